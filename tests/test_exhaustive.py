"""Exhaustive checks of small formats against the exact reference."""

import itertools
from functools import cache

import numpy as np
import pytest
from reference import (
    MODES,
    PRESETS,
    all_values,
    assert_matches,
    ref_add,
    ref_decode,
    ref_div,
    ref_mul,
    ref_round,
    ref_sub,
    same_bits,
)

import fpsim

FORMATS = ["fp16", "bf16", "fp8_e5m2", "fp8_e4m3"]
UINT = {8: np.uint8, 16: np.uint16}


@cache
def _values(name):
    return all_values(PRESETS[name])


# --- (a) bit patterns --------------------------------------------------------------------


@pytest.mark.parametrize("name", FORMATS)
def test_from_bits_every_pattern(name, backend_name):
    """from_bits decodes every bit pattern as the reference does."""
    fmt = PRESETS[name]
    pats = np.arange(1 << fmt.bits).astype(UINT[fmt.bits])
    got = fpsim.from_bits(pats, name)
    assert np.asarray(got).dtype == np.float64
    assert_matches(got, _values(name), [pats], f"from_bits {name}")


@pytest.mark.parametrize("name", FORMATS)
def test_to_bits_round_trip(name, backend_name):
    """to_bits(from_bits(b)) == b for every non-NaN pattern; NaN patterns stay NaN."""
    fmt = PRESETS[name]
    pats = np.arange(1 << fmt.bits).astype(UINT[fmt.bits])
    vals = _values(name)
    back = np.asarray(fpsim.to_bits(vals, name))
    assert back.dtype == UINT[fmt.bits]
    nan = np.isnan(vals)
    bad = np.flatnonzero(~nan & (back != pats))
    assert bad.size == 0, f"{name}: to_bits wrong for patterns {pats[bad[:8]]}: {back[bad[:8]]}"
    assert all(np.isnan(ref_decode(int(b), fmt)) for b in back[nan])
    again = fpsim.from_bits(fpsim.to_bits(fpsim.from_bits(pats, name), name), name)
    assert_matches(again, vals, [pats], f"from_bits(to_bits(from_bits)) {name}")
    zeros = np.asarray(fpsim.to_bits(np.array([0.0, -0.0]), name))
    assert zeros.tolist() == [0, 1 << (fmt.bits - 1)]


# --- (b) rounding of values at, between and beside every representable value ------------


@cache
def _probes(name):
    """Every value, every midpoint, the points beyond max, and float64 neighbours of all."""
    fmt = PRESETS[name]
    v = _values(name)
    v = np.unique(np.abs(v[np.isfinite(v)]))
    ulp_top = 2.0 ** (fmt.emax - fmt.man_bits)
    beyond = np.array([fmt.max + ulp_top, 2 * fmt.max, 1e300, np.finfo(np.float64).max])
    mids = np.concatenate([(v[:-1] + v[1:]) / 2, [fmt.max + ulp_top / 2]])
    base = np.concatenate([v, mids, beyond])
    with np.errstate(over="ignore"):
        pts = np.concatenate([base, np.nextafter(base, np.inf), np.nextafter(base, 0)])
    pts = np.unique(pts)
    return np.concatenate([pts, -pts, [np.inf, -np.inf, np.nan]])


def _ref_table(name, mode, subnormals, saturate, x):
    out = np.empty(x.size)
    fl = np.empty(x.size, dtype=np.uint8)
    for i, v in enumerate(x.tolist()):
        out[i], fl[i] = ref_round(v, PRESETS[name], mode, subnormals, saturate)
    return out, fl


@cache
def _expected_round(name, mode, subnormals, saturate):
    """Reference results for the probes.

    subnormals only affects |x| < smallest_normal and saturate only |x| > max (and
    infinities), so points in between reuse the (True, False) table; a wrong
    assumption here can only produce false failures, never hide one.
    """
    x = _probes(name)
    if (subnormals, saturate) == (True, False):
        return _ref_table(name, mode, True, False, x)
    fmt = PRESETS[name]
    out, fl = (a.copy() for a in _expected_round(name, mode, True, False))
    ax = np.abs(x)
    edge = ~((ax >= fmt.smallest_normal) & (ax <= fmt.max))
    o2, f2 = _ref_table(name, mode, subnormals, saturate, x[edge])
    out[edge], fl[edge] = o2, f2
    return out, fl


def _shared(names, modes, *more):
    """Parameters (name, mode, ...): the tests of one name and mode share their reference
    tables (cached in this module), so they run on one worker (``xdist_group``)."""
    return [pytest.param(n, m, *rest, marks=pytest.mark.xdist_group(f"exhaustive {n} {m}"))
            for n in names for m in modes for rest in itertools.product(*more)]


@pytest.mark.parametrize("name, mode, subnormals, saturate",
                         _shared(FORMATS, MODES, [True, False], [False, True]))
def test_round_probes(name, mode, subnormals, saturate, backend_name):
    """fpsim.round of every probe equals the reference, values and flags."""
    x = _probes(name)
    exp, efl = _expected_round(name, mode, subnormals, saturate)
    kw = dict(subnormals=subnormals, saturate=saturate)
    got, gfl = fpsim.round(x, name, mode, flags=True, **kw)
    what = f"round {name} {mode} {kw}"
    assert_matches(got, exp, [x], what, gfl, efl)
    assert_matches(fpsim.round(x, name, mode, **kw), exp, [x], what + " (flags=False)")


# --- (c) every pair of fp8 values ---------------------------------------------------------

REF_BINARY = {"add": ref_add, "sub": ref_sub, "mul": ref_mul, "div": ref_div}


@cache
def _pairs(name):
    v = _values(name)
    return np.repeat(v, v.size), np.tile(v, v.size)


@cache
def _expected_pairs(name, op, mode, subnormals):
    a, b = _pairs(name)
    fn, fmt = REF_BINARY[op], PRESETS[name]
    out = np.empty(a.size)
    fl = np.empty(a.size, dtype=np.uint8)
    for i, (x, y) in enumerate(zip(a.tolist(), b.tolist(), strict=True)):
        out[i], fl[i] = fn(x, y, fmt, mode, subnormals)
    return out, fl


@pytest.mark.parametrize("name, mode, op, subnormals",
                         _shared(["fp8_e5m2", "fp8_e4m3"], MODES, list(REF_BINARY), [True, False]))
def test_fp8_all_pairs(name, op, mode, subnormals, backend_name):
    """Every pair of fp8 values through add, sub, mul, div, values and flags."""
    a, b = _pairs(name)
    exp, efl = _expected_pairs(name, op, mode, subnormals)
    with np.errstate(all="ignore"):
        got, gfl = getattr(fpsim, op)(a, b, name, mode, subnormals=subnormals, flags=True)
    assert_matches(got, exp, [a, b], f"{op} {name} {mode} subnormals={subnormals}", gfl, efl)


def test_probe_coverage():
    """The probes include every value, exact ties and their float64 neighbours."""
    x = _probes("fp16")
    assert np.isin(_values("fp16")[np.isfinite(_values("fp16"))], x).all()
    assert 1 + 2.0**-11 in x and np.nextafter(1 + 2.0**-11, 0) in x and 65520.0 in x
    assert same_bits(fpsim.round(np.array([65520.0]), "fp16"), [np.inf]).all()
