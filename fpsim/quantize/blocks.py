"""The block layout: an axis cut into blocks of consecutive elements, or the last two axes
cut into tiles."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from fpsim._device import array_module, binary64

__all__ = ["Blocks"]

Floats = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Blocks:
    """``values`` cut into blocks of ``size`` along the last axis (the blocked axis moved
    there), or with ``rows > 1`` into tiles of ``rows x size`` over the last two axes; the
    last blocks shorter where an axis is not a multiple (as if padded with zeros). Host or
    device arrays (``fpsim._device.array_module``): every step is exact."""

    values: Floats
    size: int
    rows: int = 1

    @property
    def dims(self) -> tuple[int, ...]:
        """The block's extent along each blocked axis (the last one or two)."""
        return (self.rows, self.size) if self.rows > 1 else (self.size,)

    @property
    def counts(self) -> tuple[int, ...]:
        """Blocks along each blocked axis."""
        lengths = self.values.shape[-len(self.dims):]
        return tuple(-(-n // d) for n, d in zip(lengths, self.dims, strict=True))

    def grouped(self) -> Floats:
        """The values as ``(..., count, size)`` or ``(..., count_rows, rows, count, size)``,
        zeros after the last element."""
        k, lead = len(self.dims), self.values.shape[:-len(self.dims)]
        xp = array_module(self.values)
        padded = xp.zeros((*lead, *(c * d for c, d in zip(self.counts, self.dims, strict=True))))
        index: tuple[Any, ...] = (Ellipsis,) + tuple(slice(0, n) for n in self.values.shape[-k:])
        padded[index] = binary64(self.values)  # not CuPy's conversion: it flushes
        split = [v for c, d in zip(self.counts, self.dims, strict=True) for v in (c, d)]
        grouped: Floats = padded.reshape(*lead, *split)
        return grouped

    def amax(self) -> Floats:
        """Each block's largest magnitude (NaN where the block holds a NaN)."""
        axes = (-1,) if self.rows == 1 else (-3, -1)
        xp = array_module(self.values)
        out: Floats = xp.max(xp.abs(self.grouped()), axis=axes)
        return out

    def each(self, per_block: npt.NDArray[Any]) -> npt.NDArray[Any]:
        """A value per block, repeated for each element of its block."""
        xp = array_module(per_block)
        out = xp.repeat(per_block, self.size, axis=-1)[..., :self.values.shape[-1]]
        if self.rows > 1:
            out = xp.repeat(out, self.rows, axis=-2)[..., :self.values.shape[-2], :]
        each: npt.NDArray[Any] = out
        return each
