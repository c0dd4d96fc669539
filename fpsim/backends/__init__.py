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

NAMES = ("numpy", "numba", "cupy")
_MODULES = {
    "numpy": "fpsim.backends.numpy_backend",
    "numba": "fpsim.backends.numba_backend",
    "cupy": None,
}
_instances: dict = {}
_default = ["numba"]
_current: contextvars.ContextVar[str | None] = contextvars.ContextVar("fpsim_backend", default=None)


def _check(name: str) -> str:
    if name not in NAMES:
        raise ValueError(f"unknown backend {name!r}; known backends: {', '.join(NAMES)}")
    if _MODULES[name] is None:
        raise ValueError(f"backend {name!r} is not available in this version of fpsim")
    return name


def set_backend(name: str) -> None:
    """Select the backend for later calls: ``"numpy"`` (reference) or ``"numba"`` (CPU)."""
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


def get_backend():
    """The backend object in force (created on first use)."""
    name = get_backend_name()
    if name not in _instances:
        _instances[name] = importlib.import_module(_MODULES[name]).Backend()
    return _instances[name]
