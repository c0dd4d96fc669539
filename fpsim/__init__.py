"""fpsim: bit-exact simulation of reduced-precision floating point.

Formats (``Format``, ``format``), rounding (``round``), encodings
(``to_bits``, ``from_bits``), elementwise arithmetic (``add`` ... ``fma``) with
IEEE flags, on the ``numpy`` (reference) or ``numba`` (CPU) backend; emulated
accumulation (``matmul``, ``sum``, ``conv2d``, ``hw``); and an autograd engine
(``Tensor``, ``nn``, ``optim``) trained under a precision ``Policy`` and a
``training`` policy (master weights, loss scaling).
"""

from fpsim import hw, nn, optim, training
from fpsim.accumulation import AccumulationStats, conv2d, dot, matmul, sum
from fpsim.arithmetic import add, div, fma, mul, sqrt, sub
from fpsim.autograd import Tensor, no_grad, tensor
from fpsim.backends import backend, get_backend_name, set_backend
from fpsim.bits import from_bits, to_bits
from fpsim.flags import ABSORBED, DIVBYZERO, INEXACT, INVALID, OVERFLOW, UNDERFLOW
from fpsim.formats import PRESETS, Format, format
from fpsim.modes import CODES as _CODES
from fpsim.precision import Policy
from fpsim.quantize import Quantized, dequantize, quantize  # after the package: the function
from fpsim.rounding import round

ROUNDING_MODES = tuple(_CODES)
"""The names of the rounding modes that ``round`` and the arithmetic take."""

__version__ = "0.1.0"

__all__ = [
    "ABSORBED", "DIVBYZERO", "INEXACT", "INVALID", "OVERFLOW", "PRESETS", "ROUNDING_MODES",
    "UNDERFLOW", "AccumulationStats", "Format", "Policy", "Quantized", "Tensor", "add",
    "backend", "conv2d", "dequantize", "div", "dot", "fma", "format", "from_bits",
    "get_backend_name", "hw", "matmul", "mul", "nn", "no_grad", "optim", "quantize", "round",
    "set_backend", "sqrt", "sub", "sum", "tensor", "to_bits", "training",
]
