"""Turning user input into arrays the kernels take, with clear errors."""

from __future__ import annotations

import numbers

import numpy as np

FLOAT_DTYPES = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))


def as_float_array(x, name: str) -> np.ndarray:
    """``x`` as a float16/float32/float64 array; ``ValueError`` for anything else."""
    if isinstance(x, (bool, np.bool_)):
        raise ValueError(f"{name}: expected floating-point values, got a boolean")
    if isinstance(x, np.ndarray) or isinstance(x, np.generic):
        arr = np.asarray(x)
        if arr.dtype not in FLOAT_DTYPES:
            raise ValueError(
                f"{name}: expected a float16, float32 or float64 array, got dtype {arr.dtype}"
            )
        return arr
    if isinstance(x, numbers.Integral):
        return _exact_float64(np.asarray(int(x), dtype=object), name)
    try:
        arr = np.asarray(x)
    except ValueError as exc:
        raise ValueError(f"{name}: cannot make an array of {x!r}: {exc}") from None
    if arr.dtype.kind in "iuO" and arr.size and all(
        isinstance(v, numbers.Real) and not isinstance(v, bool) for v in arr.ravel().tolist()
    ):
        return _exact_float64(arr.astype(object), name)
    if arr.dtype not in FLOAT_DTYPES:
        raise ValueError(f"{name}: expected floating-point values, got dtype {arr.dtype}")
    return arr


def _exact_float64(values: np.ndarray, name: str) -> np.ndarray:
    """Python numbers as float64, refusing integers that float64 cannot hold exactly."""
    out = np.empty(values.shape, dtype=np.float64)
    for index, v in np.ndenumerate(values):
        f = float(v)
        if isinstance(v, numbers.Integral) and int(f) != v:
            raise ValueError(f"{name}: the integer {v} is not exactly representable in float64")
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


def flat_operand(arr: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``arr`` broadcast to ``shape``, as a contiguous 1-D float32/float64 array."""
    if arr.dtype == np.float16:
        arr = arr.astype(np.float32)
    if arr.shape == shape:
        return np.ascontiguousarray(arr).reshape(-1)
    return np.ascontiguousarray(np.broadcast_to(arr, shape)).reshape(-1)
