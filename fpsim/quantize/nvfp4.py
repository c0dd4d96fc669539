"""NVFP4: fp4 e2m1 elements in blocks of 16, each with a UE4M3 scale, and one binary32
scale for the tensor, computed in binary32 as TransformerEngine computes them.

The steps of TransformerEngine's reference quantizer (``NVFP4QuantizerRef``), each a
binary32 operation rounded to nearest even: ``global_encode = min(448 * 6 / amax,
FLT_MAX)`` (1 where that is 0), ``global_decode = 1 / global_encode``, and per block
``decode = e4m3(min(block_amax * (global_encode * (1 / 6)), 448))``, ``encode = min(1 /
(decode * global_decode), FLT_MAX)``, the elements ``x * encode``. TransformerEngine clips
the elements to +-6 before rounding them: the same as the saturating rounding that
follows, in every mode.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from fpsim._device import binary32, binary64
from fpsim.backends import array_kernels
from fpsim.kernels.blockscale import Encoding
from fpsim.kernels.spec import Spec, make_spec
from fpsim.quantize.blocks import Blocks
from fpsim.quantize.schemes import Scheme

__all__ = ["NVFP4Parameters", "nvfp4_parameters", "scale_nvfp4"]

Floats = npt.NDArray[np.float64]
F32 = np.float32
_F32_MAX = np.finfo(np.float32).max


class NVFP4Parameters(NamedTuple):
    """What the NVFP4 kernels read: the tensor's scales and the elements' rounding."""

    multiplier: np.float32  # binary32(global_encode * binary32(1 / 6))
    global_decode: np.float32  # the tensor's decode scale
    e4m3: Spec  # UE4M3, nearest even (the block scales)
    spec: Spec  # the elements' rounding
    code: Encoding  # the elements' encoding
    scale_code: Encoding  # the block scales' encoding


def nvfp4_parameters(scheme: Scheme, amax: float, spec: Spec) -> NVFP4Parameters:
    """The ``NVFP4Parameters`` of a tensor whose largest magnitude is ``amax`` (NaN if it
    holds a NaN), read as binary32."""
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        global_encode = np.minimum(F32(448.0 * 6.0) / F32(amax), F32(_F32_MAX))
        global_encode = F32(1.0) if global_encode == 0 else F32(global_encode)
        global_decode = F32(1.0) / global_encode
        multiplier = global_encode * (F32(1.0) / F32(6.0))
    return NVFP4Parameters(
        F32(multiplier), F32(global_decode),
        make_spec(scheme.scale_format, "nearest_even", True, False, None), spec,
        Encoding.of(scheme.element), Encoding.of(scheme.scale_format))


def scale_nvfp4(blocks: Blocks, params: NVFP4Parameters) -> tuple[Floats, Floats]:
    """The elements before rounding (``x * encode`` in binary32; 0 where NaN) and each
    block's UE4M3 decode scale."""
    kernels = array_kernels(blocks.values)
    p = params
    with np.errstate(all="ignore"):
        scales, encode = kernels["nvfp4_block_scales"](blocks.amax(), p.multiplier,
                                                       p.global_decode, p.e4m3)
        scaled = kernels["nvfp4_scaled"](binary32(blocks.values), binary32(blocks.each(encode)))
    return binary64(scaled), scales
