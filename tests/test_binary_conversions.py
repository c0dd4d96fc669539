"""The binary32/binary64 conversion kernels (``fpsim.kernels.convert``), which convert
device arrays where CuPy's own conversion would flush binary32 subnormals (its kernels are
compiled with ``-ftz=true``), checked here in their host instance against independent
references: the rounding primitive's integer arithmetic (``fpsim.round`` to fp32, TestFloat-
clean) for binary64 to binary32, and an integer decoding of every binary32 subnormal and of
sampled normal encodings for binary32 to binary64. Their device instance runs in the CUDA
simulator and on a GPU (``tests/device_checks.py``: binary32_subnormals_survive_the_device).
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fpsim
from fpsim._device import binary32, binary64
from fpsim.backends import array_kernels

KERNELS = array_kernels()
pytestmark = pytest.mark.filterwarnings("ignore:.*encountered in cast:RuntimeWarning")
NAN64, NAN32 = 0x7FF8000000000000, 0x7FC00000


def bits64(a):
    return np.asarray(a, np.float64).view(np.uint64)


def bits32(a):
    return np.asarray(a, np.float32).view(np.uint32)


def want32(x):
    """binary32 of ``x`` by the rounding primitive: nearest even, subnormals kept, NaN the
    one quiet NaN."""
    with np.errstate(over="ignore"):
        return np.float32(fpsim.round(x, "fp32"))


def edges():
    """binary64 values where binary32 rounding is delicate: each side of and exactly on the
    halfway points around binary32's subnormals, its smallest normal and its largest value;
    zeros, infinities, NaNs of both signs with payloads."""
    f32 = np.finfo(np.float32)
    points = [2.0**-149, 2.0**-148, 3 * 2.0**-149, f32.tiny, float(f32.max), 1.0, 2.0**-150]
    out = []
    for p in points:
        up = float(np.nextafter(np.float32(p), np.float32(np.inf)))
        half = (p + up) / 2  # exact in binary64
        out += [p, up, half, np.nextafter(half, 0), np.nextafter(half, np.inf)]
    out += [2.0**-151, np.nextafter(2.0**-150, 1.0), 2.0**128, 2.0**128 * (1 - 2.0**-25),
            np.nextafter(2.0**128 * (1 - 2.0**-25), 0), 0.0, np.inf, 1e-320, 5e-324]
    values = np.array(out + [-v for v in out])
    nans = np.array([NAN64, 0xFFF8000000000000, 0x7FF0000000000001, 0xFFFFFFFFFFFFFFFF],
                    np.uint64).view(np.float64)
    return np.concatenate([values, nans])


def test_to_binary32_rounds_as_the_rounding_primitive():
    x = edges()
    got = KERNELS["to_binary32"](x)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(bits32(got), bits32(want32(x)))
    assert set(bits32(got[np.isnan(x)]).tolist()) == {NAN32}


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True,
                          width=64), min_size=1, max_size=50))
def test_to_binary32_on_any_binary64(values):
    x = np.array(values, np.float64)
    np.testing.assert_array_equal(bits32(KERNELS["to_binary32"](x)), bits32(want32(x)))


def decode32(b):
    """binary32 encodings' values from their fields, in integer arithmetic (finite ones)."""
    b = b.astype(np.int64)
    sign = np.where(b >> 31, -1.0, 1.0)
    e, f = (b >> 23) & 0xFF, b & 0x7FFFFF
    mantissa = np.where(e == 0, f, f | 0x800000)
    return sign * np.ldexp(mantissa.astype(np.float64), np.where(e == 0, -149, e - 150))


def test_to_binary64_is_exact_on_every_subnormal_and_sampled_normals():
    rng = np.random.default_rng(0)
    encodings = np.concatenate([
        np.arange(1 << 23, dtype=np.uint32),  # zero and every positive subnormal
        np.arange(1 << 23, dtype=np.uint32) | np.uint32(1 << 31),  # and the negative ones
        rng.integers(0, 0x7F800000, 1 << 16, dtype=np.uint32),  # normal ones
        np.uint32([0x7F7FFFFF, 0x00800000, 0x80800000])])
    got = KERNELS["to_binary64"](encodings.view(np.float32))
    assert got.dtype == np.float64
    np.testing.assert_array_equal(bits64(got), bits64(decode32(encodings)))


def test_to_binary64_specials():
    x = np.array([0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFFFFFFF],
                 np.uint32).view(np.float32)
    got = bits64(KERNELS["to_binary64"](x))
    assert got[:2].tolist() == [0x7FF0000000000000, 0xFFF0000000000000]
    assert set(got[2:].tolist()) == {NAN64}


def test_device_helpers_leave_host_arrays_to_numpy():
    x = np.float32([2.0**-149, -0.0, np.inf])
    assert binary64(x).dtype == np.float64 and bits64(binary64(x)).tolist() == bits64(
        x.astype(np.float64)).tolist()
    w = np.array([2.0**-149, 0.1, 1e300])
    with np.errstate(over="ignore"):
        assert bits32(binary32(w)).tolist() == bits32(w.astype(np.float32)).tolist()
    same = np.zeros(2)
    assert binary64(same) is same and binary32(x) is x
    assert binary64(np.float16([1.5])).tolist() == [1.5]
    assert binary64(np.zeros(0, np.float32)).shape == (0,)
