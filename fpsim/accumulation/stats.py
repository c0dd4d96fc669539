"""Counts that explain an accumulation: what its rounded additions did."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fpsim.flags import ABSORBED, INEXACT, OVERFLOW, UNDERFLOW

# Order of the counters the backends return.
FIELDS = ("additions", "inexact", "absorbed", "underflow", "overflow")
FLAG_OF_FIELD = {"inexact": INEXACT, "absorbed": ABSORBED, "underflow": UNDERFLOW,
                 "overflow": OVERFLOW}


@dataclass(frozen=True)
class AccumulationStats:
    """Over every rounded addition of one call: how many there were, and how many were
    inexact, had a nonzero addend absorbed (ABSORBED), underflowed or overflowed."""

    additions: int = 0
    inexact: int = 0
    absorbed: int = 0
    underflow: int = 0
    overflow: int = 0

    @classmethod
    def from_counts(cls, counts: np.ndarray) -> AccumulationStats:
        return cls(*(int(v) for v in counts))

    def fraction(self, name: str) -> float:
        """``name`` (e.g. ``"absorbed"``) as a fraction of the additions."""
        return getattr(self, name) / self.additions if self.additions else 0.0
