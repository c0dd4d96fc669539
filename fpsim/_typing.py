"""Type aliases of fpsim's signatures, for annotations only (imported under TYPE_CHECKING)."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt

from fpsim.formats import Format

#: A format, or the name of one (``"fp16"``, ``"e6m9"``, ...).
FormatLike: TypeAlias = Format | str
#: One number: a Python or NumPy float or int, or a Fraction float64 holds exactly.
Scalar: TypeAlias = float | np.floating[Any] | np.integer[Any] | Fraction
#: Values in: anything NumPy makes an array of (arrays, sequences, numbers), or sequences of
#: Fractions (with ``Scalar``, every input fpsim takes).
Values: TypeAlias = npt.ArrayLike | Sequence[Fraction]
#: Values out: a float16, float32 or float64 array, or one such NumPy scalar.
FloatArray: TypeAlias = npt.NDArray[np.floating[Any]]
FloatScalar: TypeAlias = np.floating[Any]
#: IEEE flags out, one uint8 per element (``fpsim.flags``).
FlagArray: TypeAlias = npt.NDArray[np.uint8]
