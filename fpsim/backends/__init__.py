"""Backends run the kernels; this module selects one.

What a backend must offer is ``fpsim.backends.protocol.Backend``: ``apply``
(an elementwise kernel), ``first_unrepresentable``, ``accumulate`` and
``accumulate_blocks``. The core calls nothing else.
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fpsim.backends.protocol import Backend

NAMES = ("numpy", "numba", "cupy")
_MODULES = {
    "numpy": "fpsim.backends.numpy_backend",
    "numba": "fpsim.backends.numba_backend",
    "cupy": "fpsim.backends.cupy_backend",
}
_instances: dict[str, Backend] = {}
_default = ["numba"]
_current: contextvars.ContextVar[str | None] = contextvars.ContextVar("fpsim_backend", default=None)


def _check(name: str) -> str:
    if not isinstance(name, str) or name not in NAMES:
        raise ValueError(f"unknown backend {name!r}; known backends: {', '.join(NAMES)}")
    if name == "cupy":
        missing = gpu_missing()
        if missing:
            raise RuntimeError(f"the cupy backend cannot run here: {missing}")
    return name


def gpu_missing() -> str | None:
    """What the ``cupy`` backend lacks on this machine, or None when it can run.

    Under Numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``) it runs, on the CPU.
    """
    install = "install the GPU extra: pip install 'fpsim[gpu]'"
    try:
        from numba import cuda
    except ImportError as exc:
        return f"numba-cuda is not installed ({exc}); {install}"
    if getattr(getattr(cuda, "config", None), "ENABLE_CUDASIM", False):
        return None
    try:
        import cupy
    except ImportError as exc:
        return f"CuPy is not installed ({exc}); {install}"
    if not cuda.is_available():  # type: ignore[no-untyped-call]
        try:
            count = cupy.cuda.runtime.getDeviceCount()
            detail = f"CuPy sees {count} device(s)"
        except Exception as exc:  # CuPy says why: no driver, too old a driver, ...
            detail = f"{type(exc).__name__}: {exc}"
        return f"no usable CUDA GPU: numba-cuda finds none ({detail})"
    return None


def set_backend(name: str) -> None:
    """Select the backend for later calls: ``"numpy"`` (reference), ``"numba"`` (CPU) or
    ``"cupy"`` (GPU)."""
    _default[0] = _check(name)


def get_backend_name() -> str:
    """The name of the backend in force."""
    return _current.get() or _default[0]


@contextlib.contextmanager
def backend(name: str) -> Iterator[None]:
    """Use backend ``name`` inside a ``with`` block."""
    token = _current.set(_check(name))
    try:
        yield
    finally:
        _current.reset(token)


def get_backend() -> Backend:
    """The backend object in force (created on first use)."""
    name = get_backend_name()
    if name not in _instances:
        _instances[name] = importlib.import_module(_MODULES[name]).Backend()
    return _instances[name]
