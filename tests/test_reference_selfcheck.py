"""Checks that make the exact reference (tests/reference.py) trustworthy on its own."""

import gzip
import math
import os
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from reference import (
    ABSORBED,
    DIVBYZERO,
    INEXACT,
    INVALID,
    MODES,
    OVERFLOW,
    PRESETS,
    UNDERFLOW,
    Fmt,
    all_values,
    ref_add,
    ref_decode,
    ref_div,
    ref_fma,
    ref_mul,
    ref_round,
    ref_sqrt,
    ref_sub,
    same_bits,
)
from testfloat import ROUNDINGS

FP16, FP32, E4M3, E5M2 = PRESETS["fp16"], PRESETS["fp32"], PRESETS["fp8_e4m3"], PRESETS["fp8_e5m2"]


def _probe_values(values: np.ndarray) -> np.ndarray:
    """Values, midpoints and the float64 neighbours of both, both signs."""
    v = np.unique(np.abs(values[np.isfinite(values)]))
    mids = (v[:-1] + v[1:]) / 2
    base = np.concatenate([v, mids, [v[-1] * 2, v[-1] * 1.5]])
    pts = np.concatenate([base, np.nextafter(base, np.inf), np.nextafter(base, -np.inf)])
    return np.concatenate([pts, -pts])


def _ref_round_array(x, fmt, mode="nearest_even"):
    return np.array([ref_round(v, fmt, mode)[0] for v in x.tolist()])


@pytest.mark.parametrize("dtype,fmt", [(np.float16, FP16), (np.float32, FP32)])
def test_nearest_even_matches_numpy_cast(dtype, fmt):
    """ref_round nearest_even agrees with NumPy's float64 casts, halfway cases included."""
    rng = np.random.default_rng(1)
    if dtype is np.float16:
        grid = all_values(fmt)
    else:
        bits = rng.integers(0, 1 << 32, 20000, dtype=np.uint64).astype(np.uint32)
        special = np.array([0, 1, 2, 0x7FFFFF, 0x800000, 0x800001, 0x7F7FFFFF], dtype=np.uint32)
        with np.errstate(invalid="ignore"):
            grid = np.concatenate([bits, special]).view(np.float32).astype(np.float64)
    x = _probe_values(grid)
    with np.errstate(over="ignore"):
        expected = x.astype(dtype).astype(np.float64)
    assert same_bits(_ref_round_array(x, fmt), expected).all()


def test_random_magnitudes_match_numpy():
    """Random float64 values over a wide exponent range round like NumPy casts."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal(20000) * np.exp2(rng.integers(-160, 140, 20000))
    with np.errstate(over="ignore"):
        assert same_bits(_ref_round_array(x, FP16), x.astype(np.float16)).all()
        assert same_bits(_ref_round_array(x, FP32), x.astype(np.float32)).all()


@pytest.mark.parametrize("dtype,fmt", [(np.float16, FP16), (np.float32, FP32)])
def test_operations_match_numpy(dtype, fmt):
    """Nearest-even add, sub, mul, div, sqrt agree with NumPy's (innocuously double-rounded) ops."""
    rng = np.random.default_rng(3)
    width = {np.float16: (np.uint16, 16), np.float32: (np.uint32, 32)}[dtype]
    a = rng.integers(0, 1 << width[1], 3000, dtype=np.uint64).astype(width[0]).view(dtype)
    b = rng.integers(0, 1 << width[1], 3000, dtype=np.uint64).astype(width[0]).view(dtype)
    with np.errstate(all="ignore"):
        b[:1000] = (a[:1000].astype(np.float64) * (1 + rng.random(1000))).astype(dtype)
    with np.errstate(all="ignore"):
        cases = {
            ref_add: a + b,
            ref_sub: a - b,
            ref_mul: a * b,
            ref_div: a / b,
        }
        sq = np.sqrt(a)
        al, bl = a.astype(np.float64).tolist(), b.astype(np.float64).tolist()
    for fn, expected in cases.items():
        got = [fn(x, y, fmt)[0] for x, y in zip(al, bl, strict=True)]
        assert same_bits(got, expected.astype(np.float64)).all(), fn.__name__
    got = [ref_sqrt(x, fmt)[0] for x in al]
    assert same_bits(got, sq.astype(np.float64)).all()


def test_fp8_known_values():
    """OCP E4M3 and E5M2 limits and overflow."""
    assert ref_round(448.0, E4M3) == (448.0, 0)
    assert ref_round(464.0, E4M3) == (448.0, INEXACT)
    assert math.isnan(ref_round(470.0, E4M3)[0])
    assert ref_round(470.0, E4M3)[1] == INEXACT | OVERFLOW
    assert math.isnan(ref_round(-480.0, E4M3)[0])
    assert ref_round(470.0, E4M3, saturate=True) == (448.0, INEXACT | OVERFLOW)
    assert ref_round(1e6, E4M3, "toward_zero") == (448.0, INEXACT | OVERFLOW)
    assert ref_round(-1e6, E4M3, "up") == (-448.0, INEXACT | OVERFLOW)
    assert math.isnan(ref_round(449.0, E4M3, "up")[0])
    assert ref_round(2.0**-9, E4M3) == (2.0**-9, 0)
    assert ref_round(2.0**-10, E4M3) == (0.0, INEXACT | UNDERFLOW)
    assert ref_round(2.0**-6 * 0.875, E4M3, subnormals=False) == (0.0, 0)
    assert ref_round(57344.0, E5M2) == (57344.0, 0)
    assert ref_round(61440.0, E5M2) == (math.inf, INEXACT | OVERFLOW)
    assert ref_round(61439.0, E5M2) == (57344.0, INEXACT)
    assert ref_round(-math.inf, E5M2, saturate=True)[0] == -57344.0
    e4 = all_values(E4M3)
    assert np.nanmax(e4) == 448.0 and np.isnan(e4).sum() == 2
    assert np.isinf(all_values(E5M2)).sum() == 2


def test_decode_matches_numpy():
    """ref_decode agrees with NumPy's float16/float32 bit views."""
    assert same_bits(all_values(FP16), np.arange(1 << 16, dtype=np.uint16).view(np.float16)).all()
    b = np.random.default_rng(4).integers(0, 1 << 32, 5000, dtype=np.uint64).astype(np.uint32)
    got = [ref_decode(int(i), FP32) for i in b]
    with np.errstate(invalid="ignore"):
        assert same_bits(got, b.view(np.float32).astype(np.float64)).all()


def test_directed_modes_by_hand():
    """1 + 2**-11 is halfway between fp16 neighbours 1 and 1 + 2**-10."""
    half, up1 = 1 + 2.0**-11, 1 + 2.0**-10
    exp = {
        "nearest_even": 1.0,
        "nearest_away": up1,
        "toward_zero": 1.0,
        "up": up1,
        "down": 1.0,
        "odd": up1,
    }
    for mode, v in exp.items():
        assert ref_round(half, FP16, mode) == (v, INEXACT), mode
        neg = {"up": "down", "down": "up"}.get(mode, mode)
        assert ref_round(-half, FP16, neg) == (-v, INEXACT), mode
    third = 1 + 2.0**-12
    assert ref_round(third, FP16, "nearest_even")[0] == 1.0
    assert ref_round(third, FP16, "up")[0] == up1
    assert ref_round(third, FP16, "odd")[0] == up1
    assert ref_round(1 + 3 * 2.0**-10, FP16, "odd") == (1 + 3 * 2.0**-10, 0)
    assert ref_round(1 + 2.5 * 2.0**-10, FP16, "odd")[0] == 1 + 3 * 2.0**-10
    assert ref_round(1 + 3.5 * 2.0**-10, FP16, "odd")[0] == 1 + 3 * 2.0**-10
    assert ref_round(1e9, FP16, "toward_zero") == (65504.0, INEXACT | OVERFLOW)
    assert ref_round(1e9, FP16, "odd") == (65504.0, INEXACT | OVERFLOW)
    assert ref_round(1e9, FP16, "down") == (65504.0, INEXACT | OVERFLOW)
    assert ref_round(-1e9, FP16, "down") == (-math.inf, INEXACT | OVERFLOW)
    assert ref_round(-1e9, FP16, "up") == (-65504.0, INEXACT | OVERFLOW)
    assert ref_round(65504.0 + 1, FP16, "up") == (math.inf, INEXACT | OVERFLOW)
    assert ref_round(65504.0 + 1, FP16, "nearest_even") == (65504.0, INEXACT)
    assert ref_round(Fraction(1, 3), FP16, "up")[0] == np.float16(1 / 3) + 2.0**-12
    assert ref_round(Fraction(-1, 3), FP16, "down")[0] == -(np.float16(1 / 3) + 2.0**-12)


def test_tininess_after_rounding():
    """UNDERFLOW uses the unbounded-exponent rounding (IEEE tininess after rounding)."""
    sn = 2.0**-14
    # Halfway (p = 11) between 2**-14 - 2**-25 and 2**-14: ties to 2**-14, so not tiny.
    assert ref_round(sn - 2.0**-26, FP16) == (sn, INEXACT)
    # Just below that halfway point: unbounded rounding gives 2**-14 - 2**-25, tiny.
    assert ref_round(sn - 2.0**-26 - 2.0**-40, FP16) == (sn, INEXACT | UNDERFLOW)
    assert ref_round(sn - 2.0**-26, FP16, "toward_zero") == (sn - 2.0**-24, INEXACT | UNDERFLOW)
    assert ref_round(sn - 2.0**-26, FP16, "up") == (sn, INEXACT)
    assert ref_round(sn - 2.0**-26, FP16, "nearest_away") == (sn, INEXACT)
    assert ref_round(2.0**-25, FP16) == (0.0, INEXACT | UNDERFLOW)
    assert ref_round(2.0**-24 * 3, FP16) == (2.0**-24 * 3, 0)
    assert ref_mul(2.0**-10, 2.0**-14 * 1.5, FP16) == (2.0**-24 * 2, INEXACT | UNDERFLOW)
    assert ref_mul(2.0**-12, 2.0**-12, FP16, subnormals=False) == (0.0, INEXACT | UNDERFLOW)
    assert ref_mul(2.0**-12, -(2.0**-13), FP16, subnormals=False) == (-0.0, INEXACT | UNDERFLOW)
    assert math.copysign(1, ref_mul(2.0**-12, -(2.0**-13), FP16, subnormals=False)[0]) < 0
    assert ref_add(2.0**-24, 2.0**-24, FP16, subnormals=False) == (0.0, 0)


def test_special_values():
    """IEEE special cases, signed zeros and flags."""
    z = ref_add(0.0, -0.0, FP16)
    assert z == (0.0, 0) and math.copysign(1, z[0]) > 0
    assert math.copysign(1, ref_add(0.0, -0.0, FP16, "down")[0]) < 0
    assert math.copysign(1, ref_add(-0.0, -0.0, FP16)[0]) < 0
    assert math.copysign(1, ref_sub(1.0, 1.0, FP16, "down")[0]) < 0
    assert math.copysign(1, ref_sub(1.0, 1.0, FP16, "up")[0]) > 0
    assert math.isnan(ref_add(math.inf, -math.inf, FP16)[0])
    assert ref_add(math.inf, -math.inf, FP16)[1] == INVALID
    assert ref_mul(0.0, math.inf, FP16)[1] == INVALID
    assert ref_div(0.0, 0.0, FP16)[1] == INVALID
    assert ref_div(math.inf, math.inf, FP16)[1] == INVALID
    assert ref_div(1.0, -0.0, FP16) == (-math.inf, DIVBYZERO)
    assert ref_div(1.0, 0.0, FP16, saturate=True) == (65504.0, DIVBYZERO)
    assert math.isnan(ref_div(1.0, 0.0, E4M3)[0])
    assert ref_sqrt(-1.0, FP16)[1] == INVALID
    assert ref_sqrt(-math.inf, FP16)[1] == INVALID
    assert math.copysign(1, ref_sqrt(-0.0, FP16)[0]) < 0
    assert ref_sqrt(math.inf, FP16) == (math.inf, 0)
    assert ref_fma(0.0, math.inf, math.nan, FP16)[1] == INVALID
    assert ref_fma(math.inf, 1.0, -math.inf, FP16)[1] == INVALID
    assert ref_fma(2.0, 3.0, -6.0, FP16, "down")[0] == 0.0
    assert math.copysign(1, ref_fma(2.0, 3.0, -6.0, FP16, "down")[0]) < 0
    assert math.copysign(1, ref_fma(-0.0, 3.0, -0.0, FP16)[0]) < 0
    assert math.copysign(1, ref_fma(-0.0, 3.0, 0.0, FP16)[0]) > 0
    assert ref_add(1.0, 2.0**-20, FP16) == (1.0, INEXACT | ABSORBED)
    assert ref_add(1.0, 2.0**-20, FP16, "up") == (1.0 + 2.0**-10, INEXACT)
    assert ref_sub(2.0**-20, 1.0, FP16) == (-1.0, INEXACT | ABSORBED)
    assert ref_fma(1.0, 2.0**-20, 1.0, FP16) == (1.0, INEXACT | ABSORBED)
    assert ref_fma(1.0, 1.0, 2.0**-20, FP16) == (1.0, INEXACT | ABSORBED)
    assert ref_add(65504.0, 65504.0, FP16) == (math.inf, INEXACT | OVERFLOW)


def test_sqrt_exact_on_wide_formats():
    """sqrt is exact integer arithmetic: squares are exact, others match Fraction bounds."""
    fmt = Fmt(11, 52)
    for k in [3, 12345, 2**26 - 1, 94906265]:
        assert ref_sqrt(float(k * k), fmt) == (float(k), 0)
    r, fl = ref_sqrt(2.0, fmt)
    assert r == math.sqrt(2.0) and fl == INEXACT
    for x in [2.0**-1074, 3 * 2.0**-1074, 1.7976931348623157e308]:
        assert ref_sqrt(x, fmt)[0] == math.sqrt(x)
    for mode in ("up", "down"):
        r, _ = ref_sqrt(2.0, Fmt(8, 23), mode)
        assert (Fraction(r) ** 2 > 2) == (mode == "up")


def test_custom_format_geometry():
    """Fmt attributes for IEEE-style and finite-style formats."""
    f = Fmt(3, 4)
    assert (f.bias, f.emin, f.emax, f.max) == (3, -2, 3, 15.5)
    g = Fmt(3, 4, False)
    assert (g.emax, g.max) == (4, 30.0)
    assert E4M3.max == 448.0 and E5M2.max == 57344.0 and FP16.smallest_subnormal == 2.0**-24


# --- Berkeley TestFloat conformance vectors -------------------------------------------------

TF_MODES = ROUNDINGS
TF_FMT = {"f16": FP16, "f32": FP32, "f64": Fmt(11, 52), "bf16": PRESETS["bf16"]}


def _testfloat_dir():
    env = os.environ.get("FPSIM_TESTFLOAT_DIR")
    path = Path(env) if env else Path(__file__).resolve().parents[2] / "shared" / "testfloat"
    return path if path.is_dir() else None


def _is_snan(bits: int, fmt: Fmt) -> bool:
    man = fmt.man_bits
    e = (bits >> man) & ((1 << fmt.exp_bits) - 1)
    f = bits & ((1 << man) - 1)
    return e == (1 << fmt.exp_bits) - 1 and f != 0 and not f >> (man - 1)


def _cases(name, stride):
    path = _testfloat_dir()
    if path is None:
        pytest.skip("TestFloat vectors not found: set FPSIM_TESTFLOAT_DIR")
    with gzip.open(path / name, "rt") as fh:
        for i, line in enumerate(fh):
            if i % stride == 0:
                yield [int(t, 16) for t in line.split()]


OPS = {"add": ref_add, "sub": ref_sub, "mul": ref_mul, "div": ref_div}


@pytest.mark.parametrize("tf_mode", list(TF_MODES))
@pytest.mark.parametrize("prefix", ["f16", "f32"])
def test_testfloat_arithmetic(prefix, tf_mode):
    """The reference reproduces SoftFloat's results and flags (sampled)."""
    fmt, mode = TF_FMT[prefix], TF_MODES[tf_mode]
    stride = 3 if prefix == "f16" else 6
    checked = 0
    for op, fn in [*OPS.items(), ("sqrt", ref_sqrt), ("mulAdd", ref_fma)]:
        step = {"sqrt": 1, "mulAdd": 5 * stride}.get(op, stride)
        for row in _cases(f"{prefix}_{op}.{tf_mode}.txt.gz", step):
            *ops, res, flags = row
            if any(_is_snan(o, fmt) for o in ops):
                continue
            args = [ref_decode(o, fmt) for o in ops]
            got, gfl = fn(*args, fmt, mode)
            exp = ref_decode(res, fmt)
            assert same_bits([got], [exp]).all() and (gfl & 31) == flags, (op, row, got, gfl)
            checked += 1
    assert checked > 1000


@pytest.mark.parametrize("tf_mode", list(TF_MODES))
@pytest.mark.parametrize("conv", ["f32_to_f16", "f64_to_f16", "f32_to_bf16", "f64_to_f32"])
def test_testfloat_conversions(conv, tf_mode):
    """ref_round reproduces SoftFloat conversions, flags included."""
    src, dst = (TF_FMT[s] for s in conv.split("_to_"))
    for row in _cases(f"{conv}.{tf_mode}.txt.gz", 1):
        a, res, flags = row
        if _is_snan(a, src):
            continue
        got, gfl = ref_round(ref_decode(a, src), dst, TF_MODES[tf_mode])
        assert same_bits([got], [ref_decode(res, dst)]).all() and gfl == flags, (row, got, gfl)


def test_mode_list():
    """Every deterministic mode is covered by the TestFloat mapping."""
    assert sorted(TF_MODES.values()) == sorted(MODES)
