"""Turning user input into arrays the kernels take, with clear errors."""

from __future__ import annotations

import contextlib
import numbers
import sys
from fractions import Fraction
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from fpsim import _device
from fpsim._dtypes import is_ml_dtype, widen
from fpsim.backends.protocol import is_device_array

if TYPE_CHECKING:
    from collections.abc import Iterable
    from contextlib import AbstractContextManager

FLOAT_DTYPES = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))
_FLOAT16 = FLOAT_DTYPES[0]


def as_float_array(x: Any, name: str, device: bool = False) -> Any:
    """``x`` as a float16/float32/float64 array; ``ValueError`` for anything else.

    ``device``: the caller also takes GPU arrays, which are returned as they are.
    """
    if is_device_array(x):
        if not device:
            raise ValueError(
                f"{name}: a GPU array ({type(x).__module__}.{type(x).__name__}); this function "
                "takes host arrays: copy it with cupy.asnumpy first"
            )
        if getattr(x, "dtype", None) not in FLOAT_DTYPES:
            raise ValueError(
                f"{name}: expected a float16, float32 or float64 array, got dtype "
                f"{getattr(x, 'dtype', None)}"
            )
        return x
    if isinstance(x, (bool, np.bool_)):
        raise ValueError(f"{name}: expected floating-point values, got a boolean")
    if isinstance(x, (np.ndarray, np.generic)):
        if type(x) is not np.ndarray:
            _refuse_masks(x, name)
        return _host_array(np.asarray(x), name)
    if type(x) is float:
        return np.asarray(x)
    if isinstance(x, numbers.Number) and not isinstance(x, numbers.Real):
        raise ValueError(f"{name}: expected real values, got {type(x).__name__} {x!r}")
    if isinstance(x, numbers.Real):
        return _exact_float64(np.asarray(x, dtype=object), name)
    try:
        arr = np.asarray(x)
    except (ValueError, TypeError, OverflowError) as exc:
        raise ValueError(f"{name}: cannot make an array of {x!r}: {exc}") from None
    if arr.dtype.kind == "O":
        if arr.size and all(isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_))
                            for v in arr.ravel().tolist()):
            return _exact_float64(arr, name)
        raise ValueError(f"{name}: expected real numbers, got {_sample(arr)}")
    if arr.dtype.kind == "b":
        raise ValueError(f"{name}: expected floating-point values, got booleans")
    if arr.dtype.kind == "f":
        # NumPy turns integers among floats into float64 silently, rounding the large ones,
        # and numpy.ma.masked into NaN.
        values = np.asarray(x, dtype=object)
        items = values.ravel().tolist()
        ma = sys.modules.get("numpy.ma")
        if ma is not None and any(v is ma.masked for v in items):
            raise _masks_refused(name, "numpy.ma.masked among the values")
        if any(isinstance(v, numbers.Integral) for v in items):
            return _exact_float64(values, name)
    return _host_array(arr, name)


def _refuse_masks(x: object, name: str) -> None:
    """``ValueError`` for a NumPy masked array with masked elements: fpsim would compute
    with the values under the mask, so it refuses rather than drop it."""
    ma = sys.modules.get("numpy.ma")  # not imported: no masked array exists
    if ma is None or not isinstance(x, ma.MaskedArray):
        return
    masked = int(np.count_nonzero(ma.getmaskarray(x)))
    if masked:
        raise _masks_refused(name, f"a masked array (numpy.ma) with {masked} masked element"
                                   f"{'s' if masked > 1 else ''}")


def _masks_refused(name: str, what: str) -> ValueError:
    return ValueError(f"{name}: {what}; fpsim applies no masks: fill them (.filled(value)) or "
                      "leave them out (.compressed()) first")


def _short(v: object, width: int = 60) -> str:
    text = repr(v)
    return text if len(text) <= width else f"{text[:width // 2]}...{text[-12:]} ({len(text)} chars)"


def _sample(arr: np.ndarray) -> str:
    bad = [v for v in arr.ravel().tolist()
           if not isinstance(v, numbers.Real) or isinstance(v, (bool, np.bool_))]
    return f"{type(bad[0]).__name__} {bad[0]!r}" if bad else f"dtype {arr.dtype}"


def _host_array(arr: np.ndarray, name: str) -> np.ndarray:
    """A NumPy array as float16/32/64 in native byte order: floats widened exactly,
    integers taken when float64 holds them exactly; anything else refused."""
    if arr.dtype in FLOAT_DTYPES:
        return arr
    if arr.dtype.kind == "f" and arr.dtype.itemsize <= 8 and not is_ml_dtype(arr.dtype):
        return arr.astype(arr.dtype.newbyteorder("="))  # another byte order: same values
    wide = widen(arr)  # ml_dtypes' bfloat16, float8, ...: float32 holds them all
    if wide is not None:
        return _host_array(wide, name)
    if arr.dtype.kind in "iu":
        with np.errstate(all="ignore"):
            wide = arr.astype(np.float64)
            exact = wide.astype(arr.dtype) == arr
            # float64(2**63 - 1) is 2**63, which converts back to the type's minimum.
            exact &= np.abs(wide) < 2.0 ** (arr.dtype.itemsize * 8 - (arr.dtype.kind == "i"))
        if not exact.all():
            bad = arr.reshape(-1)[np.flatnonzero(~exact.reshape(-1))[0]]
            raise ValueError(f"{name}: the integer {int(bad)} is not exactly representable "
                             "in float64")
        return wide
    raise ValueError(
        f"{name}: expected floating-point values (float16, float32, float64) or integers, "
        f"got dtype {arr.dtype}"
    )


def _exact_float64(values: np.ndarray, name: str) -> np.ndarray:
    """Python numbers as float64, refusing any that float64 cannot hold exactly (large
    integers, Fractions between binary64 values, long doubles): no rounding on the way
    in, so that what fpsim rounds is what the caller gave."""
    out = np.empty(values.shape, dtype=np.float64)
    for index, v in np.ndenumerate(values):
        if isinstance(v, np.floating) and v.dtype.itemsize > 8:
            raise ValueError(f"{name}: {v!r} is a {v.dtype} value; fpsim takes binary64 "
                             "values at most")
        try:
            f = float(v)
        except OverflowError:
            raise ValueError(f"{name}: {_short(v)} is beyond float64's range") from None
        if isinstance(v, numbers.Rational):
            if not np.isfinite(f) or Fraction(f) != Fraction(int(v.numerator), int(v.denominator)):
                kind = "integer" if isinstance(v, numbers.Integral) else "rational"
                raise ValueError(f"{name}: the {kind} {_short(v)} is not exactly representable "
                                 "in float64 (round it yourself, or pass a float)")
        out[index] = f
    return out


def broadcast(arrays: dict[str, np.ndarray]) -> tuple[int, ...]:
    """The common shape of ``arrays``; ``ValueError`` naming the shapes if there is none."""
    if len(arrays) == 1:
        return next(iter(arrays.values())).shape
    try:
        return np.broadcast_shapes(*(a.shape for a in arrays.values()))
    except ValueError:
        shapes = ", ".join(f"{k} {a.shape}" for k, a in arrays.items())
        raise ValueError(f"operands do not broadcast together: {shapes}") from None


def array_module(arrays: Iterable[Any]) -> ModuleType:
    """NumPy, or the GPU array module (CuPy) when any of ``arrays`` lives on the GPU.

    GPU arrays need the ``cupy`` backend; mixing them with host arrays is fine
    (the host ones are copied to the device).
    """
    device = [a for a in arrays if is_device_array(a)]
    if not device:
        return np
    from fpsim.backends import get_backend_name

    if get_backend_name() != "cupy":
        raise ValueError(
            f"GPU arrays need the GPU backend: use fpsim.backend('cupy') (the backend in "
            f"force is {get_backend_name()!r}), or copy them to the host with cupy.asnumpy"
        )
    return _device.array_module(device[0])


def errstate(xp: ModuleType) -> AbstractContextManager[object]:
    """NumPy's floating-point warnings silenced (CuPy has none to silence)."""
    return np.errstate(all="ignore") if xp is np else contextlib.nullcontext()


def flat_operand(arr: Any, shape: tuple[int, ...], xp: ModuleType = np) -> Any:
    """``arr`` broadcast to ``shape``, as a contiguous 1-D float32/float64 array of ``xp``."""
    if arr.dtype == _FLOAT16:
        arr = as_dtype(arr, np.float32)
    if xp is not np:
        arr = xp.asarray(arr)  # a host operand of a GPU call, copied to the device
    if arr.shape != shape:
        arr = xp.broadcast_to(arr, shape)
    return arr.ravel()  # a view of a C-contiguous arr, a C-contiguous copy of any other


def as_dtype(x: Any, dtype: npt.DTypeLike) -> Any:
    """``x`` in ``dtype``, which holds each of its values exactly (``x`` itself if it is
    of that dtype already)."""
    target = np.dtype(dtype)
    if x.dtype == target:
        return x
    out = array_module([x]).empty(x.shape, dtype=target)
    copy_exact(x, out)
    return out


def copy_exact(x: Any, out: Any) -> None:
    """``out[...] = x``, where ``out``'s dtype holds each value of ``x`` exactly: the
    backend's conversion (fast for float16 and bfloat16) on host arrays of one shape."""
    if is_device_array(x) or is_device_array(out) or x.shape != out.shape or not (
            out.flags.c_contiguous and out.flags.writeable):
        if is_device_array(out) and out.dtype in (np.float32, np.float64):
            # Not CuPy's conversion: its kernels (-ftz=true) flush binary32 subnormals.
            x = _device.converted(x, out.dtype)
        array_module([x, out]).copyto(out, x, casting="unsafe")
        return
    from fpsim.backends import get_backend

    get_backend().convert(np.ascontiguousarray(x).reshape(-1), out.reshape(-1))


def result_dtype(*values: Any) -> np.dtype:
    """``np.result_type`` of arrays (host or GPU) and dtypes."""
    return np.result_type(*(v.dtype if is_device_array(v) else v for v in values))


def host_value(x: Any) -> Any:
    """An element of an array, as a host scalar (for messages)."""
    return x.item() if is_device_array(x) else x
