"""``kernels.blockscale.nearest_even_encoded``: an MX element rounded to nearest even by
binary64's own addition, and its encoding, against an exact reference (each format's
values enumerated from the OCP MX v1.0 definitions, the nearest found with Fractions), on
every decision boundary and its binary64 neighbours, and on Hypothesis' floats; on the
NumPy and Numba instances of the kernel. ``numba_quantize.nearest_even_applies`` says
where the MX loops use it."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fpsim
from fpsim.backends import array_kernels, get_backend, numba_quantize
from fpsim.formats import PRESETS
from fpsim.kernels.blockscale import Encoding
from fpsim.kernels.spec import make_spec

# (exponent bits, fraction bits, the NaN and infinity codes of a sign's half: OCP MX v1.0
# section 5.3 and the OFP8 formats).
FORMATS = {
    "fp8_e4m3": (4, 3, {0x7F}),  # S.1111.111 is NaN; no infinities
    "fp8_e5m2": (5, 2, set(range(0x7C, 0x80))),  # IEEE style: infinities and NaNs
    "fp6_e2m3": (2, 3, set()),  # every code a number
    "fp6_e3m2": (3, 2, set()),
    "fp4_e2m1": (2, 1, set()),
}


def values(name: str) -> list[tuple[Fraction, int]]:
    """The format's nonnegative values and their codes, ascending, from the definition:
    ``(1 + f / 2**m) * 2**(e - bias)``, or ``f / 2**m * 2**(1 - bias)`` for e = 0."""
    e_bits, m, special = FORMATS[name]
    bias = (1 << (e_bits - 1)) - 1
    out = []
    for code in range(1 << (e_bits + m)):
        if code in special:
            continue
        e, f = code >> m, code & ((1 << m) - 1)
        value = (Fraction(f, 1 << m) * Fraction(2) ** (1 - bias) if e == 0 else
                 (1 + Fraction(f, 1 << m)) * Fraction(2) ** (e - bias))
        out.append((value, code))
    return sorted(out)


def reference(y: float, name: str) -> tuple[float, int]:
    """``y`` rounded to nearest, ties to the even code, saturating at the largest value,
    the sign kept (a zero's too): the value and its encoding."""
    table = values(name)
    a = abs(Fraction(y))
    sign_bit = 1 << (sum(FORMATS[name][:2]))
    if a >= table[-1][0]:
        value, code = table[-1]
    else:
        hi = next(i for i, (v, _) in enumerate(table) if v > a)
        (lo_v, lo_c), (hi_v, hi_c) = table[hi - 1], table[hi]
        if a - lo_v != hi_v - a:
            value, code = (lo_v, lo_c) if a - lo_v < hi_v - a else (hi_v, hi_c)
        else:
            value, code = (lo_v, lo_c) if lo_c % 2 == 0 else (hi_v, hi_c)
    negative = math.copysign(1.0, y) < 0
    return (-float(value) if negative else float(value)), code | (sign_bit if negative else 0)


def candidates(name: str) -> np.ndarray:
    """Every value, every midpoint of neighbours, each one's binary64 neighbours, far
    beyond the largest value and far below the smallest, with both signs."""
    v = np.array([float(value) for value, _ in values(name)])
    mids = (v[1:] + v[:-1]) / 2
    top = v[-1]
    spots = np.concatenate([v, mids, [top * 1.0625, top * 2, top * 4, 2.0**896, 1e308,
                                      np.finfo(np.float64).max, 5e-324, 1e-300]])
    with np.errstate(over="ignore"):  # the largest binary64's neighbour up: inf, dropped
        near = np.concatenate([spots, np.nextafter(spots, np.inf), np.nextafter(spots, 0.0)])
    near = near[np.isfinite(near)]
    return np.concatenate([near, -near])


def numpy_kernel(y: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray]:
    fmt = PRESETS[name]
    spec = make_spec(fmt, "nearest_even", True, True, None)
    return array_kernels(y)["nearest_even_encoded"](y, spec, Encoding.of(fmt))


@pytest.mark.parametrize("name", list(FORMATS))
def test_it_is_nearest_even_and_the_encoding_on_every_boundary(name):
    y = candidates(name)
    fmt = PRESETS[name]
    spec, code = make_spec(fmt, "nearest_even", True, True, None), Encoding.of(fmt)
    assert numba_quantize.nearest_even_applies(spec, code)
    got_v, got_e = numpy_kernel(y, name)
    want = [reference(float(x), name) for x in y]
    want_v = np.array([w[0] for w in want])
    want_e = np.array([w[1] for w in want])
    bad = np.flatnonzero((got_v.view(np.int64) != want_v.view(np.int64)) | (got_e != want_e))
    assert bad.size == 0, [(y[i], got_v[i], want_v[i], got_e[i], want_e[i]) for i in bad[:5]]
    # The Numba backend's instance, as the loops inline it.
    with fpsim.backend("numba"):
        kernel = get_backend().kernels["nearest_even_encoded"]
    for i in range(0, y.size, 7):
        v, e = kernel(float(y[i]), spec, code)
        assert (np.float64(v).view(np.int64), e) == (want_v[i:i + 1].view(np.int64)[0],
                                                    want_e[i]), y[i]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(list(FORMATS)),
       st.one_of(st.floats(allow_nan=False, allow_infinity=False),
                 st.floats(-1024.0, 1024.0), st.floats(-2.0**-5, 2.0**-5)))
def test_it_is_nearest_even_and_the_encoding_on_any_finite_value(name, y):
    v, e = numpy_kernel(np.array([y]), name)
    want_v, want_e = reference(y, name)
    assert (v.view(np.int64)[0], int(e[0])) == (np.float64(want_v).view(np.int64), want_e)


def test_the_loops_use_it_only_where_it_is_the_rounding():
    """Nearest even, saturating, with subnormals, into a format with a signed zero:
    every other spec rounds by the rounding primitive."""
    applies = numba_quantize.nearest_even_applies
    e4m3 = PRESETS["fp8_e4m3"]
    code = Encoding.of(e4m3)
    assert applies(make_spec(e4m3, "nearest_even", True, True, None), code)
    for spec in (make_spec(e4m3, "nearest_away", True, True, None),
                 make_spec(e4m3, "stochastic", True, True, 8),
                 make_spec(e4m3, "nearest_even", False, True, None),
                 make_spec(e4m3, "nearest_even", True, False, None)):
        assert not applies(spec, code)
    fnuz = PRESETS["fp8_e4m3fnuz"]  # the sign bit alone is the NaN: no -0
    assert not applies(make_spec(fnuz, "nearest_even", True, True, None), Encoding.of(fnuz))
    e8m0 = PRESETS["e8m0"]  # unsigned
    assert not applies(make_spec(e8m0, "nearest_even", True, True, None), Encoding.of(e8m0))
