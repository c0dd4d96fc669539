"""Backends run the kernels; this module selects one.

What a backend must offer is ``fpsim.backends.protocol.Backend``: ``apply``
(an elementwise kernel), ``convert`` (exact conversions between float dtypes),
``first_unrepresentable``, ``accumulate`` and ``accumulate_blocks``. The core
calls nothing else, but for ``array_kernels``: the shared kernels as functions of whole
arrays (host arrays; or device arrays, on the ``cupy`` backend), for array code that runs
a kernel's steps itself (block quantization, the block-scaled products).
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

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
    if name == "cupy" and name not in _instances:  # a backend made once stays usable
        missing = gpu_missing()
        if missing:
            raise RuntimeError(f"the cupy backend cannot run here: {missing}")
    return name


def gpu_missing() -> str | None:
    """What the ``cupy`` backend lacks on this machine, or None when it can run.

    Under Numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``) it runs, on the CPU.

    Returns
    -------
    str or None
        Why it cannot run (what to install, or that there is no GPU), or None.

    Examples
    --------
    >>> from fpsim.backends import gpu_missing
    >>> isinstance(gpu_missing(), (str, type(None)))
    True
    """
    from fpsim._optional import MissingDependency, cuda_driver_missing, require

    try:
        cuda = require("numba.cuda", "running fpsim on a GPU")
    except MissingDependency as exc:
        return str(exc)
    if getattr(getattr(cuda, "config", None), "ENABLE_CUDASIM", False):
        return None
    try:
        cupy = require("cupy", "running fpsim on a GPU")
    except MissingDependency as exc:
        return str(exc)
    if not cuda.is_available():
        driver = cuda_driver_missing()
        if driver is not None:
            return f"no usable CUDA GPU: {driver}"
        try:
            count = cupy.cuda.runtime.getDeviceCount()
            detail = f"CuPy sees {count} device(s)"
        except Exception as exc:  # CuPy says why: too old a driver, ...
            detail = f"{type(exc).__name__}: {exc}"
        return f"no usable CUDA GPU: numba-cuda finds none ({detail})"
    return None


def set_backend(name: str) -> None:
    """Select the backend for later calls.

    Every backend gives the same bits; ``backend`` selects one for a ``with``
    block instead.

    Parameters
    ----------
    name : str
        ``"numpy"`` (the reference, on whole arrays), ``"numba"`` (parallel
        compiled loops on the CPU; the default) or ``"cupy"`` (CUDA on a GPU).

    Raises
    ------
    ValueError
        An unknown name.
    RuntimeError
        ``"cupy"`` where it cannot run (no CuPy, numba-cuda or GPU): the message
        says what is missing.

    Examples
    --------
    >>> import fpsim
    >>> previous = fpsim.get_backend_name()
    >>> fpsim.set_backend("numpy")
    >>> fpsim.get_backend_name()
    'numpy'
    >>> fpsim.set_backend(previous)
    """
    _default[0] = _check(name)


def get_backend_name() -> str:
    """The name of the backend in force.

    Returns
    -------
    str
        ``"numpy"``, ``"numba"`` or ``"cupy"``: that of the innermost ``with
        backend(...)`` block, or else the one ``set_backend`` selected.

    Examples
    --------
    >>> import fpsim
    >>> with fpsim.backend("numpy"):
    ...     fpsim.get_backend_name()
    'numpy'
    """
    return _current.get() or _default[0]


@contextlib.contextmanager
def backend(name: str) -> Iterator[None]:
    """Use a backend inside a ``with`` block (and its thread or task alone).

    Parameters
    ----------
    name : str
        ``"numpy"``, ``"numba"`` or ``"cupy"`` (see ``set_backend``).

    Raises
    ------
    ValueError
        An unknown name.
    RuntimeError
        ``"cupy"`` where it cannot run.

    Examples
    --------
    >>> import fpsim
    >>> with fpsim.backend("numpy"):
    ...     float(fpsim.round(0.1, "tf32"))
    0.0999755859375
    """
    token = _current.set(_check(name))
    try:
        yield
    finally:
        _current.reset(token)


def get_backend() -> Backend:
    """The backend object in force (created on first use).

    Returns
    -------
    fpsim.backends.protocol.Backend
        What fpsim's core calls to run the kernels.

    Examples
    --------
    >>> import fpsim
    >>> from fpsim.backends import get_backend
    >>> with fpsim.backend("numpy"):
    ...     get_backend().name
    'numpy'
    """
    name = get_backend_name()
    if name not in _instances:
        _instances[name] = importlib.import_module(_MODULES[name]).Backend()
    return _instances[name]


def array_kernels(like: Any = None) -> Mapping[str, Any]:
    """The kernels of ``fpsim.kernels`` as functions of whole arrays: of host arrays as the
    NumPy backend instantiates them, whichever backend is in force; or, where ``like`` is
    a device (CuPy) array, of device arrays as the ``cupy`` backend runs them
    (``fpsim.backends.cuda_arrays``).

    Raises
    ------
    ValueError
        ``like`` is a device array and the backend in force is not ``cupy``.

    Examples
    --------
    >>> import numpy as np
    >>> from fpsim.backends import array_kernels
    >>> array_kernels()["is_nonfinite"](np.array([1.0, np.inf])).tolist()
    [False, True]
    """
    if like is not None and hasattr(like, "__cuda_array_interface__"):
        engine = get_backend()
        if engine.name != "cupy":
            raise ValueError(f"a GPU array takes the cupy backend, not {engine.name!r}: "
                             "run it inside fpsim.backend('cupy')")
        device: Mapping[str, Any] = engine.array_kernels()  # type: ignore[attr-defined]
        return device
    if "numpy" not in _instances:
        _instances["numpy"] = importlib.import_module(_MODULES["numpy"]).Backend()
    kernels: dict[str, Any] = _instances["numpy"].kernels  # type: ignore[attr-defined]
    return kernels
