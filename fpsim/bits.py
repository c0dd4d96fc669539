"""Encodings: format values to and from their bit patterns."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, overload

import numpy as np

from fpsim._dtypes import is_ml_dtype
from fpsim._inputs import _refuse_masks, as_float_array
from fpsim.backends import get_backend
from fpsim.backends.protocol import is_device_array
from fpsim.formats import PRESETS, Format, _register_dtype_lookup, as_format
from fpsim.kernels.spec import make_spec

if TYPE_CHECKING:
    import numpy.typing as npt

    from fpsim._typing import FormatLike, Scalar, Values

_SIGN = np.uint64(1 << 63)
_M52 = np.uint64((1 << 52) - 1)


@overload
def to_bits(x: Scalar, fmt: FormatLike) -> np.unsignedinteger[Any]: ...
@overload
def to_bits(x: Values, fmt: FormatLike) -> npt.NDArray[np.unsignedinteger[Any]]: ...
def to_bits(x: Values | Scalar, fmt: FormatLike) -> Any:
    """Encode values of a format as their bit patterns.

    Parameters
    ----------
    x : array_like
        Values of ``fmt`` (NaN and, in an IEEE-style format, infinities included).
    fmt : Format or str
        The format, or its name; any width up to 64 bits.

    Returns
    -------
    numpy.ndarray or numpy scalar
        The encodings, in the shape of ``x``, as the narrowest unsigned integer
        type that holds them (``fmt.bits_dtype``: uint8, uint16, uint32 or uint64).
        NaN encodes as the quiet NaN with a zero sign (S.1..1.1..1 in a
        finite-style format; the negative-zero pattern 1.0..0.0..0 in the fnuz style,
        where -0.0 encodes as +0).

    Raises
    ------
    ValueError
        A value that is not a value of ``fmt`` (round it first with
        ``fpsim.round``); an unknown format; input fpsim cannot take exactly.

    Examples
    --------
    >>> import fpsim
    >>> hex(fpsim.to_bits(1.0, "fp16"))
    '0x3c00'
    >>> fpsim.to_bits([1.0, -2.0, float("inf"), float("nan")], "fp16").tolist()
    [15360, 49152, 31744, 32256]
    >>> fpsim.to_bits([448.0, float("nan")], "fp8_e4m3").tolist()
    [126, 127]
    """
    fmt = as_format(fmt)
    arr = as_float_array(x, "x")
    flat = np.ascontiguousarray(arr, dtype=np.float64).reshape(-1)
    spec = make_spec(fmt, "nearest_even", True, False, None)
    bad = get_backend().first_unrepresentable(flat, spec)
    if bad >= 0:
        raise ValueError(f"x={flat[bad]!r} (flat index {bad}) is not representable in {fmt.name}")
    t, bias = fmt.man_bits, fmt.bias
    u = flat.view(np.uint64)
    sign = (u & _SIGN) >> np.uint64(63 - (fmt.bits - 1)) if fmt.signed else np.uint64(0)
    mag = np.abs(flat)
    with np.errstate(invalid="ignore"):
        normal = mag >= fmt.smallest_normal
        finite = np.isfinite(flat)
    exp_field = ((u >> np.uint64(52)) & np.uint64(0x7FF)).astype(np.int64) - 1023 + bias
    frac = (u & _M52) >> np.uint64(52 - t)
    sub_frac = np.ldexp(np.where(finite & ~normal, mag, 0.0), t - fmt.emin).astype(np.uint64)
    all_ones = np.uint64(2 ** fmt.exp_bits - 1)
    nan_frac = np.uint64(2**t - 1 if not fmt.infinities else 2 ** (t - 1))
    field = np.where(normal & finite, exp_field.clip(0), 0).astype(np.uint64)
    field = np.where(finite, field, all_ones)
    if not fmt.negative_zero:  # fnuz: the NaN is the negative-zero pattern, a zero is +0
        sign = np.where(flat == 0, np.uint64(0), sign)
        field = np.where(np.isnan(flat), np.uint64(0), field)
        nan_frac = np.uint64(0)
    frac = np.where(normal, frac, sub_frac)
    frac = np.where(np.isinf(flat), np.uint64(0), frac)
    frac = np.where(np.isnan(flat), nan_frac, frac)
    sign = np.where(np.isnan(flat), np.uint64(0 if fmt.negative_zero else 1 << (fmt.bits - 1)),
                    sign)
    bits = sign | (field << np.uint64(t)) | frac
    out: np.ndarray = bits.astype(fmt.bits_dtype).reshape(arr.shape)
    return out[()] if arr.ndim == 0 else out


@overload
def from_bits(bits: int | np.integer[Any], fmt: FormatLike) -> np.float64: ...
@overload
def from_bits(bits: npt.ArrayLike, fmt: FormatLike) -> npt.NDArray[np.float64]: ...
def from_bits(bits: npt.ArrayLike, fmt: FormatLike) -> Any:
    """Decode bit patterns of a format into its values.

    Parameters
    ----------
    bits : array_like of int
        Encodings: an unsigned or non-negative integer array (or integers), each
        in 0..2**fmt.bits - 1.
    fmt : Format or str
        The format, or its name.

    Returns
    -------
    numpy.ndarray or numpy.float64
        The float64 values, in the shape of ``bits`` (a NaN keeps its payload).

    Raises
    ------
    ValueError
        Not integers, or an encoding out of range; a GPU array (copy it to the
        host first); an unknown format.

    Examples
    --------
    >>> import fpsim
    >>> float(fpsim.from_bits(0x3C00, "fp16"))
    1.0
    >>> fpsim.from_bits([0x7BFF, 0x0001, 0xFC00], "fp16").tolist()
    [65504.0, 5.960464477539063e-08, -inf]
    """
    fmt = as_format(fmt)
    if is_device_array(bits):
        raise ValueError("bits: a GPU array; from_bits takes host arrays: copy it with "
                         "cupy.asnumpy first")
    _refuse_masks(bits, "bits")
    arr = np.asarray(bits)
    if arr.dtype.kind not in "iu":
        raise ValueError(f"bits: expected an integer array, got dtype {arr.dtype}")
    if arr.size and (int(arr.min()) < 0 or int(arr.max()) >= 2**fmt.bits):
        raise ValueError(f"bits: values must lie in 0..2**{fmt.bits}-1 for {fmt.name}")
    t, bias = fmt.man_bits, fmt.bias
    u = arr.astype(np.uint64).reshape(-1)
    frac = u & np.uint64(2**t - 1)
    field = ((u >> np.uint64(t)) & np.uint64(2**fmt.exp_bits - 1)).astype(np.int64)
    negative = ((u >> np.uint64(fmt.bits - 1)) != 0) & fmt.signed
    top = 2**fmt.exp_bits - 1
    if fmt.infinities:
        special = field == top
    elif not fmt.negative_zero:  # fnuz: the negative-zero pattern is the NaN
        special = (field == 0) & (frac == 0) & negative
    else:
        special = (field == top) & (frac == np.uint64(2**t - 1)) & fmt.nan
    normal_bits = (np.clip(field - bias + 1023, 1, 2046).astype(np.uint64) << np.uint64(52)) | (
        frac << np.uint64(52 - t)
    )
    subnormal = np.ldexp(frac.astype(np.float64), fmt.emin - t)
    # Exponent-only (E8M0): field 0 is 2**-bias, a normal value; no subnormals, no zero.
    value = np.where((field > 0) | (t == 0), normal_bits.view(np.float64), subnormal)
    # Keep a NaN's payload (and so its quiet bit) in the binary64 fraction.
    special_bits = np.uint64(0x7FF << 52) | (frac << np.uint64(52 - t))
    if not fmt.infinities:  # every special is a NaN (E8M0's has no fraction: set it quiet)
        special_bits = special_bits | np.uint64(1 << 51)
    value = np.where(special, special_bits.view(np.float64), value)
    value = np.where(negative & ~(special & (not fmt.negative_zero)), -value, value)
    out: np.ndarray = value.reshape(arr.shape)
    return out[()] if arr.ndim == 0 else out


@functools.lru_cache(maxsize=64)
def format_of_dtype(dtype: npt.DTypeLike) -> Format | None:
    """The format of a NumPy or ml_dtypes dtype.

    Parameters
    ----------
    dtype : data-type
        A NumPy float dtype, or an ml_dtypes one (``ml_dtypes.bfloat16``, ...).

    Returns
    -------
    Format or None
        The format whose values ``dtype`` holds, value for value and encoding for
        encoding (NaNs as a class): ``float4_e2m1fn``, ``float6_e2m3fn``,
        ``float6_e3m2fn``, ``float8_e8m0fnu`` and the fnuz types ``float8_e4m3fnuz``,
        ``float8_e5m2fnuz`` included; None when it is none of fpsim's (integers,
        ``float8_e4m3b11fnuz``, whose bias is 11).

    Raises
    ------
    TypeError
        ``dtype`` is not a data type NumPy knows.

    Examples
    --------
    >>> import numpy as np
    >>> from fpsim.bits import format_of_dtype
    >>> format_of_dtype(np.float16)
    Format(5, 10, name='fp16')
    >>> format_of_dtype(np.int8) is None
    True
    >>> import ml_dtypes
    >>> format_of_dtype(ml_dtypes.float4_e2m1fn).name
    'fp4_e2m1'
    """
    dtype = np.dtype(dtype)
    natives = {np.dtype(np.float16): "fp16", np.dtype(np.float32): "fp32",
               np.dtype(np.float64): "fp64"}
    if dtype in natives:
        return PRESETS[natives[dtype]]
    if not is_ml_dtype(dtype) or dtype.itemsize > 2:
        return None
    import ml_dtypes

    try:
        info = ml_dtypes.finfo(dtype)
    except ValueError:  # an integer type
        return None
    width = int(info.bits)  # under 8 for float4 and float6, stored one to a byte
    codes = np.arange(2**width, dtype=np.uint64)
    stored = codes.astype({1: np.uint8, 2: np.uint16}[dtype.itemsize]).view(dtype)
    with np.errstate(invalid="ignore"):
        values = stored.astype(np.float64)
    has_inf = bool(np.isinf(values).any())
    # IEEE or finite with NaN; finite without NaN (float4/6 fn); unsigned (float8_e8m0fnu);
    # fnuz (no -0: float8_e4m3fnuz, float8_e5m2fnuz).
    styles = ((has_inf, True, True, True), (False, False, True, True),
              (False, True, False, True), (False, True, True, False))
    for exp_bits in {info.nexp, width - 1 - info.nmant}:
        for infinities, nan, signed, negative_zero in styles:
            try:
                fmt = Format(int(exp_bits), int(info.nmant), infinities=infinities, nan=nan,
                             signed=signed, negative_zero=negative_zero)
            except ValueError:
                continue
            if fmt.bits != width:
                continue
            ours = np.asarray(from_bits(codes, fmt), dtype=np.float64)
            same = (ours == values) & (np.signbit(ours) == np.signbit(values))
            if np.all(same | (np.isnan(ours) & np.isnan(values))):
                return next((p for p in PRESETS.values() if p == fmt), fmt)
    return None


_register_dtype_lookup(format_of_dtype)
