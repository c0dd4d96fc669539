"""Stochastic rounding: neighbours, unbiasedness, determinism, backend independence."""

import math
from fractions import Fraction

import numba
import numpy as np
import pytest
from reference import PRESETS, ref_add, ref_round, same_bits

import fpsim

N = 200_000
SIGMAS = 5.0


def _neighbours(v, fmt):
    """Round-down and round-up candidates (toward zero and away from zero)."""
    lo = ref_round(v, fmt, "toward_zero")[0]
    hi = ref_round(v, fmt, "up" if v > 0 else "down")[0]
    return lo, hi


def _prob_up(v, fmt, r=None):
    """Exact probability of rounding away from zero: f, or floor(f * 2**r) / 2**r."""
    lo, hi = _neighbours(v, fmt)
    if lo == hi:
        return Fraction(0)
    f = (Fraction(v) - Fraction(lo)) / (Fraction(hi) - Fraction(lo))
    if r is not None:
        f = Fraction(math.floor(f * 2**r), 2**r)
    return f


def _assert_rate(count, n, p, what):
    """|count/n - p| <= 5 standard errors, the standard error being sqrt(p(1-p)/n)."""
    p = float(p)
    se = math.sqrt(p * (1 - p) / n)
    assert abs(count / n - p) <= SIGMAS * se + 1e-12, f"{what}: rate {count / n}, expected {p}"


@pytest.mark.parametrize("name", ["fp16", "bf16", "fp8_e5m2", "fp8_e4m3", "fp32"])
def test_only_two_neighbours(name, backend_name):
    """Every stochastic result is the round-down or the round-up candidate."""
    fmt = PRESETS[name]
    rng = np.random.default_rng(7)
    x = rng.standard_normal(4000) * np.exp2(rng.integers(fmt.emin - fmt.man_bits - 2, 8, 4000))
    x = x[np.abs(x) <= fmt.max]
    got = np.asarray(fpsim.round(x, name, "stochastic", seed=11), dtype=np.float64)
    for v, g in zip(x.tolist(), got.tolist(), strict=True):
        lo, hi = _neighbours(v, fmt)
        assert same_bits([g], [lo])[0] or same_bits([g], [hi])[0], (v, g, lo, hi)


UNBIASED = [
    ("fp16", 1 + 0.3 * 2.0**-10),
    ("fp16", -(2.0**-24) * 0.7),
    ("bf16", 3.0 + 0.9 * 2.0**-6),
    ("fp8_e5m2", -1.1),
    ("fp8_e4m3", 2.0**-9 * 0.05 + 2.0**-7),
    ("fp32", 1 / 3),
]


@pytest.mark.parametrize("name,v", UNBIASED)
def test_round_unbiased(name, v, backend_name):
    """Mean of N roundings of v is v: the rate of rounding up is within 5 standard errors of f."""
    fmt = PRESETS[name]
    lo, hi = _neighbours(v, fmt)
    p = _prob_up(v, fmt)
    assert 0 < p < 1
    got = np.asarray(fpsim.round(np.full(N, v), name, "stochastic", seed=123), dtype=np.float64)
    assert np.isin(got, [lo, hi]).all()
    _assert_rate(int((got == hi).sum()), N, p, f"round {name} {v}")
    mean = got.mean()
    assert abs(mean - v) <= SIGMAS * abs(hi - lo) * math.sqrt(float(p * (1 - p)) / N) + 1e-15


ADD_CASES = [
    ("fp16", 1.0, 2.0**-12),
    ("fp16", -1.0, 3 * 2.0**-13),
    ("bf16", 1.0, 2.0**-10),
    ("fp8_e4m3", 1.0, 2.0**-6),
    ("fp32", 1.0, 2.0**-26 * 3),
]


@pytest.mark.parametrize("name,a,b", ADD_CASES)
def test_add_unbiased(name, a, b, backend_name):
    """Stochastic add: the rate of rounding up is within 5 standard errors of f."""
    fmt = PRESETS[name]
    exact = Fraction(a) + Fraction(b)
    lo = ref_add(a, b, fmt, "toward_zero")[0]
    hi = ref_add(a, b, fmt, "up" if exact > 0 else "down")[0]
    p = (exact - Fraction(lo)) / (Fraction(hi) - Fraction(lo))
    assert 0 < p < 1
    got = fpsim.add(np.full(N, a), np.full(N, b), name, "stochastic", seed=5)
    got = np.asarray(got, dtype=np.float64)
    assert np.isin(got, [lo, hi]).all()
    _assert_rate(int((got == hi).sum()), N, p, f"add {name} {a} {b}")


def _inputs():
    rng = np.random.default_rng(3)
    return rng.standard_normal(200_000) * np.exp2(rng.integers(-20, 10, 200_000))


def test_seed_determinism(backend_name):
    """Same seed gives the same bits; another seed gives different bits."""
    x = _inputs()
    r1 = fpsim.round(x, "bf16", "stochastic", seed=42)
    r2 = fpsim.round(x, "bf16", "stochastic", seed=42)
    r3 = fpsim.round(x, "bf16", "stochastic", seed=43)
    assert same_bits(r1, r2).all()
    assert not same_bits(r1, r3).all()
    xb = np.array([ref_round(v, PRESETS["bf16"])[0] for v in x.tolist()])
    yb = xb[::-1].copy()
    s1 = fpsim.add(xb, yb, "bf16", "stochastic", seed=42)
    assert same_bits(s1, fpsim.add(xb, yb, "bf16", "stochastic", seed=42)).all()
    assert not same_bits(s1, fpsim.add(xb, yb, "bf16", "stochastic", seed=43)).all()
    exact = fpsim.add(xb, np.zeros_like(xb), "bf16", "stochastic", seed=1)
    assert same_bits(exact, xb).all()


def test_draw_keyed_by_index():
    """The draw depends on the element's C-order index in the result, not on the shape."""
    x = _inputs()
    flat = fpsim.round(x, "fp16", "stochastic", seed=9)
    shaped = fpsim.round(x.reshape(400, 500), "fp16", "stochastic", seed=9)
    assert same_bits(np.asarray(shaped).ravel(), flat).all()
    head = fpsim.round(x[:1000], "fp16", "stochastic", seed=9)
    assert same_bits(head, np.asarray(flat)[:1000]).all()


def _run_all(backend, threads=None):
    x = _inputs()
    y = np.asarray(fpsim.round(x[::-1], "bf16"), dtype=np.float64)
    xb = np.asarray(fpsim.round(x, "bf16"), dtype=np.float64)
    old = numba.get_num_threads()
    if threads is not None:
        numba.set_num_threads(threads)
    try:
        with fpsim.backend(backend):
            return [
                np.asarray(fpsim.round(x, "fp16", "stochastic", seed=77), dtype=np.float64),
                np.asarray(fpsim.round(x, "fp8_e4m3", "stochastic", seed=77), dtype=np.float64),
                np.asarray(fpsim.add(xb, y, "bf16", "stochastic", seed=77), dtype=np.float64),
                np.asarray(fpsim.mul(xb, y, "bf16", "stochastic", seed=77), dtype=np.float64),
                np.asarray(fpsim.fma(xb, y, xb, "bf16", "stochastic", seed=77), dtype=np.float64),
            ]
    finally:
        numba.set_num_threads(old)


def test_backends_and_threads_agree():
    """numpy and numba backends, and numba with 1 or all threads, give identical bits."""
    ref = _run_all("numpy")
    for threads in sorted({1, numba.config.NUMBA_NUM_THREADS}):
        for r, g in zip(ref, _run_all("numba", threads), strict=True):
            assert same_bits(g, r).all(), f"threads={threads}"


@pytest.mark.parametrize("r", [1, 2, 3])
def test_random_bits_probability(r, backend_name):
    """random_bits=r rounds up with probability floor(f * 2**r) / 2**r."""
    fmt = PRESETS["fp16"]
    ulp = 2.0**-10
    for f in [0.1, 0.3, 0.49, 0.5, 0.6, 0.8, 0.99]:
        v = 1 + f * ulp
        p = _prob_up(v, fmt, r)
        got = fpsim.round(np.full(N // 4, v), "fp16", "stochastic", seed=3, random_bits=r)
        count = int((np.asarray(got, dtype=np.float64) == 1 + ulp).sum())
        if p == 0:
            assert count == 0, (r, f)
        else:
            _assert_rate(count, N // 4, p, f"random_bits={r} f={f}")
