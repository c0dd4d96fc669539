"""The rounding primitive and the carrier every operation hands to it.

A *carrier* is the exact value v of a result, given as
``(neg, a, sticky)``: ``a`` is the binary64 encoding of |v| truncated toward
zero onto the binary64 grid (subnormals included; the encoding of +inf when
|v| >= 2**1024), and ``sticky`` says that |v| is strictly larger than that.
``round_mag`` is the one place where a value is rounded to a format.

Format parameters travel as ``spec``, a ``fpsim.kernels.spec.Spec``.

Every constant of the carrier's encoding is named below (``FRAC``, ``BIAS``,
...): the rounding functions also run on the binary32 encoding, for float32
input rounded to narrower formats, with the same source and binary32's
constants (``fpsim.kernels.carrier``).
"""

import numpy as np

from fpsim.flags import INEXACT, INVALID, OVERFLOW, UNDERFLOW
from fpsim.kernels.prims import bits_f64, f64_bits, i64_f64, maximum, minimum, select
from fpsim.modes import DOWN, NEAREST_AWAY, NEAREST_EVEN, ODD, STOCHASTIC, UP

# The carrier's encoding: binary64.
FRAC = 52  # fraction bits
BIAS = 1023  # exponent bias
SHIFT_CAP = 62  # shift counts stay below the integer width (int64)
MAG = 0x7FFFFFFFFFFFFFFF  # all but the sign bit
SIGN = -(1 << 63)  # the sign bit
INF_BITS = 0x7FF0000000000000
QUIET = 0x0008000000000000
FRAC_MASK = 0x000FFFFFFFFFFFFF
HIDDEN = 0x0010000000000000  # the implicit bit of a normal significand
INF = np.inf
NAN = np.nan
NO_EXPONENT = -(1 << 40)  # stands for the exponent of zero in a maximum


def pow2_bits(q):
    """The encoding of 2.0**q, from the smallest subnormal up (-1074 <= q <= 1023)."""
    normal = maximum(q + BIAS, 0) << FRAC
    sub = 1 << minimum(maximum(q + BIAS + FRAC - 1, 0), SHIFT_CAP)
    return select(q >= 1 - BIAS, normal, sub)


def grid(a, t, emin):
    """Split the carrier's magnitude ``a`` at the format's last place.

    Returns ``(sig, d, rem)``: the integer significand of ``a`` (implicit bit
    included), the number ``d`` of its low bits that fall below the format's
    last place there (on the subnormal grid below ``emin``), and those bits
    (``rem = sig`` for every d > FRAC).
    """
    ef = a >> FRAC
    sig = (a & FRAC_MASK) | select(ef > 0, HIDDEN, 0)
    d = FRAC - t + maximum(emin + BIAS - maximum(ef, 1), 0)
    return sig, d, sig & ((1 << minimum(d, SHIFT_CAP)) - 1)


def offset(odd, rem, d, sticky, neg, rnd, mode, rbits):
    """What rounding adds below the format's last place: the truncated magnitude moves
    up one unit exactly when ``rem + offset`` reaches the unit ``2**d`` (d capped),
    so that on the grid ``(a + offset)`` carries into the kept bits by itself.

    ``odd``: the truncated magnitude is an odd multiple of the unit. Every offset is
    at most one unit.
    """
    unit = 1 << minimum(d, SHIFT_CAP)
    half = unit >> 1
    # d = 0 happens only for exact inputs (sticky clear): nothing to round, no offset.
    # Nearest-even: a tie (rem == half) carries only with an odd unit or a sticky bit.
    nearest_even = maximum(half - 1 + select(odd | sticky, 1, 0), 0)
    inexact = (rem != 0) | sticky
    away = unit - 1 + select(sticky, 1, 0)  # any nonzero remainder or sticky bit carries
    # Stochastic: R uniform in [0, 2**r) rounds away iff R < floor(f * 2**r).
    r = minimum(rbits, d)
    g = rem >> minimum(d - r, SHIFT_CAP + 1)
    sr = (rnd >> (53 - r)) < g
    return select(
        mode == NEAREST_EVEN,
        nearest_even,
        select(
            mode == NEAREST_AWAY,
            half,
            select(
                mode == UP,
                select(neg, 0, away),
                select(
                    mode == DOWN,
                    select(neg, away, 0),
                    select(
                        mode == STOCHASTIC,
                        select(sr, unit, 0),
                        # Round to odd: an inexact magnitude on an even unit moves up one.
                        select((mode == ODD) & inexact & (odd == 0), unit, 0),
                    ),
                ),
            ),
        ),
    )


def carries(rem, add, d):
    """Whether ``rem + add`` reaches the unit: the truncated magnitude moves up one."""
    return rem + add >= (1 << minimum(d, SHIFT_CAP))


def increment(odd, rem, d, sticky, neg, rnd, mode, rbits):
    """Whether the truncated magnitude moves up one unit."""
    return carries(rem, offset(odd, rem, d, sticky, neg, rnd, mode, rbits), d)


def overflow_value(neg, spec):
    """The magnitude an overflow gives (IEEE 754 section 7.4, and the finite-style rule)."""
    to_inf = (
        (spec.mode == NEAREST_EVEN)
        | (spec.mode == NEAREST_AWAY)
        | (spec.mode == STOCHASTIC)
        | ((spec.mode == UP) & (neg == 0))
        | ((spec.mode == DOWN) & neg)
    )
    return select(to_inf & (spec.saturate == 0), select(spec.infinities != 0, INF, NAN), spec.maxv)


def round_mag(a, sticky, neg, rnd, spec, want_flags):
    """Round the carrier ``(neg, a, sticky)`` to the format: (magnitude, flags).

    ``rnd`` holds 53 random bits (stochastic mode only). The magnitude is a
    float64 >= 0, or +inf, or NaN (overflow in a finite-style format).
    """
    sig, d, rem = grid(a, spec.t, spec.emin)
    # The result is built in the carrier's encoding: adding the offset and clearing
    # the low d bits rounds (a carry moves into the exponent). Below the smallest
    # subnormal (d > FRAC) the candidates are 0 and 2**(emin-t).
    on_grid = d <= FRAC
    odd = select(d == FRAC, True, on_grid & (((a >> minimum(d, FRAC)) & 1) == 1))
    inexact = (rem != 0) | sticky
    add = offset(odd, rem, d, sticky, neg, rnd, spec.mode, spec.rbits)
    rounded = select(on_grid, (a + add) & (0 - (1 << minimum(d, FRAC))),
                     select(carries(rem, add, d), pow2_bits(spec.emin - spec.t), 0))
    # Compared as encodings: a carrier at +inf may step past it.
    over = rounded > f64_bits(spec.maxv)
    v = select(over, overflow_value(neg, spec), bits_f64(rounded))
    nonzero = (a != 0) | sticky
    flush = (spec.subnormals == 0) & (v < spec.minnorm) & nonzero
    v = select(flush, 0.0, v)
    # An exponent-only format (E8M0, t = 0) has no zero: a nonzero magnitude below its
    # smallest value gives that value, and zero has no encoding (NaN, INVALID). An unsigned
    # format has no negative values: a negative nonzero value is NaN (INVALID).
    v = select((spec.t == 0) & (v == 0.0) & nonzero, spec.minnorm, v)
    invalid = ((spec.t == 0) & (nonzero == 0)) | ((spec.signed == 0) & neg & nonzero)
    v = select(invalid, NAN, v)
    flags = 0
    if want_flags:
        # Tininess after rounding (IEEE 754 section 7.5): round to the
        # precision with an unbounded exponent; only values in
        # [2**(emin-1), 2**emin) can reach 2**emin that way.
        e_lsb = maximum(a >> FRAC, 1) - (BIAS + FRAC)
        e_top = select(a >= HIDDEN, (a >> FRAC) - BIAS,
                       select(a >= (HIDDEN >> 1), -BIAS, -BIAS - 1))
        du = minimum(maximum(e_top - spec.t - e_lsb, 0), SHIFT_CAP)
        keep_u = sig >> du
        odd_u = (keep_u & 1) == 1
        inc_u = increment(odd_u, sig - (keep_u << du), du, sticky, neg, rnd, spec.mode, spec.rbits)
        reaches = (e_top == spec.emin - 1) & (keep_u + inc_u == (1 << (spec.t + 1)))
        tiny = (e_top < spec.emin) & (reaches == 0) & ((a != 0) | sticky)
        flags = select(invalid, INVALID, (
            select(inexact | over | flush, INEXACT, 0)
            | select((tiny & inexact) | flush, UNDERFLOW, 0)
            | select(over, OVERFLOW, 0)
        ))
    return v, flags


def bitlen(x):
    """Number of significant bits of 0 <= x < 2**63 (0 for 0)."""
    e = (f64_bits(i64_f64(x)) >> 52) - 1022
    e = select(x == 0, 0, e)
    # The conversion rounds to 53 bits and may carry into the next power of two.
    low = (x >> minimum(maximum(e - 1, 0), 62)) == 0
    return e - select(low & (x != 0), 1, 0)


def pack(sig, e, sticky):
    """Carrier ``(a, sticky)`` of the exact ``sig * 2**e`` (+ sticky), for 0 <= sig < 2**63."""
    n = bitlen(sig)
    s = maximum(n - 53, -1074 - e)
    right = minimum(maximum(s, 0), 63)
    kept = sig >> right
    dropped = (sig - (kept << right)) != 0
    m = kept << minimum(maximum(-s, 0), 63)
    # A normal m (implicit bit 2**52) carries one into the exponent field.
    field = e + s + 1074
    a = select(field >= 2046, INF_BITS, m + (minimum(maximum(field, 0), 2046) << 52))
    return select(sig == 0, 0, a), sticky | dropped


def decode(a, t):
    """Integer significand and exponent of a format value's binary64 magnitude ``a``.

    The significand is cut to ``t + 1`` bits, exact for values of the format.
    """
    ef = a >> FRAC
    sig = (a & FRAC_MASK) | select(ef > 0, HIDDEN, 0)
    shift = FRAC - t
    return sig >> shift, maximum(ef, 1) - (BIAS + FRAC) + shift


def sign_bit(x):
    return f64_bits(x) < 0


def is_snan(x):
    a = f64_bits(x) & MAG
    return (a > INF_BITS) & ((a & QUIET) == 0)


def is_inf(x):
    return (f64_bits(x) & MAG) == INF_BITS


def flush_input(x, spec):
    """Operands below the smallest normal read as zero under ``subnormals=False``."""
    return select((spec.subnormals == 0) & (abs(x) < spec.minnorm), x * 0.0, x)


def infinite_magnitude(spec):
    """An exact infinity's magnitude in the format: inf, or max when saturating, or NaN."""
    return select(spec.saturate != 0, spec.maxv, select(spec.infinities != 0, INF, NAN))


def infinite_result(neg, spec):
    """An exact infinity delivered in the format: ±inf, or ±max when saturating, or NaN."""
    return signed(neg, infinite_magnitude(spec))


def zero_sum_sign(neg_x, zero_x, neg_y, zero_y, mode):
    """Sign of an exact zero sum (IEEE 754 section 6.3)."""
    same = zero_x & zero_y & (neg_x == neg_y)
    return select(same, neg_x, mode == DOWN)


def signed(neg, v):
    return select(neg, -v, v)


def unsigned_zero(v, spec):
    """``v``, a zero made +0 in a format without a negative zero (the fnuz style, whose
    negative-zero pattern is its NaN)."""
    return select((spec.signed == 2) & (v == 0), abs(v), v)


def representable(x, spec):
    """Whether ``x`` is a value of the format (NaN always is, infinities if it has them)."""
    a = f64_bits(x) & MAG
    # The bits below the format's last place must be clear; below the smallest
    # subnormal (d > FRAC) that leaves only zero.
    d = FRAC - spec.t + maximum(spec.emin + BIAS - maximum(a >> FRAC, 1), 0)
    on_grid = (a & ((1 << minimum(d, SHIFT_CAP)) - 1)) == 0
    finite_ok = on_grid & (a <= f64_bits(spec.maxv))
    # No zero in an exponent-only format (E8M0); no negative values, -0 included, unsigned.
    finite_ok = finite_ok & ((spec.t != 0) | (a != 0)) & ((spec.signed != 0) | (sign_bit(x) == 0))
    return (finite_ok | ((a > INF_BITS) & (spec.nan != 0))
            | ((a == INF_BITS) & (spec.infinities != 0)))


def round_value(x, rnd, spec, want_flags):
    """``x`` (any value of the carrier's type) rounded to the format: (value, flags)."""
    x = flush_input(x, spec)
    neg = sign_bit(x)
    a = f64_bits(x) & MAG
    nan = a > INF_BITS
    inf = a == INF_BITS
    # NaN and infinity lanes round their encodings too (integer steps, nothing traps); the
    # selects below replace the result.
    v, flags = round_mag(a, False, neg, rnd, spec, want_flags)
    # -inf has no encoding in an unsigned format: round_mag's NaN stands.
    negative_inf = inf & neg & (spec.signed == 0)
    # x's sign bit set on the magnitude (copySign, IEEE 754 5.5.1): one OR on the encoding;
    # an unsigned format has none (-0 gives +0).
    mag = select(inf & (negative_inf == 0), infinite_magnitude(spec), v)
    sign = f64_bits(x) & select(spec.signed != 0, SIGN, 0)
    out = unsigned_zero(select(nan, NAN, bits_f64(f64_bits(mag) | sign)), spec)
    if want_flags:
        inf_to_nan = inf & (spec.infinities == 0) & (spec.saturate == 0)
        # NaN into a format without one stays a (float64) NaN, flagged INVALID.
        invalid = inf_to_nan | negative_inf | is_snan(x) | (nan & (spec.nan == 0))
        flags = select(nan | inf, select(invalid, INVALID, 0), flags)
    return out, flags
