"""Matrix products and dot products with an emulated accumulator (see docs/accumulation.md)."""

from __future__ import annotations

import math

import numpy as np

from fpsim._checks import boolean
from fpsim._elementwise import stream_key
from fpsim._inputs import array_module, as_float_array, result_dtype
from fpsim.accumulation.blocks import block_matmul
from fpsim.accumulation.operands import check_float32_values, initial, layout, result_shape
from fpsim.accumulation.stats import AccumulationStats
from fpsim.backends import get_backend
from fpsim.formats import MAX_ARITH_MAN_BITS, Format, as_format
from fpsim.kernels.spec import Spec, make_spec
from fpsim.modes import STOCHASTIC
from fpsim.rounding import round as round_to

ORDERS = ("sequential", "pairwise", "any")
PRODUCTS = ("exact", "rounded")


def accumulation_spec(accum, rounding, subnormals, saturate, random_bits) -> tuple[Format, Spec]:
    fmt = as_format(accum)
    if fmt.man_bits > MAX_ARITH_MAN_BITS:
        raise ValueError(
            f"accumulators need man_bits <= {MAX_ARITH_MAN_BITS}; {fmt.name} has {fmt.man_bits}"
        )
    return fmt, make_spec(fmt, rounding, subnormals, saturate, random_bits)


def accumulate(
    a: np.ndarray,
    b: np.ndarray,
    *,
    accum,
    rounding: str,
    order: str,
    products: str,
    out,
    c,
    subnormals: bool,
    saturate: bool,
    seed,
    random_bits,
    stats: bool,
):
    """Sum over k of a[..., m, k] * b[..., k, n]: checks, layout and the backend call.

    The inputs' values are not checked here (``matmul`` and ``sum`` check what
    their semantics need).
    """
    if order not in ORDERS:
        raise ValueError(f"unknown order {order!r}; known orders: {', '.join(ORDERS)}")
    if products not in PRODUCTS:
        raise ValueError(f"unknown products {products!r}; known: {', '.join(PRODUCTS)}")
    fmt, spec = accumulation_spec(accum, rounding, subnormals, saturate, random_bits)
    stats = boolean(stats, "stats")
    out_fmt = None if out is None else as_format(out)
    dtype = result_dtype(a, b, (out_fmt or fmt).dtype)
    xp = array_module([a, b])
    blas = (
        order == "any" and fmt == as_format("fp32") and rounding == "nearest_even"
        and subnormals and not saturate and not stats and xp is np
    )
    if math.prod(result_shape(a, b)) == 0:
        # Nothing to add up (a zero-size batch, M or N): no loop runs, however long K.
        shape = result_shape(a, b)
        initial(c, shape, fmt, spec, xp)  # c must still be values of the accumulator
        result = xp.zeros(shape)
        counts = np.zeros(5, dtype=np.int64)
    elif blas:
        with np.errstate(all="ignore"):
            result = np.matmul(np.asarray(a, np.float32), np.asarray(b, np.float32))
            if c is not None:
                result = result + initial(c, result.shape, fmt, spec).astype(np.float32)
        counts = np.zeros(5, dtype=np.int64)
    else:
        shape, a2, b3 = layout(a, b, xp)
        c0 = initial(c, shape, fmt, spec, xp)
        rows, n = a2.shape[0], b3.shape[2]
        result = xp.empty((rows, n))
        key = stream_key(seed) if spec.mode == STOCHASTIC else None
        counts = get_backend().accumulate(
            a2, b3, c0.reshape(rows, n), result, spec, key=key,
            order="pairwise" if order == "pairwise" else "sequential",
            rounded=products == "rounded", has_c=c is not None, want_stats=stats,
        )
        result = result.reshape(shape)
    if out_fmt is not None:
        result = round_to(result.astype(np.float64, copy=False), out_fmt)
    result = result.astype(dtype, copy=False)
    return (result, AccumulationStats.from_counts(counts)) if stats else result


# matmul's arguments that say how additions round; a block-FMA model fixes them all.
ACCUMULATOR_OPTIONS = {"accum": "fp32", "rounding": "nearest_even", "order": "sequential",
                       "products": "exact", "subnormals": True, "saturate": False,
                       "seed": None, "random_bits": None}


def matmul(
    A,
    B,
    *,
    accum: Format | str | None = None,
    rounding: str | None = None,
    order: str | None = None,
    products: str | None = None,
    out: Format | str | None = None,
    c=None,
    model=None,
    subnormals: bool | None = None,
    saturate: bool | None = None,
    seed: int | None = None,
    random_bits: int | None = None,
    stats: bool = False,
):
    """A @ B with every addition rounded to ``accum`` (or a hardware block-FMA ``model``).

    A is (..., M, K), B (..., K, N); see docs/accumulation.md. Unless a ``model`` is
    given: ``accum="fp32"``, ``rounding="nearest_even"``, ``order="sequential"``,
    ``products="exact"``, ``subnormals=True``, ``saturate=False``; a model fixes all of
    them, so passing one with it is an error. With ``stats=True`` returns
    ``(result, AccumulationStats)``.
    """
    given = dict(accum=accum, rounding=rounding, order=order, products=products,
                 subnormals=subnormals, saturate=saturate, seed=seed, random_bits=random_bits)
    a = as_float_array(A, "A", device=True)
    b = as_float_array(B, "B", device=True)
    if a.ndim < 2 or b.ndim < 2:
        raise ValueError(
            f"matmul needs arrays of at least 2 dimensions, got A {a.shape} and B {b.shape} "
            "(use fpsim.dot for vectors)"
        )
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(f"inner dimensions differ: A {a.shape} and B {b.shape}")
    check_float32_values(a, "A")
    check_float32_values(b, "B")
    if model is not None:
        overridden = [k for k, v in given.items() if v is not None]
        if overridden:
            raise ValueError(
                f"model={getattr(model, 'name', model)!r} fixes how the products are added up; "
                f"{', '.join(overridden)} cannot be given with it"
            )
        return block_matmul(a, b, model, c=c, out=out, stats=stats)
    options = {k: ACCUMULATOR_OPTIONS[k] if v is None else v for k, v in given.items()}
    return accumulate(a, b, out=out, c=c, stats=stats, **options)


def dot(a, b, **options):
    """The dot product of 1-D ``a`` and ``b``: ``matmul(a[None, :], b[:, None])[0, 0]``."""
    x = as_float_array(a, "a", device=True)
    y = as_float_array(b, "b", device=True)
    if x.ndim != 1 or y.ndim != 1 or x.shape != y.shape:
        raise ValueError(f"dot needs two 1-D arrays of equal length, got {x.shape} and {y.shape}")
    if "c" in options and options["c"] is not None:
        options["c"] = as_float_array(options["c"], "c", device=True).reshape(1, 1)
    result = matmul(x[None, :], y[:, None], **options)
    if options.get("stats"):
        return result[0][0, 0], result[1]
    return result[0, 0]
