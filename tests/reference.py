"""Exact reference for fpsim: rounding and arithmetic with Python integers.

Independent of fpsim. Values of a format are Python floats (every format value
is a float64 value); exact intermediate values are integers scaled by powers
of two, or quotients of integers, never floating point.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache
from typing import NamedTuple

import numpy as np

INEXACT, UNDERFLOW, OVERFLOW, DIVBYZERO, INVALID, ABSORBED = 1, 2, 4, 8, 16, 32
MODES = ("nearest_even", "nearest_away", "toward_zero", "up", "down", "odd")
NAN = math.nan
INF = math.inf


class Fmt(NamedTuple):
    """Format parameters: exponent bits, stored fraction bits, IEEE-style or finite style."""

    exp_bits: int
    man_bits: int
    infinities: bool = True

    @property
    def bias(self) -> int:
        return (1 << (self.exp_bits - 1)) - 1

    @property
    def emin(self) -> int:
        return 1 - self.bias

    @property
    def emax(self) -> int:
        return self.bias if self.infinities else self.bias + 1

    @property
    def max_mant(self) -> int:
        """Integer significand of max, in units of 2**(emax - man_bits)."""
        top = 1 << (self.man_bits + 1)
        return top - 1 if self.infinities else top - 2

    @property
    def max(self) -> float:
        return math.ldexp(self.max_mant, self.emax - self.man_bits)

    @property
    def smallest_normal(self) -> float:
        return math.ldexp(1.0, self.emin)

    @property
    def smallest_subnormal(self) -> float:
        return math.ldexp(1.0, self.emin - self.man_bits)

    @property
    def bits(self) -> int:
        return 1 + self.exp_bits + self.man_bits


PRESETS = {
    "fp16": Fmt(5, 10),
    "bf16": Fmt(8, 7),
    "tf32": Fmt(8, 10),
    "fp32": Fmt(8, 23),
    "fp64": Fmt(11, 52),
    "fp8_e5m2": Fmt(5, 2),
    "fp8_e4m3": Fmt(4, 3, False),
}


def as_fmt(fmt) -> Fmt:
    """Accept a Fmt, a preset name or any object with exp_bits/man_bits/infinities."""
    if isinstance(fmt, Fmt):
        return fmt
    if isinstance(fmt, str):
        return PRESETS[fmt]
    return Fmt(int(fmt.exp_bits), int(fmt.man_bits), bool(getattr(fmt, "infinities", True)))


def _ilog2(n: int, d: int) -> int:
    """floor(log2(n / d)) for positive integers."""
    e = n.bit_length() - d.bit_length()
    if e >= 0:
        if n < d << e:
            e -= 1
    elif n << -e < d:
        e -= 1
    return e


def _split_ratio(n: int, d: int, e: int, q: int) -> tuple[int, int]:
    """Integer part k and class of the fraction of n/d*2**e / 2**q.

    Class: 0 exact, 1 below one half, 2 exactly one half, 3 above one half.
    """
    s = e - q
    if s >= 0:
        num, den = n << s, d
    else:
        num, den = n, d << -s
    k, r = divmod(num, den)
    if r == 0:
        return k, 0
    t = r << 1
    return k, 1 if t < den else (2 if t == den else 3)


def _pick(k: int, cls: int, neg: bool, mode: str) -> int:
    """Magnitude chosen between k and k+1 (semantics.md table)."""
    if cls == 0:
        return k
    if mode == "nearest_even":
        return k + (cls == 3 or (cls == 2 and k & 1 == 1))
    if mode == "nearest_away":
        return k + (cls >= 2)
    if mode == "toward_zero":
        return k
    if mode == "up":
        return k + (not neg)
    if mode == "down":
        return k + neg
    if mode == "odd":
        return k if k & 1 else k + 1
    raise ValueError(f"unknown rounding mode {mode!r}")


def _overflow_value(neg: bool, fmt: Fmt, mode: str, saturate: bool) -> float:
    mx = fmt.max
    if saturate or mode in ("toward_zero", "odd"):
        big = False
    elif mode == "up":
        big = not neg
    elif mode == "down":
        big = neg
    else:
        big = True
    if not big:
        return -mx if neg else mx
    if not fmt.infinities:
        return NAN
    return -INF if neg else INF


def _round_core(neg, ilog, split, fmt: Fmt, mode, subnormals, saturate) -> tuple[float, int]:
    """Round a nonzero finite exact value.

    ilog is floor(log2|v|); split(q) gives (k, class) of |v| / 2**q.
    """
    man, emin = fmt.man_bits, fmt.emin
    q = max(ilog, emin) - man
    k, cls = split(q)
    m = _pick(k, cls, neg, mode)
    flags = INEXACT if cls else 0
    qmax = fmt.emax - man
    if q >= qmax:
        over = (m << (q - qmax)) > fmt.max_mant
    else:
        over = m > (fmt.max_mant << (qmax - q))
    if over:
        return _overflow_value(neg, fmt, mode, saturate), OVERFLOW | INEXACT
    if ilog < emin:
        if cls:
            # Tininess after rounding: round to the precision with an unbounded exponent.
            qu = ilog - man
            ku, clsu = split(qu)
            mu = _pick(ku, clsu, neg, mode)
            if mu < 1 << (emin - qu):
                flags |= UNDERFLOW
        if not subnormals and m < 1 << man:
            return (-0.0 if neg else 0.0), INEXACT | UNDERFLOW
    r = math.ldexp(m, q)
    return (-r if neg else r), flags


def _round_ratio(neg, n, d, e, fmt, mode, subnormals, saturate):
    """Round +-n/d * 2**e (n, d > 0)."""
    ilog = _ilog2(n, d) + e
    return _round_core(
        neg, ilog, lambda q: _split_ratio(n, d, e, q), fmt, mode, subnormals, saturate
    )


@lru_cache(maxsize=1 << 18)
def _round_ratio_cached(neg, n, d, e, fmt, mode, subnormals, saturate):
    return _round_ratio(neg, n, d, e, fmt, mode, subnormals, saturate)


def _round_dyadic(neg, n, e, fmt, mode, subnormals, saturate):
    tz = (n & -n).bit_length() - 1
    return _round_ratio_cached(neg, n >> tz, 1, e + tz, fmt, mode, subnormals, saturate)


def _dyadic(x: float) -> tuple[bool, int, int]:
    """Finite float -> (negative, n, e) with |x| = n * 2**e."""
    n, d = abs(x).as_integer_ratio()
    return math.copysign(1.0, x) < 0, n, 1 - d.bit_length()


def _daz(x: float, fmt: Fmt, subnormals: bool) -> float:
    if not subnormals and x != 0 and abs(x) < fmt.smallest_normal:
        return math.copysign(0.0, x)
    return x


def _inf_result(neg: bool, fmt: Fmt, saturate: bool) -> float:
    if saturate:
        return -fmt.max if neg else fmt.max
    if not fmt.infinities:
        return NAN
    return -INF if neg else INF


def _zero_sum(sign_a: bool, sign_b: bool, mode: str) -> float:
    if sign_a == sign_b:
        return -0.0 if sign_a else 0.0
    return -0.0 if mode == "down" else 0.0


def ref_round(value, fmt, mode="nearest_even", subnormals=True, saturate=False):
    """Round a Fraction, int or float to fmt; returns (float, flags).

    subnormals=False reads an input below smallest_normal as zero (no flag).
    """
    fmt = as_fmt(fmt)
    if isinstance(value, (Fraction, int)) and not isinstance(value, bool):
        v = Fraction(value)
        if v == 0:
            return 0.0, 0
        neg = v < 0
        n, d, e = abs(v.numerator), v.denominator, 0
    else:
        x = float(value)
        if x != x:
            return NAN, 0
        if math.isinf(x):
            # A finite-style format has no infinity: NaN, and INVALID (semantics.md).
            nan = not fmt.infinities and not saturate
            return _inf_result(x < 0, fmt, saturate), INVALID if nan else 0
        if x == 0:
            return x, 0
        neg, n, e = _dyadic(x)
        d = 1
    if not subnormals and _ilog2(n, d) + e < fmt.emin:
        return (-0.0 if neg else 0.0), 0
    return _round_ratio(neg, n, d, e, fmt, mode, subnormals, saturate)


def _sum(fmt, mode, subnormals, saturate, terms, zero_signs):
    """Round an exact sum of dyadic terms (neg, n, e); zero_signs give the addends' signs."""
    e = min(t[2] for t in terms)
    s = sum((-(n << (te - e)) if ng else n << (te - e)) for ng, n, te in terms)
    if s == 0:
        return _zero_sum(zero_signs[0], zero_signs[1], mode), 0
    return _round_dyadic(s < 0, abs(s), e, fmt, mode, subnormals, saturate)


def ref_add(a, b, fmt, mode="nearest_even", subnormals=True, saturate=False):
    """a + b rounded once; returns (float, flags)."""
    fmt = as_fmt(fmt)
    a, b = _daz(float(a), fmt, subnormals), _daz(float(b), fmt, subnormals)
    if a != a or b != b:
        return NAN, 0
    if math.isinf(a) or math.isinf(b):
        if math.isinf(a) and math.isinf(b) and (a > 0) != (b > 0):
            return NAN, INVALID
        return _inf_result((a if math.isinf(a) else b) < 0, fmt, saturate), 0
    if a == 0 and b == 0:
        return _zero_sum(math.copysign(1, a) < 0, math.copysign(1, b) < 0, mode), 0
    da, db = _dyadic(a), _dyadic(b)
    r, fl = _sum(fmt, mode, subnormals, saturate, (da, db), (da[0], db[0]))
    if a != 0 and b != 0 and (r == a or r == b) and not fl & OVERFLOW:
        fl |= ABSORBED
    return r, fl


def ref_sub(a, b, fmt, mode="nearest_even", subnormals=True, saturate=False):
    """a - b rounded once, as a + (-b); ABSORBED compares the result with a and -b."""
    return ref_add(a, -float(b), fmt, mode, subnormals, saturate)


def _product_operands(a, b, fmt, subnormals):
    """Format, operands as read (subnormals flushed if off), and the sign of a*b or a/b."""
    fmt = as_fmt(fmt)
    a, b = _daz(float(a), fmt, subnormals), _daz(float(b), fmt, subnormals)
    return fmt, a, b, (math.copysign(1, a) < 0) != (math.copysign(1, b) < 0)


def ref_mul(a, b, fmt, mode="nearest_even", subnormals=True, saturate=False):
    """a * b rounded once; returns (float, flags)."""
    fmt, a, b, neg = _product_operands(a, b, fmt, subnormals)
    if a != a or b != b:
        return NAN, 0
    if math.isinf(a) or math.isinf(b):
        if a == 0 or b == 0:
            return NAN, INVALID
        return _inf_result(neg, fmt, saturate), 0
    if a == 0 or b == 0:
        return (-0.0 if neg else 0.0), 0
    _, na, ea = _dyadic(a)
    _, nb, eb = _dyadic(b)
    return _round_dyadic(neg, na * nb, ea + eb, fmt, mode, subnormals, saturate)


def ref_div(a, b, fmt, mode="nearest_even", subnormals=True, saturate=False):
    """a / b rounded once; returns (float, flags)."""
    fmt, a, b, neg = _product_operands(a, b, fmt, subnormals)
    if a != a or b != b:
        return NAN, 0
    if math.isinf(a):
        if math.isinf(b):
            return NAN, INVALID
        return _inf_result(neg, fmt, saturate), 0
    if math.isinf(b) or (a == 0 and b != 0):
        return (-0.0 if neg else 0.0), 0
    if b == 0:
        if a == 0:
            return NAN, INVALID
        return _inf_result(neg, fmt, saturate), DIVBYZERO
    _, na, ea = _dyadic(a)
    _, nb, eb = _dyadic(b)
    tza, tzb = (na & -na).bit_length() - 1, (nb & -nb).bit_length() - 1
    na, nb = na >> tza, nb >> tzb
    g = math.gcd(na, nb)
    e = ea + tza - eb - tzb
    return _round_ratio_cached(neg, na // g, nb // g, e, fmt, mode, subnormals, saturate)


def _split_sqrt(n: int, h: int, q: int) -> tuple[int, int]:
    """Integer part and fraction class of sqrt(n) * 2**h / 2**q."""
    s = h - q
    if s >= 0:
        y = n << (2 * s)
        k = math.isqrt(y)
        if k * k == y:
            return k, 0
        return k, 1 if 4 * y < (2 * k + 1) ** 2 else 3
    t = -2 * s
    k = math.isqrt(n >> t)
    if (k * k) << t == n:
        return k, 0
    lhs, rhs = 4 * n, ((2 * k + 1) ** 2) << t
    return k, 1 if lhs < rhs else (2 if lhs == rhs else 3)


def ref_sqrt(a, fmt, mode="nearest_even", subnormals=True, saturate=False):
    """sqrt(a) rounded once, with an exact integer square root; returns (float, flags)."""
    fmt = as_fmt(fmt)
    a = _daz(float(a), fmt, subnormals)
    if a != a:
        return NAN, 0
    if a == 0:
        return a, 0
    if a < 0:
        return NAN, INVALID
    if math.isinf(a):
        return _inf_result(False, fmt, saturate), 0
    _, n, e = _dyadic(a)
    if e & 1:
        n, e = n << 1, e - 1
    h = e // 2
    ilog = (_ilog2(n, 1) + e) >> 1
    return _round_core(False, ilog, lambda q: _split_sqrt(n, h, q), fmt, mode, subnormals, saturate)


def ref_fma(a, b, c, fmt, mode="nearest_even", subnormals=True, saturate=False):
    """a * b + c rounded once; returns (float, flags)."""
    fmt = as_fmt(fmt)
    a, b, c = (_daz(float(x), fmt, subnormals) for x in (a, b, c))
    if (math.isinf(a) and b == 0) or (a == 0 and math.isinf(b)):
        return NAN, INVALID
    if a != a or b != b or c != c:
        return NAN, 0
    pneg = (math.copysign(1, a) < 0) != (math.copysign(1, b) < 0)
    if math.isinf(a) or math.isinf(b):
        if math.isinf(c) and (c < 0) != pneg:
            return NAN, INVALID
        return _inf_result(pneg, fmt, saturate), 0
    if math.isinf(c):
        return _inf_result(c < 0, fmt, saturate), 0
    cneg = math.copysign(1, c) < 0
    if a == 0 or b == 0:
        if c == 0:
            return _zero_sum(pneg, cneg, mode), 0
        return c, 0
    _, na, ea = _dyadic(a)
    _, nb, eb = _dyadic(b)
    prod = (pneg, na * nb, ea + eb)
    if c == 0:
        return _round_dyadic(pneg, na * nb, ea + eb, fmt, mode, subnormals, saturate)
    r, fl = _sum(fmt, mode, subnormals, saturate, (prod, _dyadic(c)), (pneg, cneg))
    absorbed = r == c or r == ref_mul(a, b, fmt, mode, subnormals, saturate)[0]
    if absorbed and not fl & OVERFLOW:
        fl |= ABSORBED
    return r, fl


REF_OPS = {
    "add": ref_add,
    "sub": ref_sub,
    "mul": ref_mul,
    "div": ref_div,
    "sqrt": ref_sqrt,
    "fma": ref_fma,
}


def ref_decode(bits: int, fmt) -> float:
    """Value of a bit pattern of fmt (NaN for NaN patterns)."""
    fmt = as_fmt(fmt)
    man, eb = fmt.man_bits, fmt.exp_bits
    sign = (bits >> (eb + man)) & 1
    ef = (bits >> man) & ((1 << eb) - 1)
    mf = bits & ((1 << man) - 1)
    top = (1 << eb) - 1
    if ef == top and (fmt.infinities or mf == (1 << man) - 1):
        if fmt.infinities and mf == 0:
            v = INF
        else:
            return NAN
    elif ef == 0:
        v = math.ldexp(mf, fmt.emin - man)
    else:
        v = math.ldexp(mf | (1 << man), ef - fmt.bias - man)
    return -v if sign else v


def ref_encode(x: float, fmt) -> int:
    """Bit pattern of a value of fmt (one NaN pattern for NaN)."""
    fmt = as_fmt(fmt)
    man, eb = fmt.man_bits, fmt.exp_bits
    sign = int(math.copysign(1.0, x) < 0) << (eb + man)
    if x != x:
        return (((1 << eb) - 1) << man) | ((1 << man) - 1)
    if math.isinf(x):
        return sign | (((1 << eb) - 1) << man)
    if x == 0:
        return sign
    _, n, e = _dyadic(x)
    tz = (n & -n).bit_length() - 1
    n, e = n >> tz, e + tz
    ilog = _ilog2(n, 1) + e
    if ilog < fmt.emin:
        return sign | (n << (e - (fmt.emin - man)))
    return sign | ((ilog + fmt.bias) << man) | ((n << (e - ilog + man)) - (1 << man))


def all_values(fmt) -> np.ndarray:
    """Every bit pattern of fmt decoded, index = pattern (float64)."""
    fmt = as_fmt(fmt)
    return np.array([ref_decode(i, fmt) for i in range(1 << fmt.bits)], dtype=np.float64)


def ref_apply(fn, fmt, mode, subnormals, saturate, *arrays):
    """Apply a reference function elementwise to equal-length 1-D arrays."""
    n = len(arrays[0])
    out = np.empty(n, dtype=np.float64)
    fl = np.empty(n, dtype=np.uint8)
    cols = [a.tolist() for a in arrays]
    for i, args in enumerate(zip(*cols, strict=True)):
        out[i], fl[i] = fn(*args, fmt, mode, subnormals, saturate)
    return out, fl


def same_bits(got, expected) -> np.ndarray:
    """Elementwise: equal float64 bits, or both NaN."""
    g = np.asarray(got, dtype=np.float64)
    e = np.asarray(expected, dtype=np.float64)
    both_nan = np.isnan(g) & np.isnan(e)
    return both_nan | (g.view(np.uint64) == e.view(np.uint64))


def assert_same_bits(got, expected, what):
    """Assert equal shapes and bit-for-bit equal values (NaN matches NaN)."""
    g = np.asarray(got, dtype=np.float64)
    e = np.asarray(expected, dtype=np.float64)
    assert g.shape == e.shape, f"{what}: shape {g.shape}, expected {e.shape}"
    ok = same_bits(g, e)
    if not ok.all():
        lines = [f"{what}: {int((~ok).sum())} of {ok.size} differ"]
        for idx in np.argwhere(~ok)[:5]:
            t = tuple(int(i) for i in idx)
            lines.append(f"  at {t}: expected {e[t]!r}, got {g[t]!r}")
        raise AssertionError("\n".join(lines))


def assert_matches(got, expected, inputs, what, got_flags=None, expected_flags=None, limit=8):
    """Assert values (and flags if given) match; list the first mismatching inputs."""
    got = np.asarray(got, dtype=np.float64).ravel()
    expected = np.asarray(expected, dtype=np.float64).ravel()
    ok = same_bits(got, expected)
    if got_flags is not None:
        ok &= np.asarray(got_flags).ravel().astype(np.int64) == np.asarray(
            expected_flags
        ).ravel().astype(np.int64)
    if ok.all():
        return
    bad = np.flatnonzero(~ok)
    lines = [f"{what}: {bad.size} of {ok.size} mismatch"]
    for i in bad[:limit]:
        ins = ", ".join(repr(float(np.asarray(x).ravel()[i])) for x in inputs)
        line = f"  inputs ({ins}): expected {float(expected[i])!r}, got {float(got[i])!r}"
        if got_flags is not None:
            line += (
                f"; flags expected {int(np.asarray(expected_flags).ravel()[i])},"
                f" got {int(np.asarray(got_flags).ravel()[i])}"
            )
        lines.append(line)
    raise AssertionError("\n".join(lines))
