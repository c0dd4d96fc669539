"""The OCP MX schemes: a shared E8M0 scale ``2**s`` per block (OCP MX v1.0 section 6.3)."""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from fpsim.backends import array_kernels
from fpsim.formats import PRESETS
from fpsim.kernels.blockscale import Encoding
from fpsim.kernels.spec import Spec, make_spec
from fpsim.quantize.blocks import Blocks
from fpsim.quantize.scale_rules import SCALE_RULES
from fpsim.quantize.schemes import Scheme

__all__ = ["MXParameters", "mx_parameters", "scale_mx"]

Floats = npt.NDArray[np.float64]


class MXParameters(NamedTuple):
    """What the MX kernels read of a scheme, a scale rule and the elements' rounding."""

    rule: int  # the scale rule's code (SCALE_RULES)
    emax: int  # the element format's largest exponent
    t: int  # the element format's fraction bits
    inv_max: float  # 1 / the element format's largest value, rounded to binary32
    low: int  # the scale format's exponent range
    high: int
    fp32: Spec  # binary32, nearest even (the transformer_engine rule's arithmetic)
    spec: Spec  # the elements' rounding
    code: Encoding  # the elements' encoding
    scale_code: Encoding  # the scales' encoding


@functools.lru_cache(maxsize=256)
def mx_parameters(scheme: Scheme, rule: str, spec: Spec) -> MXParameters:
    """The ``MXParameters`` of ``scheme`` under scale rule ``rule``, its elements rounded
    as ``spec`` says."""
    element, scale = scheme.element, scheme.scale_format
    return MXParameters(
        SCALE_RULES[rule], element.emax, element.man_bits,
        float(np.float32(1.0 / element.max)), scale.emin, scale.emax,
        make_spec(PRESETS["fp32"], "nearest_even", True, False, None), spec,
        Encoding.of(element), Encoding.of(scale))


def scale_mx(blocks: Blocks, params: MXParameters) -> tuple[Floats, Floats]:
    """The elements before rounding (``x / 2**s``, exact) and each block's scale (NaN for
    a block with a NaN or an infinity, whose elements are +0)."""
    kernels = array_kernels(blocks.values)
    p = params
    with np.errstate(all="ignore"):
        s, nan = kernels["mx_exponent"](blocks.amax(), p.rule, p.emax, p.t, p.inv_max, p.low,
                                        p.high, p.fp32)
        down, up = kernels["mx_factors"](s)
        scaled = kernels["mx_scaled"](blocks.values, blocks.each(down), blocks.each(up),
                                      blocks.each(nan), kernels["TINY"])
        return scaled, kernels["pow2_or_nan"](s, nan)
