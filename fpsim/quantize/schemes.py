"""The block-scaling schemes by name: element format, scale format, block size, scale rule."""

from __future__ import annotations

from dataclasses import dataclass

from fpsim.formats import PRESETS, Format
from fpsim.quantize.scale_rules import SCALE_RULES

__all__ = ["SCHEMES", "Scheme", "scheme"]


@dataclass(frozen=True)
class Scheme:
    """A block-scaling scheme: blocks of ``block`` consecutive elements along an axis share
    one scale of ``scale_format``; each element is stored in ``element``.

    Attributes
    ----------
    name : str
        The scheme's name (``from fpsim.quantize import SCHEMES``).
    element : Format
        The elements' format.
    scale_format : Format
        The scales' format (E8M0 for the MX schemes: a power of two).
    block : int
        Elements per block (0: the whole axis, per_row; or the whole tensor, per_tensor).
    scale_rule : str
        The default rule that picks a block's scale (``from fpsim.quantize import SCALE_RULES``).

    Examples
    --------
    >>> from fpsim.quantize import scheme
    >>> s = scheme("mxfp4_e2m1")
    >>> s.element.name, s.scale_format.name, s.block, s.scale_rule
    ('fp4_e2m1', 'e8m0', 32, 'ocp')
    """

    name: str
    element: Format
    scale_format: Format
    block: int
    scale_rule: str
    rules: tuple[str, ...]
    kind: str
    rows: int = 1


_CURRENT = ("transformer_engine", "transformer_engine_pow2")


def _mx(name: str, element: str) -> Scheme:
    return Scheme(name, PRESETS[element], PRESETS["e8m0"], 32, "ocp", tuple(SCALE_RULES), "mx")


#: The schemes by name: the OCP MX v1.0 formats (blocks of 32, E8M0 scales), NVFP4
#: (blocks of 16, or 16x16 tiles, UE4M3 scales, a binary32 scale for the tensor) and
#: DeepSeek-V3's blockwise FP8 in 1x128 blocks and 128x128 tiles (binary32 scales), and
#: FP8 current scaling per tensor and per row (binary32 scales).
SCHEMES: dict[str, Scheme] = {
    s.name: s
    for s in (
        _mx("mxfp8_e4m3", "fp8_e4m3"),
        _mx("mxfp8_e5m2", "fp8_e5m2"),
        _mx("mxfp6_e2m3", "fp6_e2m3"),
        _mx("mxfp6_e3m2", "fp6_e3m2"),
        _mx("mxfp4_e2m1", "fp4_e2m1"),
        Scheme("nvfp4", PRESETS["fp4_e2m1"], PRESETS["ue4m3"], 16, "transformer_engine",
               ("transformer_engine",), "nvfp4"),
        Scheme("nvfp4_16x16", PRESETS["fp4_e2m1"], PRESETS["ue4m3"], 16, "transformer_engine",
               ("transformer_engine",), "nvfp4", rows=16),
        Scheme("fp8_block1x128", PRESETS["fp8_e4m3"], PRESETS["fp32"], 128, "deepseek_v3",
               ("deepseek_v3",), "blockwise"),
        Scheme("fp8_block128x128", PRESETS["fp8_e4m3"], PRESETS["fp32"], 128, "deepseek_v3",
               ("deepseek_v3",), "blockwise", rows=128),
        Scheme("per_tensor", PRESETS["fp8_e4m3"], PRESETS["fp32"], 0, "transformer_engine",
               _CURRENT, "current"),
        Scheme("per_row", PRESETS["fp8_e4m3"], PRESETS["fp32"], 0, "transformer_engine",
               _CURRENT, "current"),
    )
}


def scheme(name: str | Scheme) -> Scheme:
    """Look a block-scaling scheme up by name.

    Parameters
    ----------
    name : str or Scheme
        ``"mxfp8_e4m3"``, ``"mxfp8_e5m2"``, ``"mxfp6_e2m3"``, ``"mxfp6_e3m2"``,
        ``"mxfp4_e2m1"``, ``"nvfp4"``, ``"nvfp4_16x16"``, ``"fp8_block1x128"``,
        ``"fp8_block128x128"``, ``"per_tensor"`` or ``"per_row"`` (case is ignored), or a
        ``Scheme``, returned as it is.

    Returns
    -------
    Scheme

    Raises
    ------
    ValueError
        An unknown name (the message lists the known ones).

    Examples
    --------
    >>> from fpsim.quantize import scheme
    >>> scheme("MXFP8_E4M3").element.name
    'fp8_e4m3'
    """
    if isinstance(name, Scheme):
        return name
    if isinstance(name, str) and name.strip().lower() in SCHEMES:
        return SCHEMES[name.strip().lower()]
    raise ValueError(f"unknown scheme {name!r}; known schemes: {', '.join(SCHEMES)}")
