"""Rounding to a format: the public ``round``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, overload

import numpy as np

from fpsim._elementwise import elementwise
from fpsim._inputs import as_float_array
from fpsim.bits import format_of_dtype
from fpsim.formats import Format, as_format

if TYPE_CHECKING:
    import numpy.typing as npt

    from fpsim._typing import FlagArray, FloatArray, FloatScalar, FormatLike, Scalar, Values


@overload
def round(x: Scalar, fmt: FormatLike, rounding: str = ..., *, subnormals: bool = ...,
          saturate: bool = ..., seed: int | None = ..., random_bits: int | None = ...,
          flags: Literal[False] = ..., dtype: None = ...) -> FloatScalar: ...
@overload
def round(x: Values, fmt: FormatLike, rounding: str = ..., *, subnormals: bool = ...,
          saturate: bool = ..., seed: int | None = ..., random_bits: int | None = ...,
          flags: Literal[False] = ..., dtype: None = ...) -> FloatArray: ...
@overload
def round(x: Scalar, fmt: FormatLike, rounding: str = ..., *, subnormals: bool = ...,
          saturate: bool = ..., seed: int | None = ..., random_bits: int | None = ...,
          flags: Literal[True], dtype: None = ...) -> tuple[FloatScalar, np.uint8]: ...
@overload
def round(x: Values, fmt: FormatLike, rounding: str = ..., *, subnormals: bool = ...,
          saturate: bool = ..., seed: int | None = ..., random_bits: int | None = ...,
          flags: Literal[True], dtype: None = ...) -> tuple[FloatArray, FlagArray]: ...
@overload
def round(x: Scalar, fmt: FormatLike, rounding: str = ..., *, subnormals: bool = ...,
          saturate: bool = ..., seed: int | None = ..., random_bits: int | None = ...,
          flags: bool = ..., dtype: npt.DTypeLike | None = ...,
          out: Any = ...) -> Any: ...
@overload
def round(x: Values, fmt: FormatLike, rounding: str = ..., *, subnormals: bool = ...,
          saturate: bool = ..., seed: int | None = ..., random_bits: int | None = ...,
          flags: bool = ..., dtype: npt.DTypeLike | None = ...,
          out: Any = ...) -> Any: ...
def round(
    x: Values | Scalar,
    fmt: FormatLike,
    rounding: str = "nearest_even",
    *,
    subnormals: bool = True,
    saturate: bool = False,
    seed: int | None = None,
    random_bits: int | None = None,
    flags: bool = False,
    dtype: npt.DTypeLike | None = None,
    out: Any = None,
) -> Any:
    """Round values to a format.

    Each value of ``x`` is rounded once, exactly, to ``fmt`` in the mode
    ``rounding``; ``docs/semantics.md`` states every mode, overflow,
    ``subnormals=False`` and stochastic rounding to the bit.

    Parameters
    ----------
    x : array_like
        The values: NumPy arrays of float16, float32, float64 or integers,
        ml_dtypes arrays, Python numbers, Fractions, or sequences of them, each
        taken exactly (a value float64 cannot hold exactly is refused). GPU
        (CuPy) arrays need the ``cupy`` backend.
    fmt : Format or str
        The format, or a preset name (``"fp16"``, ``"bf16"``, ``"e6m9"``, ...).
    rounding : str, default "nearest_even"
        One of ``fpsim.ROUNDING_MODES``: ``"nearest_even"``, ``"nearest_away"``,
        ``"toward_zero"``, ``"up"``, ``"down"``, ``"odd"``, ``"stochastic"``.
    subnormals : bool, default True
        False: magnitudes below the smallest normal number are read, and
        rounded, as zeros of the same sign.
    saturate : bool, default False
        True: results that would be infinite (overflows and infinite inputs)
        are the largest finite value of the same sign instead.
    seed : int or None, default None
        Stochastic rounding only: the key (0..2**64-1) of the counter-based
        random stream; None draws fresh entropy. The same seed gives the same
        bits on every backend. With another mode: a ``UserWarning`` (it does
        nothing).
    random_bits : int or None, default None
        Stochastic rounding only: random bits per draw (1..53; None: 53).
    flags : bool, default False
        True: also return the IEEE flags raised by each element.
    dtype : data-type, optional
        Return the values in this dtype, which must hold exactly the values of
        ``fmt`` (``np.float16`` for fp16, ``ml_dtypes.bfloat16`` for bf16,
        ``ml_dtypes.float8_e4m3fn`` for fp8_e4m3, ...). By default the dtype
        is NumPy's promotion of the input's dtype and ``fmt.dtype`` (Python
        numbers count as float64).
    out : numpy.ndarray, optional
        An array to write the result to, and return, instead of a new one (as
        NumPy's ``out``): of the result's shape, of dtype float64, float32 (for
        formats within binary32) or one holding exactly ``fmt`` (``np.float16``
        for fp16, ...), writeable; it may be ``x`` itself (rounding in place).
        A CuPy array with the ``cupy`` backend. Not with ``dtype``.

    Returns
    -------
    numpy.ndarray or numpy scalar
        The rounded values, in the shape of ``x`` (a NumPy scalar for a scalar);
        ``out`` itself when given.
    flags : numpy.ndarray of uint8 or numpy.uint8
        Only with ``flags=True``, as ``(values, flags)``: the bitwise or of
        ``fpsim.INEXACT``, ``UNDERFLOW``, ``OVERFLOW`` and ``INVALID`` for each element.

    Raises
    ------
    ValueError
        An unknown format or rounding mode; a value fpsim cannot take exactly;
        a NaN in ``x`` when ``fmt`` has no NaN (``fp6_e2m3``, ``fp6_e3m2``, ``fp4_e2m1``)
        and the result goes into a dtype of that format (``dtype=``, ``out=``);
        a ``seed``, ``random_bits`` or flag argument out of range or of the
        wrong type; a ``dtype`` that does not hold exactly ``fmt``'s values; an
        ``out`` of another shape, a dtype that cannot hold the values, read-only,
        or given with ``dtype``.

    Examples
    --------
    >>> import fpsim
    >>> float(fpsim.round(0.1, "fp16"))
    0.0999755859375
    >>> fpsim.round([0.1, 70000.0, 1e-7], "fp16").tolist()
    [0.0999755859375, inf, 1.1920928955078125e-07]
    >>> fpsim.round([0.1, 70000.0, 1e-7], "fp16", "toward_zero").tolist()
    [0.0999755859375, 65504.0, 5.960464477539063e-08]
    >>> fpsim.round([0.1, 1000.0], "fp8_e4m3", saturate=True).tolist()
    [0.1015625, 448.0]
    >>> values, flags = fpsim.round([0.1, 70000.0], "fp16", flags=True)
    >>> [fpsim.flags.describe(f) for f in flags]
    ['inexact', 'inexact|overflow']
    >>> fpsim.round([7.0, -100.0], "fp4_e2m1").tolist()  # no infinities: it saturates
    [6.0, -6.0]
    >>> float(fpsim.round(0.1, "bf16", "stochastic", seed=0))
    0.099609375
    >>> import numpy as np
    >>> w = np.array([0.1, 1e-8], dtype=np.float32)
    >>> fpsim.round(w, "fp16", out=w) is w  # in place
    True
    >>> w.tolist()
    [0.0999755859375, 0.0]
    """
    if out is not None and dtype is not None:
        raise ValueError("give dtype or out, not both: out's dtype is the result's")
    if dtype is not None or (out is not None and getattr(out, "dtype", None) not in _WIDE):
        _refuse_nan(x, as_format(fmt))
    return elementwise(
        "round_value", {"x": x}, fmt, rounding, subnormals=subnormals, saturate=saturate,
        flags=flags, seed=seed, random_bits=random_bits, arithmetic=False, into=out,
        dtype=None if dtype is None else _matching(dtype, as_format(fmt)),
    )


_WIDE = (np.dtype(np.float32), np.dtype(np.float64))


def _refuse_nan(x: Any, fmt: Format) -> None:
    """ValueError where ``x`` holds a NaN and ``fmt`` has no NaN (OCP fp6, fp4), for a
    result stored in a dtype of the format itself: it has no encoding for it (the OCP MX
    specification leaves the conversion implementation-defined; fpsim invents no value)."""
    if fmt.nan:
        return
    arr = as_float_array(x, "x", device=True)
    nan = arr != arr
    if bool(nan.any()):
        first = int(nan.reshape(-1).argmax())
        raise ValueError(f"x: NaN at flat index {first}, and {fmt.name} has no NaN encoding "
                         "(every encoding of it is finite) for the dtype asked for: replace "
                         "NaNs before rounding")


def _matching(dtype: npt.DTypeLike | None, fmt: Format) -> np.dtype:
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
