"""Binary16 accumulation on the CPU's half-precision arithmetic (fpsim.backends.numba_half).

Each kind that this CPU can run is checked against the exact reference; kinds
that it cannot run are skipped.
"""

import numpy as np
import pytest
from accumulation_reference import ref_matmul
from reference import assert_same_bits as check
from reference import ref_add

import fpsim
from fpsim.backends import backend, numba_half

HERE = numba_half.compiled_for()
KINDS = {"native": ("native",), "f16c": ("f16c",), None: ()}[HERE]
KINDS = KINDS + (("f16c",) if HERE == "native" else ())


@pytest.fixture(params=["native", "f16c"])
def half(request):
    if request.param not in KINDS:
        pytest.skip(f"this CPU offers no {request.param} half-precision arithmetic to Numba")
    return numba_half.HalfAccumulation(request.param, "test")


def finite_halves(rng, size, near=0.7):
    """Random finite binary16 values (as float64), most with exponents near the bias."""
    bits = rng.integers(0, 0x7C00, size).astype(np.uint16)
    close = rng.random(size) < near
    bits[close] = (rng.integers(12, 18, close.sum()) << 10) | rng.integers(0, 1024, close.sum())
    bits |= (rng.integers(0, 2, size) << 15).astype(np.uint16)
    return bits.view(np.float16).astype(np.float64)


def step(half, a, b, c, rounded=False):
    """round(c + a*b) elementwise, as one-term accumulations (K = 1, one group per element)."""
    n = a.size
    out = np.empty((n, 1))
    left = half.accumulate(a.reshape(n, 1), b.reshape(n, 1, 1), c.reshape(n, 1), out,
                           rounded, parallel=False)
    assert left is not None
    out[left] = np.nan  # not finite: the generic loops' job
    return out[:, 0]


def test_every_accumulator_value_against_the_fma_of_the_arithmetic_core(half):
    """All 63488 finite binary16 accumulators, each with 16 random products: the result
    equals fpsim.fma (itself checked against TestFloat's f16_mulAdd vectors)."""
    rng = np.random.default_rng(7)
    c = np.repeat(np.arange(0x7C00, dtype=np.uint16)[None], 2, 0)
    c[1] |= 0x8000
    c = np.repeat(c.reshape(-1).view(np.float16).astype(np.float64), 16)
    a, b = finite_halves(rng, c.size), finite_halves(rng, c.size)
    got = step(half, a, b, c)
    with backend("numpy"):
        exp = np.asarray(fpsim.fma(a, b, c, "fp16"), dtype=np.float64)
    finite = np.isfinite(exp)
    assert finite.mean() > 0.9
    check(got[finite], exp[finite], "binary16 steps")
    assert np.isnan(got[~finite]).all()


def test_near_ties_against_the_rational_reference(half):
    """c + a*b within a few units of binary32 of a binary16 midpoint: the double-rounding
    cases that a plain binary32 sum would get wrong."""
    rng = np.random.default_rng(11)
    a, b = finite_halves(rng, 4000, near=1.0), finite_halves(rng, 4000, near=1.0)
    p = a * b
    # c is the binary16 value that puts c + p nearest a midpoint of p's binary16 grid.
    ulp = 2.0 ** (np.floor(np.log2(np.abs(p))) - 10)
    mid = (np.floor(p / ulp) + 0.5) * ulp
    c = np.asarray(fpsim.round(mid - p + rng.integers(-3, 4, p.size) * 2.0**-24, "fp16"),
                   dtype=np.float64)
    got = step(half, a, b, c)
    for i in range(a.size):
        exp, _ = ref_add(c[i], a[i] * b[i], "fp16")  # a*b is exact in binary64
        check(got[i:i + 1], np.array([exp]), f"a={a[i]!r} b={b[i]!r} c={c[i]!r}")


def test_rounded_products_against_the_rational_reference(half):
    rng = np.random.default_rng(3)
    a, b, c = (finite_halves(rng, 3000) for _ in range(3))
    got = step(half, a, b, c, rounded=True)
    for i in range(a.size):
        p, _ = ref_add(a[i] * b[i], -0.0, "fp16")  # round(a*b), the sign of zero kept
        exp, _ = ref_add(c[i], p, "fp16")
        if np.isfinite(exp):
            check(got[i:i + 1], np.array([exp]), f"a={a[i]!r} b={b[i]!r} c={c[i]!r}")


def test_rounded_sums_of_every_binary16_value_against_the_arithmetic_core(half):
    """round(round(1*b) + c) for every finite binary16 b and 4 c each within 2**12 of b's
    size or far below it (ties, cancellation, subnormals): the f16c kind adds two binary16
    values in binary32 and converts once, which Figueroa's bound says is exact; the
    result equals fpsim.add (checked against TestFloat's f16_add vectors)."""
    rng = np.random.default_rng(29)
    b = np.arange(0x7C00, dtype=np.uint16)
    b = np.concatenate([b, b | 0x8000]).repeat(4)
    shift = rng.integers(-12, 13, b.size) << 10
    shift[::4] = -(rng.integers(12, 30, b.size // 4) << 10)  # far below: only a sticky part
    c = np.clip((b & 0x7FFF).astype(np.int64) + shift, 0, 0x7BFF).astype(np.uint16)
    c |= (rng.integers(0, 2, b.size) << 15).astype(np.uint16)
    b, c = (x.view(np.float16).astype(np.float64) for x in (b, c))
    got = step(half, np.ones(b.size), b, c, rounded=True)
    with backend("numpy"):
        exp = np.asarray(fpsim.add(b, c, "fp16"), dtype=np.float64)
    finite = np.isfinite(exp)
    assert finite.mean() > 0.95  # the rest overflow: the generic loops' job
    check(got[finite], exp[finite], "round(b) + c")


@pytest.mark.parametrize("rounded", [False, True])
def test_tiles_against_the_reference(half, rounded):
    """Tiles of 3 rows and 8 columns: partial tiles at both edges, groups that end inside
    a tile, and several column tiles per row, serial and parallel."""
    tiled = numba_half.HalfAccumulation(half.kind, "test", tile=(3, 8))
    rng = np.random.default_rng(11)
    groups, per_group, k_len, n = 2, 7, 6, 19
    A = finite_halves(rng, groups * per_group * k_len, 0.97).reshape(groups * per_group, k_len)
    B = finite_halves(rng, groups * k_len * n, 0.97).reshape(groups, k_len, n)
    C = finite_halves(rng, groups * per_group * n, 0.97).reshape(groups * per_group, n)
    products = "rounded" if rounded else "exact"
    expected = np.concatenate([
        ref_matmul(A[g * per_group:(g + 1) * per_group], B[g], C[g * per_group:(g + 1) * per_group],
                   accum="fp16", rounding="nearest_even", order="sequential",
                   products=products, subnormals=True, saturate=False)
        for g in range(groups)])
    for parallel in (False, True):
        out = np.empty(C.shape)
        left = tiled.accumulate(A, B, C, out, rounded, parallel)
        assert left is not None
        out[left] = expected[left] = np.nan  # not finite: the generic loops' job
        check(out, expected, f"parallel={parallel}")
    assert left.size < len(out) // 2


@pytest.mark.parametrize("products", ["exact", "rounded"])
def test_matmuls_against_the_reference(products):
    """Through fpsim.matmul: c, batches with their own B, and rows that overflow (left to
    the generic loops)."""
    rng = np.random.default_rng(5)
    for shape_a, shape_b, scale in [((5, 9), (9, 4), 1.0), ((3, 4, 30), (3, 30, 6), 64.0),
                                    ((2, 1, 12), (12, 3), 300.0)]:
        A = finite_halves(rng, np.prod(shape_a)).reshape(shape_a)
        B = np.clip(finite_halves(rng, np.prod(shape_b)) * scale, -65504, 65504)
        B = B.astype(np.float16).astype(np.float64).reshape(shape_b)
        c = finite_halves(rng, shape_a[-2] * shape_b[-1]).reshape(shape_a[-2], shape_b[-1])
        opts = dict(accum="fp16", products=products)
        got = fpsim.matmul(A, B, c=c, **opts)
        check(got, ref_matmul(A, B, c, order="sequential", rounding="nearest_even",
                              subnormals=True, saturate=False, **opts), f"{shape_a} {shape_b}")
        with backend("numpy"):
            check(got, fpsim.matmul(A, B, c=c, **opts), "numpy backend")
    assert not np.isfinite(got).all()  # the last case overflowed somewhere


@pytest.mark.skipif(not KINDS, reason="no half-precision arithmetic for Numba on this CPU")
def test_fpsim_takes_this_path_for_binary16(monkeypatch):
    taken = []
    real = numba_half.HalfAccumulation.accumulate

    def spy(self, *args):
        result = real(self, *args)
        taken.append(result is not None)
        return result

    monkeypatch.setattr(numba_half.HalfAccumulation, "accumulate", spy)
    ones = np.ones(4096)
    with backend("numba"):
        assert fpsim.dot(ones, ones, accum="fp16") == 2048.0  # 2048 + 1 rounds to 2048 (even)
        fpsim.matmul(np.full((2, 2), np.float32(0.1)), np.eye(2), accum="fp16")  # not binary16
        fpsim.dot(ones, ones, accum="fp16", rounding="up")  # not nearest_even: not offered
    assert taken == [True, False]


def test_it_declines_inputs_and_environments_it_cannot_do_exactly(half, monkeypatch):
    out = np.empty((1, 1))
    c = np.zeros((1, 1))
    for bad in (0.1, np.inf, np.nan, 1e6):
        assert half.accumulate(np.array([[bad]]), np.ones((1, 1, 1)), c, out, False,
                               False) is None
    assert half.sound()
    wrong = list(numba_half.PROBES)
    wrong[1] = (*wrong[1][:3], 0x3C01)  # as if ties went up
    monkeypatch.setattr(numba_half, "PROBES", tuple(wrong))
    assert not half.sound()
    assert half.accumulate(np.ones((1, 1)), np.ones((1, 1, 1)), c, out, False, False) is None


@pytest.mark.skipif(not KINDS, reason="no half-precision arithmetic for Numba on this CPU")
def test_a_refused_environment_falls_back_to_the_exact_loops(monkeypatch):
    monkeypatch.setattr(numba_half.HalfAccumulation, "sound", lambda self: False)
    rng = np.random.default_rng(2)
    A, B = finite_halves(rng, 40).reshape(4, 10), finite_halves(rng, 30).reshape(10, 3)
    with backend("numba"):
        got = fpsim.matmul(A, B, accum="fp16")
    check(got,
          ref_matmul(A, B, None, accum="fp16", rounding="nearest_even", order="sequential",
                     products="exact", subnormals=True, saturate=False), "fallback")
