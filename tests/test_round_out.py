"""``fpsim.round(..., out=)``: the result written to an array the caller owns.

The values must be those of ``round`` without ``out`` (itself checked against the
exact reference), on every backend, for every dtype ``out`` may have, in place, into
an array that overlaps the input, into a strided array, with flags and with
stochastic rounding; every bad ``out`` is an error that names the problem.
"""

import ml_dtypes
import numpy as np
import pytest
from reference import ref_round

import fpsim
from fpsim.backends import numba_backend

SIZES = [7, numba_backend.HALF_ROUND_FROM + 5]  # the generic loops, and the fp16 conversion


def values(n: int, dtype=np.float32) -> np.ndarray:
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n) * np.exp2(rng.integers(-30, 20, n))
    x[:5] = [np.nan, np.inf, -0.0, 65520.0, 2.0**-25]
    return x.astype(dtype)


def same(a, b) -> bool:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return a.shape == b.shape and bool(np.all((a == b) | (np.isnan(a) & np.isnan(b)))) and bool(
        np.array_equal(np.signbit(a), np.signbit(b)) or np.isnan(a).any())


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("fmt, out_dtype", [
    ("fp16", np.float32), ("fp16", np.float64), ("fp16", np.float16),
    ("bf16", np.float32), ("bf16", ml_dtypes.bfloat16), ("fp8_e4m3", ml_dtypes.float8_e4m3fn),
    ("fp64", np.float64),
])
def test_out_holds_what_round_returns(backend_name, n, fmt, out_dtype):
    x = values(n)
    want = fpsim.round(x, fmt)
    out = np.full(n, 7, dtype=out_dtype)
    assert fpsim.round(x, fmt, out=out) is out
    assert same(out.astype(np.float64), want)
    exact = [ref_round(float(v), fmt)[0] for v in x[:50]]
    assert same(out[:50].astype(np.float64), exact)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", SIZES)
def test_in_place(backend_name, dtype, n):
    x = values(n, dtype)
    want = fpsim.round(x, "fp16", "toward_zero")
    assert fpsim.round(x, "fp16", "toward_zero", out=x) is x
    assert same(x, want)


def test_overlapping_and_strided_outputs(backend_name):
    buffer = values(2001)
    x, shifted = buffer[1:], buffer[:-1]  # out starts one element before x
    want = fpsim.round(x.copy(), "bf16", "up")
    fpsim.round(x, "bf16", "up", out=shifted)
    assert same(buffer[:-1], want)
    strided = np.zeros(4000, dtype=np.float32)[::2]
    x = values(2000)
    fpsim.round(x, "fp16", out=strided)
    assert same(strided, fpsim.round(x, "fp16"))
    grid = np.zeros((3, 4), dtype=np.float64)
    fpsim.round(x[:12].reshape(3, 4).T.T, "fp8_e5m2", out=grid)
    assert same(grid, fpsim.round(x[:12].reshape(3, 4), "fp8_e5m2"))


def test_flags_and_stochastic_rounding(backend_name):
    x = values(3000)
    want, want_flags = fpsim.round(x, "bf16", "stochastic", seed=4, flags=True)
    out = np.empty(3000, dtype=np.float32)
    got, flags = fpsim.round(x, "bf16", "stochastic", seed=4, flags=True, out=out)
    assert got is out and same(out, want) and np.array_equal(flags, want_flags)
    zero_d = np.empty((), dtype=np.float64)
    assert fpsim.round(0.1, "fp16", out=zero_d) is zero_d and float(zero_d) == 0.0999755859375


@pytest.mark.parametrize("out, message", [
    ([0.0, 0.0], "out must be a NumPy array, got list"),
    (np.zeros(3, dtype=np.float32), r"out has shape \(3,\); the result's shape is \(2,\)"),
    (np.zeros((2, 1), dtype=np.float32), r"out has shape \(2, 1\)"),
    (np.zeros(2, dtype=np.int32), "dtype int32 cannot hold every value of fp16"),
    (np.zeros(2, dtype=np.float16).astype(ml_dtypes.bfloat16), "dtype bfloat16 cannot hold"),
    (np.zeros(2, dtype=np.complex128), "dtype complex128 cannot hold"),
    (np.zeros(2, dtype=object), "dtype object cannot hold"),
])
def test_a_bad_out_is_refused(out, message):
    with pytest.raises(ValueError, match=message):
        fpsim.round(np.float32([0.1, 0.2]), "fp16", out=out)


def test_a_bad_out_is_refused_before_anything_is_written():
    wide = np.zeros(2, dtype=np.float32)
    with pytest.raises(ValueError, match="dtype float32 cannot hold every value of fp64"):
        fpsim.round([0.1, 0.2], "fp64", out=wide)
    frozen = np.zeros(2)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="out is read-only"):
        fpsim.round([0.1, 0.2], "fp16", out=frozen)
    with pytest.raises(ValueError, match="give dtype or out, not both"):
        fpsim.round([0.1, 0.2], "fp16", out=np.zeros(2, np.float16), dtype=np.float16)
    x = np.float32([0.1, 0.2])
    with pytest.raises(ValueError, match="not exactly representable"):
        fpsim.round([0.1, 2**60 + 1], "fp16", out=x)  # an input refused: out untouched
    assert np.array_equal(x, np.float32([0.1, 0.2])) and not wide.any()
