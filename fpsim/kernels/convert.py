"""IEEE 754 convertFormat between binary32 and binary64, elementwise.

Written once for every backend, so that a device array is converted by fpsim's own
kernel: CuPy compiles its kernels with ``-ftz=true`` (a binary32 subnormal it reads or
writes becomes a zero) and gives the GPU's NaN. Here subnormals are kept, and every NaN
becomes the one quiet NaN of the destination (sign 0, quiet bit only), on every device.
"""

import numpy as np

from fpsim.kernels.core import NAN
from fpsim.kernels.prims import select

NAN32 = np.float32(np.nan)  # 0x7FC00000


def to_binary64(x):
    """``x`` (binary32 or binary64) as binary64: exact; a NaN as ``0x7FF8000000000000``."""
    y = np.float64(x)
    return select(y != y, NAN, y)


def to_binary32(x):
    """``x`` (binary64 or binary32) rounded to binary32, to nearest even, subnormals
    kept; a NaN as ``0x7FC00000``."""
    y = np.float32(x)
    return select(y != y, NAN32, y)
