"""Devices: where a tensor's values live, and the one place the engine picks its array module.

``"cpu"``: NumPy arrays, computed on by the backend in force (``numba`` by default).
``"cuda"``: CuPy arrays, whose emulated arithmetic runs on the ``cupy`` backend's kernels.
The autograd engine, the layers, the optimizers and the training loop are written once,
over the array module this module gives them (``array_module``), and move values only
where asked (``transfer``): nothing here copies a device array to the host implicitly.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager
from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt

from fpsim.backends.protocol import is_device_array

DEVICES = ("cpu", "cuda")
"""The device names: ``"cpu"`` (NumPy) and ``"cuda"`` (CuPy, on a GPU)."""


def as_device(device: object, name: str = "device") -> str:
    """``device`` checked: ``"cpu"`` or ``"cuda"`` (a ValueError naming ``name`` otherwise).

    Examples
    --------
    >>> as_device("cpu")
    'cpu'
    """
    if not isinstance(device, str) or device not in DEVICES:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, DEVICES))}, "
                         f"got {device!r}")
    return device


def device_of(data: Any) -> str:
    """The device an array lives on: ``"cuda"`` for a GPU array, else ``"cpu"``.

    Examples
    --------
    >>> import numpy as np
    >>> device_of(np.zeros(2))
    'cpu'
    """
    return "cuda" if is_device_array(data) else "cpu"


def gpu_module() -> ModuleType:
    """CuPy, where a GPU is usable; else a RuntimeError saying what is missing.

    The message is ``fpsim.backends.gpu_missing()``'s: what to install, or that there is
    no usable GPU.
    """
    from fpsim.backends import gpu_missing

    missing = gpu_missing()
    if missing is not None:
        raise RuntimeError(f'device "cuda" cannot be used here: {missing}')
    from fpsim._optional import MissingDependency, require

    try:
        return require("cupy", 'device "cuda"')
    except MissingDependency as exc:
        raise RuntimeError(f'device "cuda" cannot be used here: {exc}') from None


# The array module of each GPU array type met so far (checked once).
GPU_ARRAY_TYPES: dict[type, ModuleType] = {}


def array_module(data: Any) -> ModuleType:
    """The array module of ``data``: NumPy for host arrays, CuPy for GPU arrays.

    The one place fpsim picks an array module: the engine and the public functions
    (``fpsim._inputs``) both ask here. A GPU array's module is the one its type comes from
    (``cupy``), which must have CuPy's array functions; a ValueError otherwise.

    Examples
    --------
    >>> import numpy as np
    >>> array_module(np.zeros(2)) is np
    True
    """
    if not is_device_array(data):
        return np
    kind = type(data)
    module = GPU_ARRAY_TYPES.get(kind)
    if module is None:
        module = sys.modules.get(kind.__module__)  # a GPU array exists: its module is imported
        needed = ("asarray", "empty", "ascontiguousarray")
        if module is None or not all(hasattr(module, f) for f in needed):
            raise ValueError(f"unsupported GPU array type {kind.__name__}: fpsim takes CuPy "
                             "arrays")
        GPU_ARRAY_TYPES[kind] = module
    return module


# CuPy's compute types for float32 products that add in IEEE binary32 (CUBLAS_COMPUTE_32F):
# its default and "pedantic"; TF32 and the fp16/bf16 ones round the inputs and add on
# tensor cores (cupy._core._routines_linalg, set by CUPY_TF32 or set_compute_type).
_BINARY32_COMPUTE = ("COMPUTE_TYPE_DEFAULT", "COMPUTE_TYPE_PEDANTIC")


def binary32_blas(xp: ModuleType) -> bool:
    """Whether ``xp.matmul`` of float32 arrays is a BLAS product in IEEE binary32: each
    product added (or fused, FMA) to a float32 partial sum with one rounding to nearest,
    in an order of the library's choosing. NumPy: yes. CuPy: unless its float32 compute
    type lets cuBLAS use TF32 or half-precision tensor cores (``CUPY_TF32=1``).

    Examples
    --------
    >>> import numpy as np
    >>> binary32_blas(np)
    True
    """
    if xp is np:
        return True
    try:
        from cupy._core import _routines_linalg as linalg

        kind = linalg.get_compute_type(np.dtype(np.float32))
        return str(linalg.compute_type_to_str(kind)) in _BINARY32_COMPUTE
    except (ImportError, AttributeError):  # not CuPy, or a CuPy without compute types
        return False


# fpsim's conversion kernels (fpsim.kernels.convert), by the dtype they convert to.
_CONVERSIONS = {np.dtype(np.float64): "to_binary64", np.dtype(np.float32): "to_binary32"}


def converted(x: Any, dtype: npt.DTypeLike) -> Any:
    """``x`` as a float32 or float64 array on its device: ``x`` itself in that dtype;
    float32 widened exactly, float64 rounded to nearest even with subnormals kept. On a GPU,
    between binary32 and binary64, by fpsim's kernel (``fpsim.kernels.convert``: a NaN as
    the one quiet NaN), never by CuPy's own conversion, which flushes binary32 subnormals
    to zero (CuPy compiles its kernels with ``-ftz=true``); on the host, and from other
    dtypes, by the array module (NumPy's conversion is IEEE's).

    Examples
    --------
    >>> import numpy as np
    >>> converted(np.array([2.0**-149, 0.1]), np.float32).tolist()
    [1.401298464324817e-45, 0.10000000149011612]
    """
    dtype = np.dtype(dtype)
    if x.dtype == dtype:
        return x
    if is_device_array(x) and x.dtype in _CONVERSIONS:
        from fpsim.backends import array_kernels

        with kernels(x), np.errstate(over="ignore"):  # beyond binary32's range: infinite
            return array_kernels(x)[_CONVERSIONS[dtype]](x)
    return array_module(x).asarray(x, dtype=dtype)


def binary64(x: Any) -> Any:
    """``converted(x, np.float64)``: ``x``'s values as a float64 array on its device,
    exactly.

    Examples
    --------
    >>> import numpy as np
    >>> binary64(np.float32([2.0**-149, 1.5])).tolist()
    [1.401298464324817e-45, 1.5]
    """
    return converted(x, np.float64)


def binary32(x: Any) -> Any:
    """``converted(x, np.float32)``: ``x`` as a float32 array on its device, float64
    rounded to nearest even."""
    return converted(x, np.float32)


def transfer(data: Any, device: str) -> Any:
    """``data`` on ``device``: itself if it is there, else a copy (host to GPU or back).

    Examples
    --------
    >>> import numpy as np
    >>> x = np.ones(2)
    >>> transfer(x, "cpu") is x
    True
    """
    if device_of(data) == device:
        return data
    if device == "cuda":
        return gpu_module().asarray(data)
    return array_module(data).asnumpy(data)


def common(op: str, *arrays: Any) -> str:
    """The device of ``arrays``; a ValueError naming both devices when they differ.

    As PyTorch, a host scalar (0-d) may go with GPU arrays (it is copied over where used);
    anything larger must be on the same device.

    Examples
    --------
    >>> import numpy as np
    >>> common("add", np.ones(2), np.ones(3))
    'cpu'
    """
    devices = set()
    for a in arrays:
        if is_device_array(a):
            devices.add("cuda")
        elif (a.ndim if isinstance(a, np.ndarray) else np.ndim(a)) > 0:
            devices.add("cpu")
    if len(devices) > 1:
        raise ValueError(f"{op}: expected all tensors on one device, found cpu and cuda: "
                         "move them with .to(device)")
    return devices.pop() if devices else "cpu"


_HOST = contextlib.nullcontext()


def kernels(data: Any) -> AbstractContextManager[None]:
    """Inside, the backend that runs the emulated arithmetic on ``data``'s device: the
    ``cupy`` backend for a GPU array, the backend in force for a host array."""
    if not is_device_array(data):
        return _HOST
    from fpsim.backends import backend

    return backend("cupy")


_PENDING: list[list[tuple[Any, str]]] = []


def require(ok: Any, message: str) -> None:
    """A ValueError with ``message`` unless ``ok`` (a boolean, or a 0-d boolean array).

    A GPU boolean inside ``deferring()`` is not read here: the check joins the scope's
    pending checks, read on the host with the scope's one synchronisation (a training
    step's finiteness check). Anywhere else it is read at once.

    Examples
    --------
    >>> import numpy as np
    >>> require(np.all(np.arange(3) >= 0), "negative")
    >>> require(False, "negative")
    Traceback (most recent call last):
    ...
    ValueError: negative
    """
    if _PENDING and is_device_array(ok):
        _PENDING[-1].append((ok, message))
        return
    if not bool(ok):
        raise ValueError(message)


@contextlib.contextmanager
def deferring() -> Iterator[list[tuple[Any, str]]]:
    """Inside, ``require`` on GPU values adds ``(ok, message)`` to the list yielded
    instead of reading ``ok``; whoever opened the scope reads them (``raise_failed``).

    Examples
    --------
    >>> with deferring() as pending:
    ...     require(True, "never raised")
    >>> pending
    []
    """
    pending: list[tuple[Any, str]] = []
    _PENDING.append(pending)
    try:
        yield pending
    finally:
        _PENDING.pop()


def raise_failed(pending: list[tuple[Any, str]], values: Any) -> None:
    """A ValueError with the first pending check's message whose value in ``values`` (the
    host copy of the pending checks' booleans, in order) is false."""
    for (_, message), ok in zip(pending, values, strict=True):
        if not ok:
            raise ValueError(message)
