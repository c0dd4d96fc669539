"""Backends run the kernels; this module selects one.

The interface is narrow. A backend has a ``name`` and two methods:

- ``apply(kernel, operands, out, flags, spec, key, check=False, hot=False)``: evaluate the
  kernel named ``kernel`` (``"round_value"``, ``"op_add"``, ...) elementwise
  over the 1-D, equally long float32/float64 ``operands``, writing ``out`` and,
  unless ``flags`` is None, the uint8 ``flags``. ``key`` (uint64) keys the
  random stream of stochastic rounding, by element index. With ``check``,
  returns how many elements have an operand that is not a value of the format.
- ``first_unrepresentable(x, spec)``: index of the first element of ``x`` that
  is not a value of the format, or -1.
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
