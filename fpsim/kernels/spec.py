"""What the kernels read of a format and a rounding mode, and of a block FMA.

Both are NamedTuples: plain tuples to Numba (arguments and frozen globals, on
the CPU and in CUDA), read by field name everywhere.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

from fpsim._checks import boolean, integer
from fpsim.formats import Format
from fpsim.modes import mode_code

MAX_RANDOM_BITS = 53


class Spec(NamedTuple):
    """A format and a rounding mode, as the kernels read them."""

    t: int  # fraction bits (precision - 1)
    emin: int  # exponent of the smallest normal
    maxv: float  # largest finite value
    minnorm: float  # smallest normal value
    subnormals: int  # 1: subnormals kept; 0: flushed to zero, in and out
    infinities: int  # 0: the OCP finite style (overflow gives NaN)
    saturate: int  # 1: overflow gives the largest finite value (always without a NaN)
    nan: int  # 0: no NaN encoding (OCP fp6, fp4)
    signed: int  # 0: unsigned (E8M0, UE4M3): a negative nonzero value is NaN; 2: no -0 (fnuz)
    mode: int  # rounding-mode code (fpsim.modes)
    rbits: int  # random bits drawn by stochastic rounding


class BlockSpec(NamedTuple):
    """A tensor-core block FMA, as the kernels read it (see fpsim.hw.BlockFMA)."""

    t_in: int  # fraction bits of the inputs (of A's, where B's differ)
    emin_in: int
    t_in_b: int  # fraction bits of B's inputs
    emin_in_b: int
    t_out: int  # fraction bits of the accumulator
    emin_out: int
    frac_bits: int  # bits kept below the alignment exponent
    exp_floor: int  # lowest alignment exponent (NO_EXPONENT: none)
    overflow_inf: int  # 1: a result beyond the output's range is +-inf (0: as rounded)
    signed_zero: int  # 1: a nonzero sum rounded to zero keeps its sign (0: +0)
    round_down: int  # 1: AMD CDNA3's two-stage alignment (align="round_down"); 0: truncation
    sum_bits: int  # round_down: fraction bits of the second stage's sum (0 under truncation)
    product_limit: float  # round_down: a product this large is +-inf (inf under truncation)


def make_spec(
    fmt: Format, rounding: str, subnormals: bool, saturate: bool, random_bits: int | None
) -> Spec:
    """The kernels' ``Spec`` of ``fmt`` rounded in mode ``rounding``."""
    if not isinstance(fmt, Format):
        raise ValueError(f"expected a Format, got {fmt!r}")
    mode_code(rounding)
    if random_bits is None:
        random_bits = MAX_RANDOM_BITS
    bits = integer(random_bits, "random_bits", 1, MAX_RANDOM_BITS)
    # A format without a NaN saturates (OCP MX v1.0: elements are clamped to the largest
    # normal); one without subnormals (exponent-only, E8M0) has nothing to flush.
    return _spec(fmt, rounding, boolean(subnormals, "subnormals") or fmt.man_bits == 0,
                 boolean(saturate, "saturate") or not fmt.nan, bits)


@functools.lru_cache(maxsize=512)
def _spec(fmt: Format, rounding: str, subnormals: bool, saturate: bool, bits: int) -> Spec:
    return Spec(
        t=fmt.man_bits,
        emin=fmt.emin,
        maxv=fmt.max,
        minnorm=fmt.smallest_normal,
        subnormals=int(subnormals),
        infinities=int(fmt.infinities),
        saturate=int(saturate),
        nan=int(fmt.nan),
        signed=0 if not fmt.signed else 1 if fmt.negative_zero else 2,
        mode=mode_code(rounding),
        rbits=bits,
    )
