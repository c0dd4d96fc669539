"""The cupy backend's lean kernels, checked without a GPU: which loop a call runs.

Their bits are checked under the simulator (tests/cuda_parity.py's ``variants``) and
offline for contraction (tests/cuda_compile_check.py's ``LEAN``), both run by
tests/test_cuda_backend.py.
"""

import doctest
import importlib.util

import numpy as np
import pytest

import fpsim
from fpsim.kernels.spec import make_spec

pytestmark = pytest.mark.skipif(importlib.util.find_spec("numba_cuda") is None,
                                reason="numba-cuda is not installed")
F32, F64 = np.dtype(np.float32), np.dtype(np.float64)


def spec(fmt, mode="nearest_even", subnormals=True, saturate=False):
    return make_spec(fpsim.format(fmt), mode, subnormals, saturate, None)


@pytest.fixture(scope="module")
def cupy_backend():
    from fpsim.backends import cupy_backend

    return cupy_backend


def test_the_backends_examples_run(cupy_backend):
    result = doctest.testmod(cupy_backend)
    assert result.attempted >= 10 and result.failed == 0


@pytest.mark.parametrize(("kernel", "x", "out", "fmt", "check", "encoding"), [
    ("round_value", F32, F32, "fp16", False, "binary32"),
    ("round_value", F32, F32, "fp8_e5m2", False, "binary32"),
    ("round_value", F32, F32, "fp32", False, "binary32"),
    ("round_value", F32, F32, "fp64", False, "binary64"),  # binary32 cannot carry it
    ("round_value", F64, F32, "fp16", False, "binary64"),  # float64 input is not exact
    ("round_value", F32, F64, "fp16", False, "binary64"),
    ("round_value", F32, F32, "fp16", True, "binary64"),
    ("op_add", F32, F32, "fp16", False, "binary64"),  # arithmetic: binary64 carriers
])
def test_the_encoding_is_the_cpus(cupy_backend, kernel, x, out, fmt, check, encoding):
    from fpsim.backends.numba_backend import Backend as CPU

    s = spec(fmt)
    assert CPU.encoding(kernel, x, out, s, check).name == encoding
    for specialise in (False, True):
        name, argument, folded = cupy_backend.software_loop(kernel, x, out, s, check, specialise)
        assert name == encoding
        assert tuple(argument) == tuple(s)
        assert type(argument) is (cupy_backend.LaneSpec if encoding == "binary32"
                                  else type(s))
        assert folded is (argument if specialise else None)


def test_the_spec_of_the_binary32_rounding_is_in_its_lanes(cupy_backend):
    _, argument, _ = cupy_backend.software_loop("round_value", F32, F32, spec("bf16", "odd"),
                                                False, False)
    assert [type(v) for v in argument] == [np.int32] * 2 + [np.float32] * 2 + [np.int32] * 7
    # Equal to the binary64 spec field for field, and still not taken for it.
    assert argument == spec("bf16", "odd") and type(argument) is not type(spec("bf16"))


def test_large_and_hot_calls_are_specialised(cupy_backend):
    backend = cupy_backend.Backend()
    small, large = 1000, cupy_backend.SPECIALISE_FROM
    s = spec("fp8_e4m3", "down")
    assert backend.kernel_name("round_value", F32, F32, s, size=small) == "binary32"
    assert backend.kernel_name("round_value", F32, F32, s, size=large) == "binary32+spec"
    assert backend.kernel_name("round_value", F32, F32, s, size=small, hot=True) == \
        "binary32+spec"
    assert backend.kernel_name("op_mul", F32, F32, s, check=True, size=small) == "binary64"


def test_each_specialisation_is_its_own_instance_and_cache_entry(cupy_backend):
    """Each spec and encoding gets its own loop, with its own qualified name (numba-cuda's
    cache is keyed by it); the generic loop keeps the key it had before the variants."""
    from fpsim.backends import cuda_loops

    backend = cupy_backend.Backend()
    template = cuda_loops.elementwise
    assert backend.loop_key(template, "round_value") == ("elementwise", "round_value")
    loops = [backend.loop(template, "round_value"),
             backend.loop(template, "round_value", spec("fp16"), "binary64"),
             backend.loop(template, "round_value", spec("fp16", "up"), "binary64"),
             backend.loop(template, "round_value", None, "binary32"),
             backend.loop(template, "round_value", spec("fp16"), "binary32")]
    names = {loop.py_func.__qualname__ for loop in loops}
    assert len(names) == len(loops)
    assert backend.loop(template, "round_value", spec("fp16", "up"), "binary64") is loops[2]
    bound = [loop.py_func.__globals__ for loop in loops]
    assert [g["SPEC"] for g in bound] == [None, spec("fp16"), spec("fp16", "up"), None,
                                          spec("fp16")]
    assert [g["LOAD"] for g in bound] == [float, float, float, np.float32, np.float32]
    assert bound[3]["KERNEL"] is backend.binary32()["round_value"]
