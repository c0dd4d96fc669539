"""Exact conversions between 16-bit float arrays and float32/float64 ones (``Backend.convert``).

The Numba backend converts float16 and ml_dtypes' bfloat16 in compiled loops (the CPU's
binary16 conversion; the upper half of the binary32 encoding). Every encoding of both
16-bit formats is checked against NumPy's and ml_dtypes' own conversions (independent
code: NumPy's ``npy_half`` routines, ml_dtypes' C++), both ways, serial and parallel;
then the public calls that use them (float16 operands, ``dtype=``, ``out=``) against
the NumPy reference backend.
"""

import ml_dtypes
import numpy as np
import pytest

import fpsim
from fpsim.backends import get_backend, numba_backend, numba_convert

HALF = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
LENGTHS = [numba_backend.CONVERT_FROM + 3,  # a serial loop
           1 << 16]  # every encoding, in a parallel loop
NARROW = [np.float16, ml_dtypes.bfloat16]


def numba():
    with fpsim.backend("numba"):
        return get_backend()


def numba_convert_loop(x, dtype):
    """``x`` converted to ``dtype`` by the Numba backend; the loop must be a compiled one."""
    backend = numba()
    assert backend.conversions.loop(x.dtype, np.dtype(dtype)) is not None or (
        not backend.conversions.binary16 and np.dtype(np.float16) in (x.dtype, np.dtype(dtype)))
    out = np.empty(x.shape, dtype=dtype)
    backend.convert(x, out)
    return out


def nan_for_nan_bits(got, want):
    """Same encodings, except that any NaN stands for any NaN."""
    with np.errstate(invalid="ignore"):
        got_nan, want_nan = (np.isnan(a.astype(np.float64)) for a in (got, want))
    assert np.array_equal(got_nan, want_nan)
    bits = f"u{got.dtype.itemsize}"
    assert np.array_equal(got[~got_nan].view(bits), want[~want_nan].view(bits))


@pytest.mark.parametrize("narrow", NARROW, ids=["float16", "bfloat16"])
@pytest.mark.parametrize("wide", [np.float32, np.float64])
@pytest.mark.parametrize("n", LENGTHS)
def test_every_16_bit_encoding_widens_as_numpy_and_ml_dtypes_do(narrow, wide, n):
    x = HALF[:n].view(narrow)
    got = numba_convert_loop(x, wide)
    with np.errstate(invalid="ignore"):
        want = x.astype(wide)  # NumPy's npy_half code, ml_dtypes' C++
    nan_for_nan_bits(got, want)


@pytest.mark.parametrize("narrow", NARROW, ids=["float16", "bfloat16"])
@pytest.mark.parametrize("wide", [np.float32, np.float64])
@pytest.mark.parametrize("n", LENGTHS)
def test_every_16_bit_value_narrows_back_to_its_encoding(narrow, wide, n):
    x = HALF[:n].view(narrow)
    with np.errstate(invalid="ignore"):
        wide_x = x.astype(wide)
    got = numba_convert_loop(wide_x, narrow)
    nan_for_nan_bits(got, x)


def test_other_dtypes_and_short_arrays_take_numpys_conversion():
    conversions = numba().conversions
    f8 = np.dtype(ml_dtypes.float8_e4m3fn)
    for pair in [(np.float32, np.float64), (np.float16, ml_dtypes.bfloat16), (f8, np.float32),
                 (np.float32, np.float32), (np.int32, np.float16)]:
        assert conversions.loop(*map(np.dtype, pair)) is None, pair
    short = HALF[:10].view(np.float16)
    out = np.empty(10, np.float32)
    numba().convert(short, out)
    assert np.array_equal(out.view(np.uint32), short.astype(np.float32).view(np.uint32))


def test_without_binary16_conversions_only_bfloat16_has_loops():
    conversions = numba_convert.Conversions(False, "test")
    assert conversions.loop(np.dtype(np.float16), np.dtype(np.float32)) is None
    assert conversions.loop(np.dtype(np.float32), np.dtype(np.float16)) is None
    assert conversions.loop(np.dtype(ml_dtypes.bfloat16), np.dtype(np.float32)) == "from_bfloat16"


def float16_operands(n=1 << 16, seed=0):
    x = HALF.view(np.float16).copy()
    np.random.default_rng(seed).shuffle(x)
    return x[:n]


def on_both(call):
    with fpsim.backend("numba"):
        got = call()
    with fpsim.backend("numpy"):
        want = call()
    return got, want


def same_array(got, want):
    got, want = (r if isinstance(r, tuple) else (r,) for r in (got, want))
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        if g.dtype.kind == "f" or g.dtype == ml_dtypes.bfloat16:
            nan_for_nan_bits(g, w)
        else:
            assert np.array_equal(g, w)


@pytest.mark.parametrize("fmt", ["fp16", "bf16", "fp8_e4m3", "fp32"])
def test_float16_operands_round_as_on_the_reference_backend(fmt):
    h = float16_operands()
    for mode in ("nearest_even", "toward_zero", "stochastic"):
        seed = 3 if mode == "stochastic" else None
        same_array(*on_both(lambda m=mode, s=seed: fpsim.round(h, fmt, m, seed=s, flags=True)))


def test_a_signalling_nan_among_float16_operands_reads_as_quiet_as_in_float32():
    """docs/semantics.md: float16 and float32 inputs are read as NumPy widens them."""
    h = np.resize(np.array([1.0, np.nan], np.float16), 1 << 13)
    h.view(np.uint16)[1::2] = 0x7C01  # binary16 sNaN
    for values, flags in on_both(lambda: fpsim.round(h, "fp16", flags=True)):
        assert np.isnan(values[1::2]).all() and (flags == 0).all()


def test_float16_arithmetic_needs_no_operand_check_and_agrees():
    """Stored in float16 (the operands' dtype) by the loop; the fma's three operands too."""
    a, b = float16_operands(seed=1), float16_operands(seed=2)
    with np.errstate(all="ignore"):
        got, want = on_both(lambda: fpsim.add(a, b, "fp16", flags=True))
        assert got[0].dtype == np.float16
        same_array(got, want)
        same_array(*on_both(lambda: fpsim.fma(a, b, a, "fp16")))
    # A float32 operand is still checked.
    with pytest.raises(ValueError, match="not representable in fp16"):
        fpsim.add(a, np.full(a.shape, 0.1, np.float32), "fp16")


@pytest.mark.parametrize("fmt, dtype", [("fp16", np.float16), ("bf16", ml_dtypes.bfloat16)])
@pytest.mark.parametrize("n", [5, 1 << 16])
def test_dtype_and_out_of_16_bits_hold_the_rounded_values(fmt, dtype, n):
    rng = np.random.default_rng(n)
    x = (rng.standard_normal(n) * np.exp2(rng.integers(-30, 20, n))).astype(np.float32)
    x[:5] = [np.nan, np.inf, -0.0, 65520.0, 2.0**-130]
    want = fpsim.round(x, fmt)
    got = fpsim.round(x, fmt, dtype=dtype)
    assert got.dtype == dtype
    nan_for_nan_bits(got.astype(np.float32), want)
    out = np.empty(n, dtype)
    assert fpsim.round(x, fmt, out=out) is out
    nan_for_nan_bits(out.astype(np.float32), want)
    strided = np.empty(2 * n, dtype)[::2]  # not contiguous: NumPy's conversion
    fpsim.round(x, fmt, out=strided)
    nan_for_nan_bits(strided.astype(np.float32), want)


# (input dtype, format, result dtype, flags settings, stochastic too): each combination of
# carrier, 16-bit store, flags and stochastic rounding is a loop compiled on its own (CI's
# time), so the loops' dimensions are each covered, not their whole product.
STORED = [
    (np.float32, "bf16", ml_dtypes.bfloat16, (False, True), True),
    (np.float32, "fp16", np.float16, (False, True), False),
    (np.float64, "fp16", np.float16, (False,), True),
    (np.float64, "bf16", ml_dtypes.bfloat16, (False,), False),
]


@pytest.mark.parametrize("wide, fmt, dtype, flag_settings, stochastic", STORED,
                         ids=lambda v: getattr(v, "__name__", str(v)))
def test_results_stored_in_16_bits_by_the_loops_are_the_reference_backends(
        wide, fmt, dtype, flag_settings, stochastic):
    """The Numba loops store 16-bit results themselves (the format's encodings, from the
    CPU's binary16 conversion or binary32's upper half): the NumPy backend's values, flags
    included, in every mode (fp16 from float32 also through the conversion instruction),
    in the generic loop and the parallel one compiled for bf16."""
    rng = np.random.default_rng(7)
    n = numba_backend.PARALLEL_FROM + 11
    x = (rng.standard_normal(n) * np.exp2(rng.integers(-30, 20, n))).astype(wide)
    x[:6] = [np.nan, np.inf, -np.inf, -0.0, 65520.0, 2.0**-140]
    part = x[:numba_backend.HALF_ROUND_FROM + 1]
    modes = ["nearest_even", "toward_zero", "up", "odd", *(["stochastic"] if stochastic else [])]
    for mode in modes:
        seed = 2 if mode == "stochastic" else None
        for flags in flag_settings:
            same_array(*on_both(lambda m=mode, f=flags, s=seed: fpsim.round(
                part, fmt, m, seed=s, dtype=dtype, flags=f)))
        with fpsim.backend("numba"):
            out = np.full(part.size, 7.0, dtype)
            fpsim.round(part, fmt, mode, seed=seed, out=out)
        nan_for_nan_bits(out, fpsim.round(part, fmt, mode, seed=seed, dtype=dtype))
    if wide is np.float32 and fmt == "bf16":
        same_array(*on_both(lambda: fpsim.round(x, fmt, dtype=dtype)))  # parallel, compiled


@pytest.mark.parametrize("fmt", ["fp8_e4m3", "fp8_e5m2", "e5m3"])
def test_narrower_formats_of_float16_operands_are_stored_in_float16(fmt):
    """float16 operands rounded to a format float16 holds give float16 results (NumPy's
    promotion with the format's dtype), stored by the loops."""
    h = float16_operands(seed=5)
    got, want = on_both(lambda: fpsim.round(h, fmt, "nearest_even"))
    assert got.dtype == np.float16
    same_array(got, want)
