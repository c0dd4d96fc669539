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


# -- hardware paths ----------------------------------------------------------------------


def test_which_calls_have_a_hardware_path(cupy_backend):
    from fpsim.backends.cuda_hardware import Path, path

    def found(kernel, fmt, mode="nearest_even", dtypes=(F32,), out=F32, flags=False,
              subnormals=True, saturate=False, random_bits=None):
        s = make_spec(fpsim.format(fmt), mode, subnormals, saturate, random_bits)
        return path(kernel, dtypes * (1 if kernel == "round_value" else 2), out, s, flags,
                    False)

    for fmt in ("fp16", "bf16"):
        for mode in ("nearest_even", "toward_zero", "up", "down"):
            assert found("round_value", fmt, mode) == Path("round_value", fmt, mode)
        assert found("op_add", fmt) == Path("op_add", fmt, "nearest_even")
        assert found("round_value", fmt, random_bits=8) is not None  # drawn by none
    assert found("round_value", "fp16", "nearest_away") is None
    assert found("round_value", "fp16", "odd") is None
    assert found("op_mul", "fp16", "up") is None
    assert found("op_div", "fp16") is None and found("op_sqrt", "fp16") is None
    assert found("round_value", "fp16", flags=True) is None
    assert found("round_value", "fp16", subnormals=False) is None
    assert found("round_value", "fp16", saturate=True) is None
    assert found("round_value", "fp16", dtypes=(F64,)) is None
    assert found("round_value", "fp16", out=F64) is None
    assert found("op_add", "fp16", dtypes=(F64,)) is None
    assert found("round_value", "fp8_e4m3") is None
    assert found("round_value", "fp32") is None
    custom = make_spec(fpsim.Format(5, 10), "nearest_even", True, False, None)
    assert path("round_value", (F32,), F32, custom, False, False) is not None  # fp16's spec
    stochastic = make_spec(fpsim.format("fp16"), "stochastic", True, False, None)
    assert path("round_value", (F32,), F32, stochastic, False, True) is None


@pytest.mark.parametrize(("fmt", "mode", "value", "want"), [
    ("fp16", "nearest_even", 1 + 2.0**-11, 1.0),  # a tie to even
    ("fp16", "nearest_even", 1 + 3 * 2.0**-11, 1 + 2.0**-9),
    ("fp16", "nearest_even", 2.0**-25, 0.0),  # half the least subnormal: to even
    ("fp16", "nearest_even", 3 * 2.0**-26, 2.0**-24),
    ("fp16", "nearest_even", 65520.0, np.inf),
    ("fp16", "toward_zero", -65520.0, -65504.0),
    ("fp16", "up", 2.0**-40, 2.0**-24),
    ("fp16", "down", -2.0**-40, -(2.0**-24)),
    ("fp16", "down", 2.0**-40, 0.0),
    ("bf16", "nearest_even", 1 + 2.0**-8, 1.0),
    ("bf16", "nearest_even", 2.0**-134, 0.0),  # half bf16's least subnormal
    ("bf16", "up", 1 + 2.0**-20, 1 + 2.0**-7),
    ("bf16", "toward_zero", float(np.finfo(np.float32).max), 2.0**127 * (2 - 2.0**-7)),
])
def test_the_simulators_stand_in_rounds_exactly(fmt, mode, value, want):
    from fractions import Fraction

    from fpsim.backends.cuda_hardware import exact_round

    assert exact_round(Fraction(value), value < 0, fmt, mode) == want
    assert np.copysign(1, exact_round(Fraction(0), True, fmt, mode)) == -1


SIMULATED = ("import warnings, numpy as np, fpsim\n"
             "from fpsim.backends import cuda_hardware, cupy_backend\n"
             "from fpsim.backends.numpy_backend import Backend as Reference\n"
             "from fpsim.kernels.spec import make_spec\n")


def _simulated(code):
    import os
    import subprocess
    import sys

    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    out = subprocess.run([sys.executable, "-c", SIMULATED + code], capture_output=True,
                         text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out.stdout


def test_a_hardware_path_whose_probe_fails_is_not_used_and_says_why():
    """Under the simulator: a conversion that truncates where it should round to nearest,
    and an instruction that cannot run. Each probe fails once, with a warning naming the
    path and why; the software kernel computes the calls, with fpsim's bits."""
    out = _simulated(
        "real = cuda_hardware.host_instructions\n"
        "def planted(p):\n"
        "    out = real(p._replace(mode='toward_zero'))\n"
        "    def broken(a, b, c):\n"
        "        raise ValueError('no such instruction')\n"
        "    out['OPERATE'] = broken\n"
        "    return out\n"
        "cuda_hardware.host_instructions = planted\n"
        "b, ref = cupy_backend.Backend(), Reference()\n"
        "rng = np.random.default_rng(1)\n"
        "x = (rng.standard_normal(5000) * 2.0 ** rng.integers(-30, 20, 5000)).astype(np.float32)\n"
        "h = x.astype(np.float16).astype(np.float32)\n"
        "spec = make_spec(fpsim.format('fp16'), 'nearest_even', True, False, None)\n"
        "for kernel, ops in (('round_value', [x]), ('op_add', [h, h[::-1].copy()])):\n"
        "    with warnings.catch_warnings(record=True) as caught:\n"
        "        warnings.simplefilter('always')\n"
        "        for _ in range(2):\n"
        "            got, want = np.empty_like(x), np.empty_like(x)\n"
        "            b.apply(kernel, ops, got, None, spec, None)\n"
        "            ref.apply(kernel, ops, want, None, spec, None)\n"
        "            assert np.array_equal(got.view(np.int32), want.view(np.int32)), kernel\n"
        "    texts = [str(w.message) for w in caught if w.category is RuntimeWarning]\n"
        "    print(len(texts), texts[0])\n"
        "    print(b.kernel_name(kernel, np.dtype(np.float32), np.dtype(np.float32), spec,\n"
        "                        size=5000))\n")
    lines = out.splitlines()
    assert lines[0].startswith("1 the GPU's fp16 round_value (nearest_even) is not used: ")
    assert "probes differ" in lines[0] and "the software kernel runs instead" in lines[0]
    assert lines[1] == "binary32"
    assert lines[2].startswith("1 the GPU's fp16 op_add (nearest_even) is not used: it failed "
                               "to run: ValueError")
    assert "no such instruction" in lines[2]
    assert lines[3] == "binary64"


# -- on a GPU ------------------------------------------------------------------------------

# Low halves of float32 encodings: with every high half, the ties of binary16 (13 bits
# dropped) and bfloat16 (16), even and odd, their neighbours, and the extremes.
LOWS = np.array([0x0000, 0x0001, 0x0FFF, 0x1000, 0x1001, 0x3000, 0x7FFF, 0x8000, 0x8001,
                 0xFFFF], dtype=np.uint32)


def exhaustive_inputs() -> np.ndarray:
    """Every 16-bit pattern as the high half of a float32, with each of ``LOWS``: every
    binary16 and bfloat16 encoding widened, the ties between them and their neighbours."""
    high = np.arange(1 << 16, dtype=np.uint32) << 16
    return (high[:, None] | LOWS[None, :]).ravel().view(np.float32)


@pytest.fixture(scope="module")
def gpu_backend():
    from fpsim.backends import gpu_missing

    missing = gpu_missing()
    if missing:
        pytest.skip(f"no GPU: {missing}")
    from fpsim.backends import cupy_backend

    return cupy_backend.Backend()


def _same(backend, kernel, ops, s, key=None, flags=False, check=False, hot=False):
    from fpsim.backends.numpy_backend import Backend as Reference

    results = []
    for b, kw in ((backend, {"hot": hot}), (Reference(), {})):
        out = np.empty(ops[0].size, ops[0].dtype)
        fl = np.empty(out.size, np.uint8) if flags else None
        bad = b.apply(kernel, ops, out, fl, s, key, check=check, **kw)
        results.append((out.view(np.uint32 if out.itemsize == 4 else np.uint64), fl, bad))
    (o1, f1, b1), (o2, f2, b2) = results
    differ = np.flatnonzero(o1 != o2)
    assert differ.size == 0, (kernel, s, hot, flags, [o[differ[0]] for o in ops],
                              o1[differ[0]], o2[differ[0]])
    assert f1 is None or np.array_equal(f1, f2)
    assert b1 == b2


@pytest.mark.gpu
def test_every_hardware_path_passes_its_probe_on_the_gpu(gpu_backend):
    """On an H100 (compute capability 9.0) every path is exact; a warning is an error."""
    import warnings

    from fpsim.backends.cuda_hardware import ARITHMETIC, CONVERSION_MODES, FORMATS, Path

    paths = [Path("round_value", f, m) for f in FORMATS for m in CONVERSION_MODES]
    paths += [Path(k, f, "nearest_even") for f in FORMATS for k in ARITHMETIC]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert {p: gpu_backend.sound(p) for p in paths} == {p: True for p in paths}


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", ["fp16", "bf16", "fp8_e4m3", "fp8_e5m2"])
@pytest.mark.parametrize("mode", fpsim.ROUNDING_MODES)
def test_the_lean_roundings_on_the_gpu_equal_the_numpy_backend(gpu_backend, fmt, mode):
    """Every binary16 and bfloat16 encoding widened to float32, the ties between them and
    their neighbours (``exhaustive_inputs``): the generic binary32 loop, the specialised one
    (or the hardware path), with flags; float64 input in the specialised binary64 loop."""
    x = exhaustive_inputs()
    s = spec(fmt, mode)
    key = 12345 if mode == "stochastic" else None
    for hot, flags in ((False, False), (True, False), (True, True), (False, True)):
        _same(gpu_backend, "round_value", [x], s, key, flags=flags, hot=hot)
    # Each specialised loop compiles (seconds, then cached on disk): a few more specs only.
    if mode in ("nearest_even", "stochastic"):
        _same(gpu_backend, "round_value", [x.astype(np.float64)], s, key, hot=True)
        for subnormals, saturate in ((False, False), (True, True)):
            _same(gpu_backend, "round_value", [x], spec(fmt, mode, subnormals, saturate), key,
                  hot=True)


ARITHMETIC_OPERANDS = 1 << 18


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", ["fp16", "bf16"])
@pytest.mark.parametrize("kernel", ["op_add", "op_sub", "op_mul", "op_fma"])
def test_the_hardware_arithmetic_on_the_gpu_equals_the_numpy_backend(gpu_backend, fmt,
                                                                     kernel):
    """Values of the format drawn over every encoding (NaN and infinities included), a
    value beside each of a few (not of the format: the software kernel, and the operand
    check's count), with and without the check, on the hardware path and off it."""
    from fpsim.backends.cuda_hardware import ARITHMETIC

    rng = np.random.default_rng(35)
    n = ARITHMETIC_OPERANDS
    arity = ARITHMETIC[kernel][1]
    codes = rng.integers(0, 1 << 16, (arity, n), dtype=np.uint32) << 16
    ops = [c.view(np.float32) for c in codes]
    if fmt == "fp16":
        ops = [o.astype(np.float16).astype(np.float32) for o in ops]
    ops[0][::97] = np.nextafter(ops[0][::97], np.float32(np.inf))
    s = spec(fmt)
    for check in (True, False):
        _same(gpu_backend, kernel, ops, s, check=check, hot=True)
    assert gpu_backend.kernel_name(kernel, F32, F32, s, check=True, size=n) == "hardware"
    _same(gpu_backend, kernel, ops, s, flags=True, check=True, hot=True)


def test_the_compile_check_allows_a_hardware_loops_own_half_fma_only():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    try:
        import cuda_compile_check as check
    finally:
        sys.path.pop(0)
    ptx = ("\tfma.rn.f16 %rs7, %rs1, %rs2, %rs3;\n\tfma.rn.bf16 %rs8, %rs1, %rs2, %rs3;\n"
           "\tadd.rn.f16 %rs4, %rs1, %rs2;\n")
    assert len(check.ptx_problems(ptx)) == 2
    assert check.ptx_problems(ptx, half_fma=True) == []
    assert len(check.ptx_problems(ptx + "\tfma.rn.f32 %f3, %f1, %f2, %f1;\n", half_fma=True)) == 1
    assert len(check.ptx_problems("\tadd.f16 %rs4, %rs1, %rs2;\n\tmul.bf16 %rs4, %rs1, %rs2;\n",
                                  half_fma=True)) == 2
