"""Stochastic rounding as NVIDIA's ``cvt.rs`` instructions map their random bits.

``fpsim.round(..., "stochastic")`` rounds away from zero when a draw ``R`` of ``r`` random
bits is below the top ``r`` discarded bits ``g`` (``R < g``: probability ``g / 2**r``).
The PTX ISA's ``.rs`` rounding adds the random bits to the discarded bits and rounds away
on the carry out (``g + R >= 2**r``: ``R >= 2**r - g``): the same probability, another
map from bits to outcome. ``cvt_rs`` rounds as the instruction does, with the random bits
given or drawn from fpsim's stream, where the PTX ISA's text fixes the bits: binary32 to
bf16 (``cvt.rs.bf16x2.f32``, 16 random bits per value) and to fp16 for results in fp16's
normal range (``cvt.rs.f16x2.f32``, 13 bits). ``docs/semantics.md`` states both maps.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from fpsim._elementwise import stream_key
from fpsim._inputs import as_float_array
from fpsim.backends import array_kernels
from fpsim.formats import Format, as_format
from fpsim.kernels.spec import make_spec

__all__ = ["CVT_RS_BITS", "cvt_rs"]

CVT_RS_BITS = {"bf16": 16, "fp16": 13}
"""The random bits ``cvt.rs`` adds to each value, by destination format: the binary32
fraction bits the destination drops (for fp16, in its normal range)."""


def cvt_rs(x: Any, fmt: str | Format, rbits: Any = None, *, seed: int | None = None,
           saturate: bool = False) -> npt.NDArray[np.float64]:
    """Round binary32 values to bf16 or fp16 as ``cvt.rs`` does: the random bits added
    to the discarded bits, away from zero on the carry out.

    Parameters
    ----------
    x : array_like
        Binary32 values (``cvt.rs`` converts ``.f32`` operands).
    fmt : str or Format
        ``"bf16"`` (``cvt.rs.bf16x2.f32``) or ``"fp16"`` (``cvt.rs.f16x2.f32``).
    rbits : array_like of int, optional
        Each value's random bits, as the instruction takes them from its ``rbits``
        operand: 16 bits for bf16 (``rbits >> 16`` for operand ``a``, ``rbits & 0xFFFF``
        for ``b``), 13 for fp16 (``(rbits >> 16) & 0x1FFF`` and ``rbits & 0x1FFF``);
        broadcast against ``x``. None: drawn from fpsim's stream (``seed``).
    seed : int, optional
        Without ``rbits``: the stream's key, as ``fpsim.round`` takes it; each value's bits
        are the top ``CVT_RS_BITS[fmt]`` bits of its draw (C-order index). None: fresh
        entropy.
    saturate : bool, default False
        ``.satfinite``: the largest finite value instead of an infinity.

    Returns
    -------
    numpy.ndarray of float64
        The rounded values, in the shape of ``x`` broadcast against ``rbits``.

    Raises
    ------
    ValueError
        A format other than bf16 and fp16; a value of ``x`` that is not a binary32
        value; random bits out of range or not integers; for fp16, a nonzero value whose
        result would lie below fp16's smallest normal (the PTX ISA does not say in text
        which of the discarded bits the 13 random bits meet there: fpsim does not guess).

    Examples
    --------
    >>> import numpy as np
    >>> from fpsim.stochastic import cvt_rs
    >>> x = np.float32(1 + 2**-8 + 2**-9)  # discarded bits 0xC000 of 0x10000 below 1+2**-7
    >>> cvt_rs([x, x], "bf16", rbits=[0x3FFF, 0x4000]).tolist()  # no carry, carry
    [1.0, 1.0078125]
    """
    target = as_format(fmt)
    names = {as_format(name): name for name in CVT_RS_BITS}
    if target not in names:
        raise ValueError(f"cvt_rs converts to {' or '.join(CVT_RS_BITS)}, got {target.name}")
    r = CVT_RS_BITS[names[target]]
    values = np.asarray(as_float_array(x, "x"), np.float64)
    with np.errstate(over="ignore"):
        narrowed = values.astype(np.float32).astype(np.float64)
    if not np.array_equal(narrowed, values, equal_nan=True):
        bad = int(np.flatnonzero((narrowed != values) & ~np.isnan(values))[0])
        raise ValueError(f"x: {values.flat[bad]!r} (flat index {bad}) is not a binary32 value; "
                         "cvt.rs converts .f32 operands")
    spec = make_spec(target, "stochastic", True, saturate, r)
    if rbits is None:
        key = np.uint64(stream_key(seed))
        draw = array_kernels()["random53"](key, np.arange(values.size, dtype=np.int64))
        bits = np.asarray(draw).reshape(values.shape) >> (53 - r)
    else:
        bits = np.asarray(rbits)
        if bits.dtype.kind not in "iu" or (bits.size and (bits.min() < 0 or bits.max() >> r)):
            raise ValueError(f"rbits: integers in 0..2**{r}-1 ({names[target]} takes {r} random "
                             f"bits per value), got {bits!r}")
    values, bits = np.broadcast_arrays(values, bits.astype(np.int64))
    tiny = (values != 0) & (np.abs(values) < target.smallest_normal) & (target.emin > -126)
    if tiny.any():
        raise ValueError(f"x: {values[tiny].flat[0]!r} would round below {target.name}'s "
                         "smallest normal, where the PTX ISA's text does not place cvt.rs's "
                         "random bits; fpsim does not guess the layout")
    # The carry of g + R out of r bits is R >= 2**r - g, that is (2**r - 1 - R) < g: the
    # rounding primitive's stochastic test on the complemented bits.
    complement = ((1 << r) - 1 - bits) << (53 - r)
    rounded, _ = array_kernels()["round_value"](values, complement, spec, False)
    return np.asarray(rounded, np.float64).reshape(values.shape)
