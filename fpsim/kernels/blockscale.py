"""Block scaling, written once: an MX block's shared scale exponent, NVFP4's block scales,
the value each element rounds, and a format value's encoding.

Branch-free scalar code over the primitives, as the rest of ``fpsim.kernels``: the NumPy
backend runs it on whole arrays (``fpsim.quantize``), the Numba quantization loops per
block and element (``fpsim.backends.numba_quantize``). The MX rule's binary32 steps are
binary64 operations whose result is exact, rounded once to binary32 by the one rounding
primitive (``round_value`` with a binary32 spec); NVFP4's, done per block and element,
compute in the binary32 type their operands arrive in (NumPy's float32 arrays, Numba's
float32), whose every operation is IEEE binary32's.
"""

from typing import NamedTuple

import numpy as np

from fpsim.kernels.core import (
    BIAS,
    FRAC,
    FRAC_MASK,
    HIDDEN,
    INF_BITS,
    MAG,
    NAN,
    SHIFT_CAP,
    SIGN,
    bitlen,
    decode,
    pow2_bits,
    round_value,
    sign_bit,
)
from fpsim.kernels.prims import bits_f64, f64_bits, maximum, minimum, select

# The MX scale rules, by code (``fpsim.quantize.scale_rules`` names them).
OCP = 0
CEIL = 1
TORCHAO_EVEN = 2
TRANSFORMER_ENGINE = 3
NO_SCALE = -(1 << 40)  # below every scale format's range: clamped to its smallest scale
ONE_BITS = 0x3FF0000000000000  # the encoding of 1.0
TINY = 5e-324  # 2**-1074, binary64's smallest subnormal
ZERO32 = np.float32(0.0)
ONE32 = np.float32(1.0)
E4M3_MAX32 = np.float32(448.0)
FLT_MAX32 = np.finfo(np.float32).max
INF32 = np.float32(np.inf)
NORMAL32 = np.float32(2.0**-126)  # binary32's smallest normal
SIGN_EXPONENT = -(1 << 52)  # a binary64 encoding's sign and exponent bits (0xFFF0...)


class Encoding(NamedTuple):
    """A format's encoding, as ``encode`` reads it."""

    t: int  # fraction bits
    emin: int  # exponent of the smallest normal (the smallest value, exponent-only formats)
    bias: int  # exponent field of 2**e is e + bias
    sign: int  # the sign bit's value in the encoding (0: unsigned)
    inf: int  # the encoding of +inf (0: no infinities)
    nan: int  # the encoding of NaN (the quiet NaN with a zero sign)

    @classmethod
    def of(cls, fmt):
        """The ``Encoding`` of an ``fpsim.Format``."""
        top = (1 << fmt.exp_bits) - 1
        nan_frac = (1 << fmt.man_bits) - 1 if not fmt.infinities else 1 << (fmt.man_bits - 1)
        sign = (1 << (fmt.bits - 1)) if fmt.signed else 0
        # The fnuz style's NaN is the negative-zero pattern (the sign bit alone).
        return cls(fmt.man_bits, fmt.emin, fmt.bias, sign,
                   (top << fmt.man_bits) if fmt.infinities else 0,
                   (top << fmt.man_bits) | nan_frac if fmt.negative_zero else sign)


def floor_log2(a):
    """floor(log2(v)) of a positive finite magnitude v with encoding ``a``."""
    ef = a >> FRAC
    return select(ef > 0, ef - BIAS, bitlen(a) - (BIAS + FRAC))


def is_power_of_two(a):
    """Whether the positive finite magnitude with encoding ``a`` is a power of two."""
    frac = a & FRAC_MASK
    return select((a >> FRAC) > 0, frac == 0, (frac & (frac - 1)) == 0)


def significand(a):
    """The 53-bit significand of the positive finite magnitude with encoding ``a``,
    normalised: in [2**52, 2**53)."""
    frac = a & FRAC_MASK
    shift = minimum(maximum(FRAC + 1 - bitlen(frac), 0), SHIFT_CAP)
    return select((a >> FRAC) > 0, frac | HIDDEN, frac << shift)


def mx_exponent(amax, rule, emax, t, inv_max, low, high, fp32):
    """An MX block's scale exponent from its amax (>= 0, or NaN) by ``rule`` (a code
    above), clamped to ``low..high``, and whether the scale is NaN: ``(s, nan)``.

    ``emax`` and ``t`` are the element format's largest exponent and fraction bits,
    ``inv_max`` is ``1 / max`` rounded to binary32, ``fp32`` the spec of binary32 in
    nearest-even. A NaN or infinite amax, or under ``TRANSFORMER_ENGINE`` one beyond
    binary32's range, makes the scale NaN; a zero block gets ``low``.
    """
    a = f64_bits(amax) & MAG
    positive = (a != 0) & (a < INF_BITS)
    safe = select(positive, a, ONE_BITS)
    fl = floor_log2(safe)
    up = select(is_power_of_two(safe), 0, 1)
    # torchao's EVEN: amax's significand, rounded half up to t fraction bits, carries.
    carries = select(significand(safe) >= (1 << (FRAC + 1)) - (1 << (FRAC - 1 - t)), 1, 0)
    # TransformerEngine: descale = binary32(amax) * binary32(1 / max), rounded to binary32
    # (the product of two binary32 values is exact in binary64), then rounded up to a
    # power of two (cvt.rp.satfinite.ue8m0x2.f32).
    a32, _ = round_value(bits_f64(safe), 0, fp32, False)
    descale, _ = round_value(a32 * inv_max, 0, fp32, False)
    d = f64_bits(descale)
    d_safe = select((d > 0) & (d < INF_BITS), d, ONE_BITS)
    te = select(d > 0, floor_log2(d_safe) + select(is_power_of_two(d_safe), 0, 1), NO_SCALE)
    s = select(rule == OCP, fl - emax,
               select(rule == CEIL, fl + up - emax,
                      select(rule == TORCHAO_EVEN, fl + carries - emax, te)))
    nan = (a >= INF_BITS) | ((rule == TRANSFORMER_ENGINE) & (d >= INF_BITS))
    return select(positive & (nan == 0), minimum(maximum(s, low), high), low), nan


def mx_factors(s):
    """``2**-s`` and ``2**s``: what an MX block's elements are multiplied by, and what
    checks that nothing was lost (``mx_scaled``)."""
    return bits_f64(pow2_bits(0 - s)), bits_f64(pow2_bits(s))


def mx_scaled(x, down, up, nan, tiny):
    """``x / 2**s`` (``down = 2**-s``, ``up = 2**s``: ``mx_factors``), exactly: the value an
    MX element rounds (+0 in a block whose scale is NaN), in the type of ``x``, ``down``,
    ``up`` and ``tiny`` (binary64, or binary32 for binary32 input). A quotient that
    falls into that type's subnormals and loses bits (binary64: only beside a scale clamped
    at its top; binary32: one far below the block's amax) is ``tiny``, the type's smallest
    subnormal, of its sign instead: far below half of any element format's smallest
    subnormal, it rounds as the exact value does in every mode, stochastic included."""
    scaled = x * down
    lost = scaled * up != x
    return select(nan, tiny * 0, select(lost, select(x < 0, 0 - tiny, tiny), scaled))


def pow2_or_nan(s, nan):
    """The scale ``2**s``, or NaN."""
    return select(nan, NAN, bits_f64(pow2_bits(s)))


def nvfp4_block_scales(amax, multiplier, global_decode, e4m3):
    """An NVFP4 block's scales from its amax (>= 0, or NaN), as TransformerEngine computes
    them in binary32: ``(decode, encode)``, ``encode`` binary32-typed.

    ``decode = e4m3(min(binary32(amax) * multiplier, 448))`` is the block's UE4M3 scale
    (the binary32 block's amax is ``amax`` rounded: rounding is monotonic), ``encode =
    min(1 / (decode * global_decode), FLT_MAX)`` (FLT_MAX for a zero ``decode``) multiplies
    the elements; ``multiplier`` and ``global_decode`` are binary32-typed, each operation
    is binary32's (``np.float32``/``np.float64`` convert exactly or round to nearest, on
    every backend), ``e4m3`` is the spec of UE4M3 in nearest-even.
    """
    product = np.float32(amax) * multiplier
    product = select(product > E4M3_MAX32, E4M3_MAX32, product)
    scale, _ = round_value(np.float64(product), 0, e4m3, False)
    denominator = np.float32(scale) * global_decode
    zero = denominator == 0
    quotient = ONE32 / select(zero, ONE32, denominator)
    return scale, select(zero | (quotient > FLT_MAX32), FLT_MAX32, quotient)


def nvfp4_scaled(x, encode):
    """``x * encode`` for binary32-typed operands: the binary32 product an NVFP4 element
    rounds (+0 for NaN)."""
    y = x * encode
    return select(y != y, ZERO32, y)


def current_scale(amax, top, pow2):
    """FP8 current scaling's binary32 scale and decode scale from a block's amax, as
    TransformerEngine's ``compute_scale_from_amax`` computes them: ``(decode, scale)``.

    ``scale = top / amax`` rounded to binary32 (``top``: the element format's largest
    value, binary32-typed; ``amax`` a binary32 value, or NaN); ``FLT_MAX`` where that
    overflows; 1 for a zero, infinite or NaN amax; with ``pow2``, its fraction bits
    cleared (a power of two, rounded down; zero below binary32's normals, as the
    encoding's mask gives). ``decode = 1 / scale`` in binary32.
    """
    a = np.float32(amax)
    plain = (a != a) | (a == 0) | (a > FLT_MAX32)
    scale = top / select(plain, ONE32, a)
    scale = select(plain, ONE32, select(scale > FLT_MAX32, FLT_MAX32, scale))
    # The binary64 encoding's fraction bits cleared: binary32's, for its normal values.
    cleared = np.float32(bits_f64(f64_bits(np.float64(scale)) & SIGN_EXPONENT))
    scale = select(pow2, select(scale < NORMAL32, ZERO32, cleared), scale)
    return select(scale == 0, INF32, ONE32 / select(scale == 0, ONE32, scale)), scale


def blockwise_scale(amax):
    """DeepSeek-V3's binary32 block scale ``amax / 448`` (``amax`` a binary32 value, or
    NaN)."""
    return np.float32(amax) / E4M3_MAX32


def scaled32(x, scale):
    """``x * scale`` for binary32-typed operands: the binary32 product a current-scaled
    element rounds."""
    return x * scale


def descaled32(x, s):
    """``x / s`` for binary32-typed operands: the binary32 quotient a blockwise element
    rounds. A zero block's zeros (``s = 0``) stay themselves, where the kernel's ``0 / 0``
    gives NaN; a nonzero value over a zero scale is an infinity of its sign."""
    zero = s == 0
    return select(zero, select(x == 0, x, x * INF32), x / select(zero, ONE32, s))


def encode(v, code):
    """The encoding of ``v``, a value of the format that ``code`` (an ``Encoding``)
    describes (a NaN: the format's quiet NaN)."""
    a = f64_bits(v) & MAG
    sig, e = decode(a, code.t)
    top = e + code.t  # floor(log2 |v|)
    normal = ((top + code.bias) << code.t) + sig - (1 << code.t)
    sub = sig >> minimum(maximum(code.emin - top, 0), SHIFT_CAP)
    magnitude = select(top >= code.emin, normal, sub)
    magnitude = select(a == 0, 0, select(a == INF_BITS, code.inf, magnitude))
    nan = a > INF_BITS
    # A zero takes no sign where the sign bit alone is the NaN (fnuz).
    signed = sign_bit(v) & (nan == 0) & ((a != 0) | (code.nan != code.sign))
    return select(nan, code.nan, magnitude | select(signed, code.sign, 0))


def nearest_even_encoded(y, spec, code):
    """``y`` (finite, binary64) rounded to nearest even in a signed, saturating format with
    subnormals (``spec``, ``code``: its ``Encoding``), and its encoding: ``(value,
    encoding)``, the bits of ``round_value`` then ``encode`` of ``y`` (the MX loops use it
    where ``nearest_even_applies``: a third of the time).

    The rounding is binary64's own. Below 2**52 times a power of two ``q``, adding that
    much to ``|y|`` gives a sum whose last place is ``q``, so the sum rounds ``|y|`` to a
    multiple of ``q``, ties to even (IEEE 754-2019 4.3.1); taking it back off is exact
    (Sterbenz: the sum lies in ``[c, 2c]``). ``q`` is the format's quantum at ``|y|``'s
    exponent, its subnormals' below the smallest normal. A result beyond the largest
    value saturates: ``|y|`` is first capped at twice it, so that ``c`` stays finite.
    The encoding is read off the result's binary64 encoding: its exponent and top ``t``
    fraction bits, rebiased; a subnormal's after adding the smallest normal, which puts
    its multiple of the least subnormal in those fraction bits."""
    b = f64_bits(y)
    a = minimum(b & MAG, f64_bits(spec.maxv) + HIDDEN)  # |y|, capped at 2 * maxv
    e = maximum(a >> FRAC, spec.emin + BIAS)  # the quantum's binade, biased
    c = bits_f64((e - spec.t + FRAC) << FRAC)  # 2**52 * quantum
    r = minimum((bits_f64(a) + c) - c, spec.maxv)
    sub = r < spec.minnorm
    lifted = f64_bits(r + select(sub, spec.minnorm, 0.0)) >> (FRAC - spec.t)
    field = lifted - select(sub, (spec.emin + BIAS) << spec.t, (BIAS - code.bias) << spec.t)
    neg = b < 0
    return bits_f64(f64_bits(r) | (b & SIGN)), field | select(neg, code.sign, 0)
