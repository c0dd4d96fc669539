"""The elementwise operations: each computes its exact result as a carrier and rounds it once.

Operands are values of the format (checked before the kernels run). Special
values follow IEEE 754 sections 6 and 7; signalling NaNs raise INVALID.
"""

from fpsim.flags import ABSORBED, DIVBYZERO, INVALID, OVERFLOW
from fpsim.kernels.core import (
    INF_BITS,
    MAG,
    NAN,
    NO_EXPONENT,
    bitlen,
    decode,
    flush_input,
    infinite_result,
    is_inf,
    is_snan,
    pack,
    round_mag,
    sign_bit,
    signed,
    unsigned_zero,
    zero_sum_sign,
)
from fpsim.kernels.prims import f64_bits, f64_i64, fsqrt, i64_f64, maximum, minimum, select


def finite_or_zero(x):
    return select((f64_bits(x) & MAG) < INF_BITS, x, 0.0)


def nan_flags(special, invalid, snan, flags):
    return select(special, select(invalid | snan, INVALID, 0), flags)


def products_exact(spec):
    """Whether every product of two format values is exact in binary64 (no over/underflow)."""
    return (spec.t <= 25) & (spec.emin - spec.t >= -511) & (spec.maxv < 2.0**511)


def product(x, y, spec):
    """Carrier ``(a, sticky)`` of |x * y| for finite format values x, y."""
    if products_exact(spec):
        return f64_bits(abs(x * y)), False
    sx, ex = decode(f64_bits(x) & MAG, spec.t)
    sy, ey = decode(f64_bits(y) & MAG, spec.t)
    return pack(sx * sy, ex + ey, False)


def fma_integer(x, y, z, neg_p, neg_z, t):
    """Carrier ``(neg, a, sticky)`` of x*y + z from integer significands (any format)."""
    sx, ex = decode(f64_bits(x) & MAG, t)
    sy, ey = decode(f64_bits(y) & MAG, t)
    sz, ez = decode(f64_bits(z) & MAG, t)
    sp = sx * sy
    ep = ex + ey
    # Both addends scaled to [2**61, 2**62) so that the sum cannot overflow int64.
    n_p = bitlen(sp)
    n_z = bitlen(sz)
    big_p = sp << (62 - n_p)
    big_z = sz << (62 - n_z)
    e_p = select(sp == 0, NO_EXPONENT, ep - (62 - n_p))
    e_z = select(sz == 0, NO_EXPONENT, ez - (62 - n_z))
    z_first = (e_z > e_p) | ((e_z == e_p) & (big_z >= big_p))
    hi = select(z_first, big_z, big_p)
    lo = select(z_first, big_p, big_z)
    e_hi = select(z_first, e_z, e_p)
    shift = minimum(e_hi - select(z_first, e_p, e_z), 63)
    lo_kept = lo >> shift
    lost = (lo - (lo_kept << shift)) != 0
    # With bits of the smaller addend lost, floor(|hi - lo|) = hi - lo_kept - 1.
    mag = select(neg_p == neg_z, hi + lo_kept, hi - lo_kept - select(lost, 1, 0))
    a, sticky = pack(mag, e_hi, lost)
    return select(z_first, neg_z, neg_p), a, sticky


def absorbed_flag(absorbed, flags):
    """ABSORBED, unless the result overflowed (then the operand did have an effect)."""
    return select(absorbed & ((flags & OVERFLOW) == 0), ABSORBED, 0)


def two_sum(x, y):
    """Carrier of x + y for finite binary64 x, y (Knuth's TwoSum is exact without overflow)."""
    s = x + y
    bb = s - x
    err = (x - (s - bb)) + (y - bb)
    sa = f64_bits(s) & MAG
    away = (err != 0) & ((err < 0) != (s < 0))
    a = select(sa >= INF_BITS, INF_BITS, sa - select(away, 1, 0))
    return s < 0, a, err != 0


def op_add(x, y, rnd, spec, want_flags):
    """x + y rounded once."""
    snan = is_snan(x) | is_snan(y)
    x = flush_input(x, spec)
    y = flush_input(y, spec)
    nan = (x != x) | (y != y)
    inf_x = is_inf(x)
    inf_y = is_inf(y)
    invalid = inf_x & inf_y & (sign_bit(x) != sign_bit(y))
    fx = finite_or_zero(x)
    fy = finite_or_zero(y)
    neg, a, sticky = two_sum(fx, fy)
    exact_zero = (a == 0) & (sticky == 0)
    neg_x = sign_bit(fx)
    neg_y = sign_bit(fy)
    neg = select(exact_zero, zero_sum_sign(neg_x, fx == 0, neg_y, fy == 0, spec.mode), neg)
    v, flags = round_mag(a, sticky, neg, rnd, spec, want_flags)
    out = signed(neg, v)
    inf = inf_x | inf_y
    out = select(inf, infinite_result(select(inf_x, sign_bit(x), sign_bit(y)), spec), out)
    special = nan | invalid
    out = unsigned_zero(select(special, NAN, out), spec)
    if want_flags:
        absorbed = (fx != 0) & (fy != 0) & ((out == fx) | (out == fy))
        flags = nan_flags(special | inf, invalid, snan, flags | absorbed_flag(absorbed, flags))
    return out, flags


def op_sub(x, y, rnd, spec, want_flags):
    """x - y rounded once."""
    return op_add(x, -y, rnd, spec, want_flags)


def product_operands(x, y, spec):
    """Operands of mul and div as read (see ``flush_input``), and what they say of the result."""
    snan = is_snan(x) | is_snan(y)
    x = flush_input(x, spec)
    y = flush_input(y, spec)
    return x, y, snan, sign_bit(x) != sign_bit(y), (x != x) | (y != y)


def op_mul(x, y, rnd, spec, want_flags):
    """x * y rounded once."""
    x, y, snan, neg, nan = product_operands(x, y, spec)
    inf = is_inf(x) | is_inf(y)
    invalid = (is_inf(x) & (y == 0)) | (is_inf(y) & (x == 0))
    a, sticky = product(finite_or_zero(x), finite_or_zero(y), spec)
    v, flags = round_mag(a, sticky, neg, rnd, spec, want_flags)
    out = select(inf, infinite_result(neg, spec), signed(neg, v))
    special = nan | invalid
    out = unsigned_zero(select(special, NAN, out), spec)
    if want_flags:
        flags = nan_flags(special | inf, invalid, snan, flags)
    return out, flags


def op_div(x, y, rnd, spec, want_flags):
    """x / y rounded once."""
    x, y, snan, neg, nan = product_operands(x, y, spec)
    inf_x = is_inf(x)
    inf_y = is_inf(y)
    invalid = (inf_x & inf_y) | ((x == 0) & (y == 0))
    by_zero = (y == 0) & (x != 0) & (inf_x == 0)
    sx, ex = decode(f64_bits(finite_or_zero(x)) & MAG, spec.t)
    sy, ey = decode(f64_bits(select((y == 0) | inf_y, 1.0, y)) & MAG, spec.t)
    # Nonzero for every divisor of the format; a value below its grid (refused by the
    # operand check, after the loop) must not divide by zero first.
    sy = maximum(sy, 1)
    # Quotient of a 62-bit numerator by a significand of at most 30 bits:
    # at least 32 quotient bits, and the remainder decides the sticky bit.
    nx = bitlen(sx)
    num = sx << (62 - nx)
    quo = num // sy
    a, sticky = pack(quo, ex - (62 - nx) - ey, (num - quo * sy) != 0)
    v, flags = round_mag(a, sticky, neg, rnd, spec, want_flags)
    out = signed(neg, select(inf_y, 0.0, v))
    out = select(inf_x | by_zero, infinite_result(neg, spec), out)
    special = nan | invalid
    out = unsigned_zero(select(special, NAN, out), spec)
    if want_flags:
        flags = select(inf_y, 0, flags) | select(by_zero, DIVBYZERO, 0)
        flags = nan_flags(special | inf_x, invalid, snan, flags)
    return out, flags


def op_sqrt(x, rnd, spec, want_flags):
    """Square root rounded once."""
    snan = is_snan(x)
    x = flush_input(x, spec)
    nan = x != x
    invalid = (x < 0) & (x == x)
    inf = is_inf(x) & (x > 0)
    sx, ex = decode(f64_bits(select(invalid | inf | nan, 1.0, x)) & MAG, spec.t)
    # Make the exponent even, then scale to [2**60, 2**62): the root has 31 bits.
    odd = ex & 1
    sx = sx << odd
    ex = ex - odd
    shift = (62 - bitlen(sx)) & ~1
    n = sx << shift
    root = isqrt(n)
    a, sticky = pack(root, (ex - shift) >> 1, (n - root * root) != 0)
    v, flags = round_mag(a, sticky, False, rnd, spec, want_flags)
    out = select(x == 0, x, v)
    out = select(inf, infinite_result(False, spec), out)
    special = nan | invalid
    out = unsigned_zero(select(special, NAN, out), spec)
    if want_flags:
        flags = nan_flags(special | inf, invalid, snan, flags)
    return out, flags


def op_fma(x, y, z, rnd, spec, want_flags):
    """x * y + z rounded once."""
    snan = is_snan(x) | is_snan(y) | is_snan(z)
    x = flush_input(x, spec)
    y = flush_input(y, spec)
    z = flush_input(z, spec)
    neg_p = sign_bit(x) != sign_bit(y)
    neg_z = sign_bit(z)
    nan = (x != x) | (y != y) | (z != z)
    inf_p = is_inf(x) | is_inf(y)
    inf_z = is_inf(z)
    zero_times_inf = (is_inf(x) & (y == 0)) | (is_inf(y) & (x == 0))
    invalid = zero_times_inf | (inf_p & inf_z & (neg_p != neg_z) & (nan == 0))
    fx = finite_or_zero(x)
    fy = finite_or_zero(y)
    fz = finite_or_zero(z)
    zero_p = (fx == 0) | (fy == 0)
    zero_z = fz == 0
    if products_exact(spec):
        # a*b is a binary64 number: the sum is TwoSum's, as in add.
        neg, a, sticky = two_sum(fx * fy, fz)
    else:
        neg, a, sticky = fma_integer(fx, fy, fz, neg_p, neg_z, spec.t)
    exact_zero = (a == 0) & (sticky == 0)
    neg = select(exact_zero, zero_sum_sign(neg_p, zero_p, neg_z, zero_z, spec.mode), neg)
    v, flags = round_mag(a, sticky, neg, rnd, spec, want_flags)
    out = signed(neg, v)
    inf = inf_p | inf_z
    out = select(inf, infinite_result(select(inf_p, neg_p, neg_z), spec), out)
    special = nan | invalid
    out = unsigned_zero(select(special, NAN, out), spec)
    if want_flags:
        a_p, sticky_p = product(fx, fy, spec)
        v_p, flags_p = round_mag(a_p, sticky_p, neg_p, rnd, spec, False)
        absorbed = (zero_p == 0) & (zero_z == 0) & ((out == z) | (out == signed(neg_p, v_p)))
        flags = flags | absorbed_flag(absorbed, flags)
        flags = nan_flags(special | inf, invalid, snan, flags)
    return out, flags


def isqrt(n):
    """floor(sqrt(n)) for 0 <= n < 2**62."""
    r = f64_i64(fsqrt(i64_f64(n)))
    r = r - select(r * r > n, 1, 0)
    return r + select((r + 1) * (r + 1) <= n, 1, 0)
