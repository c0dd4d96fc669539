"""NVFP4: fp4 e2m1 elements in blocks of 16, each with a UE4M3 scale, and one binary32
scale for the tensor, computed in binary32 as TransformerEngine computes them."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from fpsim.quantize.blocks import Blocks
from fpsim.rounding import round as round_to

__all__ = ["scale_nvfp4"]

Floats = npt.NDArray[np.float64]
F32 = np.float32
_F32_MAX = np.finfo(np.float32).max


def scale_nvfp4(blocks: Blocks) -> tuple[Floats, Floats, float]:
    """The elements before rounding (``x * encode_scale`` in binary32; 0 where NaN), each
    block's UE4M3 decode scale and the tensor's decode scale. TransformerEngine clips the
    elements to +-6 before rounding them: the same as the saturating rounding that
    follows, in every mode.

    The steps of TransformerEngine's reference quantizer (``NVFP4QuantizerRef``), each a
    binary32 operation rounded to nearest even: ``global_encode = min(448 * 6 / amax,
    FLT_MAX)`` (1 where that is 0), ``global_decode = 1 / global_encode``, ``block_decode =
    e4m3(clip(min(block_amax * (global_encode * (1 / 6)), FLT_MAX), 448))``,
    ``encode = min(1 / (block_decode * global_decode), FLT_MAX)``, the elements
    ``x * encode``.
    """
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        x = blocks.values.astype(F32)
        amax = np.max(np.abs(x)) if x.size else F32(0.0)
        global_encode = np.minimum(F32(448.0 * 6.0) / F32(amax), F32(_F32_MAX))
        global_encode = np.where(global_encode == 0, F32(1.0), global_encode).astype(F32)
        global_decode = F32(1.0) / global_encode
        multiplier = global_encode * (F32(1.0) / F32(6.0))
        grouped = Blocks(x.astype(np.float64), blocks.size, blocks.rows).amax().astype(F32)
        decode = np.minimum(grouped * multiplier, F32(_F32_MAX))
        decode = np.clip(decode, F32(-448.0), F32(448.0))
        decode_e4m3 = np.asarray(round_to(decode.astype(np.float64), "ue4m3"), np.float64)
        product = (decode_e4m3.astype(F32) * global_decode).astype(F32)
        encode = np.minimum(F32(1.0) / product, F32(_F32_MAX)).astype(F32)
        product32 = (x * blocks.each(encode).astype(F32)).astype(F32)
        wide = product32.astype(np.float64)
    scaled: Floats = np.where(np.isnan(wide), 0.0, wide)
    return scaled, decode_e4m3, float(global_decode)
