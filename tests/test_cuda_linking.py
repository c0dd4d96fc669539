"""fpsim's CUDA kernels are linked from their PTX, never by nvJitLink's link-time
optimization: LTO contracts ``a*b + c`` into FMAs again whatever NVVM was told (on an H200,
2026-11-27, the shared kernels' exp, log and tanh differed from the CPU's in the last place
on 58 of 393,240 values while their PTX held only ``.rn`` operations; linked from the PTX,
none differed). numba-cuda 0.30's ``cuda.jit(**options)(func)`` drops ``lto=`` and links
with LTO wherever nvJitLink is installed, so the backends call ``cuda.jit(func, ...)``.
Checked without a GPU: the options of the kernels the backends build (nothing compiles)."""

import importlib.util
import os

import pytest

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("numba_cuda") is None or os.environ.get("NUMBA_ENABLE_CUDASIM"),
    reason="needs numba-cuda's real compiler (the simulator builds no kernels)")


def test_the_cupy_backends_loops_link_without_lto():
    from fpsim.backends import cuda_loops, cupy_backend
    from fpsim.backends.cuda_hardware import Path
    from fpsim.formats import format as preset
    from fpsim.kernels.spec import make_spec

    backend = cupy_backend.Backend()
    spec = make_spec(preset("bf16"), "nearest_even", True, False, None)
    loops = [backend.loop(cuda_loops.elementwise, "op_exp"),
             backend.loop(cuda_loops.elementwise, "round_value", spec),
             backend.loop(cuda_loops.accumulate_sequential),
             backend.loop(cuda_loops.accumulate_blocks)]
    template, encoding, _, bound, hardware = backend.hardware_loop(Path("op_add", "fp16",
                                                                        "nearest_even"))
    loops.append(backend.loop(template, "op_add", bound, encoding, hardware))
    for loop in loops:
        assert loop.targetoptions["lto"] is False, loop.py_func.__qualname__


def test_the_tiled_kernels_link_without_lto():
    from fpsim.backends import cuda_tiles

    for name in cuda_tiles.KERNELS:
        for kernel in cuda_tiles.kernel(name, cuda_tiles.DEVICE_TILES[name]):
            assert kernel.targetoptions["lto"] is False, (name, kernel.py_func.__qualname__)


def test_numba_cudas_decorator_form_is_the_trap():
    """Why the backends pass the function to ``cuda.jit``: the decorator form drops
    ``lto`` (if a numba-cuda release fixes that, this fails and the note can go)."""
    from numba import cuda
    from numba.cuda.cudadrv.driver import _have_nvjitlink

    def kernel(x):
        x[0] = 1.0

    assert cuda.jit(kernel, lto=False).targetoptions["lto"] is False
    assert cuda.jit(lto=False)(kernel).targetoptions["lto"] is _have_nvjitlink()
