"""Block quantization: the OCP MX schemes (``quantize``, ``dequantize``, ``Quantized``).

- ``schemes``: the schemes by name (element format, scale format, block size).
- ``scale_rules``: the rules that pick a block's shared scale from its amax.
- ``quantized``: ``quantize``, ``dequantize`` and the ``Quantized`` they exchange.
"""

from fpsim.quantize.quantized import Quantized, dequantize, quantize
from fpsim.quantize.scale_rules import SCALE_RULES
from fpsim.quantize.schemes import SCHEMES, Scheme, scheme

__all__ = ["SCALE_RULES", "SCHEMES", "Quantized", "Scheme", "dequantize", "quantize", "scheme"]
