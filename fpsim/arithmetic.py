"""Elementwise arithmetic in a format: the exact result rounded once (IEEE 754)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, overload

import numpy as np

from fpsim._elementwise import elementwise

if TYPE_CHECKING:
    from fpsim._typing import FlagArray, FloatArray, FloatScalar, FormatLike, Scalar, Values

__all__ = ["add", "sub", "mul", "div", "sqrt", "fma"]


@overload
def add(a: Scalar, b: Scalar, fmt: FormatLike, rounding: str = ..., *, subnormals: bool = ...,
        saturate: bool = ..., flags: Literal[False] = ..., seed: int | None = ...,
        random_bits: int | None = ...) -> FloatScalar: ...
@overload
def add(a: Values, b: Values, fmt: FormatLike, rounding: str = ..., *, subnormals: bool = ...,
        saturate: bool = ..., flags: Literal[False] = ..., seed: int | None = ...,
        random_bits: int | None = ...) -> FloatArray: ...
@overload
def add(a: Scalar, b: Scalar, fmt: FormatLike, rounding: str = ..., *, subnormals: bool = ...,
        saturate: bool = ..., flags: Literal[True], seed: int | None = ...,
        random_bits: int | None = ...) -> tuple[FloatScalar, np.uint8]: ...
@overload
def add(a: Values, b: Values, fmt: FormatLike, rounding: str = ..., *, subnormals: bool = ...,
        saturate: bool = ..., flags: Literal[True], seed: int | None = ...,
        random_bits: int | None = ...) -> tuple[FloatArray, FlagArray]: ...
@overload
def add(a: Scalar, b: Scalar, fmt: FormatLike, rounding: str = ..., *, subnormals: bool = ...,
        saturate: bool = ..., flags: bool = ..., seed: int | None = ...,
        random_bits: int | None = ...) -> Any: ...
@overload
def add(a: Values, b: Values, fmt: FormatLike, rounding: str = ..., *, subnormals: bool = ...,
        saturate: bool = ..., flags: bool = ..., seed: int | None = ...,
        random_bits: int | None = ...) -> Any: ...
def add(a: Values | Scalar, b: Values | Scalar, fmt: FormatLike, rounding: str = "nearest_even", *,
        subnormals: bool = True, saturate: bool = False, flags: bool = False,
        seed: int | None = None, random_bits: int | None = None) -> Any:
    """Add in a format: ``a + b`` rounded once to ``fmt`` (IEEE 754).

    An exact zero sum is +0 (-0 in ``"down"`` mode, or when both operands
    are -0). ABSORBED is raised when both operands are finite and nonzero and
    the result equals one of them.

    Parameters
    ----------
    a, b : array_like
        The addends: values of ``fmt``, broadcast together as in NumPy.
    fmt : Format or str
        The format of the operands and the result, or its name; at most 29
        fraction bits (every format up to 32 bits wide).
    rounding : str, default "nearest_even"
        One of ``fpsim.ROUNDING_MODES``.
    subnormals : bool, default True
        False: subnormal operands are read as zeros of the same sign, and a
        result below the smallest normal number becomes a zero of its sign
        (raising INEXACT and UNDERFLOW).
    saturate : bool, default False
        True: a result that would be infinite is the largest finite value of
        its sign instead.
    flags : bool, default False
        True: also return the IEEE flags (and ABSORBED) raised by each element.
    seed : int or None, default None
        Stochastic rounding only: the key (0..2**64-1) of the random stream;
        None draws fresh entropy. With another mode: a ``UserWarning``.
    random_bits : int or None, default None
        Stochastic rounding only: random bits per draw (1..53; None: 53).

    Returns
    -------
    numpy.ndarray or numpy scalar
        The exact result rounded once to ``fmt``, in the operands' broadcast
        shape (a NumPy scalar for scalar operands); its dtype is NumPy's
        promotion of the operands' dtypes and ``fmt.dtype``.
    flags : numpy.ndarray of uint8 or numpy.uint8
        Only with ``flags=True``, as ``(result, flags)``: the flags of each
        element (``fpsim.flags``).

    Raises
    ------
    ValueError
        An operand that is not a value of ``fmt`` (round it first with
        ``fpsim.round``); operands that do not broadcast together; an unknown
        format or rounding mode, or one with more than 29 fraction bits; an
        argument out of range or of the wrong type.

    Examples
    --------
    >>> import fpsim
    >>> float(fpsim.add(1.0, 2.0**-10, "fp16"))
    1.0009765625
    >>> fpsim.add([1.0, 65504.0], [2.0**-11, 65504.0], "fp16").tolist()
    [1.0, inf]
    >>> result, flags = fpsim.add(1.0, 2.0**-12, "fp16", flags=True)
    >>> float(result), fpsim.flags.describe(flags)
    (1.0, 'inexact|absorbed')
    """
    return elementwise(
        "op_add", {"a": a, "b": b}, fmt, rounding, subnormals=subnormals, saturate=saturate,
        flags=flags, seed=seed, random_bits=random_bits, arithmetic=True,
    )


@overload
def sub(a: Scalar, b: Scalar, fmt: FormatLike, rounding: str = ..., *, subnormals: bool = ...,
        saturate: bool = ..., flags: Literal[False] = ..., seed: int | None = ...,
        random_bits: int | None = ...) -> FloatScalar: ...
@overload
def sub(a: Values, b: Values, fmt: FormatLike, rounding: str = ..., *, subnormals: bool = ...,
        saturate: bool = ..., flags: Literal[False] = ..., seed: int | None = ...,
        random_bits: int | None = ...) -> FloatArray: ...
@overload
def sub(a: Scalar, b: Scalar, fmt: FormatLike, rounding: str = ..., *, subnormals: bool = ...,
        saturate: bool = ..., flags: Literal[True], seed: int | None = ...,
        random_bits: int | None = ...) -> tuple[FloatScalar, np.uint8]: ...
@overload
def sub(a: Values, b: Values, fmt: FormatLike, rounding: str = ..., *, subnormals: bool = ...,
        saturate: bool = ..., flags: Literal[True], seed: int | None = ...,
        random_bits: int | None = ...) -> tuple[FloatArray, FlagArray]: ...
@overload
def sub(a: Scalar, b: Scalar, fmt: FormatLike, rounding: str = ..., *, subnormals: bool = ...,
        saturate: bool = ..., flags: bool = ..., seed: int | None = ...,
        random_bits: int | None = ...) -> Any: ...
@overload
def sub(a: Values, b: Values, fmt: FormatLike, rounding: str = ..., *, subnormals: bool = ...,
        saturate: bool = ..., flags: bool = ..., seed: int | None = ...,
        random_bits: int | None = ...) -> Any: ...
def sub(a: Values | Scalar, b: Values | Scalar, fmt: FormatLike, rounding: str = "nearest_even", *,
        subnormals: bool = True, saturate: bool = False, flags: bool = False,
        seed: int | None = None, random_bits: int | None = None) -> Any:
    """Subtract in a format: ``a - b`` rounded once to ``fmt`` (IEEE 754).

    The same as ``add(a, -b)``, flags included.

    Parameters
    ----------
    a, b : array_like
        The minuend and subtrahend: values of ``fmt``, broadcast together.
    fmt : Format or str
        The format of the operands and the result, or its name; at most 29
        fraction bits (every format up to 32 bits wide).
    rounding : str, default "nearest_even"
        One of ``fpsim.ROUNDING_MODES``.
    subnormals : bool, default True
        False: subnormal operands are read as zeros of the same sign, and a
        result below the smallest normal number becomes a zero of its sign
        (raising INEXACT and UNDERFLOW).
    saturate : bool, default False
        True: a result that would be infinite is the largest finite value of
        its sign instead.
    flags : bool, default False
        True: also return the IEEE flags (and ABSORBED) raised by each element.
    seed : int or None, default None
        Stochastic rounding only: the key (0..2**64-1) of the random stream;
        None draws fresh entropy. With another mode: a ``UserWarning``.
    random_bits : int or None, default None
        Stochastic rounding only: random bits per draw (1..53; None: 53).

    Returns
    -------
    numpy.ndarray or numpy scalar
        The exact result rounded once to ``fmt``, in the operands' broadcast
        shape (a NumPy scalar for scalar operands); its dtype is NumPy's
        promotion of the operands' dtypes and ``fmt.dtype``.
    flags : numpy.ndarray of uint8 or numpy.uint8
        Only with ``flags=True``, as ``(result, flags)``: the flags of each
        element (``fpsim.flags``).

    Raises
    ------
    ValueError
        An operand that is not a value of ``fmt`` (round it first with
        ``fpsim.round``); operands that do not broadcast together; an unknown
        format or rounding mode, or one with more than 29 fraction bits; an
        argument out of range or of the wrong type.

    Examples
    --------
    >>> import fpsim
    >>> float(fpsim.sub(1.0, 2.0**-11, "fp16"))
    0.99951171875
    >>> float(fpsim.sub(1.0, 1.0, "fp16")), float(fpsim.sub(1.0, 1.0, "fp16", "down"))
    (0.0, -0.0)
    """
    return elementwise(
        "op_sub", {"a": a, "b": b}, fmt, rounding, subnormals=subnormals, saturate=saturate,
        flags=flags, seed=seed, random_bits=random_bits, arithmetic=True,
    )


@overload
def mul(a: Scalar, b: Scalar, fmt: FormatLike, rounding: str = ..., *, subnormals: bool = ...,
        saturate: bool = ..., flags: Literal[False] = ..., seed: int | None = ...,
        random_bits: int | None = ...) -> FloatScalar: ...
@overload
def mul(a: Values, b: Values, fmt: FormatLike, rounding: str = ..., *, subnormals: bool = ...,
        saturate: bool = ..., flags: Literal[False] = ..., seed: int | None = ...,
        random_bits: int | None = ...) -> FloatArray: ...
@overload
def mul(a: Scalar, b: Scalar, fmt: FormatLike, rounding: str = ..., *, subnormals: bool = ...,
        saturate: bool = ..., flags: Literal[True], seed: int | None = ...,
        random_bits: int | None = ...) -> tuple[FloatScalar, np.uint8]: ...
@overload
def mul(a: Values, b: Values, fmt: FormatLike, rounding: str = ..., *, subnormals: bool = ...,
        saturate: bool = ..., flags: Literal[True], seed: int | None = ...,
        random_bits: int | None = ...) -> tuple[FloatArray, FlagArray]: ...
@overload
def mul(a: Scalar, b: Scalar, fmt: FormatLike, rounding: str = ..., *, subnormals: bool = ...,
        saturate: bool = ..., flags: bool = ..., seed: int | None = ...,
        random_bits: int | None = ...) -> Any: ...
@overload
def mul(a: Values, b: Values, fmt: FormatLike, rounding: str = ..., *, subnormals: bool = ...,
        saturate: bool = ..., flags: bool = ..., seed: int | None = ...,
        random_bits: int | None = ...) -> Any: ...
def mul(a: Values | Scalar, b: Values | Scalar, fmt: FormatLike, rounding: str = "nearest_even", *,
        subnormals: bool = True, saturate: bool = False, flags: bool = False,
        seed: int | None = None, random_bits: int | None = None) -> Any:
    """Multiply in a format: ``a * b`` rounded once to ``fmt`` (IEEE 754).

    0 * inf is NaN and raises INVALID; the sign of a zero result is the xor
    of the operands' signs.

    Parameters
    ----------
    a, b : array_like
        The factors: values of ``fmt``, broadcast together as in NumPy.
    fmt : Format or str
        The format of the operands and the result, or its name; at most 29
        fraction bits (every format up to 32 bits wide).
    rounding : str, default "nearest_even"
        One of ``fpsim.ROUNDING_MODES``.
    subnormals : bool, default True
        False: subnormal operands are read as zeros of the same sign, and a
        result below the smallest normal number becomes a zero of its sign
        (raising INEXACT and UNDERFLOW).
    saturate : bool, default False
        True: a result that would be infinite is the largest finite value of
        its sign instead.
    flags : bool, default False
        True: also return the IEEE flags (and ABSORBED) raised by each element.
    seed : int or None, default None
        Stochastic rounding only: the key (0..2**64-1) of the random stream;
        None draws fresh entropy. With another mode: a ``UserWarning``.
    random_bits : int or None, default None
        Stochastic rounding only: random bits per draw (1..53; None: 53).

    Returns
    -------
    numpy.ndarray or numpy scalar
        The exact result rounded once to ``fmt``, in the operands' broadcast
        shape (a NumPy scalar for scalar operands); its dtype is NumPy's
        promotion of the operands' dtypes and ``fmt.dtype``.
    flags : numpy.ndarray of uint8 or numpy.uint8
        Only with ``flags=True``, as ``(result, flags)``: the flags of each
        element (``fpsim.flags``).

    Raises
    ------
    ValueError
        An operand that is not a value of ``fmt`` (round it first with
        ``fpsim.round``); operands that do not broadcast together; an unknown
        format or rounding mode, or one with more than 29 fraction bits; an
        argument out of range or of the wrong type.

    Examples
    --------
    >>> import fpsim
    >>> float(fpsim.mul(3.0, 0.333251953125, "fp16"))
    1.0
    >>> result, flags = fpsim.mul(2.0**-14, 2.0**-14, "fp16", flags=True)
    >>> float(result), fpsim.flags.describe(flags)
    (0.0, 'inexact|underflow')
    """
    return elementwise(
        "op_mul", {"a": a, "b": b}, fmt, rounding, subnormals=subnormals, saturate=saturate,
        flags=flags, seed=seed, random_bits=random_bits, arithmetic=True,
    )


@overload
def div(a: Scalar, b: Scalar, fmt: FormatLike, rounding: str = ..., *, subnormals: bool = ...,
        saturate: bool = ..., flags: Literal[False] = ..., seed: int | None = ...,
        random_bits: int | None = ...) -> FloatScalar: ...
@overload
def div(a: Values, b: Values, fmt: FormatLike, rounding: str = ..., *, subnormals: bool = ...,
        saturate: bool = ..., flags: Literal[False] = ..., seed: int | None = ...,
        random_bits: int | None = ...) -> FloatArray: ...
@overload
def div(a: Scalar, b: Scalar, fmt: FormatLike, rounding: str = ..., *, subnormals: bool = ...,
        saturate: bool = ..., flags: Literal[True], seed: int | None = ...,
        random_bits: int | None = ...) -> tuple[FloatScalar, np.uint8]: ...
@overload
def div(a: Values, b: Values, fmt: FormatLike, rounding: str = ..., *, subnormals: bool = ...,
        saturate: bool = ..., flags: Literal[True], seed: int | None = ...,
        random_bits: int | None = ...) -> tuple[FloatArray, FlagArray]: ...
@overload
def div(a: Scalar, b: Scalar, fmt: FormatLike, rounding: str = ..., *, subnormals: bool = ...,
        saturate: bool = ..., flags: bool = ..., seed: int | None = ...,
        random_bits: int | None = ...) -> Any: ...
@overload
def div(a: Values, b: Values, fmt: FormatLike, rounding: str = ..., *, subnormals: bool = ...,
        saturate: bool = ..., flags: bool = ..., seed: int | None = ...,
        random_bits: int | None = ...) -> Any: ...
def div(a: Values | Scalar, b: Values | Scalar, fmt: FormatLike, rounding: str = "nearest_even", *,
        subnormals: bool = True, saturate: bool = False, flags: bool = False,
        seed: int | None = None, random_bits: int | None = None) -> Any:
    """Divide in a format: ``a / b`` rounded once to ``fmt`` (IEEE 754).

    A finite nonzero ``a`` over zero is ±inf and raises DIVBYZERO (NaN in a
    format without infinities); 0/0 and inf/inf are NaN and raise INVALID.

    Parameters
    ----------
    a, b : array_like
        The dividend and divisor: values of ``fmt``, broadcast together.
    fmt : Format or str
        The format of the operands and the result, or its name; at most 29
        fraction bits (every format up to 32 bits wide).
    rounding : str, default "nearest_even"
        One of ``fpsim.ROUNDING_MODES``.
    subnormals : bool, default True
        False: subnormal operands are read as zeros of the same sign, and a
        result below the smallest normal number becomes a zero of its sign
        (raising INEXACT and UNDERFLOW).
    saturate : bool, default False
        True: a result that would be infinite is the largest finite value of
        its sign instead.
    flags : bool, default False
        True: also return the IEEE flags (and ABSORBED) raised by each element.
    seed : int or None, default None
        Stochastic rounding only: the key (0..2**64-1) of the random stream;
        None draws fresh entropy. With another mode: a ``UserWarning``.
    random_bits : int or None, default None
        Stochastic rounding only: random bits per draw (1..53; None: 53).

    Returns
    -------
    numpy.ndarray or numpy scalar
        The exact result rounded once to ``fmt``, in the operands' broadcast
        shape (a NumPy scalar for scalar operands); its dtype is NumPy's
        promotion of the operands' dtypes and ``fmt.dtype``.
    flags : numpy.ndarray of uint8 or numpy.uint8
        Only with ``flags=True``, as ``(result, flags)``: the flags of each
        element (``fpsim.flags``).

    Raises
    ------
    ValueError
        An operand that is not a value of ``fmt`` (round it first with
        ``fpsim.round``); operands that do not broadcast together; an unknown
        format or rounding mode, or one with more than 29 fraction bits; an
        argument out of range or of the wrong type.

    Examples
    --------
    >>> import fpsim
    >>> float(fpsim.div(1.0, 3.0, "fp16")), float(fpsim.div(1.0, 3.0, "fp16", "up"))
    (0.333251953125, 0.33349609375)
    >>> result, flags = fpsim.div(1.0, 0.0, "fp16", flags=True)
    >>> float(result), fpsim.flags.describe(flags)
    (inf, 'divbyzero')
    """
    return elementwise(
        "op_div", {"a": a, "b": b}, fmt, rounding, subnormals=subnormals, saturate=saturate,
        flags=flags, seed=seed, random_bits=random_bits, arithmetic=True,
    )


@overload
def sqrt(a: Scalar, fmt: FormatLike, rounding: str = ..., *, subnormals: bool = ...,
        saturate: bool = ..., flags: Literal[False] = ..., seed: int | None = ...,
        random_bits: int | None = ...) -> FloatScalar: ...
@overload
def sqrt(a: Values, fmt: FormatLike, rounding: str = ..., *, subnormals: bool = ...,
        saturate: bool = ..., flags: Literal[False] = ..., seed: int | None = ...,
        random_bits: int | None = ...) -> FloatArray: ...
@overload
def sqrt(a: Scalar, fmt: FormatLike, rounding: str = ..., *, subnormals: bool = ...,
        saturate: bool = ..., flags: Literal[True], seed: int | None = ...,
        random_bits: int | None = ...) -> tuple[FloatScalar, np.uint8]: ...
@overload
def sqrt(a: Values, fmt: FormatLike, rounding: str = ..., *, subnormals: bool = ...,
        saturate: bool = ..., flags: Literal[True], seed: int | None = ...,
        random_bits: int | None = ...) -> tuple[FloatArray, FlagArray]: ...
@overload
def sqrt(a: Scalar, fmt: FormatLike, rounding: str = ..., *, subnormals: bool = ...,
        saturate: bool = ..., flags: bool = ..., seed: int | None = ...,
        random_bits: int | None = ...) -> Any: ...
@overload
def sqrt(a: Values, fmt: FormatLike, rounding: str = ..., *, subnormals: bool = ...,
        saturate: bool = ..., flags: bool = ..., seed: int | None = ...,
        random_bits: int | None = ...) -> Any: ...
def sqrt(a: Values | Scalar, fmt: FormatLike, rounding: str = "nearest_even", *,
        subnormals: bool = True, saturate: bool = False, flags: bool = False,
        seed: int | None = None, random_bits: int | None = None) -> Any:
    """Square root in a format: ``sqrt(a)`` rounded once to ``fmt`` (IEEE 754).

    sqrt(±0) is ±0; the square root of a negative number is NaN and raises
    INVALID.

    Parameters
    ----------
    a : array_like
        The operand: values of ``fmt``.
    fmt : Format or str
        The format of the operands and the result, or its name; at most 29
        fraction bits (every format up to 32 bits wide).
    rounding : str, default "nearest_even"
        One of ``fpsim.ROUNDING_MODES``.
    subnormals : bool, default True
        False: subnormal operands are read as zeros of the same sign, and a
        result below the smallest normal number becomes a zero of its sign
        (raising INEXACT and UNDERFLOW).
    saturate : bool, default False
        True: a result that would be infinite is the largest finite value of
        its sign instead.
    flags : bool, default False
        True: also return the IEEE flags (and ABSORBED) raised by each element.
    seed : int or None, default None
        Stochastic rounding only: the key (0..2**64-1) of the random stream;
        None draws fresh entropy. With another mode: a ``UserWarning``.
    random_bits : int or None, default None
        Stochastic rounding only: random bits per draw (1..53; None: 53).

    Returns
    -------
    numpy.ndarray or numpy scalar
        The exact result rounded once to ``fmt``, in the operands' broadcast
        shape (a NumPy scalar for scalar operands); its dtype is NumPy's
        promotion of the operands' dtypes and ``fmt.dtype``.
    flags : numpy.ndarray of uint8 or numpy.uint8
        Only with ``flags=True``, as ``(result, flags)``: the flags of each
        element (``fpsim.flags``).

    Raises
    ------
    ValueError
        An operand that is not a value of ``fmt`` (round it first with
        ``fpsim.round``); operands that do not broadcast together; an unknown
        format or rounding mode, or one with more than 29 fraction bits; an
        argument out of range or of the wrong type.

    Examples
    --------
    >>> import fpsim
    >>> float(fpsim.sqrt(2.0, "fp16"))
    1.4140625
    >>> result, flags = fpsim.sqrt(-1.0, "fp16", flags=True)
    >>> float(result), fpsim.flags.describe(flags)
    (nan, 'invalid')
    """
    return elementwise(
        "op_sqrt", {"a": a}, fmt, rounding, subnormals=subnormals, saturate=saturate,
        flags=flags, seed=seed, random_bits=random_bits, arithmetic=True,
    )


@overload
def fma(a: Scalar, b: Scalar, c: Scalar, fmt: FormatLike, rounding: str = ..., *,
        subnormals: bool = ..., saturate: bool = ..., flags: Literal[False] = ...,
        seed: int | None = ..., random_bits: int | None = ...) -> FloatScalar: ...
@overload
def fma(a: Values, b: Values, c: Values, fmt: FormatLike, rounding: str = ..., *,
        subnormals: bool = ..., saturate: bool = ..., flags: Literal[False] = ...,
        seed: int | None = ..., random_bits: int | None = ...) -> FloatArray: ...
@overload
def fma(a: Scalar, b: Scalar, c: Scalar, fmt: FormatLike, rounding: str = ..., *,
        subnormals: bool = ..., saturate: bool = ..., flags: Literal[True], seed: int | None = ...,
        random_bits: int | None = ...) -> tuple[FloatScalar, np.uint8]: ...
@overload
def fma(a: Values, b: Values, c: Values, fmt: FormatLike, rounding: str = ..., *,
        subnormals: bool = ..., saturate: bool = ..., flags: Literal[True], seed: int | None = ...,
        random_bits: int | None = ...) -> tuple[FloatArray, FlagArray]: ...
@overload
def fma(a: Scalar, b: Scalar, c: Scalar, fmt: FormatLike, rounding: str = ..., *,
        subnormals: bool = ..., saturate: bool = ..., flags: bool = ..., seed: int | None = ...,
        random_bits: int | None = ...) -> Any: ...
@overload
def fma(a: Values, b: Values, c: Values, fmt: FormatLike, rounding: str = ..., *,
        subnormals: bool = ..., saturate: bool = ..., flags: bool = ..., seed: int | None = ...,
        random_bits: int | None = ...) -> Any: ...
def fma(a: Values | Scalar, b: Values | Scalar, c: Values | Scalar, fmt: FormatLike,
        rounding: str = "nearest_even", *, subnormals: bool = True, saturate: bool = False,
        flags: bool = False, seed: int | None = None, random_bits: int | None = None) -> Any:
    """Fused multiply-add in a format: ``a * b + c`` rounded once to ``fmt``.

    The product is not rounded on its own. ABSORBED is raised when ``a * b``
    and ``c`` are finite and nonzero and the result equals ``c``, or equals
    ``a * b`` rounded alone.

    Parameters
    ----------
    a, b, c : array_like
        The factors and the addend: values of ``fmt``, broadcast together.
    fmt : Format or str
        The format of the operands and the result, or its name; at most 29
        fraction bits (every format up to 32 bits wide).
    rounding : str, default "nearest_even"
        One of ``fpsim.ROUNDING_MODES``.
    subnormals : bool, default True
        False: subnormal operands are read as zeros of the same sign, and a
        result below the smallest normal number becomes a zero of its sign
        (raising INEXACT and UNDERFLOW).
    saturate : bool, default False
        True: a result that would be infinite is the largest finite value of
        its sign instead.
    flags : bool, default False
        True: also return the IEEE flags (and ABSORBED) raised by each element.
    seed : int or None, default None
        Stochastic rounding only: the key (0..2**64-1) of the random stream;
        None draws fresh entropy. With another mode: a ``UserWarning``.
    random_bits : int or None, default None
        Stochastic rounding only: random bits per draw (1..53; None: 53).

    Returns
    -------
    numpy.ndarray or numpy scalar
        The exact result rounded once to ``fmt``, in the operands' broadcast
        shape (a NumPy scalar for scalar operands); its dtype is NumPy's
        promotion of the operands' dtypes and ``fmt.dtype``.
    flags : numpy.ndarray of uint8 or numpy.uint8
        Only with ``flags=True``, as ``(result, flags)``: the flags of each
        element (``fpsim.flags``).

    Raises
    ------
    ValueError
        An operand that is not a value of ``fmt`` (round it first with
        ``fpsim.round``); operands that do not broadcast together; an unknown
        format or rounding mode, or one with more than 29 fraction bits; an
        argument out of range or of the wrong type.

    Examples
    --------
    >>> import fpsim
    >>> a = 1.0 + 2.0**-10
    >>> float(fpsim.fma(a, a, -(1.0 + 2.0**-9), "fp16"))
    9.5367431640625e-07
    >>> float(fpsim.sub(fpsim.mul(a, a, "fp16"), 1.0 + 2.0**-9, "fp16"))
    0.0
    >>> float(fpsim.fma(1.5, 3.0, 0.25, fpsim.Format(6, 9), "odd"))
    4.75
    """
    return elementwise(
        "op_fma", {"a": a, "b": b, "c": c}, fmt, rounding, subnormals=subnormals, saturate=saturate,
        flags=flags, seed=seed, random_bits=random_bits, arithmetic=True,
    )
