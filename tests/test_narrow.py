"""Backend.narrow (the float32 copy and check of float64 accumulation inputs), against
Python's own binary32 conversion (``struct``), and the scratch arrays around the BLAS
product: results never share them."""

import struct
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fpsim
from fpsim import _workspace
from fpsim.backends import get_backend


def held(v: float) -> bool:
    """Whether binary32 holds the double v: struct packs it to nearest (overflow: error)."""
    if v != v:
        return True
    try:
        back = struct.unpack("<f", struct.pack("<f", v))[0]
    except OverflowError:
        return False
    return struct.pack("<d", back) == struct.pack("<d", v)  # -0.0 is not +0.0


def expected_first(x: np.ndarray) -> int:
    return next((i for i, v in enumerate(x.tolist()) if not held(v)), -1)


FLOAT32_VALUES = [0.0, -0.0, 1.0, -2.5, 2.0**-149, -(2.0**-149), 2.0**-126 * 1.5,
                  3.4028234663852886e38, float("inf"), float("-inf"), float("nan"), 65504.0,
                  1 + 2.0**-23]
NOT_FLOAT32 = [0.1, 5e-324, 2.0**-150, 2.0**-149 * 1.5, 1 + 2.0**-24, 3.4028235677973366e38,
               1e300, -1e-300, 2.0**-1074 * 7]


def run_narrow(x):
    x = np.ascontiguousarray(x, dtype=np.float64)
    out = np.full(x.size, 7.0, np.float32)
    return get_backend().narrow(x, out), out


def test_float32_values_are_copied_and_pass(backend_name):
    x = np.array(FLOAT32_VALUES * 700)  # long enough for any vector loop's main body
    first, out = run_narrow(x)
    assert first == -1
    same = out.astype(np.float64).view(np.int64) == x.view(np.int64)
    assert (same | np.isnan(x)).all() and np.isnan(out[np.isnan(x)]).all()


@pytest.mark.parametrize("bad", NOT_FLOAT32)
@pytest.mark.parametrize("where", [0, 5, 4099])
def test_the_first_value_float32_does_not_hold_is_found(backend_name, bad, where):
    assert not held(bad)
    x = np.array(FLOAT32_VALUES * 400)
    x[where] = bad
    x[where + 3] = 0.1  # a later one too: the first is reported
    first, _ = run_narrow(x)
    assert first == where == expected_first(x)


def test_empty(backend_name):
    assert run_narrow(np.empty(0))[0] == -1


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.floats(width=32), st.floats()), min_size=1, max_size=300))
def test_against_struct(values):
    x = np.array(values, dtype=np.float64)
    for name in ("numpy", "numba"):
        with fpsim.backend(name):
            first, out = run_narrow(x)
        assert first == expected_first(x), name
        stop = x.size if first < 0 else first
        ok = np.isnan(x[:stop]) | (out[:stop].astype(np.float64) == x[:stop])
        assert ok.all(), name


def test_matmul_of_float64_values_names_the_first_bad_element(backend_name):
    a = np.ones((3, 4))
    a[1, 2], a[2, 0] = 0.1, 0.2
    with pytest.raises(ValueError, match=r"A\[\(1, 2\)\]=.*0\.1.* is not a float32 value"):
        fpsim.matmul(a, np.ones((4, 2)), order="any")
    with pytest.raises(ValueError, match=r"B\[\(0, 0\)\]=.*5e-324.* is not a float32 value"):
        fpsim.matmul(np.ones((3, 4)), np.full((4, 2), 5e-324))


def test_results_never_share_the_scratch_arrays(backend_name):
    """The BLAS product of float64 inputs goes through scratch arrays; each result is an
    array of its own, unchanged by later calls."""
    rng = np.random.default_rng(3)
    # Small integers: every sum is exact in binary32, whatever BLAS's order.
    a = rng.integers(-8, 9, (2, 32, 16)).astype(np.float64)
    b = rng.integers(-8, 9, (16, 8)).astype(np.float64)
    first = fpsim.matmul(a, b, order="any")
    kept = first.copy()
    second = fpsim.matmul(2 * a, b, order="any")
    third = fpsim.matmul(a.astype(np.float32), b.astype(np.float32), order="any")
    np.testing.assert_array_equal(first, kept)
    assert first.dtype == np.float64 and third.dtype == np.float32
    for x, y in ((first, second), (first, third), (second, third)):
        assert not np.shares_memory(x, y)
    np.testing.assert_array_equal(second, 2 * kept)
    np.testing.assert_array_equal(third, kept.astype(np.float32))
    np.testing.assert_array_equal(first, np.einsum("bmk,kn->bmn", a, b))


def test_scratch_arrays_are_per_role_per_thread_and_bounded():
    x = _workspace.scratch("test a", (3, 4), np.float32)
    y = _workspace.scratch("test b", (3, 4), np.float32)
    assert not np.shares_memory(x, y) and x.shape == (3, 4) and x.flags.c_contiguous
    assert np.shares_memory(_workspace.scratch("test a", (2, 2), np.float32), x)
    assert _workspace.scratch("test a", (2,), np.float64).dtype == np.float64
    big = (_workspace.MAX_BYTES // 4 + 1,)
    assert not np.shares_memory(_workspace.scratch("test c", big, np.float32),
                                _workspace.scratch("test c", big, np.float32))
    other = []
    thread = threading.Thread(target=lambda: other.append(
        _workspace.scratch("test a", (3, 4), np.float32)))
    thread.start()
    thread.join()
    assert not np.shares_memory(other[0], _workspace.scratch("test a", (3, 4), np.float32))
