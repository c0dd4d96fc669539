"""Scratch arrays that one call uses and drops, kept for the next call of the same kind.

A fresh array of a few megabytes costs a page fault per 4 KiB page on first touch
(glibc's allocator hands large blocks back to the system when they are freed), which
beside a BLAS product of the same size is not small: at n = 512 the float32 copies
of two float64 operands and of the product fault about 0.5 ms in a VM. A scratch
array never leaves the call that took it, so reusing it is safe; it is per thread,
so concurrent calls never share one.
"""

from __future__ import annotations

import math
import threading
from typing import Any

import numpy as np

# Arrays larger than this are not kept (their faults are small beside their work).
MAX_BYTES = 1 << 22

_local = threading.local()


def scratch(role: str, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """A C-contiguous host array of ``shape`` and ``dtype`` whose contents are garbage,
    for use within one call only. ``role`` names the use: arrays of distinct roles are
    distinct, and the next call on this thread with the same role may get the same one."""
    dtype = np.dtype(dtype)
    size = math.prod(shape)
    if size * dtype.itemsize > MAX_BYTES:
        return np.empty(shape, dtype)
    kept: dict[str, np.ndarray] = _local.__dict__.setdefault("kept", {})
    array = kept.get(role)
    if array is None or array.dtype != dtype or array.size < size:
        array = kept[role] = np.empty(size, dtype)
    return array[:size].reshape(shape)
