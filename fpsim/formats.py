"""Binary floating-point formats: IEEE 754 style, the OCP finite styles (with and without a
NaN), the fnuz style (AMD's and Graphcore's fp8: no negative zero) and the unsigned scale
formats (E8M0, UE4M3)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from fpsim._checks import boolean

__all__ = ["Format", "format", "PRESETS", "as_format"]

MAX_ARITH_MAN_BITS = 29


@dataclass(frozen=True)
class Format:
    """A binary floating-point format: 1 sign bit, ``exp_bits`` exponent bits,
    ``man_bits`` fraction bits.

    Every value of every format is a float64 value. Formats compare equal when
    their parameters are (the name aside). ``docs/semantics.md`` gives every
    derived quantity.

    Parameters
    ----------
    exp_bits : int
        Exponent bits, 2..11.
    man_bits : int
        Fraction (trailing significand) bits, 1..52; 0 for an exponent-only
        unsigned format (E8M0: every encoding but the NaN is a power of two, no
        zero, no subnormals).
    name : str, optional
        A label; by default the canonical name ``e<exp_bits>m<man_bits>``
        (``fn`` appended in the finite style, ``fnn`` without a NaN, ``fnuz``
        without a negative zero, ``u`` prepended when unsigned).
    infinities : bool, default True
        True: IEEE 754 style. False: the OCP finite style (as fp8_e4m3): no
        infinities, the all-ones exponent holds finite values and only the
        all-ones pattern is NaN (needs ``exp_bits <= 10``).
    nan : bool, default True
        False (with ``infinities=False``): no NaN either, every encoding is
        finite (OCP fp6 e2m3, fp6 e3m2, fp4 e2m1).
    signed : bool, default True
        False (with ``infinities=False``): no sign bit; the unsigned scale
        formats, whose all-ones pattern is NaN (E8M0, UE4M3).
    negative_zero : bool, default True
        False (with ``infinities=False``, signed, with a NaN): the fnuz style of
        AMD's and Graphcore's fp8 (ml_dtypes' ``float8_e4m3fnuz``,
        ``float8_e5m2fnuz``): the negative-zero pattern (sign bit alone) is the one
        NaN, every other pattern is finite, a zero is +0, and the exponent bias is
        ``2**(exp_bits - 1)``, one more than the other styles'.

    Attributes
    ----------
    bias, emin, emax : int
        The exponent bias and the least and greatest normal exponents.
    precision : int
        Significand bits, ``man_bits + 1``.
    bits : int
        The width of an encoding, ``1 + exp_bits + man_bits``.
    max, smallest_normal, smallest_subnormal, eps : float
        The largest finite value, ``2**emin``, ``2**(emin - man_bits)`` and
        ``2**-man_bits``.
    style : str
        The special values: ``"ieee"``, ``"finite_nan"``, ``"finite"``, ``"fnuz"``
        or ``"unsigned"`` (``docs/semantics.md``).
    dtype : numpy.dtype
        The narrowest of float16, float32, float64 that holds every value.
    bits_dtype : numpy.dtype
        The unsigned integer dtype that holds one encoding.

    Raises
    ------
    ValueError
        A parameter out of range or of the wrong type.

    Examples
    --------
    >>> import fpsim
    >>> fp16 = fpsim.Format(5, 10)
    >>> fp16
    Format(5, 10, name='e5m10')
    >>> fp16 == fpsim.PRESETS["fp16"]
    True
    >>> fp16.max, fp16.smallest_normal, fp16.eps
    (65504.0, 6.103515625e-05, 0.0009765625)
    >>> fpsim.Format(4, 3, infinities=False).max
    448.0
    >>> fp4 = fpsim.Format(2, 1, infinities=False, nan=False)
    >>> fp4.max, fp4.style, fp4.name
    (6.0, 'finite', 'e2m1fnn')
    >>> fpsim.Format(8, 0, signed=False, infinities=False).max == 2.0**127
    True
    >>> e4m3fnuz = fpsim.Format(4, 3, infinities=False, negative_zero=False)
    >>> e4m3fnuz.bias, e4m3fnuz.max, e4m3fnuz.smallest_subnormal, e4m3fnuz.style
    (8, 240.0, 0.0009765625, 'fnuz')
    """

    exp_bits: int
    man_bits: int
    name: str = field(default=None, compare=False)  # type: ignore[assignment]  # set: a str
    infinities: bool = True
    nan: bool = True
    signed: bool = True
    negative_zero: bool = True

    def __init__(
        self, exp_bits: int, man_bits: int, *, name: str | None = None, infinities: bool = True,
        nan: bool = True, signed: bool = True, negative_zero: bool = True,
    ) -> None:
        for label, value, lo, hi in (("exp_bits", exp_bits, 2, 11), ("man_bits", man_bits, 0, 52)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise ValueError(f"{label} must be an integer, got {value!r}")
            if not lo <= value <= hi:
                raise ValueError(f"{label}={value} is out of the supported range "
                                 f"{max(lo, 1) if label == 'man_bits' else lo}..{hi}")
        infinities = boolean(infinities, "infinities")
        nan = boolean(nan, "nan")
        signed = boolean(signed, "signed")
        negative_zero = boolean(negative_zero, "negative_zero")
        if name is not None and (not isinstance(name, str) or not name.strip()):
            raise ValueError(f"name must be a non-empty string, got {name!r}")
        if not infinities and exp_bits > 10:
            raise ValueError(
                f"exp_bits={exp_bits}: a format without infinities needs exp_bits <= 10"
            )
        if not nan and infinities:
            raise ValueError("nan=False needs infinities=False: a format with infinities has NaNs")
        if not signed and (infinities or not nan):
            raise ValueError("signed=False needs infinities=False and nan=True: the unsigned "
                             "formats (E8M0, UE4M3) are finite with an all-ones NaN")
        if not negative_zero and (infinities or not nan or not signed or man_bits == 0):
            raise ValueError("negative_zero=False needs infinities=False, nan=True, signed=True "
                             "and man_bits >= 1: the fnuz style (e4m3fnuz, e5m2fnuz) keeps its "
                             "one NaN where -0 would be")
        if man_bits == 0 and signed:
            raise ValueError("man_bits=0 is out of the supported range 1..52 for a signed "
                             "format (0 is the exponent-only unsigned style, E8M0)")
        object.__setattr__(self, "exp_bits", int(exp_bits))
        object.__setattr__(self, "man_bits", int(man_bits))
        object.__setattr__(self, "infinities", bool(infinities))
        object.__setattr__(self, "nan", bool(nan))
        object.__setattr__(self, "signed", bool(signed))
        object.__setattr__(self, "negative_zero", bool(negative_zero))
        object.__setattr__(self, "name", name if name is not None else self.canonical_name)

    @property
    def canonical_name(self) -> str:
        """``e<exp_bits>m<man_bits>``, with ``fn`` for the finite style, ``fnn`` for the
        finite style without a NaN, ``fnuz`` without a negative zero, and ``u`` before it
        when unsigned: ``format()`` reads it back.

        Examples
        --------
        >>> import fpsim
        >>> fpsim.PRESETS["bf16"].canonical_name, fpsim.PRESETS["fp8_e4m3"].canonical_name
        ('e8m7', 'e4m3fn')
        >>> fpsim.PRESETS["fp4_e2m1"].canonical_name, fpsim.PRESETS["e8m0"].canonical_name
        ('e2m1fnn', 'ue8m0')
        """
        core = f"e{self.exp_bits}m{self.man_bits}"
        if not self.signed:
            return "u" + core
        if not self.negative_zero:
            return core + "fnuz"
        return core + ("" if self.infinities else "fn" if self.nan else "fnn")

    @property
    def style(self) -> str:
        """The format's special values: ``"ieee"`` (infinities and NaNs),
        ``"finite_nan"`` (no infinities, one NaN pattern per sign: OCP fp8 e4m3),
        ``"finite"`` (every encoding finite: OCP fp6, fp4), ``"fnuz"`` (no infinities,
        no negative zero, its pattern the one NaN: AMD's fp8) or ``"unsigned"`` (no sign
        bit, no infinities, the all-ones pattern NaN: E8M0, UE4M3).

        Examples
        --------
        >>> import fpsim
        >>> [fpsim.format(n).style for n in ("fp16", "fp8_e4m3", "fp6_e3m2", "ue4m3")]
        ['ieee', 'finite_nan', 'finite', 'unsigned']
        """
        if not self.signed:
            return "unsigned"
        if self.infinities:
            return "ieee"
        if not self.negative_zero:
            return "fnuz"
        return "finite_nan" if self.nan else "finite"

    @property
    def bias(self) -> int:
        """The exponent bias, ``2**(exp_bits - 1) - 1`` (``2**(exp_bits - 1)`` in the fnuz
        style)."""
        return (1 << (self.exp_bits - 1)) - int(self.negative_zero)

    @property
    def emin(self) -> int:
        """The least normal exponent, ``1 - bias`` (``-bias`` when exponent-only: E8M0)."""
        return 1 - self.bias if self.man_bits else -self.bias

    @property
    def emax(self) -> int:
        """The greatest exponent of a finite value: ``bias`` (in the finite styles, where the
        all-ones exponent holds finite values, ``2**exp_bits - 1 - bias``: ``bias + 1``,
        and ``bias - 1`` in the fnuz style; ``bias`` when exponent-only, where it is the
        NaN)."""
        if self.infinities or not self.man_bits:
            return self.bias
        return (1 << self.exp_bits) - 1 - self.bias

    @property
    def precision(self) -> int:
        """Significand bits, ``man_bits + 1``."""
        return self.man_bits + 1

    @property
    def bits(self) -> int:
        """The width of an encoding, ``1 + exp_bits + man_bits``."""
        return int(self.signed) + self.exp_bits + self.man_bits

    @cached_property
    def max(self) -> float:
        """The largest finite value."""
        nan_on_top = (not self.infinities and self.nan and self.man_bits > 0
                      and self.negative_zero)
        top = 2.0 - 2.0 ** -self.man_bits * (2 if nan_on_top else 1)
        return float(np.ldexp(top, self.emax))

    @cached_property
    def smallest_normal(self) -> float:
        """``2**emin``."""
        return float(np.ldexp(1.0, self.emin))

    @cached_property
    def smallest_subnormal(self) -> float:
        """``2**(emin - man_bits)``."""
        return float(np.ldexp(1.0, self.emin - self.man_bits))

    @cached_property
    def eps(self) -> float:
        """The spacing of the values in [1, 2), ``2**-man_bits``."""
        return float(np.ldexp(1.0, -self.man_bits))

    @cached_property
    def dtype(self) -> np.dtype:
        """The narrowest NumPy float dtype that holds every value of the format."""
        for dt in (np.float16, np.float32, np.float64):
            info = np.finfo(dt)
            if (
                self.man_bits <= info.nmant
                and self.emax <= info.maxexp - 1
                and self.emin - self.man_bits >= info.minexp - info.nmant
            ):
                return np.dtype(dt)
        raise AssertionError("every format fits in float64")

    @property
    def bits_dtype(self) -> np.dtype:
        """The unsigned integer dtype that holds one encoding."""
        for dt in (np.uint8, np.uint16, np.uint32, np.uint64):
            if self.bits <= np.dtype(dt).itemsize * 8:
                return np.dtype(dt)
        raise AssertionError("every format fits in 64 bits")

    def __repr__(self) -> str:
        extra = "" if self.infinities else ", infinities=False"
        extra += ("" if self.nan else ", nan=False") + ("" if self.signed else ", signed=False")
        extra += "" if self.negative_zero else ", negative_zero=False"
        return f"Format({self.exp_bits}, {self.man_bits}, name={self.name!r}{extra})"


#: The preset formats by name: fp16, bf16, tf32, fp32, fp64, fp8_e5m2, fp8_e4m3, the
#: block-scaled element and scale formats fp6_e2m3, fp6_e3m2, fp4_e2m1, e8m0, ue4m3, and
#: AMD's fnuz fp8 (CDNA3's fp8 and bf8) fp8_e4m3fnuz, fp8_e5m2fnuz.
PRESETS: dict[str, Format] = {
    f.name: f
    for f in (
        Format(5, 10, name="fp16"),
        Format(8, 7, name="bf16"),
        Format(8, 10, name="tf32"),
        Format(8, 23, name="fp32"),
        Format(11, 52, name="fp64"),
        Format(5, 2, name="fp8_e5m2"),
        Format(4, 3, name="fp8_e4m3", infinities=False),
        Format(2, 3, name="fp6_e2m3", infinities=False, nan=False),
        Format(3, 2, name="fp6_e3m2", infinities=False, nan=False),
        Format(2, 1, name="fp4_e2m1", infinities=False, nan=False),
        Format(8, 0, name="e8m0", infinities=False, signed=False),
        Format(4, 3, name="ue4m3", infinities=False, signed=False),
        Format(4, 3, name="fp8_e4m3fnuz", infinities=False, negative_zero=False),
        Format(5, 2, name="fp8_e5m2fnuz", infinities=False, negative_zero=False),
    )
}

_ALIASES = {
    "binary16": "fp16", "half": "fp16", "float16": "fp16",
    "bfloat16": "bf16",
    "binary32": "fp32", "single": "fp32", "float32": "fp32",
    "binary64": "fp64", "double": "fp64", "float64": "fp64",
    "e5m2": "fp8_e5m2", "e4m3": "fp8_e4m3",
    "float6_e2m3fn": "fp6_e2m3", "float6_e3m2fn": "fp6_e3m2", "float4_e2m1fn": "fp4_e2m1",
    "float8_e8m0fnu": "e8m0", "ue8m0": "e8m0",
    "float8_e4m3fnuz": "fp8_e4m3fnuz", "float8_e5m2fnuz": "fp8_e5m2fnuz",
}


_CANONICAL = re.compile(r"(u)?e(\d{1,2})m(\d{1,2})(fnuz|fnn|fn)?")


def format(name: str) -> Format:
    """Look a format up by name.

    Parameters
    ----------
    name : str
        A preset (``"fp16"``, ``"bf16"``, ``"tf32"``, ``"fp32"``, ``"fp64"``,
        ``"fp8_e5m2"``, ``"fp8_e4m3"``, ``"fp6_e2m3"``, ``"fp6_e3m2"``,
        ``"fp4_e2m1"``, ``"e8m0"``, ``"ue4m3"``, ``"fp8_e4m3fnuz"``,
        ``"fp8_e5m2fnuz"``), an alias (``"half"``, ``"float32"``, ``"bfloat16"``,
        ml_dtypes' names ``"float4_e2m1fn"``, ``"float8_e4m3fnuz"``, ...), or
        ``"e<exp_bits>m<man_bits>"`` (``"e6m9"``; ``"e4m3fn"``: the finite style, no
        infinities; ``"e3m2fnn"``: finite, no NaN; ``"e4m3fnuz"``: finite, no
        negative zero; ``"ue5m2"``: unsigned); case is ignored.

    Returns
    -------
    Format

    Raises
    ------
    ValueError
        An unknown name (the message lists the known ones), or parameters out
        of range.

    Examples
    --------
    >>> import fpsim
    >>> fpsim.format("half")
    Format(5, 10, name='fp16')
    >>> fpsim.format("e6m9")
    Format(6, 9, name='e6m9')
    >>> fpsim.format("e4m3fn")
    Format(4, 3, name='e4m3fn', infinities=False)
    """
    if not isinstance(name, str):
        raise ValueError(f"format name must be a string, got {name!r}")
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key in PRESETS:
        return PRESETS[key]
    match = _CANONICAL.fullmatch(key)
    if match and not (match[1] and match[4]):
        exp_bits, man_bits = int(match[2]), int(match[3])
        if match[1]:
            return Format(exp_bits, man_bits, infinities=False, signed=False)
        if match[4] == "fnuz":
            return Format(exp_bits, man_bits, infinities=False, negative_zero=False)
        return Format(exp_bits, man_bits, infinities=match[4] is None, nan=match[4] != "fnn")
    known = ", ".join(sorted(PRESETS))
    raise ValueError(f"unknown format {name!r}; known formats: {known}, or e<E>m<M> "
                     "(e.g. e6m9) for a custom one")


def _no_dtype_lookup(dtype: np.dtype) -> Format | None:
    raise RuntimeError("fpsim.bits is not imported: it tells which format a dtype holds")


# How a dtype maps to its format (``fpsim.bits.format_of_dtype``, which decodes the dtype's
# encodings): set by fpsim.bits when it is imported (``import fpsim`` does), so that this
# module imports nothing above it.
_dtype_lookup: list[Callable[[np.dtype], Format | None]] = [_no_dtype_lookup]


def _register_dtype_lookup(lookup: Callable[[np.dtype], Format | None]) -> None:
    """Make ``as_format`` find a dtype's format with ``lookup`` (``fpsim.bits`` calls it)."""
    _dtype_lookup[0] = lookup


def as_format(fmt: Format | str | np.dtype | type[np.generic]) -> Format:
    """A ``Format`` as it is, the format a name names (``format(name)``), or the format
    of a NumPy float type or dtype (``np.float16``: fp16), as ``"float16"`` names it.

    Parameters
    ----------
    fmt : Format, str, numpy.dtype or NumPy scalar type
        A format, a name, or ``np.float16``, ``np.float32``, ``np.float64``, an
        ml_dtypes type of one of fpsim's formats (``ml_dtypes.bfloat16``), or the
        dtype of one of these.

    Returns
    -------
    Format

    Raises
    ------
    ValueError
        Not a Format, a known name, or a dtype of one of fpsim's formats.

    Examples
    --------
    >>> import numpy as np
    >>> from fpsim.formats import as_format
    >>> as_format("fp16") is as_format(as_format("fp16"))
    True
    >>> as_format(np.float16) is as_format(np.dtype("float16")) is as_format("float16")
    True
    """
    if isinstance(fmt, Format):
        return fmt
    if isinstance(fmt, str):
        return format(fmt)
    if isinstance(fmt, np.dtype) or (isinstance(fmt, type) and issubclass(fmt, np.generic)):
        dtype = np.dtype(fmt)
        found = _dtype_lookup[0](dtype.newbyteorder("=") if dtype.kind == "f" else dtype)
        if found is None:
            raise ValueError(f"dtype {dtype} is not one of fpsim's formats: a format is a "
                             "Format, a name (\"fp16\", \"e6m9\") or a float dtype of one")
        return found
    raise ValueError(f"expected a Format, a format name or a NumPy float dtype, got {fmt!r}")
