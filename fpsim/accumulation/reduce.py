"""Sums with an emulated accumulator."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Literal, overload

import numpy as np

from fpsim._inputs import array_module, as_float_array
from fpsim.accumulation.matmul import accumulate
from fpsim.accumulation.stats import AccumulationStats

if TYPE_CHECKING:
    from fpsim._typing import FloatArray, FloatScalar, FormatLike, Scalar, Values

# numpy.exceptions.AxisError (numpy.AxisError before NumPy 1.25): a ValueError and an IndexError.
AXIS_ERROR: type[ValueError] = getattr(np, "exceptions", np).AxisError


@overload
def sum(x: Values, axis: None = ..., *, accum: FormatLike = ..., rounding: str = ...,
        order: str = ..., c: Values | Scalar | None = ..., out: FormatLike | None = ...,
        subnormals: bool = ..., saturate: bool = ..., seed: int | None = ...,
        random_bits: int | None = ...,
        stats: Literal[False] = ...) -> FloatScalar: ...
@overload
def sum(x: Values, axis: int, *, accum: FormatLike = ..., rounding: str = ...,
        order: str = ..., c: Values | Scalar | None = ..., out: FormatLike | None = ...,
        subnormals: bool = ..., saturate: bool = ..., seed: int | None = ...,
        random_bits: int | None = ...,
        stats: Literal[False] = ...) -> FloatArray: ...
@overload
def sum(x: Values, axis: None = ..., *, accum: FormatLike = ..., rounding: str = ...,
        order: str = ..., c: Values | Scalar | None = ..., out: FormatLike | None = ...,
        subnormals: bool = ..., saturate: bool = ..., seed: int | None = ...,
        random_bits: int | None = ...,
        stats: Literal[True]) -> tuple[FloatScalar, AccumulationStats]: ...
@overload
def sum(x: Values, axis: int, *, accum: FormatLike = ..., rounding: str = ...,
        order: str = ..., c: Values | Scalar | None = ..., out: FormatLike | None = ...,
        subnormals: bool = ..., saturate: bool = ..., seed: int | None = ...,
        random_bits: int | None = ...,
        stats: Literal[True]) -> tuple[FloatArray, AccumulationStats]: ...
@overload
def sum(x: Values, axis: int | None = ..., *, accum: FormatLike = ..., rounding: str = ...,
        order: str = ..., c: Values | Scalar | None = ..., out: FormatLike | None = ...,
        subnormals: bool = ..., saturate: bool = ..., seed: int | None = ...,
        random_bits: int | None = ...,
        stats: bool = ...) -> Any: ...
def sum(
    x: Values,
    axis: int | None = None,
    *,
    accum: FormatLike = "fp32",
    rounding: str = "nearest_even",
    order: str = "sequential",
    c: Values | Scalar | None = None,
    out: FormatLike | None = None,
    subnormals: bool = True,
    saturate: bool = False,
    seed: int | None = None,
    random_bits: int | None = None,
    stats: bool = False,
) -> Any:
    """Sum with an emulated accumulator: every addition rounded to ``accum``.

    The sum of ``x`` along ``axis`` (of all elements, in C order, for None):
    sequentially (``c``, then each term added exactly and the sum rounded) or
    pairwise (terms rounded to ``accum`` first, then added as a balanced tree).
    ``docs/accumulation.md`` states the order to the bit.

    Parameters
    ----------
    x : array_like
        The terms: float32 values (fp32, tf32, bf16, fp16, fp8 all are).
    axis : int or None, default None
        The axis to sum over; None sums every element.
    accum : Format or str, default "fp32"
        The accumulator's format (at most 29 fraction bits).
    rounding : str, default "nearest_even"
        How each addition rounds: one of ``fpsim.ROUNDING_MODES``.
    order : {"sequential", "pairwise", "any"}, default "sequential"
        The order of the additions (``"any"``: whatever is fastest).
    c : array_like, optional
        The initial accumulator, broadcast to the result's shape: values of
        ``accum`` (default +0).
    out : Format or str, optional
        Round the sums to this format at the end.
    subnormals : bool, default True
        False: subnormal sums flush to zero.
    saturate : bool, default False
        True: sums that would overflow are the largest finite value instead.
    seed : int, optional
        Stochastic rounding only: the key (0..2**64-1) of the random stream.
    random_bits : int, optional
        Stochastic rounding only: random bits per draw (1..53; default 53).
    stats : bool, default False
        True: also return the counts of what the additions did.

    Returns
    -------
    numpy.ndarray or numpy scalar
        The sums: ``x``'s shape without ``axis`` (a NumPy scalar for
        ``axis=None``); the dtype is NumPy's promotion of ``x``'s dtype and the
        dtype of ``accum`` (or ``out``). A sum over an empty axis is ``c`` or +0.
    stats : AccumulationStats
        Only with ``stats=True``, as ``(result, stats)``.

    Raises
    ------
    numpy.exceptions.AxisError
        An ``axis`` out of range, as NumPy raises (any axis of a 0-d array; a
        ``ValueError`` too).
    ValueError
        An ``axis`` that is not an integer; terms that are not float32 values;
        a ``c`` that does not broadcast or is not of ``accum``; an unknown
        format, mode or order.

    Examples
    --------
    >>> import numpy as np
    >>> import fpsim
    >>> float(fpsim.sum(np.ones(4096), accum="fp16"))
    2048.0
    >>> float(fpsim.sum(np.ones(4096), accum="fp16", order="pairwise"))
    4096.0
    >>> total, stats = fpsim.sum(np.ones(4096), accum="fp16", stats=True)
    >>> stats.fraction("absorbed")
    0.5
    >>> fpsim.sum([[1.0, 2.0], [3.0, 4.0]], axis=0).tolist()
    [4.0, 6.0]
    """
    arr = as_float_array(x, "x", device=True)
    xp = array_module([arr])
    if axis is None:
        terms = arr.reshape(1, -1)
        shape: tuple[int, ...] = ()
    else:
        if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
            raise ValueError(f"axis must be an integer or None, got {axis!r}")
        if not -arr.ndim <= axis < arr.ndim:  # a 0-d array has no axis, as in np.mean
            raise AXIS_ERROR(int(axis), arr.ndim)
        moved = xp.moveaxis(arr, axis, -1)
        shape = moved.shape[:-1]
        terms = moved.reshape(math.prod(shape), moved.shape[-1])
    start: Any = None  # c as a column, one row per sum
    if c is not None:
        start = as_float_array(c, "c", device=True)
        try:
            start = xp.broadcast_to(xp.asarray(start), shape)
        except ValueError:
            raise ValueError(f"c of shape {start.shape} does not broadcast to {shape}") from None
        start = start.reshape(-1, 1)
    # Each term is multiplied by one, exactly: a sum is a product with a vector of ones
    # (a broadcast view: nothing the size of K is made when there is nothing to sum; in
    # float16, which widens no result: the dtype follows x and the accumulator).
    ones = xp.broadcast_to(xp.ones((1, 1), dtype=np.float16), (terms.shape[1], 1))
    result = accumulate(
        terms, ones, accum=accum, rounding=rounding, order=order, products="exact", out=out,
        c=start, subnormals=subnormals, saturate=saturate, seed=seed, random_bits=random_bits,
        stats=stats,
    )
    value, counts = result if stats else (result, None)
    value = value.reshape(shape)
    value = value[()] if value.ndim == 0 else value
    return (value, counts) if stats else value
