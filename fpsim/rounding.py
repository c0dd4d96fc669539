"""Rounding to a format: the public ``round``."""

from __future__ import annotations

import numpy as np

from fpsim._elementwise import elementwise
from fpsim.bits import format_of_dtype
from fpsim.formats import Format, as_format


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
    dtype=None,
):
    """``x`` rounded to ``fmt``; with ``flags=True``, ``(result, flags)``.

    See ``docs/semantics.md`` for every mode, overflow, ``subnormals=False``
    and stochastic rounding (``seed``, ``random_bits``). ``dtype``: return the
    values in an array dtype that holds exactly ``fmt``'s values (``np.float16``
    for fp16, ``ml_dtypes.bfloat16`` for bf16, ``ml_dtypes.float8_e4m3fn`` for
    fp8_e4m3, ...); by default the dtype follows docs/semantics.md's rule.
    """
    result = elementwise(
        "round_value", {"x": x}, fmt, rounding, subnormals=subnormals, saturate=saturate,
        flags=flags, seed=seed, random_bits=random_bits, arithmetic=False,
    )
    if dtype is None:
        return result
    value, flag = result if flags else (result, None)
    value = np.asarray(value).astype(_matching(dtype, as_format(fmt)))
    value = value[()] if value.ndim == 0 else value
    return (value, flag) if flags else value


def _matching(dtype, fmt: Format) -> np.dtype:
    """``dtype`` if it holds exactly the values of ``fmt``; ValueError otherwise."""
    try:
        target = np.dtype(dtype)
    except TypeError:
        raise ValueError(f"dtype: not a NumPy dtype: {dtype!r}") from None
    held = format_of_dtype(target)
    if held != fmt:
        holds = f"holds {held.name}" if held is not None else "holds no fpsim format"
        raise ValueError(f"dtype {target} {holds}, not {fmt.name}: the result of rounding to "
                         f"{fmt.name} goes into a dtype of exactly that format")
    return target
