"""Block quantization: MX, NVFP4, blockwise and current-scaled FP8 (``quantize``,
``dequantize``, ``Quantized``).

- ``schemes``: the schemes by name (element format, scale format, block size).
- ``scale_rules``: the rules that pick a block's shared scale from its amax.
- ``blocks``: the layout (blocks along an axis, or tiles of the last two axes).
- ``mx``, ``nvfp4``, ``blockwise``, ``current``: each family's scales and scaled elements.
- ``quantized``: ``quantize``, ``dequantize`` and the ``Quantized`` they exchange.
- ``telemetry``: what a quantization saturated, flushed and made subnormal.
- ``hadamard``: the NVFP4 recipe's random Hadamard transform.
- ``product``: ``fpsim.matmul`` of two ``Quantized`` (registered with it here).
"""

from fpsim.accumulation.matmul import register_product
from fpsim.quantize.hadamard import hadamard_matrix, hadamard_transform, random_signs
from fpsim.quantize.product import quantized_matmul
from fpsim.quantize.quantized import Quantized, dequantize, quantize
from fpsim.quantize.scale_rules import SCALE_RULES
from fpsim.quantize.schemes import SCHEMES, Scheme, scheme
from fpsim.quantize.telemetry import QuantizationStats

register_product(Quantized, quantized_matmul)

__all__ = ["SCALE_RULES", "SCHEMES", "QuantizationStats", "Quantized", "Scheme", "dequantize",
           "hadamard_matrix", "hadamard_transform", "quantize", "random_signs", "scheme"]
