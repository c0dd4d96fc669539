"""The block layout: an axis cut into blocks of consecutive elements."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["Blocks"]

Floats = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Blocks:
    """``values`` (the blocked axis moved last) cut into blocks of ``size``; the last block
    shorter where the axis is not a multiple of it (as if padded with zeros)."""

    values: Floats
    size: int

    @property
    def length(self) -> int:
        """Elements along the blocked axis."""
        return int(self.values.shape[-1])

    @property
    def count(self) -> int:
        """Blocks along the axis."""
        return -(-self.length // self.size)

    def grouped(self) -> Floats:
        """The values as ``(..., count, size)``, zeros after the last element."""
        padded = np.zeros((*self.values.shape[:-1], self.count * self.size))
        padded[..., :self.length] = self.values
        return padded.reshape(*self.values.shape[:-1], self.count, self.size)

    def amax(self) -> Floats:
        """Each block's largest magnitude (NaN where the block holds a NaN)."""
        out: Floats = np.max(np.abs(self.grouped()), axis=-1)
        return out

    def each(self, per_block: npt.NDArray[Any]) -> npt.NDArray[Any]:
        """A value per block, repeated for each element of its block."""
        return np.repeat(per_block, self.size, axis=-1)[..., :self.length]
