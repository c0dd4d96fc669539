"""DeepSeek-V3's blockwise FP8: fp8 e4m3 elements, a binary32 scale ``amax / 448`` per
block, computed in binary32 as DeepSeek-V3's quantization kernels (``act_quant``) do."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from fpsim.quantize.blocks import Blocks

__all__ = ["scale_blockwise"]

Floats = npt.NDArray[np.float64]
F32 = np.float32


def scale_blockwise(blocks: Blocks) -> tuple[Floats, Floats]:
    """The elements before rounding (``x / s`` in binary32) and each block's scale
    ``s = amax / 448`` (binary32). A zero block (``s = 0``) keeps its zeros, where the
    kernel's ``0 / 0`` gives NaN."""
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        x = blocks.values.astype(F32)
        s = (Blocks(x.astype(np.float64), blocks.size, blocks.rows).amax().astype(F32)
             / F32(448.0)).astype(F32)
        s_each = blocks.each(s).astype(F32)
        y = (x / s_each).astype(F32).astype(np.float64)
    y = np.where((s_each == 0) & (x == 0), x.astype(np.float64), y)
    return y, s.astype(np.float64)
