"""The cupy backend's raw launch path (fpsim/backends/cuda_launch.py), checked without a GPU.

The packing of each kernel's arguments is checked against the parameter list of the
PTX entry numba-cuda compiles (offline, ``numba.cuda.compile_ptx``) for every
signature the backend launches, and against numba-cuda's kernel ABI written out by
hand (numba_cuda/numba/cuda/dispatcher.py, ``_Kernel._prepare_args``). The launcher
itself runs against a stand-in for CuPy. The two paths are compared on a GPU by
``python3 -m fpsim.compare.launch``.

``FPSIM_CUDA_LAUNCH_ALL=1`` compiles every real kernel variant (minutes) where by
default one real kernel and a stand-in of each signature are compiled.
"""

from __future__ import annotations

import os
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("numba.cuda")

import fpsim  # noqa: E402
from fpsim.backends import cuda_launch  # noqa: E402
from fpsim.backends.cuda_launch import (  # noqa: E402
    entry_parameters,
    launch_mode,
    matches_entry,
    pack,
    parameter_dtypes,
    signature_key,
)
from fpsim.kernels.spec import make_spec  # noqa: E402

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
import cuda_compile_check  # noqa: E402

CC = (9, 0)


class DeviceArray:
    """A host array presented as a device array (``__cuda_array_interface__``)."""

    def __init__(self, a: np.ndarray) -> None:
        self.a = a
        contiguous = a.flags.c_contiguous
        self.__cuda_array_interface__ = {
            "shape": a.shape, "typestr": a.dtype.str, "version": 3,
            "data": (a.__array_interface__["data"][0], False),
            "strides": None if contiguous else a.strides}


def _typeof(args):
    from numba.cuda.typing.typeof import typeof

    return tuple(typeof(a.a if isinstance(a, DeviceArray) else a) for a in args)


def _ptx(func, argtypes) -> str:
    from numba import cuda

    from fpsim.backends.cuda_contraction import no_contraction

    with no_contraction():
        ptx, _ = cuda.compile_ptx(func, argtypes, cc=CC)
    return ptx


def _stand_in(arity: int):
    """A kernel of ``arity`` arguments that does nothing: its entry is the signature's."""
    names = ", ".join(f"a{i}" for i in range(arity))
    namespace: dict = {}
    exec(f"def stand_in({names}):\n    pass\n", namespace)
    return namespace["stand_in"]


# -- the launch mode -------------------------------------------------------------------

def test_launch_mode_reads_the_environment(monkeypatch):
    monkeypatch.delenv("FPSIM_CUDA_LAUNCH", raising=False)
    assert launch_mode() == "raw"
    monkeypatch.setenv("FPSIM_CUDA_LAUNCH", " RAW ")
    assert launch_mode() == "raw"
    monkeypatch.setenv("FPSIM_CUDA_LAUNCH", "numba")
    assert launch_mode() == "numba"


@pytest.mark.parametrize("bad", ["cupy", "raw2", "1"])
def test_an_unknown_launch_mode_is_refused_by_name(monkeypatch, bad):
    monkeypatch.setenv("FPSIM_CUDA_LAUNCH", bad)
    with pytest.raises(ValueError, match=f"FPSIM_CUDA_LAUNCH={bad!r}: expected one of numba, raw"):
        launch_mode()


def test_the_backend_takes_the_launch_mode(monkeypatch):
    from fpsim.backends.cupy_backend import Backend

    monkeypatch.setenv("FPSIM_CUDA_LAUNCH", "numba")
    backend = Backend()
    assert backend.raw is None
    backend.set_launch("raw")
    launcher = backend.raw
    assert isinstance(launcher, cuda_launch.RawLauncher)
    backend.set_launch("numba")
    assert backend.raw is None
    backend.set_launch("raw")
    assert backend.raw is launcher  # its compiled kernels are kept
    monkeypatch.delenv("FPSIM_CUDA_LAUNCH", raising=False)  # the default: raw
    assert isinstance(Backend().raw, cuda_launch.RawLauncher)
    with pytest.raises(ValueError, match="FPSIM_CUDA_LAUNCH='fast'"):
        Backend(launch="fast")


def test_the_simulator_keeps_the_dispatcher():
    """Under NUMBA_ENABLE_CUDASIM=1 there is no PTX: raw asked for, the dispatcher runs,
    and its result is the NumPy backend's."""
    code = (
        "import numpy as np, fpsim\n"
        "from fpsim.backends.cupy_backend import Backend\n"
        "from fpsim.backends.numpy_backend import Backend as Reference\n"
        "from fpsim.kernels.spec import make_spec\n"
        "b = Backend()\n"
        "assert b.simulator and b.raw is None, b.raw\n"
        "b.set_launch('raw')\n"
        "assert b.raw is None\n"
        "spec = make_spec(fpsim.format('fp16'), 'nearest_even', True, False, None)\n"
        "x = np.array([1 + 2.0**-11, 65520.0, 2.0**-25, -3.3, np.nan])\n"
        "got, want = np.empty(5), np.empty(5)\n"
        "b.apply('round_value', [x], got, None, spec, None)\n"
        "Reference().apply('round_value', [x], want, None, spec, None)\n"
        "assert np.array_equal(got, want, equal_nan=True), (got, want)\n"
        "print('ok')\n")
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", FPSIM_CUDA_LAUNCH="raw")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=600)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]


# -- the PTX entry -----------------------------------------------------------------------

def test_entry_parameters_refuses_ptx_without_one_entry():
    with pytest.raises(ValueError, match="found 0"):
        entry_parameters(".version 8.5\n.visible .func f(.param .u64 a)\n{}")
    two = ".entry a(\n.param .u64 p\n)\n{}\n.entry b(\n.param .u64 q\n)\n{}"
    with pytest.raises(ValueError, match="found 2"):
        entry_parameters(two)


def test_matches_entry_names_each_disagreement():
    u64, f64, u8 = np.dtype(np.uint64), np.dtype(np.float64), np.dtype(np.uint8)
    assert matches_entry([u64, f64, u8], ["u64", "f64", "u8"]) == []
    assert matches_entry([u64, u64, u8], ["u64", "f64", "u8"]) == [
        "parameter 1: packed uint64, the entry declares .f64"]
    assert matches_entry([u64], ["u64", "f64"])[0] == "1 parameters packed, the entry declares 2"


# -- the packing against numba-cuda's ABI ------------------------------------------------

def test_pack_lays_arguments_out_as_numba_cuda_does():
    """Written out from numba-cuda's ``_prepare_args``: an array is meminfo, parent (null),
    nitems, itemsize, data, shape, strides; a tuple its fields; a bool one byte."""
    base = np.zeros((4, 6), dtype=np.float32)
    view = base[::2, 1:4]  # not contiguous: its own strides
    flat = np.zeros(5, dtype=np.int64)
    spec = make_spec(fpsim.format("bf16"), "up", True, False, None)
    args = (DeviceArray(view), DeviceArray(flat), np.uint64(2**64 - 1), spec, False, 7)
    argtypes = _typeof(args)
    assert str(argtypes[0]) == "array(float32, 2d, A)"
    got = pack(argtypes, args)
    data = view.__array_interface__["data"][0]

    def bits(v):
        return int(np.float64(v).view(np.int64))

    expected = [0, 0, 6, 4, data, 2, 3, 48, 4,
                0, 0, 5, 8, flat.__array_interface__["data"][0], 5, 8,
                -1, 7, -126, bits(spec.maxv), bits(spec.minnorm), 1, 1, 0, 1, 1, spec.mode, 53,
                0, 7]
    assert got == expected
    assert [str(d) for d in parameter_dtypes(argtypes)[16:30]] == (
        ["uint64"] + ["int64"] * 2 + ["float64"] * 2 + ["int64"] * 7 + ["uint8", "int64"])


@pytest.mark.parametrize("value", [0.0, -0.0, 1.5, -2.0**-1074, np.inf, -np.inf, 65504.0,
                                   2.0**127 * 1.75])
def test_a_float_slot_holds_its_bits(value):
    got = cuda_launch.slot(value, np.dtype(np.float64))
    assert got == int(np.array(value, np.float64).view(np.int64))
    single = cuda_launch.slot(np.float32(value), np.dtype(np.float32)) & 0xFFFFFFFF
    assert single == int(np.array(value, np.float32).view(np.uint32))


def test_a_packed_tuple_is_kept_by_type_and_value():
    from fpsim.kernels.spec import Spec

    spec = make_spec(fpsim.format("fp16"), "nearest_even", True, False, None)
    other = Spec(*spec[:-1], spec.rbits - 1)
    kept: dict = {}
    argtypes = _typeof((spec,))
    first = pack(argtypes, (spec,), kept)
    assert pack(argtypes, (spec,), kept) == first and len(kept) == 1
    assert pack(argtypes, (other,), kept)[-1] == spec.rbits - 1 and len(kept) == 2


def test_signature_key_tells_apart_what_the_typing_does():
    a32, a64 = np.zeros(4, np.float32), np.zeros(4, np.float64)
    key = signature_key((DeviceArray(a32), np.uint64(1), True, 3))
    assert key == signature_key((DeviceArray(np.ones(9, np.float32)), np.uint64(5), False, 4))
    assert key != signature_key((DeviceArray(a64), np.uint64(1), True, 3))
    assert key != signature_key((DeviceArray(a32[::2]), np.uint64(1), True, 3))
    assert key != signature_key((DeviceArray(a32), np.uint64(1), 1, 3))
    assert key != signature_key((DeviceArray(a32), np.int64(1), True, 3))


# -- the packing against the PTX of every kernel variant ---------------------------------

def _variant_args(loop, kernel, dtype):
    return tuple(DeviceArray(a) if isinstance(a, np.ndarray) else a
                 for a in cuda_compile_check.sample_args(loop, kernel, dtype))


def test_packing_matches_the_ptx_entry_of_every_signature_the_backend_launches():
    """Each (loop, kernel, dtype) the backend compiles: the parameters packed for its
    arguments are the PTX entry's, in number, order and type. The entry is a function of
    the signature alone: one stand-in kernel per signature (the real kernels below)."""
    seen: dict = {}
    for loop, kernel, dtype in cuda_compile_check.variants():
        args = _variant_args(loop, kernel, dtype)
        argtypes = _typeof(args)
        if argtypes not in seen:
            seen[argtypes] = entry_parameters(_ptx(_stand_in(len(args)), argtypes))[1]
        ptx_types = seen[argtypes]
        dtypes = parameter_dtypes(argtypes)
        assert matches_entry(dtypes, ptx_types) == [], (loop, kernel, dtype)
        assert len(pack(argtypes, args)) == len(dtypes)
    assert len(seen) == 7


REAL = cuda_compile_check.variants() if os.environ.get("FPSIM_CUDA_LAUNCH_ALL") else [
    ("first_unrepresentable", "", "float32")]


@pytest.mark.parametrize("variant", REAL, ids=lambda v: "-".join(p for p in v if p))
def test_packing_matches_the_real_kernel_entry(variant):
    from fpsim.backends import cuda_loops, cupy_backend

    loop, kernel, dtype = variant
    backend = cupy_backend.Backend()
    func = backend.loop(getattr(cuda_loops, loop), kernel).py_func
    args = _variant_args(loop, kernel, dtype)
    argtypes = _typeof(args)
    name, ptx_types = entry_parameters(_ptx(func, argtypes))
    assert loop in name
    assert ptx_types == entry_parameters(_ptx(_stand_in(len(args)), argtypes))[1]
    assert matches_entry(parameter_dtypes(argtypes), ptx_types) == []


def test_a_wrong_packing_is_caught_by_the_entry():
    """The check can fail: tuples not flattened, or an array missing its strides."""
    args = _variant_args("elementwise", "round_value", "float32")
    argtypes = _typeof(args)
    ptx_types = entry_parameters(_ptx(_stand_in(len(args)), argtypes))[1]
    assert len(ptx_types) == 6 * 7 + 1 + 11 + 3
    unflattened = parameter_dtypes(argtypes[:7]) + [np.dtype(np.uint64)] + \
        parameter_dtypes(argtypes[8:])
    assert matches_entry(unflattened, ptx_types)
    no_strides = parameter_dtypes(argtypes)[:6] + parameter_dtypes(argtypes)[7:]
    assert matches_entry(no_strides, ptx_types)


# -- the launcher, against a stand-in for CuPy --------------------------------------------

def _fake_cupy(launches: list, loads: list):
    """CuPy's module loading and ``driver.launchKernel`` recording what a launch reads:
    each parameter's 8 bytes through the array of pointers (the PTX entry's count)."""
    import ctypes

    functions: dict = {}
    frees: list = []

    class Function:
        def __init__(self, name, count):
            self.name, self.count = name, count
            self.ptr = id(self)
            functions[self.ptr] = self

    class Module:
        def load(self, image):
            loads.append(image)
            self.count = len(entry_parameters(image.decode())[1])

        def get_function(self, name):
            return Function(name, self.count)

    def launch_kernel(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        function = functions[f]
        pointers = (ctypes.c_uint64 * function.count).from_address(params)
        values = [ctypes.c_int64.from_address(p).value for p in pointers]
        launches.append((function.name, (gx, gy, gz), (bx, by, bz), values, stream, shared,
                         extra))

    class Device:
        def __init__(self, index):
            self.compute_capability = "90"
            self.attributes = {"MultiProcessorCount": 132}

    cupy = types.ModuleType("cupy")
    cupy.ndarray = type("ndarray", (), {})
    cupy.cuda = types.SimpleNamespace(
        runtime=types.SimpleNamespace(getDevice=lambda: 0, free=frees.append), Device=Device,
        function=types.SimpleNamespace(Module=Module),
        driver=types.SimpleNamespace(launchKernel=launch_kernel))
    cupy.frees = frees
    return cupy


def test_the_launcher_builds_once_and_launches_packed_arguments(monkeypatch):
    launches: list = []
    loads: list = []
    cupy = _fake_cupy(launches, loads)
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setattr(cuda_launch, "_cupy_ndarray", [])
    built: list = []

    def build(dispatcher, argtypes, cc):
        assert cc == (9, 0)
        built.append((dispatcher, cc))
        ptx = _ptx(_stand_in(len(argtypes)), argtypes)
        return ptx, ptx.encode()  # the stand-in's module reads the entry from it

    launcher = cuda_launch.RawLauncher(build)
    x, out = np.arange(5.0), np.zeros(5)
    spec = make_spec(fpsim.format("fp16"), "nearest_even", True, False, None)
    args = (DeviceArray(x), DeviceArray(out), spec, True)
    launcher("k", "dispatcher", 10**7, args, 256, 32)
    launcher("k", "dispatcher", 3, args, 256, 32)
    assert [b for b, _ in built] == ["dispatcher"] and len(loads) == 1
    (name1, grid1, block1, packed1, *rest1), (_, grid2, _, packed2, *_) = launches
    assert name1.startswith("_Z") and "stand_in" in name1
    assert grid1 == (32 * 132, 1, 1) and grid2 == (1, 1, 1) and block1 == (256, 1, 1)
    assert rest1 == [0, 0, 0]  # the legacy default stream, as numba-cuda; no shared memory
    assert packed1 == packed2 == pack(_typeof(args), args)
    assert packed1[0:7] == [0, 0, 5, 8, x.__array_interface__["data"][0], 5, 8]
    assert packed1[-1] == 1 and len(packed1) == 7 + 7 + 11 + 1
    launcher("k", "dispatcher", 3, (DeviceArray(x.astype(np.float32)),) + args[1:], 256, 32)
    assert len(built) == 2  # a new signature compiles again
    assert cupy.frees == [0]  # cudaFree(0) once: the context current on this thread
    import threading

    thread = threading.Thread(target=launcher, args=("k", "dispatcher", 3, args, 256, 32))
    thread.start()
    thread.join()
    assert cupy.frees == [0, 0] and len(launches) == 4 and launches[-1][3] == packed1


def test_the_launcher_refuses_a_kernel_whose_entry_disagrees(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy([], []))
    monkeypatch.setattr(cuda_launch, "_cupy_ndarray", [])
    args = (DeviceArray(np.zeros(3)), True)

    def build(dispatcher, argtypes, cc):  # the entry of other arguments
        return _ptx(_stand_in(2), _typeof((DeviceArray(np.zeros(3)), np.uint64(1)))), b""

    with pytest.raises(RuntimeError, match="parameter 7: packed uint8, the entry declares .u64"):
        cuda_launch.RawLauncher(build)("k", None, 3, args, 256, 32)


def test_the_docstring_examples_run():
    import doctest

    result = doctest.testmod(cuda_launch, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 5 and result.failed == 0


class CupyLike:
    """What the raw launch reads of a CuPy array, over a host array."""

    def __init__(self, a: np.ndarray) -> None:
        self.dtype, self.ndim, self.flags = a.dtype, a.ndim, a.flags
        self.size, self.itemsize, self.shape, self.strides = a.size, a.itemsize, a.shape, \
            a.strides
        self.data = types.SimpleNamespace(ptr=a.__array_interface__["data"][0])
        self.__cuda_array_interface__ = DeviceArray(a).__cuda_array_interface__


def test_cupy_arrays_are_read_from_their_attributes_alike(monkeypatch):
    """CuPy's arrays are read from their attributes (no interface dictionary per call):
    the same parameters, and the same signature key distinctions, as through the interface."""
    monkeypatch.setattr(cuda_launch, "_cupy_ndarray", [CupyLike])
    base = np.zeros((3, 8), np.float32)
    for a in (base, base[1:, ::3], np.zeros(7), np.zeros((2, 1, 4), np.uint8)):
        argtypes = _typeof((DeviceArray(a),))
        assert pack(argtypes, (CupyLike(a),)) == pack(argtypes, (DeviceArray(a),))
    keys = {signature_key((CupyLike(a),)) for a in (base, base[1:], base[:, ::2], base.T,
                                                     np.zeros(4, np.float32))}
    assert len(keys) == 5 - 1  # base and base[1:] are typed alike (float32, 2d, C)


def test_the_gpu_check_says_when_there_is_no_gpu(tmp_path, capsys):
    from fpsim.backends import gpu_missing
    from fpsim.compare import launch as cuda_launch_check

    if gpu_missing() is None:
        pytest.skip("a GPU is here: python3 -m fpsim.compare.launch runs it")
    assert cuda_launch_check.main(["--out", str(tmp_path / "record")]) == 3
    said = capsys.readouterr().out
    assert said.startswith("no GPU to check on: ")
    assert (tmp_path / "record" / "launch_check.txt").read_text() == said
    with pytest.raises(SystemExit):
        cuda_launch_check.main(["--out", str(tmp_path), "--repeat", "0"])


def test_numba_cuda_arrays_are_read_once_others_on_every_launch(monkeypatch):
    """numba-cuda's device arrays never change pointer or shape: read once, kept by weak
    reference; any other device array (a tensor can be resized in place) on every call."""
    import gc

    class NumbaLike(DeviceArray):
        pass

    monkeypatch.setattr(cuda_launch, "_numba_arrays", [NumbaLike])
    monkeypatch.setattr(cuda_launch, "_foreign", {})
    kept, other = NumbaLike(np.zeros(3)), DeviceArray(np.zeros(3))
    first_kept = cuda_launch.device_array(kept)
    first_other = cuda_launch.device_array(other)
    for a in (kept, other):
        a.__cuda_array_interface__ = dict(a.__cuda_array_interface__, shape=(2,))
    assert cuda_launch.device_array(kept) == first_kept
    assert cuda_launch.device_array(other) != first_other
    assert cuda_launch.device_array(other)[1][2] == 2  # nitems of the new shape
    del kept
    gc.collect()
    for n in range(1, 40):  # whatever id a new array gets, it is read for itself
        fresh = NumbaLike(np.zeros(n))
        assert cuda_launch.device_array(fresh)[1][2] == n


def test_the_gpu_check_runs_every_variant_and_catches_a_difference():
    """Under the simulator (both paths the dispatcher there) with the CuPy stand-in, the
    GPU check runs each variant through the backend's interface; a planted difference and
    a planted failure of the second path are reported."""
    code = (
        "import sys\n"
        f"sys.path.insert(0, {str(HERE)!r})\n"
        "import fake_cupy\n"
        "from fpsim.compare import launch as c\n"
        "from fpsim.backends.cupy_backend import Backend\n"
        "c.ELEMENTS = 16\n"
        "b = Backend()\n"
        "lines, failed = c.compare(b, fake_cupy)\n"
        "from fpsim.backends.protocol import KERNELS\n"
        "# each kernel in float32 and float64, nearest and stochastic; the scan; the loops\n"
        "assert failed == 0 and len(lines) == 4 * len(KERNELS) + 7, lines\n"
        "assert all(l.endswith(': identical') for l in lines), lines\n"
        "apply, modes = b.apply, []\n"
        "b.set_launch = modes.append\n"
        "def planted(kernel, operands, out, *args, **kw):\n"
        "    bad = apply(kernel, operands, out, *args, **kw)\n"
        "    if modes[-1] == 'raw' and kernel == 'op_mul':\n"
        "        out[3] = 0.5\n"
        "    if modes[-1] == 'raw' and kernel == 'op_div':\n"
        "        raise RuntimeError('planted')\n"
        "    return bad\n"
        "b.apply = planted\n"
        "lines, failed = c.compare(b, fake_cupy)\n"
        "odd = [l for l in lines if not l.endswith(': identical')]\n"
        "assert failed == 8 and all('op_mul' in l and l.endswith('DIFFERENT')\n"
        "    or 'op_div' in l and l.endswith('FAILED: RuntimeError: planted') for l in odd), odd\n"
        "print('ok')\n")
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=900)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]


def test_machine_code_from_numba_cudas_linker_in_either_form():
    """numba-cuda 0.30 with cuda-core 1.x returns a cuda.core ObjectCode from its linker
    (seen on the H100 of 2026-11-25, where bytes() of it raised TypeError); older ones
    return bytes. Both give the bytes of the cubin."""
    from fpsim.backends.cuda_launch import cubin_bytes

    class ObjectCode:  # cuda.core's: the image in .code
        code = b"\x7fELF-cubin"

    assert cubin_bytes(ObjectCode()) == b"\x7fELF-cubin"
    assert cubin_bytes(b"\x7fELF") == b"\x7fELF"
    assert cubin_bytes(bytearray(b"\x7fELF")) == b"\x7fELF"
