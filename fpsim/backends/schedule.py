"""The pairwise summation tree as a post-order program for a small stack machine."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

ADD = -1
PUSH_C = -2


@lru_cache(maxsize=256)
def pairwise_program(k: int, with_c: bool = False) -> np.ndarray:
    """Post-order program summing k terms as SPEC's balanced tree, then c.

    A run of n terms is the sum of its first ceil(n/2) and last floor(n/2)
    terms. Entries >= 0 push that term rounded to the accumulator; ``PUSH_C``
    pushes the initial accumulator c; ``ADD`` pops two partial sums and pushes
    their rounded sum. With ``with_c``, c is added last (and alone for k = 0).
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
    if with_c:
        program.append(PUSH_C)
        if k > 0:
            program.append(ADD)
    out = np.array(program, dtype=np.int64)
    out.setflags(write=False)
    return out


def stack_depth(program: np.ndarray) -> int:
    """Largest number of partial sums alive while running ``program``."""
    depth = peak = 0
    for op in program:
        depth += -1 if op == ADD else 1
        peak = max(peak, depth)
    return max(peak, 1)
