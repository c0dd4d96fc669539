"""Telemetry of a quantization: what the elements lost, and the scales it chose."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from fpsim._device import array_module, transfer
from fpsim.flags import OVERFLOW, UNDERFLOW

if TYPE_CHECKING:
    from fpsim.formats import Format

__all__ = ["QuantizationStats", "summarize"]


@dataclass(frozen=True)
class QuantizationStats:
    """What one quantization did (``Quantized.stats()``).

    Attributes
    ----------
    saturated : float
        The share of elements whose rounding overflowed the element format and was clamped
        to its largest value.
    flushed : float
        The share of nonzero scaled elements that became zero.
    subnormal : float
        The share of elements that are subnormal in the element format.
    amax : float
        The input's largest magnitude (NaN if it held a NaN).
    scale_histogram : tuple of (float, int)
        Each distinct scale and how many blocks have it, in increasing order (NaN last).

    Examples
    --------
    >>> import numpy as np, fpsim
    >>> x = np.array([7.9, 0.2, 0.5] + [1.0] * 29)
    >>> s = fpsim.quantize(x, "mxfp4_e2m1").stats()
    >>> s.saturated * 32, s.flushed * 32, s.subnormal * 32, s.amax, s.scale_histogram
    (1.0, 1.0, 1.0, 7.9, ((1.0, 1),))
    """

    saturated: float
    flushed: float
    subnormal: float
    amax: float
    scale_histogram: tuple[tuple[float, int], ...]


def summarize(values: np.ndarray, flags: np.ndarray, scales: np.ndarray, amax: float,
              element: Format) -> QuantizationStats:
    """The telemetry of a quantization (``Quantized.stats()``): from its elements (of the
    ``element`` format), their rounding flags, its scales and the input's amax. Device
    arrays are counted on the device; the counts and the scales' histogram are read back."""
    xp = array_module(values)
    n = max(values.size, 1)
    tiny = xp.abs(values) < element.smallest_normal
    scales = scales.ravel()
    nan = xp.isnan(scales)
    levels, counts = xp.unique(scales[~nan], return_counts=True)  # sorted
    histogram = [(float(v), int(c)) for v, c in zip(transfer(levels, "cpu").tolist(),
                                                     transfer(counts, "cpu").tolist(),
                                                     strict=True)]
    nans = int(xp.count_nonzero(nan))
    if nans:
        histogram.append((float("nan"), nans))
    return QuantizationStats(
        saturated=int(xp.count_nonzero(flags & OVERFLOW)) / n,
        flushed=int(xp.count_nonzero(((flags & UNDERFLOW) != 0) & (values == 0))) / n,
        subnormal=int(xp.count_nonzero(tiny & (values != 0))) / n,
        amax=amax,
        scale_histogram=tuple(histogram),
    )
