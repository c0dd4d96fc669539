"""How far two arrays of one format's encodings are apart: identical bits, and the
distance in units in the last place (the number of format values stepped over)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from fpsim.bits import from_bits
from fpsim.formats import Format, as_format

if TYPE_CHECKING:
    import numpy.typing as npt

# Histogram bins of the ulp distance: 0, 1, 2, 3-4, 5-8, ..., 2**14+1-2**15, more, NaN mismatch.
HISTOGRAM_EDGES = (0, 1, 2) + tuple(2**k + 1 for k in range(1, 16))
"""The left edges of the bins of ``Comparison.histogram``'s ulp distances: 0, 1, 2, 3-4,
5-8, ..., 2**14+1 to 2**15, then more; a last bin counts NaNs against numbers."""


def _encodings(bits: npt.ArrayLike, fmt: Format, name: str) -> np.ndarray:
    arr = np.asarray(bits)
    if arr.dtype.kind not in "iu":
        raise ValueError(f"{name}: expected the encodings of {fmt.name} as an integer array, "
                         f"got dtype {arr.dtype}")
    if arr.size and (int(arr.min()) < 0 or int(arr.max()) >= 2**fmt.bits):
        raise ValueError(f"{name}: encodings of {fmt.name} lie in 0..2**{fmt.bits}-1")
    return arr.astype(np.uint64)


def ulp_distance(x_bits: npt.ArrayLike, y_bits: npt.ArrayLike, fmt: Format | str) -> np.ndarray:
    """Units in the last place between the encodings ``x_bits`` and ``y_bits`` of ``fmt``.

    The count of format values from one to the other (+0 and -0 are one value);
    0 where both are NaN, inf where exactly one is.

    Parameters
    ----------
    x_bits, y_bits : array_like of int
        Encodings of ``fmt`` (in 0..2**bits - 1), of one shape.
    fmt : Format or str
        The format.

    Returns
    -------
    numpy.ndarray
        float64 distances.

    Raises
    ------
    ValueError
        If the arrays are not encodings of ``fmt``, or their shapes differ.

    Examples
    --------
    >>> import numpy as np
    >>> from fpsim.compare import ulp_distance
    >>> ulp_distance(np.array([0x3C00, 0x8000, 0x7E00]), np.array([0x3C01, 0x0000, 0x3C00]),
    ...              "fp16")  # 1 and its successor; -0 and +0; a NaN and 1
    array([ 1.,  0., inf])
    """
    fmt = as_format(fmt)
    x, y = _encodings(x_bits, fmt, "x_bits"), _encodings(y_bits, fmt, "y_bits")
    if x.shape != y.shape:
        raise ValueError(f"shapes differ: {x.shape} and {y.shape}")
    sign = np.uint64(1) << np.uint64(fmt.bits - 1)
    # On the line -mag ... -0 = +0 ... +mag, in unsigned arithmetic (a 64-bit format's
    # distances reach 2**64 - 2): |mx - my| on one side of zero, mx + my across it.
    mx, my = x & (sign - np.uint64(1)), y & (sign - np.uint64(1))
    same_side = ((x & sign) == (y & sign)) | (mx == 0) | (my == 0)
    apart = np.where(same_side, np.maximum(mx, my) - np.minimum(mx, my), mx + my)
    distance: np.ndarray = apart.astype(np.float64)
    nan_x, nan_y = np.isnan(from_bits(x, fmt)), np.isnan(from_bits(y, fmt))
    distance[nan_x & nan_y] = 0.0
    distance[nan_x != nan_y] = np.inf
    return distance


@dataclass(frozen=True)
class Comparison:
    """One case: ``identical`` is the share of bit-identical elements; ``histogram``
    counts ulp distances in the bins of HISTOGRAM_EDGES (last bin: NaN against a number).

    Parameters
    ----------
    format : str
        The format's name.
    size : int
        The number of elements compared.
    identical : float
        The share of bit-identical elements.
    max_ulp, median_ulp : float
        The largest and the median ulp distance (inf for a NaN against a number).
    histogram : tuple of int
        The counts per bin of ``HISTOGRAM_EDGES``, then of NaN mismatches.
    """

    format: str
    size: int
    identical: float
    max_ulp: float
    median_ulp: float
    histogram: tuple[int, ...]

    def as_dict(self) -> dict[str, Any]:
        """The comparison as results.json holds it.

        Returns
        -------
        dict
        """
        return dict(format=self.format, size=self.size, identical=self.identical,
                    max_ulp=self.max_ulp, median_ulp=self.median_ulp,
                    histogram=list(self.histogram))


def compare_bits(emulated_bits: npt.ArrayLike, hardware_bits: npt.ArrayLike,
                 fmt: Format | str) -> Comparison:
    """Compare the emulated and the hardware encodings of one case.

    Parameters
    ----------
    emulated_bits, hardware_bits : array_like of int
        Encodings of ``fmt``, of one shape.
    fmt : Format or str
        The format.

    Returns
    -------
    Comparison

    Raises
    ------
    ValueError
        If the arrays are empty, differ in shape, or are not encodings of ``fmt``.

    Examples
    --------
    >>> import numpy as np
    >>> from fpsim.compare import compare_bits
    >>> c = compare_bits(np.array([0x3C00, 0x3C00]), np.array([0x3C00, 0x3C02]), "fp16")
    >>> c.identical, c.max_ulp, c.histogram[:3]
    (0.5, 2.0, (1, 0, 1))
    """
    fmt = as_format(fmt)
    distance = ulp_distance(emulated_bits, hardware_bits, fmt).reshape(-1)
    if distance.size == 0:
        raise ValueError("nothing to compare: the arrays are empty")
    same = np.asarray(emulated_bits).reshape(-1) == np.asarray(hardware_bits).reshape(-1)
    finite = distance[np.isfinite(distance)]
    counts = np.histogram(finite, bins=(*HISTOGRAM_EDGES, np.inf))[0]
    return Comparison(
        format=fmt.name,
        size=int(distance.size),
        identical=float(same.mean()),
        max_ulp=float(distance.max()),
        median_ulp=float(np.median(distance)),
        histogram=(*(int(c) for c in counts), int((~np.isfinite(distance)).sum())),
    )


def share(identical: float) -> str:
    """A percentage that reads 100% only when every element is identical."""
    if identical == 1.0:
        return "100%"
    return f"{math.floor(identical * 1e4) / 100:.2f}%"


def ulp_text(v: float) -> str:
    """A distance in ulp for a table: NaN/num where a NaN met a number."""
    return "NaN/num" if np.isinf(v) else f"{v:g}"
