"""fpsim among NumPy and ml_dtypes arrays: exact widening in, exact dtypes out, one rule
for result dtypes, and Tensors that NumPy reads."""

import ml_dtypes
import numpy as np
import pytest

import fpsim
from fpsim.bits import format_of_dtype
from fpsim.compare.inputs import around

SHARED = [  # (ml_dtypes or NumPy dtype, the fpsim format it holds)
    (np.float16, "fp16"), (ml_dtypes.bfloat16, "bf16"), (ml_dtypes.float8_e4m3fn, "fp8_e4m3"),
    (ml_dtypes.float8_e5m2, "fp8_e5m2"), (ml_dtypes.float8_e4m3, fpsim.Format(4, 3)),
    (ml_dtypes.float8_e3m4, fpsim.Format(3, 4)), (ml_dtypes.float6_e2m3fn, "fp6_e2m3"),
    (ml_dtypes.float6_e3m2fn, "fp6_e3m2"), (ml_dtypes.float4_e2m1fn, "fp4_e2m1"),
    (ml_dtypes.float8_e8m0fnu, "e8m0"),
    (ml_dtypes.float8_e4m3fnuz, "fp8_e4m3fnuz"), (ml_dtypes.float8_e5m2fnuz, "fp8_e5m2fnuz"),
]
# float8_e4m3b11fnuz: the fnuz style with bias 11, not 2**(exp_bits - 1).
NOT_FPSIM = [ml_dtypes.float8_e4m3b11fnuz, np.int8]


@pytest.mark.parametrize("dtype, fmt", SHARED, ids=lambda v: getattr(v, "__name__", str(v)))
def test_which_format_a_dtype_holds(dtype, fmt):
    assert format_of_dtype(np.dtype(dtype)) == fpsim.formats.as_format(fmt)


@pytest.mark.parametrize("dtype", NOT_FPSIM, ids=lambda t: np.dtype(t).name)
def test_dtypes_of_no_fpsim_format(dtype):
    assert format_of_dtype(np.dtype(dtype)) is None


def same_values(got, want) -> bool:
    """Encodings equal, NaN for NaN (ml_dtypes gives a negative overflow a negative NaN)."""
    with np.errstate(invalid="ignore"):
        g, w = np.asarray(got).astype(np.float64), np.asarray(want).astype(np.float64)
    nan = np.isnan(w)
    return (np.array_equal(np.isnan(g), nan) and np.array_equal(np.signbit(g[~nan]),
                                                                 np.signbit(w[~nan]))
            and np.array_equal(g[~nan], w[~nan]))


@pytest.mark.parametrize("dtype, fmt", SHARED, ids=lambda v: getattr(v, "__name__", str(v)))
def test_round_into_a_dtype_is_the_dtypes_own_cast(dtype, fmt, backend_name):
    """Where ml_dtypes (and NumPy, for float16) round correctly, to nearest even, fpsim's
    result in their dtype is their cast, bit for bit."""
    x = around(np.random.default_rng(5), fmt, 20_000, np.float32)
    if not fpsim.formats.as_format(fmt).nan:  # refused for such a dtype (test_small_formats)
        x = x[~np.isnan(x)]
    if dtype is ml_dtypes.float8_e8m0fnu:
        # ml_dtypes rounds float32 subnormals between 2^-127 and 2^-126 up to 2^-126 where
        # the nearest is 2^-127 (asserted in test_small_formats): compare normal inputs.
        x = x[~(np.abs(x) < np.float32(2.0**-126))]
    got = fpsim.round(x, fmt, dtype=dtype)
    assert got.dtype == np.dtype(dtype)
    with np.errstate(all="ignore"):
        want = x.astype(dtype)
    assert same_values(got, want)


def test_a_dtype_of_another_format_is_refused():
    with pytest.raises(ValueError, match="dtype bfloat16 holds bf16, not fp16"):
        fpsim.round([1.0], "fp16", dtype=ml_dtypes.bfloat16)
    with pytest.raises(ValueError, match="holds no fpsim format"):
        fpsim.round([1.0], "fp8_e4m3", dtype=ml_dtypes.float8_e4m3b11fnuz)
    with pytest.raises(ValueError, match="holds fp8_e4m3fnuz, not fp8_e4m3"):
        fpsim.round([1.0], "fp8_e4m3", dtype=ml_dtypes.float8_e4m3fnuz)
    with pytest.raises(ValueError, match="not a NumPy dtype"):
        fpsim.round([1.0], "fp16", dtype="half-ish")


@pytest.mark.parametrize("dtype", [t for t, _ in SHARED[1:]] + NOT_FPSIM[:-1],
                         ids=lambda t: np.dtype(t).name)
def test_ml_dtypes_arrays_are_widened_exactly(dtype):
    codes = np.arange(2 ** (8 * np.dtype(dtype).itemsize), dtype=np.uint64)
    x = codes.astype({1: np.uint8, 2: np.uint16}[np.dtype(dtype).itemsize]).view(dtype)
    with np.errstate(invalid="ignore"):
        exact = x.astype(np.float32)
    assert same_values(fpsim.round(x, "fp32"), exact)
    assert same_values(fpsim.round(x, "bf16", "toward_zero"),
                       fpsim.round(exact, "bf16", "toward_zero"))


def test_ml_dtypes_integers_are_taken_exactly():
    assert fpsim.round(np.array([-8, 7], dtype=ml_dtypes.int4), "fp16").tolist() == [-8, 7]


F16, F32, F64 = np.float16, np.float32, np.float64


@pytest.mark.parametrize("call, inputs, fmt", [
    (lambda x: fpsim.round(x, "fp16"), [F32], "fp16"),
    (lambda x: fpsim.round(x, "fp16"), [F16], "fp16"),
    (lambda x: fpsim.round(x, "bf16"), [F16], "bf16"),
    (lambda x: fpsim.add(x, x, "fp16"), [F32], "fp16"),
    (lambda x: fpsim.matmul(x, x, accum="fp16"), [F16], "fp16"),
    (lambda x: fpsim.matmul(x, x), [F32], "fp32"),
    (lambda x: fpsim.matmul(x, x, accum="fp16", out="bf16"), [F16], "bf16"),
    (lambda x: fpsim.sum(x), [F32], "fp32"),
    (lambda x: fpsim.sum(x, axis=0, accum="fp16"), [F16], "fp16"),
    (lambda x: fpsim.sum(x, accum="fp16"), [F64], "fp16"),
    (lambda x: fpsim.sum(x, accum="fp16", out="fp8_e4m3"), [F32], "fp8_e4m3"),
    (lambda x: fpsim.dot(x[0], x[1], accum="bf16"), [F32], "bf16"),
    (lambda x: fpsim.conv2d(x[None, None], x[None, None], accum="fp16"), [F16], "fp16"),
])
def test_one_rule_for_result_dtypes(call, inputs, fmt, backend_name):
    """The result dtype is NumPy's promotion of the inputs' dtypes and the result
    format's own dtype (docs/semantics.md)."""
    x = np.array([[1.0, 2.0], [0.5, -1.0]], dtype=inputs[0])
    want = np.result_type(*inputs, fpsim.formats.as_format(fmt).dtype)
    assert np.asarray(call(x)).dtype == want


def test_numpy_reads_a_tensor():
    t = fpsim.tensor([0.5, 2.0], format="fp16")
    assert t.dtype == np.float64 and t.format.name == "fp16"
    a = np.asarray(t)
    assert a.tolist() == [0.5, 2.0] and a is t.numpy()
    assert np.asarray(t, dtype=np.float16).dtype == np.float16  # its values fit: exact
    with pytest.raises(ValueError, match="do not all fit float16"):
        np.asarray(fpsim.tensor([0.1]), dtype=np.float16)
    assert isinstance(np.ones(2) + t, fpsim.Tensor)  # NumPy defers to the Tensor


def test_to_is_a_differentiable_cast():
    t = fpsim.tensor([0.1, 3.0], requires_grad=True)
    h = t.to("fp16")
    assert h.format.name == "fp16" and h.data.tolist() == [0.0999755859375, 3.0]
    (h * 2.0).sum().backward()
    assert t.grad.tolist() == [2.0, 2.0]
