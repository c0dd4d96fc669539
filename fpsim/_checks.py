"""Checks of scalar arguments, with messages that name the argument.

Every check is written so that NaN fails it (a comparison with NaN is false).
"""

from __future__ import annotations

import math
import numbers
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import os
    from pathlib import Path


def boolean(value: object, name: str) -> bool:
    """``value`` if it is a bool (Python's or NumPy's); no truthy strings or numbers."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def integer(value: Any, name: str, low: int | None = None, high: int | None = None) -> int:
    """``value`` as an int, if it is an integer (not a bool) in ``low..high``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    number = int(value)
    if (low is not None and number < low) or (high is not None and number > high):
        span = f"{'-inf' if low is None else low}..{'inf' if high is None else high}"
        raise ValueError(f"{name} must be an integer in {span}, got {number}")
    return number


def integer_pair(value: Any, name: str, low: int | None = None) -> tuple[int, int]:
    """An integer or a pair of integers (each at least ``low``), as a pair."""
    values = value if isinstance(value, (tuple, list, np.ndarray)) else (value, value)
    if len(values) != 2:
        raise ValueError(f"{name} must be an integer or a pair of integers, got {value!r}")
    return integer(values[0], name, low), integer(values[1], name, low)


def real(value: Any, name: str, low: float | None = None, high: float | None = None, *,
         low_open: bool = False, high_open: bool = False) -> float:
    """``value`` as a float, if it is a finite real number in the given interval."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a real number, got {value!r}")
    number = float(value)
    ok = math.isfinite(number)
    if low is not None:
        ok = ok and (number > low if low_open else number >= low)
    if high is not None:
        ok = ok and (number < high if high_open else number <= high)
    if not ok:
        raise ValueError(f"{name} must be {_describe(low, high, low_open, high_open)}, "
                         f"got {number!r}")
    return number


def _describe(low: float | None, high: float | None, low_open: bool, high_open: bool) -> str:
    if low == 0 and high is None:
        return "a positive finite number" if low_open else "a non-negative finite number"
    lo = "(" if low_open or low is None else "["
    hi = ")" if high_open or high is None else "]"
    return (f"a finite number in {lo}{'-inf' if low is None else low}, "
            f"{'inf' if high is None else high}{hi}")


def output_folder(path: str | os.PathLike[str], what: str = "the output folder") -> Path:
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
