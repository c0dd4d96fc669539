"""The rules that give an MX block its shared scale exponent from the block's amax.

One kernel computes them all (``fpsim.kernels.blockscale.mx_exponent``); a rule is its
code there. With ``emax`` the element format's largest exponent and ``max`` its largest
value (``docs/block-scaled.md``):

- ``ocp``: ``floor(log2(amax)) - emax`` (OCP MX v1.0 section 6.3; gfloat's and torchao's
  ``FLOOR``); the block's largest element may exceed the element format's range and
  saturate.
- ``ceil``: ``ceil(log2(amax)) - emax`` (torchao's ``CEIL``).
- ``torchao_even``: amax rounded to the element format's precision (ties away from zero,
  as torchao adds half a unit to the float32 encoding), then the OCP rule (torchao's
  ``EVEN``).
- ``transformer_engine``: in binary32, ``descale = amax * (1 / max)`` (each rounded to
  nearest even), rounded up to a power of two (``cvt.rp.satfinite.ue8m0x2.f32``):
  TransformerEngine's and cuBLAS's rule (torchao's ``RCEIL``).
"""

from __future__ import annotations

from fpsim.kernels.blockscale import CEIL, OCP, TORCHAO_EVEN, TRANSFORMER_ENGINE

__all__ = ["SCALE_RULES"]

SCALE_RULES: dict[str, int] = {
    "ocp": OCP, "ceil": CEIL, "torchao_even": TORCHAO_EVEN,
    "transformer_engine": TRANSFORMER_ENGINE,
}
"""The MX scale rules by name, each with its code in the block-scaling kernel."""
