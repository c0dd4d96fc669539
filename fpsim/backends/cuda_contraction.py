"""Compile fpsim's CUDA kernels with floating-point contraction off.

NVVM contracts ``a*b + c`` into ``fma.rn`` by default, and ptxas fuses a plain
``mul``/``add`` pair into one FMA, even with ``fastmath=False``. A fused
multiply-add rounds once where the source rounds twice, which breaks TwoSum
(Knuth), every exact-product argument and every ``x*y - z`` error term of the
kernels, silently. NVVM's ``-fma=0`` option turns contraction off: NVVM then
emits ``add.rn``/``mul.rn``, which ptxas never fuses (the PTX ISA: an explicit
rounding modifier forbids contraction).

numba-cuda has no public switch for it (NVIDIA/numba-cuda issue 118), so this
module wraps the one call through which every NVVM compilation passes,
``numba.cuda.cudadrv.nvvm.compile_ir``, and adds ``fma=False`` to its options
inside ``no_contraction()`` only: other code's kernels compile as before.

The kernels are also linked from that PTX, not by link-time optimization
(``KERNEL_OPTIONS``): numba-cuda links with nvJitLink's LTO wherever nvJitLink is
installed, and LTO contracts again, whatever NVVM was told (found on an H200, where
the shared kernels' exp differed from the CPU's in the last place on 49 of 131,072
values while their PTX held only ``.rn`` operations).
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Iterator

_active: contextvars.ContextVar[bool] = contextvars.ContextVar("fpsim_no_fma", default=False)
_lock = threading.Lock()
_installed: list = []


def _install() -> None:
    with _lock:
        if _installed:
            return
        from numba.cuda.cudadrv import nvvm

        original = nvvm.compile_ir

        def compile_ir(llvmir, **options):
            if _active.get():
                options["fma"] = False
            return original(llvmir, **options)

        compile_ir.__wrapped__ = original
        nvvm.compile_ir = compile_ir
        _installed.append(original)


# cuda.jit's options for every fpsim kernel on a device (the simulator takes none), given
# as ``cuda.jit(func, **KERNEL_OPTIONS)``: numba-cuda 0.30's ``cuda.jit(**options)(func)``
# drops ``lto`` and links with LTO anyway.
KERNEL_OPTIONS = {"lto": False}


@contextlib.contextmanager
def no_contraction() -> Iterator[None]:
    """NVVM compilations started inside this block keep every multiply and add apart."""
    _install()
    token = _active.set(True)
    try:
        yield
    finally:
        _active.reset(token)
