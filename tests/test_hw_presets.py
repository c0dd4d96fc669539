"""The presets after MMA-Sim's instructions, two input formats, a block's narrower
output and the promotion of fp8 partial sums, against an exact rational reference.

The reference is MMA-Sim's rule for NVIDIA tensor cores (Xie et al., arXiv 2511.10909;
``mmasim`` 2.1.1, ``mmasim/arithmetic/fdpa.py``, ``t_fdpa``), written here with
Fractions: each input is read as s * 2**e with e at least its format's least normal
exponent (subnormals unnormalised); a zero term (a zero product, or c = 0) counts at
exponent ``e_zero``; every term is cut toward zero to F fraction bits below the largest
exponent; the exact sum is rounded (``RZ-FP32``, ``RZ-E8M13`` toward zero to 23 or 13
fraction bits with binary32's range, ``RNE-FP16``), +-inf beyond the range, a zero
result +0. A block with an infinite or NaN input gives the IEEE result of its plain sum.
Promotion (DeepSeek-V3, arXiv 2412.19437, section 3.3.2): each chunk of N products
from +0, added to a binary32 accumulator rounded to nearest even. fpsim's model is
written differently (a floor for the alignment, docs/accumulation.md), so agreement
is evidence for both.
"""

from __future__ import annotations

import dataclasses
import math
import os
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reference import as_fmt, ref_add, ref_round, same_bits

import fpsim
import fpsim.hw
from fpsim.formats import Format

# preset -> (MMA-Sim's F, rho, L (products per block), e_zero): mmasim/nv_ptx/sim.py
MMASIM_RULES = {
    "V100": (23, "RZ-FP32", 4, -131),
    "T4": (24, "RZ-FP32", 8, -132),
    "A100": (24, "RZ-FP32", 8, -132),
    "L40": (24, "RZ-FP32", 8, -132),
    "H100": (25, "RZ-FP32", 16, -133),
    "B200": (25, "RZ-FP32", 16, -133),
    "RTX5090": (25, "RZ-FP32", 16, -133),
    "L40_FP8": (13, "RZ-E8M13", 16, -132),
    "H100_FP8": (13, "RZ-E8M13", 32, -133),
    "H100_FP8_F16": (13, "RNE-FP16", 32, -21),
    "B200_FP8": (25, "RZ-FP32", 32, -133),
    "RTX5090_FP8": (25, "RZ-FP32", 32, -133),
}
OUTPUT = {"RZ-FP32": ("fp32", Format(8, 23), "toward_zero"),
          "RZ-E8M13": ("fp32", Format(8, 13), "toward_zero"),
          "RNE-FP16": ("fp16", Format(5, 10), "nearest_even")}
FP8 = ("fp8_e4m3", "fp8_e5m2")
# Hypothesis examples per preset and input pairing (more: FPSIM_HW_EXAMPLES=200).
EXAMPLES = int(os.environ.get("FPSIM_HW_EXAMPLES", "15"))


def read(x: Fraction, fmt) -> tuple[Fraction, int]:
    """x = s * 2**e, e = max(floor(log2|x|), emin): the hardware's reading."""
    emin = fpsim.formats.as_format(fmt).emin
    if x == 0:
        return Fraction(0), emin
    a = abs(x)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    e = e - 1 if Fraction(2) ** e > a else e
    e = max(e, emin)
    return x / Fraction(2) ** e, e


def ref_block(pairs, c: float, rule, fmt_a, fmt_b, fmt_c) -> float:
    """One instruction step: c + sum(a * b) under MMA-Sim's rule."""
    frac_bits, rho, _, e_zero = rule
    values = [c, *(v for p in pairs for v in p)]
    if not all(math.isfinite(v) for v in values):
        with np.errstate(all="ignore"):
            return float(np.float64(c) + sum(np.float64(a) * np.float64(b) for a, b in pairs))
    terms = []
    for a, b in pairs:
        (sa, ea), (sb, eb) = read(Fraction(a), fmt_a), read(Fraction(b), fmt_b)
        terms.append((sa * sb, ea + eb))
    terms.append(read(Fraction(c), fmt_c))
    exps = [e if s != 0 else e_zero for s, e in terms]
    top = max(exps)
    total = sum(Fraction(math.trunc(s * Fraction(2) ** (e - top + frac_bits)))
                for (s, _), e in zip(terms, exps, strict=True))
    total *= Fraction(2) ** (top - frac_bits)
    _, fmt, mode = OUTPUT[rho]
    f = as_fmt(fmt)
    if abs(total) >= Fraction(2) ** (f.emax + 1):
        return math.copysign(math.inf, total)
    value, _ = ref_round(total, fmt, mode)
    return value + 0.0  # a zero result is +0


def ref_chain(a, b, c, rule, fmt_a, fmt_b, fmt_c) -> float:
    """The instruction chained over K in blocks of L, each result the next one's c."""
    pairs = list(zip(a, b, strict=True))
    for k0 in range(0, len(pairs), rule[2]):
        c = ref_block(pairs[k0:k0 + rule[2]], c, rule, fmt_a, fmt_b, fmt_c)
    return c


def ref_promoted(a, b, c, every, rule, fmt_a, fmt_b, fmt_c) -> float:
    """DeepSeek-V3's promotion: chunks of ``every`` products from +0, each added to a
    binary32 accumulator (starting at c) rounded to nearest even."""
    acc = c
    for k0 in range(0, len(a), every):
        part = ref_chain(a[k0:k0 + every], b[k0:k0 + every], 0.0, rule, fmt_a, fmt_b, fmt_c)
        acc = ref_add(acc, part, "fp32")[0]
    return acc


def preset(name: str, fmt_a: str | None = None, fmt_b: str | None = None):
    m = fpsim.hw.PRESETS[name]
    return m if fmt_a is None else m.with_inputs(fmt_a, fmt_b)


def formats(name: str, fmt_a: str | None, fmt_b: str | None):
    """(A's, B's, c's format) of a preset as the reference reads them."""
    m = fpsim.hw.PRESETS[name]
    c_fmt = OUTPUT[MMASIM_RULES[name][1]][0]
    return fmt_a or m.input, fmt_b or m.input, c_fmt


def fpsim_dot(model, a, b, c) -> float:
    got = fpsim.matmul(np.array([a], np.float64).reshape(1, -1),
                       np.array(b, np.float64).reshape(-1, 1), c=np.array([[c]]), model=model)
    return float(np.asarray(got, np.float64)[0, 0])


def check(name, a, b, c, fmt_a=None, fmt_b=None, every=None):
    rule = MMASIM_RULES[name]
    fa, fb, fc = formats(name, fmt_a, fmt_b)
    model = preset(name, fmt_a, fmt_b)
    if every is None:
        want = ref_chain(a, b, c, rule, fa, fb, fc)
    else:
        model = model.with_promotion(every)
        want = ref_promoted(a, b, c, every, rule, fa, fb, fc)
    got = fpsim_dot(model, a, b, c)
    assert same_bits(got, want), f"{model.name}: a={a} b={b} c={c}: want {want!r}, got {got!r}"
    return got


# --- the presets are MMA-Sim's parameters ----------------------------------------------------


@pytest.mark.parametrize("name", sorted(MMASIM_RULES))
def test_preset_parameters_are_mmasims(name):
    """Block, F, output and rounding as MMA-Sim's sim.py gives them; the floor is its
    e_zero (no floor on Volta, where no fp16 product or fp32 c falls below -131)."""
    frac_bits, rho, block, e_zero = MMASIM_RULES[name]
    m = fpsim.hw.PRESETS[name]
    out, narrow, mode = OUTPUT[rho]
    assert (m.block, m.frac_bits, m.output_rounding) == (block, frac_bits, mode)
    assert m.exp_floor == (None if name == "V100" else e_zero)
    assert fpsim.format(m.output) == fpsim.format(out)
    got = fpsim.formats.as_format(m.block_output or m.output)
    assert (got.exp_bits, got.man_bits) == (narrow.exp_bits, narrow.man_bits)
    assert m.input == ("fp8_e4m3" if name.endswith(("FP8", "FP8_F16")) else "fp16")
    assert (m.overflow, m.zero_sign, m.input_b, m.split_k, m.promote_every) == (
        "inf", "positive", None, None, None)


def test_every_preset_has_a_rule():
    """The truncating (NVIDIA) presets here; the rounding-down (AMD) ones in
    test_amd_presets.py."""
    bases = {name.split("/")[0] for name, m in fpsim.hw.PRESETS.items() if m.align == "truncate"}
    assert bases == set(MMASIM_RULES)
    assert {m.name for m in fpsim.hw.PRESETS.values() if m.align == "round_down"} == {
        "MI300", "MI300/bf16", "MI300/tf32"}


# --- directed cases -------------------------------------------------------------------------


def test_mixed_inputs_read_subnormals_in_their_own_format():
    """e4m3's 2**-9 is subnormal (read at exponent -6), so it aligns the block at -6 and
    the product 2**-9 * 2**-13 = 2**-22, 16 bits below, is cut (F = 13): the result is
    2**-9, not 2**-9 + 2**-22."""
    a, b = [2.0**-9, 2.0**-9], [1.0, 2.0**-13]
    assert check("H100_FP8", a, b, 0.0, "fp8_e4m3", "fp8_e5m2") == 2.0**-9
    # With F = 25 (Blackwell) the small product stays.
    assert check("B200_FP8", a, b, 0.0, "fp8_e4m3", "fp8_e5m2") == 2.0**-9 + 2.0**-22


def test_block_output_keeps_13_fraction_bits():
    """31 * 1.75 + 2**-9 * 2**-4 = 54.25 + 2**-13: on Hopper fp8 the sum is cut to 13
    fraction bits (54.25); Blackwell's fp8 keeps binary32's 23."""
    a, b = [1.75] * 31 + [2.0**-9], [1.0] * 31 + [2.0**-4]
    assert check("H100_FP8", a, b, 0.0) == 54.25
    assert check("B200_FP8", a, b, 0.0) == 54.25 + 2.0**-13
    narrow = dataclasses.replace(fpsim.hw.H100_FP8, block_output=None)
    assert fpsim_dot(narrow, a, b, 0.0) == 54.25 + 2.0**-13


def test_block_output_reads_c_in_full():
    """The first c is a binary32 value, read to F = 13 bits below the alignment; only
    the block's result is cut to e8m13."""
    c = 1 + 2.0**-12 + 2.0**-20
    assert check("H100_FP8", [0.0], [0.0], c) == 1 + 2.0**-12
    assert check("H100_FP8", [2.0**-9] * 2, [2.0**-4] * 2, 2.0**-20) == 2.0**-12 + 2.0**-20


def test_ada_fp8_adds_k32_in_two_halves():
    """Ada's fp8 mma adds 16 products per step, Hopper's wgmma 32: 8 ones, 8 minus ones
    and 16 products 2**-14. In one block aligned at 0 (F = 13) each 2**-14 is cut;
    Ada's second step aligns them at -14 and keeps their sum 2**-10."""
    a = [1.0] * 8 + [-1.0] * 8 + [2.0**-7] * 16
    b = [1.0] * 16 + [2.0**-7] * 16
    assert check("L40_FP8", a, b, 0.0) == 2.0**-10
    assert check("H100_FP8", a, b, 0.0) == 0.0


def test_fp16_output_rounds_to_nearest_even_and_overflows_to_inf():
    assert check("H100_FP8_F16", [1.0, 2.0**-9], [1.0, 2.0**-3], 0.0) == 1.0  # 1 + 2**-12
    assert check("H100_FP8_F16", [1.0, 2.0**-9], [1.0, 1.5 * 2.0**-2], 0.0) == 1 + 2.0**-10
    assert check("H100_FP8_F16", [448.0] * 2, [448.0] * 2, 0.0) == math.inf
    assert check("H100_FP8_F16", [-448.0], [448.0], -65504.0) == -math.inf


def test_promotion_adds_chunks_in_fp32():
    """Every 2 products on H100 fp8: each chunk from +0 (cut to 13 bits), each chunk's
    result added to the fp32 accumulator rounded to nearest even."""
    a = [1.0, 2.0**-9, 2.0**-9, 2.0**-9]
    b = [1.0, 2.0**-5, 2.0**-5, 2.0**-5]
    # Chunks: 1 + 2**-14 (the small term cut on the 2**-13 grid) is 1, then 2**-13.
    assert check("H100_FP8", a, b, 0.0, every=2) == 1 + 2.0**-13
    # Every product its own chunk: 1 + 3 * 2**-14 in fp32.
    assert check("H100_FP8", a, b, 0.0, every=1) == 1 + 3 * 2.0**-14
    # Without promotion the block aligns at 0 and cuts all three.
    assert check("H100_FP8", a, b, 0.0) == 1.0
    # The accumulator starts at c, a binary32 value (24 bits, not cut).
    assert check("H100_FP8", a, b, 2.0**-20, every=1) == 1 + 3 * 2.0**-14 + 2.0**-20


def test_promotion_over_an_fp16_output_preset():
    """The chunks' fp16 results are added in fp32, so the sum keeps what fp16 would round."""
    a, b = [1.0, 2.0**-9] * 2, [1.0, 2.0**-3] * 2
    assert check("H100_FP8_F16", a, b, 0.0, every=2) == 2.0
    assert check("H100_FP8_F16", a, b, 2.0**-20, every=2) == 2.0 + 2.0**-20
    # float16 inputs: the result's type is the accumulator's, float32 (not the output's).
    got = fpsim.matmul(np.array([a], np.float16), np.array(b, np.float16).reshape(-1, 1),
                       model=fpsim.hw.H100_FP8_F16.with_promotion(2))
    assert got.dtype == np.float32


def test_promotion_with_k_not_a_multiple_and_k_zero():
    a, b = [1.0] * 5, [1.0] * 5
    assert check("H100_FP8", a, b, 0.5, every=2) == 5.5
    model = fpsim.hw.H100_FP8.with_promotion(2)
    empty = fpsim.matmul(np.zeros((1, 0)), np.zeros((0, 1)), c=np.array([[-0.0]]), model=model)
    assert same_bits(float(empty[0, 0]), -0.0)


def test_promotion_of_nonfinite():
    assert math.isnan(check("H100_FP8", [1.0] * 4, [1.0] * 4, math.inf, every=2) - math.inf)
    assert check("H100_FP8", [1.0] * 4, [1.0] * 4, -math.inf, every=2) == -math.inf
    assert math.isnan(check("B200_FP8", [math.nan, 1.0], [1.0, 1.0], 0.0, every=1))


def test_promotion_over_an_fp16_preset_matches_the_chained_partials():
    """Promotion over H100 (fp16 inputs): chunks of 16 are single instructions."""
    rng = np.random.default_rng(5)
    a = list(np.asarray(fpsim.round(rng.standard_normal(48), "fp16"), np.float64))
    b = list(np.asarray(fpsim.round(rng.standard_normal(48), "fp16"), np.float64))
    check("H100", a, b, 0.25, every=16)
    check("H100", a, b, 0.25, every=20)


# --- Hypothesis: random inputs of every class, single and chained ---------------------------


def values(fmt: str, *, nonfinite: bool = True):
    """Values of ``fmt``: any sign, exponent and significand (zeros, subnormals, the
    largest), and sometimes inf or NaN where the format has them."""
    f = fpsim.format(fmt)
    top = f.emin + 2 ** f.exp_bits - 3 + (0 if f.infinities else 1)

    def build(sign, e, m):
        if e < f.emin:  # subnormal (or zero)
            v = m * 2.0 ** (f.emin - f.man_bits)
        else:
            v = (1 + m / 2**f.man_bits) * 2.0**e
        return -v if sign else v

    finite = st.builds(build, st.booleans(), st.integers(f.emin - 1, top),
                       st.integers(0, 2**f.man_bits - 1)).filter(lambda v: abs(v) <= f.max)
    if not nonfinite:
        return finite
    specials = ([math.nan] if f.nan else []) + ([math.inf, -math.inf] if f.infinities else [])
    if not specials:  # fp6, fp4: every encoding is finite
        return finite
    return st.one_of(finite, finite, finite, finite, st.sampled_from(specials))


CASES = [(name, None, None) for name in ("V100", "T4", "A100", "L40", "H100", "B200",
                                         "RTX5090")]
CASES += [(name, fa, fb) for name in ("L40_FP8", "H100_FP8", "H100_FP8_F16", "B200_FP8",
                                      "RTX5090_FP8") for fa in FP8 for fb in FP8]
# Blackwell's kind::f8f6f4 with fp6 and fp4 operands (the same rule as its fp8).
CASES += [("B200_FP8", "fp6_e3m2", "fp4_e2m1"), ("B200_FP8", "fp4_e2m1", "fp6_e2m3"),
          ("RTX5090_FP8", "fp6_e2m3", "fp8_e5m2"), ("RTX5090_FP8", "fp8_e4m3", "fp6_e3m2")]


@st.composite
def problems(draw, name, fmt_a, fmt_b):
    """(a, b, c): one instruction (K up to its block) or a chain of two or three."""
    fa, fb, fc = formats(name, fmt_a, fmt_b)
    block = MMASIM_RULES[name][2]
    k = draw(st.one_of(st.integers(1, block), st.integers(block + 1, 2 * block + 3)))
    special = draw(st.booleans())
    a = draw(st.lists(values(fa, nonfinite=special), min_size=k, max_size=k))
    b = draw(st.lists(values(fb, nonfinite=special), min_size=k, max_size=k))
    c = draw(st.one_of(st.just(0.0), st.just(-0.0), values(fc, nonfinite=special)))
    return a, b, c


@pytest.mark.parametrize(("name", "fmt_a", "fmt_b"), CASES)
def test_presets_against_the_rational_reference(name, fmt_a, fmt_b):
    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True)
    @given(problems(name, fmt_a, fmt_b))
    def run(problem):
        check(name, *problem, fmt_a=fmt_a, fmt_b=fmt_b)

    run()


@pytest.mark.parametrize("name", ["H100_FP8", "H100_FP8_F16", "L40_FP8", "B200_FP8", "H100"])
def test_promotion_against_the_rational_reference(name):
    fmt_a, fmt_b = ("fp8_e4m3", "fp8_e5m2") if "FP8" in name else (None, None)

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True)
    @given(problems(name, fmt_a, fmt_b), st.integers(1, 40))
    def run(problem, every):
        a, b, c = problem
        check(name, a, b, c if formats(name, fmt_a, fmt_b)[2] == "fp32" else 0.0,
              fmt_a=fmt_a, fmt_b=fmt_b, every=every)

    run()


# --- hostile input ---------------------------------------------------------------------------


def test_with_inputs_and_bad_formats():
    m = fpsim.hw.H100_FP8.with_inputs("fp8_e5m2", "fp8_e4m3")
    assert (m.input, m.input_b, m.name) == ("fp8_e5m2", "fp8_e4m3",
                                             "H100_FP8/fp8_e5m2*fp8_e4m3")
    same = fpsim.hw.H100_FP8.with_inputs("fp8_e5m2", "fp8_e5m2")
    assert (same.input, same.input_b) == ("fp8_e5m2", None)
    assert m.with_input("fp8_e4m3").input_b is None
    with pytest.raises(ValueError, match="format"):
        fpsim.hw.H100_FP8.with_inputs("fp8_e4m3", "nope")
    with pytest.raises(ValueError, match="input_b"):
        dataclasses.replace(fpsim.hw.H100, input_b=3)
    with pytest.raises(ValueError, match="input_b format .* has 31 fraction bits"):
        dataclasses.replace(fpsim.hw.H100, input_b=Format(8, 31))
    # B's values are checked against B's format, A's against A's.
    with pytest.raises(ValueError, match="B holds .* fp8_e4m3"):
        fpsim.matmul(np.ones((1, 1)), np.full((1, 1), 2.0**-14), model=m.with_inputs(
            "fp8_e5m2", "fp8_e4m3"))


def test_block_output_must_fit_the_output():
    with pytest.raises(ValueError, match="block_output fp32 is not a subset of output fp16"):
        dataclasses.replace(fpsim.hw.H100, output="fp16", block_output="fp32")
    with pytest.raises(ValueError, match="block_output bf16 is not a subset of output fp16"):
        dataclasses.replace(fpsim.hw.H100, output="fp16", block_output="bf16")
    with pytest.raises(ValueError, match="block_output must be a format"):
        dataclasses.replace(fpsim.hw.H100, block_output=13)
    with pytest.raises(ValueError, match="unknown|format"):
        dataclasses.replace(fpsim.hw.H100, block_output="e8m13x")


@pytest.mark.parametrize("bad", [0, -1, True, 2.0, "8", math.nan])
def test_promote_every_must_be_a_positive_integer(bad):
    with pytest.raises(ValueError, match="promote_every"):
        fpsim.hw.H100_FP8.with_promotion(bad)


def test_promotion_refuses_split_k_and_stats():
    with pytest.raises(ValueError, match="split_k and promote_every"):
        fpsim.hw.H100.with_split_k(64).with_promotion(128)
    model = fpsim.hw.H100.with_promotion(4)
    assert model.with_promotion(None).name == "H100"
    with pytest.raises(ValueError, match="stats cannot be given with promote_every"):
        fpsim.matmul(np.ones((1, 8)), np.ones((8, 1)), model=model, stats=True)
    # c is the fp32 accumulator's start: a binary32 value, even over an fp16 output.
    with pytest.raises(ValueError, match="accumulator format fp32"):
        fpsim.matmul(np.ones((1, 8)), np.ones((8, 1)), model=model, c=np.array([[0.1]]))
