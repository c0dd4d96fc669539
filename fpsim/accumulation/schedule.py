"""The pairwise summation tree as a post-order program for a small stack machine."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

ADD = -1


@lru_cache(maxsize=256)
def pairwise_program(k: int) -> np.ndarray:
    """Post-order program summing k terms as SPEC's balanced tree.

    A run of n terms is the sum of its first ceil(n/2) and last floor(n/2)
    terms. Entries >= 0 push that term; ``ADD`` pops two partial sums and
    pushes their rounded sum.
    """
    program: list[int] = []

    def emit(lo: int, hi: int) -> None:
        if hi - lo == 1:
            program.append(lo)
            return
        mid = lo + (hi - lo + 1) // 2
        emit(lo, mid)
        emit(mid, hi)
        program.append(ADD)

    if k > 0:
        emit(0, k)
    out = np.array(program, dtype=np.int64)
    out.setflags(write=False)
    return out


def stack_depth(k: int) -> int:
    """Largest number of partial sums alive while running ``pairwise_program(k)``."""
    depth = peak = 0
    for op in pairwise_program(k):
        depth += 1 if op >= 0 else -1
        peak = max(peak, depth)
    return max(peak, 1)
