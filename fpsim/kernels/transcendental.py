"""exp, log and tanh in binary64 from IEEE 754's basic operations alone, then rounded once.

Every step is an addition, multiplication or division of binary64 values (each correctly
rounded, IEEE 754 section 5.4, with no contraction into FMA) or an operation on the
encoding's bits. So every backend, NumPy, Numba and CUDA, computes the same binary64
value, where the platforms' ``exp``/``log``/``tanh`` differ in the last place (glibc,
SVML and CUDA's libdevice all do). The methods are fdlibm's (Sun Microsystems, 1993):
argument reduction by ln 2 and a rational approximation for ``exp``, a reduction to
[sqrt(2)/2, sqrt(2)) and a polynomial in ``s = f / (2 + f)`` for ``log``; each is within
about one unit in the last place of binary64. ``tanh`` is built on them:
``1 - 2 / (exp(2|x|) + 1)`` from |x| = 1, and for smaller |x| ``-u / (u + 2)`` with
``u = expm1(-2|x|)`` by Kahan's formula ``(e - 1) * y / log(e)``.
"""

from fpsim.kernels.core import round_value, sign_bit
from fpsim.kernels.prims import bits_f64, f64_bits, f64_i64, i64_f64, maximum, minimum, select

LN2_HI = 6.93147180369123816490e-01  # 0x3FE62E42FEE00000: k * LN2_HI is exact for |k| < 2**11
LN2_LO = 1.90821492927058770002e-10  # ln 2 - LN2_HI
INV_LN2 = 1.44269504088896338700e+00
# Adding and subtracting 1.5 * 2**52 rounds a binary64 below 2**51 to an integer (nearest).
ROUND_SHIFT = 6755399441055744.0
EXP_OVER = 7.09782712893383973096e+02  # above: exp overflows
EXP_UNDER = -7.45133219101941108420e+02  # below: exp is below half the least subnormal
E1 = 1.66666666666666019037e-01
E2 = -2.77777777770155933842e-03
E3 = 6.61375632143793436117e-05
E4 = -1.65339022054652515390e-06
E5 = 4.13813679705723846039e-08
L1 = 6.666666666666735130e-01
L2 = 3.999999999940941908e-01
L3 = 2.857142874366239149e-01
L4 = 2.222219843214978396e-01
L5 = 1.818357216161805012e-01
L6 = 1.531383769920937332e-01
L7 = 1.479819860511658591e-01
MIN_NORMAL = 2.2250738585072014e-308
TWO54 = 18014398509481984.0
INF = float("inf")
LOW32 = 0xFFFFFFFF


def pow2(n):
    """2**n for an integer -1022 <= n <= 1023, from its encoding."""
    return bits_f64((n + 1023) << 52)


def exp64(x):
    """exp(x) in binary64 (fdlibm's method; NaN kept, overflow to inf, underflow to 0)."""
    finite = select(x == x, x, 0.0)
    xc = minimum(maximum(finite, EXP_UNDER - 1.0), EXP_OVER + 1.0)
    kf = (xc * INV_LN2 + ROUND_SHIFT) - ROUND_SHIFT
    hi = xc - kf * LN2_HI
    lo = kf * LN2_LO
    r = hi - lo
    t = r * r
    c = r - t * (E1 + t * (E2 + t * (E3 + t * (E4 + t * E5))))
    y = 1.0 - ((lo - (r * c) / (2.0 - c)) - hi)
    # 2**k in two normal factors: the second multiplication is the one rounding (subnormals).
    k = f64_i64(kf)
    k1 = k >> 1
    scaled = (y * pow2(k1)) * pow2(k - k1)
    out = select(x > EXP_OVER, INF, select(x < EXP_UNDER, 0.0, scaled))
    return select(x == x, out, x)


def log64(x):
    """log(x) in binary64 (fdlibm's method): -inf at +-0, NaN below 0, inf at inf."""
    ok = (x > 0.0) & (x < INF)
    xs = select(ok, x, 1.0)
    sub = xs < MIN_NORMAL
    xn = select(sub, xs * TWO54, xs)
    bits = f64_bits(xn)
    high = bits >> 32
    k = (high >> 20) - 1023 - select(sub, 54, 0)
    high = high & 0x000FFFFF
    # i: 0x100000 where the significand is at least about sqrt(2): then take x / 2.
    i = (high + 0x95F64) & 0x100000
    m = bits_f64(((high | (i ^ 0x3FF00000)) << 32) | (bits & LOW32))
    k = k + (i >> 20)
    f = m - 1.0
    half_f2 = 0.5 * f * f
    s = f / (2.0 + f)
    z = s * s
    w = z * z
    r = z * (L1 + w * (L3 + w * (L5 + w * L7))) + w * (L2 + w * (L4 + w * L6))
    dk = i64_f64(k)
    value = dk * LN2_HI - ((half_f2 - (s * (half_f2 + r) + dk * LN2_LO)) - f)
    special = select(x == 0.0, -INF, select(x == INF, INF, x - x + (0.0 * INF)))
    return select(ok, value, select(x != x, x, special))


def expm1_64(y):
    """exp(y) - 1 for -2 < y <= 0, without cancellation (Kahan: (e - 1) * y / log(e))."""
    e = exp64(y)
    em = e - 1.0
    safe = select(e == 1.0, 2.0, e)
    kahan = em * y / log64(safe)
    return select(e == 1.0, y, select(em == -1.0, -1.0, kahan))


def tanh64(x):
    """tanh(x) in binary64: 1 - 2 / (exp(2|x|) + 1) from |x| = 1, -u / (u + 2) with
    u = expm1(-2|x|) below, |x| itself below 2**-55; NaN kept, the sign of zero kept."""
    a = select(x == x, abs(x), 0.0)
    large = 1.0 - 2.0 / (exp64(minimum(2.0 * a, 50.0)) + 1.0)
    u = expm1_64(-2.0 * minimum(a, 1.0))
    small = -u / (u + 2.0)
    t = select(a >= 22.0, 1.0, select(a >= 1.0, large, select(a < 2.0**-55, a, small)))
    signed_t = select(sign_bit(x), -t, t)
    return select(x == x, signed_t, x)


def op_exp(x, rnd, spec, want_flags):
    """exp(x) (``exp64``) rounded once to the format."""
    return round_value(exp64(x), rnd, spec, want_flags)


def op_log(x, rnd, spec, want_flags):
    """log(x) (``log64``) rounded once to the format."""
    return round_value(log64(x), rnd, spec, want_flags)


def op_tanh(x, rnd, spec, want_flags):
    """tanh(x) (``tanh64``) rounded once to the format."""
    return round_value(tanh64(x), rnd, spec, want_flags)
