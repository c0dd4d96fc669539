"""The encodings the rounding runs on: binary64, and binary32 for float32 input.

Every operation carries its exact result in the binary64 encoding (TwoSum,
exact products, integer significands all need it). Rounding float32 input to a
format no finer than binary32 needs none of that: the input is exact, so it is
its own carrier (no sticky bit), and every bit the rounding reads is one of its
binary32 encoding's. On that encoding the same source (``core.round_value``)
computes in 32-bit lanes: twice as many to a vector as binary64's.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from fpsim.kernels import core
from fpsim.kernels.spec import Spec


class Carrier(NamedTuple):
    """An encoding: the constants ``fpsim.kernels.core`` names, and its lane types."""

    name: str
    constants: dict
    integer: type
    floating: type


# The names of the encoding's constants in fpsim.kernels.core (binary64's values there).
NAMES = ("FRAC", "BIAS", "SHIFT_CAP", "MAG", "SIGN", "INF_BITS", "QUIET", "FRAC_MASK", "HIDDEN")
BINARY64 = Carrier("binary64", {name: getattr(core, name) for name in NAMES}, np.int64,
                   np.float64)
BINARY32 = Carrier("binary32", dict(FRAC=23, BIAS=127, SHIFT_CAP=30, MAG=0x7FFFFFFF,
                                    SIGN=-0x80000000,
                                    INF_BITS=0x7F800000,
                                    # Every NaN reads as quiet: fpsim reads float32 input
                                    # as NumPy widens it to float64, which quiets a
                                    # signalling NaN (docs/semantics.md), and so must this.
                                    QUIET=0x7FFFFFFF,
                                    FRAC_MASK=0x007FFFFF, HIDDEN=0x00800000),
                   np.int32, np.float32)
# What the binary32 instance computes: rounding, from its entry point down.
BINARY32_ENTRY = "round_value"


def fits_binary32(spec: Spec) -> bool:
    """Whether binary32 carries rounding of float32 input to ``spec``'s format: the
    format's grid is binary32's or coarser everywhere (so its values, its largest
    value included, are binary32 values)."""
    with np.errstate(over="ignore"):  # a largest value beyond binary32's narrows to inf
        narrowed = float(np.float32(spec.maxv))
    return (spec.t <= BINARY32.constants["FRAC"] and spec.emin >= 1 - BINARY32.constants["BIAS"]
            and narrowed == spec.maxv)


def spec_for(spec: Spec, carrier: Carrier) -> Spec:
    """``spec`` with its fields in the carrier's lane types (constants fold in them)."""
    return Spec(*(carrier.floating(v) if isinstance(v, float) else carrier.integer(v)
                  for v in spec))
