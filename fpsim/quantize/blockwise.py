"""DeepSeek-V3's blockwise FP8: fp8 e4m3 elements, a binary32 scale ``amax / 448`` per
block, computed in binary32 as DeepSeek-V3's quantization kernels (``act_quant``) do."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from fpsim._device import binary32, binary64
from fpsim.backends import array_kernels
from fpsim.quantize.blocks import Blocks

__all__ = ["scale_blockwise"]

Floats = npt.NDArray[np.float64]
F32 = np.float32


def scale_blockwise(blocks: Blocks) -> tuple[Floats, Floats]:
    """The elements before rounding (``x / s`` in binary32) and each block's scale
    ``s = amax / 448`` (binary32). A zero block (``s = 0``) keeps its zeros, where the
    kernel's ``0 / 0`` gives NaN (``fpsim.kernels.blockscale.descaled32``)."""
    kernels = array_kernels(blocks.values)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        x = binary32(blocks.values)
        s = kernels["blockwise_scale"](Blocks(binary64(x), blocks.size, blocks.rows).amax())
        y = kernels["descaled32"](x, blocks.each(s))
    return binary64(y), binary64(s)
