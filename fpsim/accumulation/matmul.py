"""Matrix products and dot products with an emulated accumulator (see docs/accumulation.md)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, overload

import numpy as np

from fpsim._checks import boolean
from fpsim._device import binary32, binary32_blas, binary64
from fpsim._elementwise import random_key
from fpsim._inputs import array_module, as_dtype, as_float_array, result_dtype
from fpsim._workspace import scratch
from fpsim.accumulation.blocks import block_matmul
from fpsim.accumulation.operands import check_float32_values, initial, layout, result_shape
from fpsim.accumulation.stats import AccumulationStats
from fpsim.backends import get_backend
from fpsim.formats import MAX_ARITH_MAN_BITS, Format, as_format
from fpsim.kernels.spec import Spec, make_spec
from fpsim.rounding import round as round_to

if TYPE_CHECKING:
    from fpsim._typing import FloatArray, FloatScalar, FormatLike, Scalar, Values
    from fpsim.accumulation.blocks import BlockFMA

ORDERS = ("sequential", "pairwise", "any")
PRODUCTS = ("exact", "rounded")


def accumulation_spec(accum: FormatLike, rounding: str, subnormals: bool, saturate: bool,
                      random_bits: int | None) -> tuple[Format, Spec]:
    fmt = as_format(accum)
    if fmt.man_bits > MAX_ARITH_MAN_BITS:
        raise ValueError(
            f"accumulators need man_bits <= {MAX_ARITH_MAN_BITS}; {fmt.name} has {fmt.man_bits}"
        )
    return fmt, make_spec(fmt, rounding, subnormals, saturate, random_bits)


def blas_sum(fmt: Format, rounding: str, order: str, subnormals: bool, saturate: bool,
             stats: bool, xp: Any) -> bool:
    """Whether ``accumulate`` adds up float32 operands' products in one BLAS call: order
    "any" into binary32 to nearest even, subnormals kept, no saturation, no stats, on a
    BLAS that adds in IEEE binary32 (``binary32_blas``)."""
    return (order == "any" and fmt == as_format("fp32") and rounding == "nearest_even"
            and subnormals and not saturate and not stats and binary32_blas(xp))


def accumulate(
    a: Any,
    b: Any,
    *,
    accum: FormatLike,
    rounding: str,
    order: str,
    products: str,
    out: FormatLike | None,
    c: Any,
    subnormals: bool,
    saturate: bool,
    seed: int | None,
    random_bits: int | None,
    stats: bool,
    narrowed: tuple[Any, Any] | None = None,
) -> Any:
    """Sum over k of a[..., m, k] * b[..., k, n]: checks, layout and the backend call.

    The inputs' values are not checked here (``matmul`` and ``sum`` check what
    their semantics need). ``narrowed``: a and b as float32 arrays, when the caller
    has them.
    """
    if order not in ORDERS:
        raise ValueError(f"unknown order {order!r}; known orders: {', '.join(ORDERS)}")
    if products not in PRODUCTS:
        raise ValueError(f"unknown products {products!r}; known: {', '.join(PRODUCTS)}")
    fmt, spec = accumulation_spec(accum, rounding, subnormals, saturate, random_bits)
    key = random_key(seed, spec.mode)  # a seed is checked (and warned about) in every mode
    stats = boolean(stats, "stats")
    out_fmt = None if out is None else as_format(out)
    dtype = result_dtype(a, b, (out_fmt or fmt).dtype)
    xp = array_module([a, b])
    blas = blas_sum(fmt, rounding, order, subnormals, saturate, stats, xp)
    shape = result_shape(a, b)
    if math.prod(shape) == 0:
        # Nothing to add up (a zero-size batch, M or N): no loop runs, however long K.
        initial(c, shape, fmt, spec, xp)  # c must still be values of the accumulator
        result = xp.zeros(shape)
        counts = np.zeros(5, dtype=np.int64)
    elif blas:
        with np.errstate(all="ignore"):
            a32, b32 = narrowed or (binary32(xp.asarray(a)), binary32(xp.asarray(b)))
            # A product that is copied into a new array below can be a scratch array.
            host_scratch = dtype != np.float32 and xp is np
            result = xp.matmul(a32, b32, out=scratch("product", shape, np.float32)
                               if host_scratch else None)
            if c is not None:
                # One binary32 addition: the binary64 sum rounded to binary32 (innocuous
                # double rounding, 53 >= 2 * 24 + 2), not CuPy's (-ftz=true: it flushes).
                c0 = initial(c, result.shape, fmt, spec, xp)
                result = round_to(binary64(result) + binary64(c0), fmt)
        counts = np.zeros(5, dtype=np.int64)
    else:
        shape, a2, b3 = layout(a, b, xp)
        c0 = initial(c, shape, fmt, spec, xp)
        rows, n = a2.shape[0], b3.shape[2]
        result = xp.empty((rows, n))
        counts = get_backend().accumulate(
            a2, b3, c0.reshape(rows, n), result, spec, key=key,
            order="pairwise" if order == "pairwise" else "sequential",
            rounded=products == "rounded", has_c=c is not None, want_stats=stats,
        )
        result = result.reshape(shape)
    if out_fmt is not None:
        result = round_to(binary64(result), out_fmt)
    result = as_dtype(result, dtype)
    return (result, AccumulationStats.from_counts(counts)) if stats else result


# Operand types that form their own products, and the function that forms them
# (``register_product``: fpsim.quantize registers its Quantized).
OPERAND_PRODUCTS: dict[type, Callable[..., Any]] = {}


def register_product(kind: type, product: Callable[..., Any]) -> None:
    """Let ``fpsim.matmul`` hand a product with an operand of type ``kind`` to ``product``,
    called with both operands and ``matmul``'s keyword arguments."""
    OPERAND_PRODUCTS[kind] = product


# matmul's arguments that say how additions round; a block-FMA model fixes them all.
ACCUMULATOR_OPTIONS = {"accum": "fp32", "rounding": "nearest_even", "order": "sequential",
                       "products": "exact", "subnormals": True, "saturate": False,
                       "seed": None, "random_bits": None}


@overload
def matmul(A: Values, B: Values, *, accum: FormatLike | None = ...,
           rounding: str | None = ..., order: str | None = ..., products: str | None = ...,
           out: FormatLike | None = ..., c: Values | Scalar | None = ...,
           model: BlockFMA | None = ..., subnormals: bool | None = ...,
           saturate: bool | None = ..., seed: int | None = ..., random_bits: int | None = ...,
           stats: Literal[False] = ...) -> FloatArray: ...
@overload
def matmul(A: Values, B: Values, *, accum: FormatLike | None = ...,
           rounding: str | None = ..., order: str | None = ..., products: str | None = ...,
           out: FormatLike | None = ..., c: Values | Scalar | None = ...,
           model: BlockFMA | None = ..., subnormals: bool | None = ...,
           saturate: bool | None = ..., seed: int | None = ..., random_bits: int | None = ...,
           stats: Literal[True]) -> tuple[FloatArray, AccumulationStats]: ...
@overload
def matmul(A: Values, B: Values, *, accum: FormatLike | None = ...,
           rounding: str | None = ..., order: str | None = ..., products: str | None = ...,
           out: FormatLike | None = ..., c: Values | Scalar | None = ...,
           model: BlockFMA | None = ..., subnormals: bool | None = ...,
           saturate: bool | None = ..., seed: int | None = ..., random_bits: int | None = ...,
           stats: bool = ...) -> FloatArray | tuple[FloatArray, AccumulationStats]: ...
def matmul(
    A: Values,
    B: Values,
    *,
    accum: FormatLike | None = None,
    rounding: str | None = None,
    order: str | None = None,
    products: str | None = None,
    out: FormatLike | None = None,
    c: Values | Scalar | None = None,
    model: BlockFMA | None = None,
    subnormals: bool | None = None,
    saturate: bool | None = None,
    seed: int | None = None,
    random_bits: int | None = None,
    stats: bool = False,
) -> Any:
    """Matrix product with an emulated accumulator: ``A @ B`` with every addition rounded.

    Each element of the result is ``c`` plus the products ``A[..., m, k] * B[..., k, n]``
    added in ``k`` order (or as a pairwise tree), each addition rounded to ``accum``;
    or, with a ``model``, added block by block as a tensor core does.
    ``docs/accumulation.md`` states the algorithm to the bit.

    Parameters
    ----------
    A, B : array_like
        (..., M, K) and (..., K, N), batch dimensions broadcast as in NumPy; float32
        values (fp32, tf32, bf16, fp16, fp8 all are), so that products are exact.
        GPU (CuPy) arrays need the ``cupy`` backend.
    accum : Format or str, default "fp32"
        The accumulator's format (at most 29 fraction bits).
    rounding : str, default "nearest_even"
        How each addition rounds: one of ``fpsim.ROUNDING_MODES``.
    order : {"sequential", "pairwise", "any"}, default "sequential"
        ``"sequential"``: ``c`` first, then each product in ``k`` order;
        ``"pairwise"``: a balanced tree of the products, each rounded to ``accum``
        first; ``"any"``: any order (fp32 with the defaults: NumPy's BLAS; on a GPU,
        cuBLAS's binary32 GEMM, not TF32).
    products : {"exact", "rounded"}, default "exact"
        Sequential order: add each product exactly, or rounded to ``accum`` first.
    out : Format or str, optional
        Round the accumulated sums to this format at the end.
    c : array_like, optional
        The initial accumulator, broadcast to the result's shape: values of
        ``accum`` (default +0).
    model : fpsim.hw.BlockFMA, optional
        A tensor core's block FMA (``fpsim.hw.H100``, ...); it fixes accum,
        rounding, order, products, subnormals, saturate, seed and random_bits,
        so none of them may be given with it.
    subnormals : bool, default True
        False: subnormal sums flush to zero (and inputs below the smallest
        normal number are read as zeros).
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
    numpy.ndarray
        The (..., M, N) result; its dtype is NumPy's promotion of the inputs'
        dtypes and the dtype of ``accum`` (or ``out``, or the model's output).
    stats : AccumulationStats
        Only with ``stats=True``, as ``(result, stats)``.

    Raises
    ------
    ValueError
        Arrays of fewer than 2 dimensions, inner or batch dimensions that do not
        fit; inputs that are not float32 values, a ``c`` that is not a value of
        ``accum``; an unknown format, mode, order or products; an option given
        with a ``model``.

    Examples
    --------
    >>> import fpsim
    >>> A = [[1.0, 2.0**-11, 2.0**-11]]
    >>> B = [[1.0], [1.0], [1.0]]
    >>> fpsim.matmul(A, B, accum="fp16").tolist()
    [[1.0]]
    >>> fpsim.matmul(A, B).tolist()
    [[1.0009765625]]
    >>> C, stats = fpsim.matmul(A, B, accum="fp16", stats=True)
    >>> stats.absorbed, stats.additions
    (2, 3)

    A tensor core adds a block of products exactly, then cuts the sum to fp32:

    >>> A = [[1.0, 2.0**-24, 2.0**-24, 2.0**-24]]
    >>> B = [[1.0]] * 4
    >>> fpsim.matmul(A, B).tolist(), fpsim.matmul(A, B, model=fpsim.hw.H100).tolist()
    ([[1.0]], [[1.0000001192092896]])
    """
    given = dict(accum=accum, rounding=rounding, order=order, products=products,
                 subnormals=subnormals, saturate=saturate, seed=seed, random_bits=random_bits)
    product = OPERAND_PRODUCTS.get(type(A)) or OPERAND_PRODUCTS.get(type(B))
    if product is not None:  # block-scaled operands (fpsim.quantize.Quantized)
        return product(A, B, model=model, out=out, c=c, stats=stats, **given)
    a = as_float_array(A, "A", device=True)
    b = as_float_array(B, "B", device=True)
    if a.ndim < 2 or b.ndim < 2:
        raise ValueError(
            f"matmul needs arrays of at least 2 dimensions, got A {a.shape} and B {b.shape} "
            "(use fpsim.dot for vectors)"
        )
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(f"inner dimensions differ: A {a.shape} and B {b.shape}")
    narrowed = check_float32_values(a, "A"), check_float32_values(b, "B")
    if model is not None:
        overridden = [k for k, v in given.items() if v is not None]
        if overridden:
            raise ValueError(
                f"model={getattr(model, 'name', model)!r} fixes how the products are added up; "
                f"{', '.join(overridden)} cannot be given with it"
            )
        return block_matmul(a, b, model, c=c, out=out, stats=stats)
    options: dict[str, Any] = {k: ACCUMULATOR_OPTIONS[k] if v is None else v
                               for k, v in given.items()}
    return accumulate(a, b, out=out, c=c, stats=stats, narrowed=narrowed, **options)


@overload
def dot(a: Values, b: Values, *, stats: Literal[False] = ..., **options: Any) -> FloatScalar: ...
@overload
def dot(a: Values, b: Values, *, stats: Literal[True],
        **options: Any) -> tuple[FloatScalar, AccumulationStats]: ...
@overload
def dot(a: Values, b: Values, *, stats: bool = ...,
        **options: Any) -> FloatScalar | tuple[FloatScalar, AccumulationStats]: ...
def dot(a: Values, b: Values, **options: Any) -> Any:
    """Dot product with an emulated accumulator: ``matmul(a[None, :], b[:, None])[0, 0]``.

    Parameters
    ----------
    a, b : array_like
        1-D arrays of equal length: float32 values.
    **options
        ``matmul``'s keyword arguments: ``accum``, ``rounding``, ``order``,
        ``products``, ``out``, ``c`` (a scalar), ``model``, ``subnormals``,
        ``saturate``, ``seed``, ``random_bits``, ``stats``.

    Returns
    -------
    numpy scalar
        The dot product, accumulated as ``matmul`` accumulates.
    stats : AccumulationStats
        Only with ``stats=True``, as ``(result, stats)``.

    Raises
    ------
    ValueError
        ``a`` and ``b`` not 1-D arrays of equal length; anything ``matmul`` refuses.

    Examples
    --------
    >>> import fpsim
    >>> float(fpsim.dot([1.0, 2.0], [3.0, 4.0]))
    11.0
    >>> a, b = [1.0, 2.0**-11, 2.0**-11], [1.0, 1.0, 1.0]
    >>> float(fpsim.dot(a, b, accum="fp16")), float(fpsim.dot(a, b, accum="fp32"))
    (1.0, 1.0009765625)
    """
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
