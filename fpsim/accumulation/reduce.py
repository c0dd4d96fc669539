"""Sums with an emulated accumulator."""

from __future__ import annotations

import math

import numpy as np

from fpsim._inputs import array_module, as_float_array
from fpsim.accumulation.matmul import accumulate
from fpsim.formats import Format


def sum(
    x,
    axis: int | None = None,
    *,
    accum: Format | str = "fp32",
    rounding: str = "nearest_even",
    order: str = "sequential",
    c=None,
    out: Format | str | None = None,
    subnormals: bool = True,
    saturate: bool = False,
    seed: int | None = None,
    random_bits: int | None = None,
    stats: bool = False,
):
    """The sum of ``x`` along ``axis`` (all elements, in C order, for None), accumulated
    in ``accum``: sequentially (each term added exactly, then rounded) or pairwise
    (terms rounded to ``accum`` first). See docs/accumulation.md."""
    arr = as_float_array(x, "x", device=True)
    xp = array_module([arr])
    if axis is None:
        terms = arr.reshape(1, -1)
        shape: tuple[int, ...] = ()
    else:
        if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
            raise ValueError(f"axis must be an integer or None, got {axis!r}")
        if not -arr.ndim <= axis < max(arr.ndim, 1):
            raise ValueError(f"axis {axis} is out of range for an array of shape {arr.shape}")
        moved = xp.moveaxis(arr, axis, -1) if arr.ndim else arr.reshape(1)
        shape = moved.shape[:-1]
        terms = moved.reshape(math.prod(shape), moved.shape[-1])
    if c is not None:
        c = as_float_array(c, "c", device=True)
        try:
            c = xp.broadcast_to(xp.asarray(c), shape)
        except ValueError:
            raise ValueError(f"c of shape {c.shape} does not broadcast to {shape}") from None
        c = c.reshape(-1, 1)
    # Each term is multiplied by one, exactly: a sum is a product with a vector of ones
    # (a broadcast view: nothing the size of K is made when there is nothing to sum; in
    # float16, which widens no result: the dtype follows x and the accumulator).
    ones = xp.broadcast_to(xp.ones((1, 1), dtype=np.float16), (terms.shape[1], 1))
    result = accumulate(
        terms, ones, accum=accum, rounding=rounding, order=order, products="exact", out=out,
        c=c, subnormals=subnormals, saturate=saturate, seed=seed, random_bits=random_bits,
        stats=stats,
    )
    value, counts = result if stats else (result, None)
    value = value.reshape(shape)
    value = value[()] if value.ndim == 0 else value
    return (value, counts) if stats else value
