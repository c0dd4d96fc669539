"""Counts that explain an accumulation: what its rounded additions did."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fpsim.backends.protocol import COUNTERS


@dataclass(frozen=True)
class AccumulationStats:
    """What the rounded additions of one accumulation did.

    Returned by ``matmul``, ``dot``, ``sum`` and ``conv2d`` with ``stats=True``.

    Attributes
    ----------
    additions : int
        How many rounded additions there were.
    inexact : int
        How many of them rounded (INEXACT).
    absorbed : int
        How many had a finite nonzero addend with no effect on the sum (ABSORBED;
        in a block-FMA model, also terms that vanished in the alignment).
    underflow : int
        How many underflowed (UNDERFLOW).
    overflow : int
        How many overflowed (OVERFLOW).

    Examples
    --------
    >>> import numpy as np
    >>> import fpsim
    >>> total, stats = fpsim.sum(np.ones(4096), accum="fp16", stats=True)
    >>> stats
    AccumulationStats(additions=4096, inexact=2048, absorbed=2048, underflow=0, overflow=0)
    """

    additions: int = 0
    inexact: int = 0
    absorbed: int = 0
    underflow: int = 0
    overflow: int = 0

    @classmethod
    def from_counts(cls, counts: np.ndarray) -> AccumulationStats:
        """From a backend's counters (``fpsim.backends.protocol.COUNTERS``, in that order).

        Parameters
        ----------
        counts : numpy.ndarray
            Five integers: additions, inexact, absorbed, underflow, overflow.

        Returns
        -------
        AccumulationStats

        Raises
        ------
        ValueError
            Not five counts.

        Examples
        --------
        >>> import numpy as np
        >>> from fpsim import AccumulationStats
        >>> AccumulationStats.from_counts(np.array([4, 1, 1, 0, 0])).inexact
        1
        """
        return cls(**{name: int(v) for name, v in zip(COUNTERS, counts, strict=True)})

    def fraction(self, name: str) -> float:
        """A count as a fraction of the additions (0.0 when there were none).

        Parameters
        ----------
        name : str
            ``"inexact"``, ``"absorbed"``, ``"underflow"`` or ``"overflow"``.

        Returns
        -------
        float

        Raises
        ------
        AttributeError
            An unknown ``name`` (where there were additions).

        Examples
        --------
        >>> from fpsim import AccumulationStats
        >>> AccumulationStats(additions=4, inexact=1).fraction("inexact")
        0.25
        """
        if not self.additions:
            return 0.0
        count: int = getattr(self, name)
        return count / self.additions
