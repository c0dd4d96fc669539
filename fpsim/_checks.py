"""Checks of scalar arguments, with messages that name the argument.

Every check is written so that NaN fails it (a comparison with NaN is false).
"""

from __future__ import annotations

import math
import numbers

import numpy as np


def boolean(value, name: str) -> bool:
    """``value`` if it is a bool (Python's or NumPy's); no truthy strings or numbers."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def integer(value, name: str, low: int | None = None, high: int | None = None) -> int:
    """``value`` as an int, if it is an integer (not a bool) in ``low..high``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    value = int(value)
    if (low is not None and value < low) or (high is not None and value > high):
        span = f"{'-inf' if low is None else low}..{'inf' if high is None else high}"
        raise ValueError(f"{name} must be an integer in {span}, got {value}")
    return value


def integer_pair(value, name: str, low: int | None = None) -> tuple[int, int]:
    """An integer or a pair of integers (each at least ``low``), as a pair."""
    values = value if isinstance(value, (tuple, list, np.ndarray)) else (value, value)
    if len(values) != 2:
        raise ValueError(f"{name} must be an integer or a pair of integers, got {value!r}")
    return integer(values[0], name, low), integer(values[1], name, low)


def real(value, name: str, low: float | None = None, high: float | None = None, *,
         low_open: bool = False, high_open: bool = False) -> float:
    """``value`` as a float, if it is a finite real number in the given interval."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a real number, got {value!r}")
    value = float(value)
    ok = math.isfinite(value)
    if low is not None:
        ok = ok and (value > low if low_open else value >= low)
    if high is not None:
        ok = ok and (value < high if high_open else value <= high)
    if not ok:
        raise ValueError(f"{name} must be {_describe(low, high, low_open, high_open)}, "
                         f"got {value!r}")
    return value


def _describe(low, high, low_open: bool, high_open: bool) -> str:
    if low == 0 and high is None:
        return "a positive finite number" if low_open else "a non-negative finite number"
    lo = "(" if low_open or low is None else "["
    hi = ")" if high_open or high is None else "]"
    return (f"a finite number in {lo}{'-inf' if low is None else low}, "
            f"{'inf' if high is None else high}{hi}")


def output_folder(path, what: str = "the output folder"):
    """``path`` as a Path to a folder that exists now (made with its parents if need be);
    ``ValueError`` saying why when it cannot be (a file, no permission, /dev/null/x)."""
    from pathlib import Path

    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"{what} {str(folder)!r} exists and is not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"cannot make {what} {str(folder)!r}: "
                         f"{exc.strerror or exc}") from None
    return folder
