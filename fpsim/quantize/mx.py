"""The OCP MX schemes: a shared E8M0 scale ``2**s`` per block (OCP MX v1.0 section 6.3)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from fpsim.quantize.blocks import Blocks
from fpsim.quantize.scale_rules import shared_exponents
from fpsim.quantize.schemes import Scheme

__all__ = ["scale_mx"]

Floats = npt.NDArray[np.float64]
_TINY = 2.0**-1074


def scale_mx(blocks: Blocks, scheme: Scheme, rule: str) -> tuple[Floats, Floats]:
    """The elements before rounding (``x / 2**s``, exact) and each block's scale (NaN for
    a block with a NaN or an infinity, whose elements are +0)."""
    fmt = scheme.scale_format
    s, nan = shared_exponents(blocks.amax(), scheme.element, rule, fmt.emin, fmt.emax)
    s_each = blocks.each(s)
    scaled = np.ldexp(blocks.values, -s_each)
    # A scaled value that falls into binary64's subnormals (only where a scale was clamped
    # at its top) is far below half of any element format's smallest subnormal: any tiny
    # value of its sign rounds as it does, in every mode, stochastic included.
    with np.errstate(invalid="ignore"):
        lost = np.isfinite(blocks.values) & (np.ldexp(scaled, s_each) != blocks.values)
    scaled = np.where(lost, np.copysign(_TINY, blocks.values), scaled)
    scaled = np.where(blocks.each(nan), 0.0, scaled)
    return scaled, np.where(nan, np.nan, np.ldexp(1.0, s))
