"""ml_dtypes' arrays (bfloat16, float8_*, ...): recognised and widened exactly."""

from __future__ import annotations

import numpy as np


def is_ml_dtype(dtype: np.dtype) -> bool:
    return getattr(dtype.type, "__module__", "").split(".")[0] == "ml_dtypes"


def is_bfloat16(dtype: np.dtype) -> bool:
    """Whether ``dtype`` is ml_dtypes' bfloat16."""
    return is_ml_dtype(dtype) and dtype.name == "bfloat16"


def widen(arr: np.ndarray) -> np.ndarray | None:
    """An ml_dtypes float array as float32 (exactly: each of their formats fits), or
    None for anything else."""
    if not is_ml_dtype(arr.dtype):
        return None
    import ml_dtypes

    try:
        info = ml_dtypes.finfo(arr.dtype)
    except ValueError:
        return arr.astype(np.int64)  # ml_dtypes' small integers
    f32 = np.finfo(np.float32)
    if (info.nmant <= f32.nmant and float(info.max) <= float(f32.max)
            and float(info.smallest_subnormal) >= float(f32.smallest_subnormal)):
        with np.errstate(invalid="ignore"):  # NaNs stay NaNs
            return arr.astype(np.float32)
    return None
