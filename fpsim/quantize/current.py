"""FP8 current scaling, per tensor or per row: a binary32 scale ``448 / amax`` per block,
computed as TransformerEngine's ``compute_scale_from_amax`` does."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from fpsim.quantize.blocks import Blocks

__all__ = ["scale_current"]

Floats = npt.NDArray[np.float64]
F32 = np.float32


def scale_current(blocks: Blocks, top: float, pow2: bool) -> tuple[Floats, Floats]:
    """The elements before rounding (``x * scale`` in binary32) and each block's decode
    scale ``1 / scale`` (binary32). ``scale = top / amax`` rounded to nearest even;
    ``FLT_MAX`` where that overflows; 1 for a zero, infinite or NaN amax; with ``pow2``,
    its fraction bits cleared (a power of two, rounded down)."""
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        x = blocks.values.astype(F32)
        amax = Blocks(x.astype(np.float64), blocks.size, blocks.rows).amax().astype(F32)
        plain = ~np.isfinite(amax) | (amax == 0)
        scale = (F32(top) / np.where(plain, F32(1.0), amax)).astype(F32)
        scale = np.where(np.isinf(scale), np.finfo(np.float32).max, scale).astype(F32)
        scale = np.where(plain, F32(1.0), scale).astype(F32)
        if pow2:
            scale = (scale.view(np.uint32) & np.uint32(0xFF800000)).view(F32)
        scaled = (x * blocks.each(scale).astype(F32)).astype(np.float64)
        decode = (F32(1.0) / scale).astype(np.float64)
    return scaled, decode
