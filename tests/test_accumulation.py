"""matmul, dot and sum against the exact accumulation reference (docs/accumulation.md)."""

import math

import numpy as np
import pytest
from accumulation_reference import ref_dot, ref_matmul, ref_sum
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference import MODES, as_fmt, ref_round, same_bits
from reference import assert_same_bits as check

import fpsim

ACCUMS = ["fp16", "bf16", "fp32", "fp8_e5m2", "fp8_e4m3"]
INPUTS = ["fp16", "bf16", "fp32"]
ORDERS = ["sequential", "pairwise"]
SETTINGS = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


# --- helpers ------------------------------------------------------------------------------


def values(rng, fmt, shape, special=0.02, near=0.5):
    """Values of fmt from random bit patterns: NaN/inf with probability ``special``.

    With probability ``near`` the exponent field lies within 3 of the bias, so
    sums do not always overflow or vanish.
    """
    f = as_fmt(fmt)
    eb, mb = f.exp_bits, f.man_bits
    size = int(np.prod(shape, dtype=np.int64))
    sign = rng.integers(0, 2, size).astype(np.uint64)
    top = (1 << eb) - 1
    wide = rng.integers(0, top, size)  # finite exponent fields (all-ones excluded)
    close = np.clip(rng.integers(f.bias - 3, f.bias + 4, size), 0, top - 1)
    expo = np.where(rng.random(size) < near, close, wide).astype(np.uint64)
    mant = rng.integers(0, 1 << mb, size).astype(np.uint64)
    bits = (sign << np.uint64(eb + mb)) | (expo << np.uint64(mb)) | mant
    special_mask = rng.random(size) < special
    bits[special_mask] = (
        (sign[special_mask] << np.uint64(eb + mb))
        | (np.uint64(top) << np.uint64(mb))
        | rng.integers(0, 2, int(special_mask.sum())).astype(np.uint64)
    )
    v = np.asarray(fpsim.from_bits(bits, fmt), dtype=np.float64)
    return v.reshape(shape)


def stats_tuple(s):
    return (s.additions, s.inexact, s.absorbed, s.underflow, s.overflow)


def random_case(rng, accum, with_c, shape=None, in_fmt=None, special=0.02):
    """(A, B, c) with A (..., M, K), B (..., K, N) and c values of accum (or None)."""
    if shape is None:
        batch = [(), (2,), (2, 1)][rng.integers(0, 3)]
        m, n, k = (int(v) for v in rng.integers(0, 7, 3))
        m, n = max(m, 1), max(n, 1)
        bb = batch if rng.random() < 0.5 else (batch[-1:] if batch else ())
    else:
        batch, bb, (m, n, k) = shape[0], shape[0], shape[1:]
    in_fmt = in_fmt or INPUTS[rng.integers(0, len(INPUTS))]
    A = values(rng, in_fmt, batch + (m, k), special)
    B = values(rng, in_fmt, bb + (k, n), special)
    c = None
    if with_c:
        cshape = [(m, n), (n,), (1, n), batch + (m, n)][rng.integers(0, 4)]
        c = values(rng, accum, cshape, special)
    return A, B, c


def assert_case(A, B, c, accum, mode, order, products, subnormals, saturate):
    """fpsim.matmul equals the exact reference on this case, bit for bit."""
    opts = dict(accum=accum, rounding=mode, order=order, products=products,
                subnormals=subnormals, saturate=saturate)
    got, exp = run_both(A, B, c, **opts)
    check(got, exp, f"{opts} A={A.tolist()} B={B.tolist()} c={c}")


def run_both(A, B, c, **opts):
    got = fpsim.matmul(A, B, c=c, **opts)
    exp = ref_matmul(A, B, c, **opts)
    return got, exp


# --- matmul, every deterministic mode ------------------------------------------------------


@pytest.mark.parametrize("accum", ACCUMS)
@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("products", ["exact", "rounded"])
def test_matmul_against_reference(accum, order, products, backend_name):
    """Random small shapes (K = 0 and 1 included), every mode, c, subnormals, saturate."""
    rng = np.random.default_rng(hash((accum, order, products)) % 2**32)
    shapes = [((), 1, 1, 0), ((), 2, 3, 1), ((2,), 3, 2, 5), (None)]
    for mode in MODES:
        for with_c in (False, True):
            for subnormals in (True, False):
                for shp in shapes:
                    saturate = bool(rng.random() < 0.3)
                    A, B, c = random_case(rng, accum, with_c, shp)
                    assert_case(A, B, c, accum, mode, order, products, subnormals, saturate)


@pytest.mark.parametrize("order", ORDERS)
def test_matmul_k0_gives_c_or_plus_zero(order, backend_name):
    """K = 0: the result is c, or +0 (docs/accumulation.md)."""
    A = np.zeros((2, 0))
    B = np.zeros((0, 3))
    got = fpsim.matmul(A, B, accum="fp16", order=order, rounding="down")
    check(got, np.zeros((2, 3)), "K=0 without c")
    c = np.array([[-0.0, 1.5, -2.0]])
    got = fpsim.matmul(A, B, accum="fp16", order=order, c=c)
    check(got, np.broadcast_to(c, (2, 3)), "K=0 with c")


def test_sequential_and_pairwise_differ_on_negative_zero(backend_name):
    """K = 1, product -0: sequential computes +0 + -0 = +0, pairwise returns the term -0."""
    A, B = np.array([[-1.0]]), np.array([[0.0]])
    check(fpsim.matmul(A, B, accum="fp16"), [[0.0]], "sequential")
    check(fpsim.matmul(A, B, accum="fp16", order="pairwise"), [[-0.0]], "pairwise")
    check(fpsim.matmul(A, B, accum="fp16", rounding="down"), [[-0.0]], "sequential down")


def test_pairwise_tree_shape(backend_name):
    """n = 3 splits as (t0 + t1) + t2, not t0 + (t1 + t2): 1 + 2**-11 + 2**-11 in fp16."""
    a = np.array([[1.0, 2.0**-11, 2.0**-11]])
    b = np.ones((3, 1))
    # (1 + 2**-11) rounds to 1 (tie to even), then 1 + 2**-11 again -> 1.
    check(fpsim.matmul(a, b, accum="fp16", order="pairwise"), [[1.0]], "ceil split")
    a = np.array([[2.0**-11, 2.0**-11, 1.0]])
    # (2**-11 + 2**-11) = 2**-10 exactly, + 1 -> 1 + 2**-10.
    check(fpsim.matmul(a, b, accum="fp16", order="pairwise"), [[1 + 2.0**-10]], "ceil split")


@SETTINGS
@given(
    seed=st.integers(0, 2**32 - 1),
    accum=st.sampled_from(ACCUMS),
    mode=st.sampled_from(MODES),
    order=st.sampled_from(ORDERS),
    products=st.sampled_from(["exact", "rounded"]),
    with_c=st.booleans(),
    subnormals=st.booleans(),
    saturate=st.booleans(),
    in_fmt=st.sampled_from(INPUTS),
)
def test_matmul_property(
    backend_name, seed, accum, mode, order, products, with_c, subnormals, saturate, in_fmt
):
    """Hypothesis: any small case equals the exact reference bit for bit."""
    rng = np.random.default_rng(seed)
    A, B, c = random_case(rng, accum, with_c, in_fmt=in_fmt)
    assert_case(A, B, c, accum, mode, order, products, subnormals, saturate)


@SETTINGS
@given(
    seed=st.integers(0, 2**32 - 1),
    accum=st.sampled_from(ACCUMS),
    mode=st.sampled_from(MODES),
    order=st.sampled_from(ORDERS),
    products=st.sampled_from(["exact", "rounded"]),
    with_c=st.booleans(),
)
def test_stats_property(backend_name, seed, accum, mode, order, products, with_c):
    """Hypothesis: stats=True gives the stats=False result and the reference's counts."""
    rng = np.random.default_rng(seed)
    A, B, c = random_case(rng, accum, with_c, special=0.0)
    opts = dict(accum=accum, rounding=mode, order=order, products=products)
    got, s = fpsim.matmul(A, B, c=c, stats=True, **opts)
    exp, rs = ref_matmul(A, B, c, stats=True, **opts)
    check(got, exp, f"{opts}")
    check(got, fpsim.matmul(A, B, c=c, **opts), "stats=True vs stats=False")
    assert stats_tuple(s) == rs.as_tuple(), (opts, A.tolist(), B.tolist(), c)


# --- out=, errors --------------------------------------------------------------------------


@pytest.mark.parametrize("out", ["fp16", "bf16", "fp8_e4m3"])
@pytest.mark.parametrize("order", ORDERS)
def test_out_final_rounding(out, order, backend_name):
    """out=: the accum result is finally rounded to out with nearest_even."""
    rng = np.random.default_rng(5)
    for mode in MODES:
        A, B, c = random_case(rng, "fp32", True, shape=((2,), 3, 4, 5), in_fmt="bf16")
        opts = dict(accum="fp32", rounding=mode, order=order)
        got = fpsim.matmul(A, B, c=c, out=out, **opts)
        check(got, ref_matmul(A, B, c, out=out, **opts), f"out={out} {opts}")
        inner = ref_matmul(A, B, c, **opts)
        direct = [ref_round(v, out, "nearest_even")[0] for v in inner.ravel().tolist()]
        check(got, np.reshape(direct, inner.shape), "out= is a final nearest_even rounding")


def test_c_must_be_values_of_accum(backend_name):
    A, B = np.ones((2, 3)), np.ones((3, 2))
    with pytest.raises(ValueError):
        fpsim.matmul(A, B, accum="fp16", c=np.full((2, 2), 0.1))
    with pytest.raises(ValueError):
        fpsim.matmul(A, B, accum="bf16", c=np.float64(1 + 2.0**-10))
    with pytest.raises(ValueError):
        fpsim.matmul(A, B, accum="fp8_e4m3", c=np.full((2, 2), 512.0))  # above max 448
    with pytest.raises(ValueError):
        fpsim.matmul(A, B, accum="fp16", c=np.ones((3, 2)))  # does not broadcast
    # A value of accum is accepted.
    got = fpsim.matmul(A, B, accum="fp16", c=np.full((2, 2), 0.5))
    check(got, np.full((2, 2), 3.5), "c accepted")


def test_inputs_must_be_float32_values(backend_name):
    good = np.ones((2, 2))
    with pytest.raises(ValueError):
        fpsim.matmul(np.full((2, 2), 0.1), good)
    with pytest.raises(ValueError):
        fpsim.matmul(good, np.full((2, 2), 1 + 2.0**-30))
    with pytest.raises(ValueError):
        fpsim.matmul(good, np.full((2, 2), 2.0**200))  # beyond float32's range
    with pytest.raises(ValueError):
        fpsim.dot(np.array([0.1, 1.0]), np.ones(2))
    # float64 arrays holding float32 values qualify, as do float16 arrays.
    x = np.float32(0.1).astype(np.float64)
    check(fpsim.matmul(np.full((1, 1), x), np.ones((1, 1))), [[x]], "float32 value in float64")
    check(fpsim.matmul(np.ones((1, 2), np.float16), np.ones((2, 1))), [[2.0]], "float16")


def test_shape_errors(backend_name):
    with pytest.raises(ValueError):
        fpsim.matmul(np.ones((2, 3)), np.ones((4, 2)))
    with pytest.raises(ValueError):
        fpsim.matmul(np.ones(3), np.ones((3, 2)))  # matmul needs 2-D
    with pytest.raises(ValueError):
        fpsim.matmul(np.ones((2, 2, 3)), np.ones((3, 3, 2)))  # batch dims do not broadcast
    with pytest.raises(ValueError):
        fpsim.dot(np.ones(3), np.ones(4))


def test_batched_broadcast(backend_name):
    """Leading dimensions broadcast as np.matmul."""
    rng = np.random.default_rng(3)
    A = values(rng, "fp16", (3, 1, 2, 4), 0)
    B = values(rng, "fp16", (2, 4, 3), 0)
    got = fpsim.matmul(A, B, accum="fp16")
    assert np.shape(got) == (3, 2, 2, 3)
    check(got, ref_matmul(A, B, accum="fp16"), "broadcast")


# --- dot and sum ---------------------------------------------------------------------------


@pytest.mark.parametrize("accum", ACCUMS)
@pytest.mark.parametrize("order", ORDERS)
def test_dot(accum, order, backend_name):
    rng = np.random.default_rng(11)
    for mode in MODES:
        for k in (0, 1, 2, 7):
            a = values(rng, "fp16", (k,), 0.02)
            b = values(rng, "bf16", (k,), 0.02)
            for products in ("exact", "rounded"):
                opts = dict(accum=accum, rounding=mode, order=order, products=products)
                got = fpsim.dot(a, b, **opts)
                assert np.ndim(got) == 0
                check(got, ref_dot(a, b, **opts), f"dot {opts} {a.tolist()} {b.tolist()}")


@pytest.mark.parametrize("accum", ACCUMS)
@pytest.mark.parametrize("order", ORDERS)
def test_sum(accum, order, backend_name):
    """Sequential adds exact terms (any float64 value); pairwise rounds terms first."""
    rng = np.random.default_rng(17)
    for mode in MODES:
        for subnormals in (True, False):
            x = rng.standard_normal((3, 4, 5)) * np.exp2(rng.integers(-30, 8, (3, 4, 5)))
            x[0, 0, 0] = 0.1  # a float64 that is no value of any accumulator
            opts = dict(accum=accum, rounding=mode, order=order, subnormals=subnormals)
            check(fpsim.sum(x, **opts), ref_sum(x, **opts), f"sum None {opts}")
            for axis in (0, 1, -1):
                check(
                    fpsim.sum(x, axis=axis, **opts),
                    ref_sum(x, axis, **opts),
                    f"sum axis={axis} {opts}",
                )
            c = values(rng, accum, (4, 5), 0.0)
            check(fpsim.sum(x, axis=0, c=c, **opts), ref_sum(x, 0, c, **opts), f"sum c {opts}")
            check(
                fpsim.sum(x, axis=2, out="fp8_e5m2", **opts),
                ref_sum(x, 2, out="fp8_e5m2", **opts),
                f"sum out {opts}",
            )


def test_sum_stats(backend_name):
    x = np.concatenate([[1.0], np.full(100, 2.0**-12), [65504.0, 65504.0]])
    for order in ORDERS:
        got, s = fpsim.sum(x, accum="fp16", order=order, stats=True)
        exp, rs = ref_sum(x, accum="fp16", order=order, stats=True)
        check(got, exp, f"sum stats {order}")
        assert stats_tuple(s) == rs.as_tuple(), order


def test_known_sums_of_ones(backend_name):
    """4096 ones in fp16: sequential stagnates at 2048, pairwise is exact."""
    ones = np.ones(4096)
    assert float(fpsim.sum(ones, accum="fp16")) == 2048.0
    assert float(fpsim.dot(ones, ones, accum="fp16")) == 2048.0
    assert float(fpsim.matmul(ones[None, :], ones[:, None], accum="fp16")[0, 0]) == 2048.0
    assert float(fpsim.sum(ones, accum="fp16", order="pairwise")) == 4096.0
    assert float(fpsim.dot(ones, ones, accum="fp16", order="pairwise")) == 4096.0


# --- order="any" ---------------------------------------------------------------------------


def test_order_any(backend_name):
    rng = np.random.default_rng(23)
    A = values(rng, "fp32", (2, 5, 6), 0.0, near=1.0)
    B = values(rng, "fp32", (2, 6, 4), 0.0, near=1.0)
    got = np.asarray(fpsim.matmul(A, B, order="any"), dtype=np.float64)
    exact = np.matmul(A, B)
    scale = np.matmul(np.abs(A), np.abs(B))
    assert np.all(np.abs(got - exact) <= 8 * 2.0**-24 * scale)
    np.testing.assert_allclose(
        got,
        np.matmul(A.astype(np.float32), B.astype(np.float32)),
        rtol=0,
        atol=float(np.max(8 * 2.0**-24 * scale)),
    )
    # Every other setting is the sequential result.
    for opts in (
        dict(accum="fp16"),
        dict(accum="bf16", rounding="toward_zero"),
        dict(accum="fp32", rounding="up"),
        dict(accum="fp32", subnormals=False),
        dict(accum="fp32", saturate=True),
    ):
        Ah = values(rng, "fp16", (3, 7), 0.0)
        Bh = values(rng, "fp16", (7, 2), 0.0)
        check(fpsim.matmul(Ah, Bh, order="any", **opts), ref_matmul(Ah, Bh, **opts), f"any {opts}")
    r, s = fpsim.matmul(Ah, Bh, order="any", stats=True)
    check(r, ref_matmul(Ah, Bh), "any with stats is sequential")
    assert s.additions == 3 * 2 * 7


def test_order_any_trusts_blas_only_where_it_adds_in_binary32():
    """NumPy's BLAS adds in binary32; an array module that is not NumPy and has no CuPy
    compute types to say so (here: CuPy is absent, or a stand-in) is not trusted."""
    import types

    from fpsim._device import binary32_blas

    assert binary32_blas(np)
    assert not binary32_blas(types.ModuleType("stand_in"))


@pytest.mark.gpu
def test_order_any_on_a_gpu_is_binary32_not_tf32():
    """On a GPU, order="any" is cuBLAS in binary32: an input with more than TF32's 10
    fraction bits keeps them, and fp16-valued products stay within the any-order bound."""
    from conftest import gpu_missing

    if gpu_missing():
        pytest.skip("no GPU")
    import cupy

    from fpsim._device import binary32_blas

    assert binary32_blas(cupy)
    a = cupy.asarray(np.array([[1 + 2.0**-20, 2.0**-23]], dtype=np.float32))
    b = cupy.asarray(np.array([[1.0], [1.0]], dtype=np.float32))
    rng = np.random.default_rng(5)
    A = values(rng, "fp16", (64, 300), 0.0)
    B = values(rng, "fp16", (300, 48), 0.0)
    with fpsim.backend("cupy"):  # GPU arrays need the GPU backend
        got = cupy.asnumpy(fpsim.matmul(a, b, order="any"))
        assert got.dtype == np.float32
        assert float(got[0, 0]) == np.float32(1 + 2.0**-20 + 2.0**-23)
        got = cupy.asnumpy(fpsim.matmul(cupy.asarray(A), cupy.asarray(B), order="any"))
    scale = np.abs(A) @ np.abs(B)
    assert np.all(np.abs(got - A @ B) <= 300 * 2.0**-24 * scale)


# --- stats ---------------------------------------------------------------------------------


def test_stats_counts(backend_name):
    rng = np.random.default_rng(29)
    A, B = values(rng, "fp16", (2, 3, 5), 0.0), values(rng, "fp16", (2, 5, 4), 0.0)
    c = values(rng, "fp16", (3, 4), 0.0)
    r, s = fpsim.matmul(A, B, accum="fp16", stats=True)
    assert isinstance(s, fpsim.AccumulationStats)
    assert s.additions == 2 * 3 * 4 * 5  # one per term per output
    check(r, fpsim.matmul(A, B, accum="fp16"), "stats=True vs stats=False")
    _, s = fpsim.matmul(A, B, accum="fp16", c=c, stats=True)
    assert s.additions == 2 * 3 * 4 * 5
    _, s = fpsim.matmul(A, B, accum="fp16", order="pairwise", stats=True)
    assert s.additions == 2 * 3 * 4 * 4  # K - 1 tree additions
    _, s = fpsim.matmul(A, B, accum="fp16", order="pairwise", c=c, stats=True)
    assert s.additions == 2 * 3 * 4 * 5  # and + c


def test_stats_absorbed_and_overflow(backend_name):
    """1 + 300 products of 2**-12 in fp16: every addition absorbed; 60000 * 2 overflows."""
    a = np.full((1, 300), 2.0**-6)
    c = np.array([[1.0]])
    r, s = fpsim.matmul(a, a.T, accum="fp16", c=c, stats=True)
    check(r, [[1.0]], "absorbed sum")
    assert (s.additions, s.absorbed, s.inexact, s.overflow) == (300, 300, 300, 0)
    big = np.array([[60000.0, 60000.0, -1.0]])
    r, s = fpsim.matmul(big, np.ones((3, 1)), accum="fp16", stats=True)
    check(r, [[math.inf]], "overflow")
    assert s.overflow == 1 and s.additions == 3
    r, s = fpsim.matmul(big, np.ones((3, 1)), accum="fp16", saturate=True, stats=True)
    check(r, [[65504.0]], "saturated overflow")
    assert s.overflow >= 1
    _, rs = ref_matmul(big, np.ones((3, 1)), accum="fp16", saturate=True, stats=True)
    assert stats_tuple(s) == rs.as_tuple()


def test_stats_underflow(backend_name):
    """2**-13 - (1 + 2**-6 + 2**-16) * 2**-14 is tiny and inexact in fp16: UNDERFLOW."""
    a = np.array([[1.0, -(1 + 2.0**-6 + 2.0**-16)]])
    b = np.array([[2.0**-13], [2.0**-14]])
    for subnormals in (True, False):
        r, s = fpsim.matmul(a, b, accum="fp16", stats=True, subnormals=subnormals)
        e, rs = ref_matmul(a, b, accum="fp16", stats=True, subnormals=subnormals)
        check(r, e, f"underflow subnormals={subnormals}")
        assert rs.underflow == 1 and rs.inexact == 1
        assert stats_tuple(s) == rs.as_tuple()


# --- stochastic rounding -------------------------------------------------------------------


def test_stochastic_deterministic_and_backend_independent(backend_name):
    rng = np.random.default_rng(31)
    A, B = values(rng, "fp16", (2, 4, 9), 0.0), values(rng, "fp16", (9, 3), 0.0)
    c = values(rng, "fp16", (4, 3), 0.0)
    for order in ORDERS:
        for products in ("exact", "rounded"):
            opts = dict(
                accum="fp16", rounding="stochastic", order=order, products=products, c=c, seed=1234
            )
            r1 = fpsim.matmul(A, B, **opts)
            r2 = fpsim.matmul(A, B, **opts)
            check(r1, r2, f"same seed {opts}")
            with fpsim.backend("numpy"):
                r3 = fpsim.matmul(A, B, **opts)
            check(r1, r3, f"backend {backend_name} vs numpy {opts}")
            r4 = fpsim.matmul(A, B, **{**opts, "seed": 99})
            assert not same_bits(r1, r4).all(), "another seed should change some bits"
    x = rng.standard_normal((5, 40))
    s1 = fpsim.sum(x, axis=1, accum="bf16", rounding="stochastic", seed=7, random_bits=8)
    with fpsim.backend("numpy"):
        s2 = fpsim.sum(x, axis=1, accum="bf16", rounding="stochastic", seed=7, random_bits=8)
    check(s1, s2, "sum backend")


def test_stochastic_sum_is_unbiased(backend_name):
    """Rows of 1000 terms 0.1 summed in fp16: the mean is near 100 (nearest gives far off)."""
    x = np.full((400, 1000), 0.1)
    got = np.asarray(
        fpsim.sum(x, axis=1, accum="fp16", rounding="stochastic", seed=5), dtype=np.float64
    )
    exact = 1000 * 0.1
    # Each row: variance <= 1000 * (2**-4)**2 / 4; the mean of 400 rows: sd <= 0.05.
    assert abs(got.mean() - exact) < 0.3, got.mean()
    assert len(np.unique(got)) > 1
    nearest = float(ref_sum(x[0], accum="fp16"))
    assert abs(nearest - exact) > 1.0  # the deterministic sum is biased


def _at(n, i, v):
    """Array of n zeros with v at index i (to pick a stream index of an elementwise op)."""
    z = np.zeros(n)
    z[i] = v
    return z


def _oracle_stochastic(A, B, c, accum, order, products, seed):
    """Stochastic matmul from fpsim's elementwise ops at the documented stream indices.

    Output i draws at i*(2K+1)+r: r = 2k rounds term k, 2k+1 brings term k in
    (sequential), 2j+1 is the j-th tree addition in post-order, 2K adds c.
    A, B values of accum; an elementwise op at C-order index idx draws stream idx.
    """
    M, K = A.shape
    N = B.shape[1]
    opts = dict(rounding="stochastic", seed=seed)
    out = np.empty((M, N))
    for m in range(M):
        for n in range(N):
            i = m * N + n
            base = i * (2 * K + 1)
            size = base + 2 * K + 1

            def rnd(x, r, size=size, base=base):
                return float(fpsim.round(_at(size, base + r, x), accum, **opts)[base + r])

            def add(s, t, r, size=size, base=base):
                res = fpsim.add(_at(size, base + r, s), _at(size, base + r, t), accum, **opts)
                return float(res[base + r])

            cc = None if c is None else float(c[m, n])
            a, b = A[m].tolist(), B[:, n].tolist()
            if order == "sequential":
                s = 0.0 if cc is None else cc
                for k in range(K):
                    r = base + 2 * k + 1
                    if products == "exact":
                        s = float(
                            fpsim.fma(
                                _at(size, r, a[k]),
                                _at(size, r, b[k]),
                                _at(size, r, s),
                                accum,
                                **opts,
                            )[r]
                        )
                    else:
                        s = add(s, rnd(a[k] * b[k], 2 * k), 2 * k + 1)
            else:
                terms = [rnd(a[k] * b[k], 2 * k) for k in range(K)]
                counter = [0]

                def tree(ts, counter=counter, add=add):
                    if len(ts) == 1:
                        return ts[0]
                    h = (len(ts) + 1) // 2
                    left, right = tree(ts[:h]), tree(ts[h:])
                    j = counter[0]
                    counter[0] += 1
                    return add(left, right, 2 * j + 1)

                s = tree(terms) if K else (0.0 if cc is None else cc)
                if K and cc is not None:
                    s = add(s, cc, 2 * K)
            out[m, n] = s
    return out


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("products", ["exact", "rounded"])
def test_stochastic_stream_indices(order, products, backend_name):
    """The documented stream layout, checked with fpsim's own elementwise stochastic ops."""
    rng = np.random.default_rng(37)
    A, B = values(rng, "fp8_e5m2", (2, 5), 0.0), values(rng, "fp8_e5m2", (5, 3), 0.0)
    c = values(rng, "fp8_e5m2", (2, 3), 0.0)
    for cc in (None, c):
        got = fpsim.matmul(
            A,
            B,
            c=cc,
            accum="fp8_e5m2",
            rounding="stochastic",
            order=order,
            products=products,
            seed=42,
        )
        exp = _oracle_stochastic(A, B, cc, "fp8_e5m2", order, products, 42)
        check(got, exp, f"stream indices {order} {products} c={cc is not None}")
