"""Property tests: every operation, mode and setting against the exact reference."""

import math
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference import (
    MODES,
    PRESETS,
    REF_OPS,
    Fmt,
    assert_matches,
    ref_add,
    ref_decode,
    ref_encode,
    ref_fma,
    ref_mul,
    ref_round,
)

import fpsim

# Examples per (operation, format, backend), each run drawing new ones (not derandomized:
# the runs' coverage adds up); FPSIM_PROPERTY_EXAMPLES for a deeper run.
EXAMPLES = int(os.environ.get("FPSIM_PROPERTY_EXAMPLES", "50"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

FORMATS = {
    "bf16": PRESETS["bf16"],
    "tf32": PRESETS["tf32"],
    "fp32": PRESETS["fp32"],
    "fp8_e5m2": PRESETS["fp8_e5m2"],
    "fp8_e4m3": PRESETS["fp8_e4m3"],
    "e6m9": Fmt(6, 9),
    "e3m4": Fmt(3, 4),
    # Wide exponent or precision: products are not exact in binary64, so the
    # implementation takes its integer path for mul and fma.
    "e11m20": Fmt(11, 20),
    "e10m12": Fmt(10, 12),
    "e3m28": Fmt(3, 28),
}
ARITY = {"add": 2, "sub": 2, "mul": 2, "div": 2, "sqrt": 1, "fma": 3}


def _fpsim_fmt(name):
    if name in PRESETS:
        return name
    f = FORMATS[name]
    return fpsim.Format(f.exp_bits, f.man_bits)


@st.composite
def operand_rows(draw, fmt: Fmt, arity: int):
    """Operands drawn as bit patterns: independent, nearby (cancellation) or, for fma, near -a*b."""
    full = (1 << fmt.bits) - 1
    near = 1 << (fmt.man_bits + 3)
    first = draw(st.integers(0, full))
    pats = [first]
    for j in range(1, arity):
        kind = draw(st.integers(0, 3))
        if kind == 0:
            p = draw(st.integers(0, full))
        elif kind == 3 and j == 2:
            a, b = (ref_decode(x, fmt) for x in pats)
            prod = ref_mul(a, b, fmt)[0]
            base = ref_encode(-prod, fmt) if math.isfinite(prod) else first
            p = (base + draw(st.integers(-8, 8))) & full
        else:
            p = (first + draw(st.integers(-near, near))) & full
            if kind == 2:
                p ^= 1 << (fmt.bits - 1)
        pats.append(p)
    return [ref_decode(p, fmt) for p in pats]


def _check_op(op, name, rows, subnormals, saturate):
    fmt = FORMATS[name]
    cols = [np.array(c, dtype=np.float64) for c in zip(*rows, strict=True)]
    fn = getattr(fpsim, op)
    for mode in MODES:
        exp = [REF_OPS[op](*r, fmt, mode, subnormals, saturate) for r in rows]
        with np.errstate(all="ignore"):
            got, gfl = fn(
                *cols,
                _fpsim_fmt(name),
                mode,
                subnormals=subnormals,
                saturate=saturate,
                flags=True,
            )
        assert_matches(
            got,
            [e[0] for e in exp],
            cols,
            f"{op} {name} {mode} subnormals={subnormals} saturate={saturate}",
            gfl,
            [e[1] for e in exp],
        )


def _make_test(op, name):
    @SETTINGS
    @given(
        rows=st.lists(operand_rows(FORMATS[name], ARITY[op]), min_size=1, max_size=24),
        subnormals=st.booleans(),
        saturate=st.booleans(),
    )
    def run(backend_name, rows, subnormals, saturate):
        _check_op(op, name, rows, subnormals, saturate)

    return run


@pytest.mark.parametrize("name", list(FORMATS))
@pytest.mark.parametrize("op", list(ARITY))
def test_operation_matches_reference(op, name, backend_name):
    """Random representable operands, all six modes, values and flags."""
    _make_test(op, name)(backend_name)


STICKY_CASES = [
    ("bf16", 1.0, 2.0**-100),
    ("bf16", 1.0, -(2.0**-100)),
    ("bf16", -1.0, 2.0**-120),
    ("bf16", 2.0**127, 2.0**-133),
    ("bf16", 1.25 * 2.0**100, -(2.0**-126)),
    ("fp32", 2.0**100, 2.0**-100),
    ("fp32", -(2.0**120), 2.0**-149),
    ("fp32", 1.5 * 2.0**-126, -(2.0**-149)),
    ("fp32", 3.4028234663852886e38, 2.0**-149),
    ("tf32", 1.0, -(2.0**-149)),
]


@pytest.mark.parametrize("mode", MODES)
def test_far_apart_sums_need_sticky_bit(mode, backend_name):
    """Sums whose exact value does not fit in float64; directed modes see the sticky bit."""
    for name, a, b in STICKY_CASES:
        fmt = FORMATS[name]
        a, b = ref_round(a, fmt)[0], ref_round(b, fmt)[0]
        for x, y in ((a, b), (b, a)):
            exp, efl = ref_add(x, y, fmt, mode)
            got, gfl = fpsim.add(np.array([x]), np.array([y]), name, mode, flags=True)
            assert_matches(
                got, [exp], [np.array([x]), np.array([y])], f"add {name} {mode}", gfl, [efl]
            )
            c = np.array([y])
            exp, efl = ref_fma(x, 1.0, y, fmt, mode)
            got, gfl = fpsim.fma(np.array([x]), np.array([1.0]), c, name, mode, flags=True)
            assert_matches(got, [exp], [np.array([x]), c], f"fma {name} {mode}", gfl, [efl])


@st.composite
def custom_format(draw):
    e = draw(st.integers(2, 11))
    m = draw(st.integers(1, 52))
    inf = True if e == 11 else draw(st.booleans())
    return Fmt(e, m, inf)


@st.composite
def float_near(draw, fmt: Fmt):
    """Arbitrary float64, or one near the format's range, often at or near a tie."""
    kind = draw(st.integers(0, 2))
    if kind == 0:
        return draw(st.floats(allow_nan=True, allow_infinity=True))
    width = draw(st.integers(1, 53))
    mant = draw(st.integers(-(1 << width), 1 << width))
    lo = max(fmt.emin - fmt.man_bits - 4, -1074)
    ex = draw(st.integers(lo, min(fmt.emax + 3, 1000))) - width
    v = math.ldexp(float(mant), max(ex, -1074)) if mant else 0.0
    if kind == 2 and math.isfinite(v):
        v = float(np.nextafter(v, draw(st.sampled_from([-np.inf, np.inf]))))
    return v


@SETTINGS
@given(
    data=st.data(),
    fmt=custom_format(),
    subnormals=st.booleans(),
    saturate=st.booleans(),
)
def _round_custom(backend_name, data, fmt, subnormals, saturate):
    xs = data.draw(st.lists(float_near(fmt), min_size=1, max_size=32))
    x = np.array(xs, dtype=np.float64)
    ffmt = fpsim.Format(fmt.exp_bits, fmt.man_bits, infinities=fmt.infinities)
    for mode in MODES:
        exp = [ref_round(v, fmt, mode, subnormals, saturate) for v in xs]
        got, gfl = fpsim.round(x, ffmt, mode, subnormals=subnormals, saturate=saturate, flags=True)
        efl = [e[1] for e in exp]
        what = f"round {fmt} {mode} subnormals={subnormals} saturate={saturate}"
        assert_matches(got, [e[0] for e in exp], [x], what, gfl, efl)


def test_round_custom_formats(backend_name):
    """fpsim.round of arbitrary float64 to formats with exp_bits 2..11, man_bits 1..52."""
    _round_custom(backend_name)
