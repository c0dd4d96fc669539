"""Scalar primitives in plain Python; backends bind their own versions of these names."""

import math
import struct


def select(c, a, b):
    """``a`` where ``c`` else ``b``."""
    return a if c else b


def maximum(a, b):
    return max(a, b)


def minimum(a, b):
    return min(a, b)


def f64_bits(x):
    """The IEEE binary64 encoding of ``x`` as a signed 64-bit integer."""
    return struct.unpack("<q", struct.pack("<d", x))[0]


def bits_f64(u):
    """The float64 whose encoding is the signed 64-bit integer ``u``."""
    return struct.unpack("<d", struct.pack("<q", u))[0]


def i64_f64(i):
    """Integer to float64 (rounded to nearest)."""
    return float(i)


def f64_i64(x):
    """Float64 to integer, truncating."""
    return int(x)


def u64(i):
    """Signed to unsigned 64-bit, modulo 2**64."""
    return i % (1 << 64)


def i64(u):
    """Unsigned 64-bit below 2**63 to signed."""
    return int(u)


def fsqrt(x):
    return math.sqrt(x)
