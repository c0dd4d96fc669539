"""Rounding to a format: the public ``round``."""

from __future__ import annotations

from fpsim._elementwise import elementwise
from fpsim.formats import Format


def round(
    x,
    fmt: Format | str,
    rounding: str = "nearest_even",
    *,
    subnormals: bool = True,
    saturate: bool = False,
    seed: int | None = None,
    random_bits: int | None = None,
    flags: bool = False,
):
    """``x`` rounded to ``fmt``; with ``flags=True``, ``(result, flags)``.

    See ``docs/semantics.md`` for every mode, overflow, ``subnormals=False``
    and stochastic rounding (``seed``, ``random_bits``).
    """
    return elementwise(
        "round_value", {"x": x}, fmt, rounding, subnormals=subnormals, saturate=saturate,
        flags=flags, seed=seed, random_bits=random_bits, arithmetic=False,
    )
