"""The rules that give an MX block its shared scale exponent from the block's amax.

Each rule maps the magnitudes ``amax`` (float64, finite, >= 0) to integer exponents s;
the block's scale is ``2**s`` once clamped to E8M0's range (``docs/block-scaled.md``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from fpsim.formats import Format

__all__ = ["SCALE_RULES", "shared_exponents"]

Exponents = npt.NDArray[np.int64]
_NAN_SCALE = np.iinfo(np.int64).max  # a rule's answer for a block whose scale is NaN
_NO_SCALE = -(1 << 40)  # below every format's range: clamped to its smallest scale


def _floor_log2(amax: npt.NDArray[np.float64]) -> Exponents:
    """floor(log2(amax)) for amax > 0, exactly (frexp: amax = m * 2**e, 0.5 <= m < 1)."""
    _, e = np.frexp(amax)
    return e.astype(np.int64) - 1


def _ceil_log2(amax: npt.NDArray[np.float64]) -> Exponents:
    """ceil(log2(amax)) for amax > 0, exactly."""
    m, e = np.frexp(amax)
    out: Exponents = e.astype(np.int64) - (m == 0.5).astype(np.int64)
    return out


def ocp(amax: npt.NDArray[np.float64], element: Format) -> Exponents:
    """OCP MX v1.0 (section 6.3): ``floor(log2(amax)) - emax``; also gfloat's and torchao's
    ``FLOOR``. The block's largest element may exceed the element format's range and
    saturate."""
    return _floor_log2(amax) - element.emax


def ceil(amax: npt.NDArray[np.float64], element: Format) -> Exponents:
    """torchao's ``CEIL``: ``ceil(log2(amax)) - emax``."""
    return _ceil_log2(amax) - element.emax


def torchao_even(amax: npt.NDArray[np.float64], element: Format) -> Exponents:
    """torchao's ``EVEN``: amax rounded to the element format's precision (ties away from
    zero, as torchao adds half a unit to the float32 encoding), then the OCP rule: no
    block's largest element rounds past the top binade."""
    m, e = np.frexp(amax)  # significand 2m in [1, 2)
    carries = 2 * m >= 2.0 - 2.0 ** -(element.man_bits + 1)
    return e.astype(np.int64) - 1 + carries - element.emax


def transformer_engine(amax: npt.NDArray[np.float64], element: Format) -> Exponents:
    """TransformerEngine's and cuBLAS's MX rule (torchao's ``RCEIL``): in binary32,
    ``descale = amax * (1 / max)`` (each rounded to nearest even), and the scale is
    ``descale`` rounded up to a power of two (``cvt.rp.satfinite.ue8m0x2.f32``)."""
    with np.errstate(over="ignore"):
        a32 = amax.astype(np.float32)
    descale = (a32 * np.float32(1.0 / element.max)).astype(np.float64)
    out = np.where(descale > 0, _ceil_log2(np.where(descale > 0, descale, 1.0)), _NO_SCALE)
    return np.where(np.isfinite(descale), out, _NAN_SCALE)


SCALE_RULES: dict[str, Callable[[npt.NDArray[np.float64], Format], Exponents]] = {
    "ocp": ocp, "ceil": ceil, "torchao_even": torchao_even,
    "transformer_engine": transformer_engine,
}
"""The MX scale rules by name."""


def shared_exponents(amax: npt.NDArray[np.float64], element: Format, rule: str,
                     low: int, high: int) -> tuple[Exponents, npt.NDArray[np.bool_]]:
    """Each block's scale exponent under ``rule``, clamped to ``low..high``, and which
    blocks have a NaN scale (a NaN or an infinity in the block; or, for the
    transformer_engine rule, an amax beyond binary32's range). A zero block gets ``low``."""
    finite = np.isfinite(amax)
    positive = finite & (amax > 0)
    s = SCALE_RULES[rule](np.where(positive, amax, 1.0), element)
    nan = ~finite | (s == _NAN_SCALE)
    s = np.where(positive & ~nan, np.clip(s, low, high), low)
    return s, nan
