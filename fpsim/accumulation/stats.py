"""Counts that explain an accumulation: what its rounded additions did."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fpsim.backends.protocol import COUNTERS


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
        """From a backend's ``COUNTERS``."""
        return cls(**{name: int(v) for name, v in zip(COUNTERS, counts, strict=True)})

    def fraction(self, name: str) -> float:
        """``name`` (e.g. ``"absorbed"``) as a fraction of the additions."""
        return getattr(self, name) / self.additions if self.additions else 0.0
