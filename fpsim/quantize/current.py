"""FP8 current scaling, per tensor or per row: a binary32 scale ``448 / amax`` per block,
computed as TransformerEngine's ``compute_scale_from_amax`` does."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from fpsim._device import binary32, binary64
from fpsim.backends import array_kernels
from fpsim.quantize.blocks import Blocks

__all__ = ["scale_current"]

Floats = npt.NDArray[np.float64]
F32 = np.float32


def scale_current(blocks: Blocks, top: float, pow2: bool) -> tuple[Floats, Floats]:
    """The elements before rounding (``x * scale`` in binary32) and each block's decode
    scale ``1 / scale`` (binary32). ``scale = top / amax`` rounded to nearest even;
    ``FLT_MAX`` where that overflows; 1 for a zero, infinite or NaN amax; with ``pow2``,
    its fraction bits cleared (a power of two, rounded down)
    (``fpsim.kernels.blockscale.current_scale``)."""
    kernels = array_kernels(blocks.values)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        x = binary32(blocks.values)
        amax = Blocks(binary64(x), blocks.size, blocks.rows).amax()
        decode, scale = kernels["current_scale"](amax, F32(top), pow2)
        scaled = kernels["scaled32"](x, blocks.each(scale))
    return binary64(scaled), binary64(decode)
