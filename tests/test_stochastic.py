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


# --- cvt.rs: the random bits added to the discarded bits (PTX ISA, cvt's .rs) -----------
from fpsim.stochastic import cvt_rs  # noqa: E402

MASK64 = (1 << 64) - 1


def _mix64(z: int) -> int:
    """SplitMix64's output function (Steele, Lea, Flood 2014), in Python integers."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def _draw53(seed: int, index: int) -> int:
    """fpsim's stream (docs/semantics.md): the index-th SplitMix64 draw keyed by seed."""
    return _mix64((_mix64(seed) + (index + 1) * 0x9E3779B97F4A7C15) & MASK64) >> 11


def _f32_bits(v: float) -> int:
    return int(np.float32(v).view(np.uint32))


def ref_cvt_rs_bf16(v: float, r: int, saturate: bool) -> float:
    """cvt.rs.bf16x2.f32 as the PTX ISA states it: the 16 random bits added, as integers, to
    the 16 fraction bits bf16 drops from the binary32 encoding; the carry out rounds away."""
    u = _f32_bits(v)
    sign, mag = u & 0x80000000, u & 0x7FFFFFFF
    if mag > 0x7F800000 or mag == 0x7F800000:
        return v
    top = (mag >> 16) + (((mag & 0xFFFF) + r) >> 16)
    if top >= 0x7F80:  # the carry reached the exponent's all-ones: infinity
        top = 0x7F7F if saturate else 0x7F80
    return float(np.uint32(sign | (top << 16)).view(np.float32))


def ref_cvt_rs_fp16(v: float, r: int, saturate: bool) -> float:
    """cvt.rs.f16x2.f32 for results in fp16's normal range, with Fractions: the 13 binary32
    fraction bits fp16 drops (D) plus the 13 random bits; away on the carry out."""
    if v != v or abs(v) == math.inf or v == 0:
        return v
    x = abs(Fraction(v))
    e = x.numerator.bit_length() - x.denominator.bit_length()
    e -= Fraction(2) ** e > x
    ulp = Fraction(2) ** (e - 10)
    k = math.floor(x / ulp)
    d = (x / ulp - k) * 2**13
    assert d.denominator == 1  # binary32 holds 13 bits more than fp16
    m = (k + (d + r >= 2**13)) * ulp
    if m > 65504:
        return math.copysign(65504.0 if saturate else math.inf, v)
    return math.copysign(float(m), v)


def _binary32_values(rng, n, low):
    """Binary32 values: random encodings (each exponent, subnormals, NaN, inf) whose
    magnitudes are at least ``low`` or zero, and the largest finite values."""
    u = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    with np.errstate(invalid="ignore"):  # signalling NaNs read as quiet
        v = u.view(np.float32).astype(np.float64)
    v = v[(np.abs(v) >= low) | (v == 0) | np.isnan(v)]
    edges = [np.float32(3.4028235e38), np.float32(65504), np.float32(65519.996), 1.0, -0.0]
    return np.concatenate([v, edges, -np.array(edges, np.float64)])


@pytest.mark.parametrize("fmt, ref, low", [("bf16", ref_cvt_rs_bf16, 0.0),
                                           ("fp16", ref_cvt_rs_fp16, 2.0**-14)])
def test_cvt_rs_against_the_ptx_isas_rule(fmt, ref, low):
    rng = np.random.default_rng(31)
    r = {"bf16": 16, "fp16": 13}[fmt]
    x = _binary32_values(rng, 4000, low)
    bits = rng.integers(0, 2**r, x.size)
    for saturate in (False, True):
        got = cvt_rs(x, fmt, bits, saturate=saturate)
        want = [ref(v, int(b), saturate) for v, b in zip(x.tolist(), bits.tolist(), strict=True)]
        assert same_bits(got, want).all(), (fmt, saturate)


def test_cvt_rs_maps_the_bits_of_fpsims_stochastic_rounding_in_reverse():
    """Both maps round away for g of the 2**r values of the random bits; cvt.rs for R, fpsim
    for 2**r - 1 - R: every value of the bits, for values with every g."""
    r = 16
    x = np.float32(1.0) + np.arange(0, 2**16, 4099, dtype=np.float32) * np.float32(2.0**-23)
    bits = np.arange(2**r)
    for v in x.tolist():
        hw = cvt_rs(np.full(2**r, v), "bf16", bits)
        g = _f32_bits(v) & 0xFFFF
        assert int((hw != hw.min()).sum()) == g or g == 0
        with fpsim.backend("numpy"):  # fpsim's map: R < g, R the top r of 53 random bits
            from fpsim.backends import get_backend
            from fpsim.kernels.spec import make_spec
            spec = make_spec(fpsim.format("bf16"), "stochastic", True, False, r)
            mine, _ = get_backend().kernels["round_value"](
                np.full(2**r, v), (2**r - 1 - bits) << (53 - r), spec, False)
        assert same_bits(mine, hw).all()


def test_cvt_rs_draws_its_bits_from_fpsims_stream():
    x = _binary32_values(np.random.default_rng(32), 300, 2.0**-14)
    for fmt, ref, r in (("bf16", ref_cvt_rs_bf16, 16), ("fp16", ref_cvt_rs_fp16, 13)):
        got = cvt_rs(x, fmt, seed=12)
        want = [ref(v, _draw53(12, i) >> (53 - r), False) for i, v in enumerate(x.tolist())]
        assert same_bits(got, want).all(), fmt
        assert same_bits(got, cvt_rs(x, fmt, seed=12)).all()


@pytest.mark.parametrize("call, match", [
    (lambda: cvt_rs([1.0], "fp8_e4m3", [0]), "bf16 or fp16"),
    (lambda: cvt_rs([0.1], "bf16", [0]), "not a binary32 value"),
    (lambda: cvt_rs([1.0], "bf16", [1 << 16]), "0..2\\*\\*16-1"),
    (lambda: cvt_rs([1.0], "fp16", [-1]), "0..2\\*\\*13-1"),
    (lambda: cvt_rs([1.0], "bf16", [0.5]), "rbits"),
    (lambda: cvt_rs([2.0**-20], "fp16", [0]), "smallest normal"),
    (lambda: cvt_rs([1.0, 2.0], "bf16", [0, 1, 2]), "broadcast"),
])
def test_cvt_rs_refuses_what_it_cannot_do(call, match):
    with pytest.raises(ValueError, match=match):
        call()
