"""AMD CDNA3's matrix cores (``fpsim.hw.MI300``, ``MI300_BF16``, ``MI300_XF32``), CDNA2's
(``fpsim.hw.mi200_mfma``) and CDNA1's (``fpsim.hw.mi100_mfma``) against exact rational
references, and ``BlockFMA(align="round_down")``'s checks.

The reference is MMA-Sim's rule for CDNA3's fp16, bf16 and xf32 ``mfma`` (Xie et al.,
arXiv 2511.10909; ``mmasim`` 2.1.1, ``mmasim/amd/sim.py`` and ``tr_fdpa`` in
``mmasim/arithmetic/fdpa.py``), written here with Fractions. Each input is read as
s * 2**e with e at least its format's least normal exponent. A product of 2**128 or more
is +-inf. The nonzero products are aligned to the largest of their exponents and each cut
toward zero to F = 24 fraction bits, then added exactly: the dot. c is read at exponent at
least -126 (c = 0 at -126). E is the larger of the two exponents. The dot is rounded down
(toward -inf) to 2**(E - 32), c to 2**(E - 24). Their sum is rounded down to F2 = 31
fraction bits below its leading bit (that bit's exponent at least -126), then to nearest
even binary32. An exactly zero sum is +0; a negative one that rounds to zero is -0. A
block with an infinite or NaN input, or an infinite product, gives the IEEE sum of c and
its products. The instruction chains over K in blocks of 8 (4 for xf32), each result the
next block's c. fpsim computes the rule differently (integer grids in binary64, in
fpsim.accumulation.blocks), so agreement is evidence for both.

CDNA2's reference is MMA-Sim's ``MMA_FTZ_MUL_ADD`` (``mmasim/arithmetic/ftz_mul_add.py``):
inputs below their format's least normal (zeros included) are +0, and so is a subnormal c;
each product is rounded to nearest even binary32, each addition is ``reference.ref_add``
in binary32, and a subnormal product or sum becomes a zero of its sign; per group of 4,
c + ((p0 + p1) + (p2 + p3)), or per pair c + (p0 + p1).

CDNA3's fp8 and bf8 reference is MMA-Sim's ``MMA_GTR_FDPA`` (``gtr_fdpa``), per step of 16
products: the even-k and the odd-k products are each aligned and cut as the dot above,
apart; the two sums are rounded down to 2**(E_dot - 24), E_dot the larger of their
exponents, and added; then the second stage above, except that a c whose exponent is below
E - 25 counts as 0 (not rounded down). The inputs are AMD's fnuz fp8 formats.

CDNA1's is MMA-Sim's ``MMA_E_FDPA`` (``e_fdpa``): per step of 4 products (fp16) or 2
(bf16), c plus the products as a Fraction, rounded once to nearest even binary32
(``reference.ref_round``); an exactly zero sum is +0, and a step with a nonfinite input
gives the IEEE sum.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reference import ref_add, ref_round, same_bits

import fpsim
import fpsim.hw
from fpsim.formats import as_format
from fpsim.hw import BlockFMA

F, F2, E_C = 24, 31, -126
PRESETS = {"MI300": (fpsim.hw.MI300, "fp16", 8), "MI300_BF16": (fpsim.hw.MI300_BF16, "bf16", 8),
           "MI300_XF32": (fpsim.hw.MI300_XF32, "tf32", 4)}
EXAMPLES = int(os.environ.get("FPSIM_HW_EXAMPLES", "15"))
TWO = Fraction(2)


def read(x: Fraction, emin: int) -> tuple[Fraction, int]:
    """x = s * 2**e, e = max(floor(log2|x|), emin)."""
    if x == 0:
        return Fraction(0), emin
    a = abs(x)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    e = e - 1 if TWO**e > a else e
    e = max(e, emin)
    return x / TWO**e, e


def down(x: Fraction, e: int) -> Fraction:
    """x rounded down (toward -inf) to a multiple of 2**e."""
    return math.floor(x / TWO**e) * TWO**e


def ref_block(pairs, c: float, fmt: str, model: BlockFMA = fpsim.hw.MI300) -> float:
    """One CDNA3 instruction step: c + sum(a * b), with ``model``'s F, F2, floor and output
    (MI300's by default: 24, 31, -126, fp32 nearest even)."""
    big = TWO ** (as_format(model.output).emax + 1)
    emin = as_format(fmt).emin
    values = [c, *(v for p in pairs for v in p)]
    products = [Fraction(a) * Fraction(b) for a, b in pairs if math.isfinite(a * b)]
    if not all(math.isfinite(v) for v in values) or any(abs(p) >= big for p in products):
        total = np.float64(c)
        with np.errstate(all="ignore"):
            for a, b in pairs:
                p = Fraction(a) * Fraction(b) if math.isfinite(a * b) else None
                share = (np.float64(a) * np.float64(b) if p is None or abs(p) < big
                         else math.copysign(math.inf, p))
                total = total + share
        return float(total)
    dot, e_dot = aligned_sum(pairs, emin, emin, model.frac_bits)
    return second_stage(dot, e_dot, c, model)


def aligned_sum(pairs, emin_a: int, emin_b: int, frac: int) -> tuple[Fraction, int | None]:
    """The nonzero products aligned to the largest of their exponents, each cut toward zero
    to ``frac`` fraction bits, added exactly: (sum, that exponent), or (0, None)."""
    terms = []
    for a, b in pairs:
        (sa, ea), (sb, eb) = read(Fraction(a), emin_a), read(Fraction(b), emin_b)
        if sa * sb != 0:
            terms.append((sa * sb, ea + eb))
    if not terms:
        return Fraction(0), None
    e_dot = max(e for _, e in terms)
    dot = sum(Fraction(math.trunc(s * TWO ** (e - e_dot + frac))) for s, e in terms)
    return dot * TWO ** (e_dot - frac), e_dot


def second_stage(dot: Fraction, e_dot: int | None, c: float, model: BlockFMA,
                 drop: bool = False) -> float:
    """``tr_fdpa``'s second stage: the dot and c rounded down to the grids of their larger
    exponent and summed, rounded down to F2 bits, then to the output; with ``drop``
    (``gtr_fdpa``), a c more than F + 1 binades below is 0 instead."""
    frac, top = model.frac_bits, model.sum_bits
    out = as_format(model.output)
    big = TWO ** (out.emax + 1)
    e_c = read(Fraction(c), out.emin)[1] if c != 0 else None
    exps = [e for e in (e_dot, e_c, model.exp_floor) if e is not None]
    if not exps:  # no floor, c = 0 and every product zero
        return 0.0
    e_top = max(exps)
    c_part = down(Fraction(c), e_top - frac)
    if drop and read(Fraction(c), out.emin)[1] < e_top - frac - 1:
        c_part = Fraction(0)
    total = down(dot, e_top - top - 1) + c_part
    if total == 0:
        return 0.0
    _, lead = read(total, out.emin)
    total = down(total, lead - top)
    if abs(total) >= big:
        return math.copysign(math.inf, total)
    value, _ = ref_round(total, out, "nearest_even")
    return math.copysign(value, total)


def ref_chain(a, b, c: float, fmt: str, block: int,
              model: BlockFMA = fpsim.hw.MI300) -> float:
    pairs = list(zip(a, b, strict=True))
    for k0 in range(0, len(pairs), block):
        c = ref_block(pairs[k0:k0 + block], c, fmt, model)
    return c


def fpsim_dot(model, a, b, c) -> float:
    got = fpsim.matmul(np.array(a, np.float64).reshape(1, -1),
                       np.array(b, np.float64).reshape(-1, 1), c=np.array([[c]]), model=model)
    return float(np.asarray(got, np.float64)[0, 0])


def check(name, a, b, c):
    model, fmt, block = PRESETS[name]
    want = ref_chain(a, b, c, fmt, block)
    got = fpsim_dot(model, a, b, c)
    assert same_bits(got, want), f"{name}: a={a} b={b} c={c}: want {want!r}, got {got!r}"
    return got


# --- the presets are MMA-Sim's parameters ----------------------------------------------------


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_preset_parameters_are_mmasims(name):
    """mmasim/amd/sim.py: MMA_TR_FDPA(F=24, F2=31, rho="RNE-FP32", L_max=8, or 4 for xf32)."""
    model, fmt, block = PRESETS[name]
    assert (model.block, model.frac_bits, model.sum_bits, model.exp_floor) == (block, F, F2, E_C)
    assert (model.input, model.input_b, model.output, model.output_rounding) == (
        fmt, None, "fp32", "nearest_even")
    assert (model.align, model.overflow, model.zero_sign, model.block_output) == (
        "round_down", "inf", "signed", None)


# --- directed cases -------------------------------------------------------------------------


def test_c_is_rounded_down_to_the_products_grid():
    """A negative c below the products' grid takes one step of it away (truncation would
    leave 1.0): 1 - 2**-30 rounds down to 1 - 2**-24."""
    got = check("MI300", [1.0], [1.0], -(2.0**-30))
    assert got == 1 - 2.0**-24
    assert check("MI300", [1.0], [1.0], 2.0**-30) == 1.0


def test_the_dot_is_rounded_down_to_cs_grid():
    """c = 1 and a dot of -2**-40: the dot rounds down to -2**-32 (one step of 2**(0-32)),
    and the sum 1 - 2**-32, rounded down to 31 bits below its leading bit (2**-1), is
    1 - 2**-32; nearest even binary32 gives 1.0. A dot of +2**-40 vanishes."""
    assert check("MI300", [-(2.0**-20)], [2.0**-20], 1.0) == 1.0
    assert check("MI300", [2.0**-20], [2.0**-20], 1.0) == 1.0
    # Near a tie at binary32's last bit: the dot 2**-24 + 2**-40 rounds down to 2**-24,
    # so 1 + 2**-24 is a tie, to even: 1.0 (the exact sum rounded to nearest: 1 + 2**-23).
    assert check("MI300_BF16", [2.0**-24, 2.0**-20], [1.0, 2.0**-20], 1.0) == 1.0
    assert check("MI300_BF16", [2.0**-24, -(2.0**-20)], [1.0, 2.0**-20], 1.0) == 1.0
    # 2**-32 survives the dot's rounding, and the sum's to 31 bits cuts it: a tie again.
    assert check("MI300_BF16", [2.0**-24, 2.0**-16], [1.0, 2.0**-16], 1.0) == 1.0
    # 2**-30 survives both: above the tie.
    assert check("MI300_BF16", [2.0**-24, 2.0**-15], [1.0, 2.0**-15], 1.0) == 1 + 2.0**-23


def test_products_are_cut_toward_zero_among_themselves():
    """The products are aligned to their own largest exponent and cut toward zero to 24
    fraction bits: -2**-24 counts below 1.0, -2**-25 and +-2**-28 are cut away."""
    assert check("MI300", [1.0, -(2.0**-12)], [1.0, 2.0**-12], 0.0) == 1 - 2.0**-24
    assert check("MI300", [1.0, -(2.0**-12)], [1.0, 2.0**-13], 0.0) == 1.0
    # A product below 2**-24 of the largest is cut away, whatever its sign.
    assert check("MI300", [1.0, -(2.0**-14)], [1.0, 2.0**-14], 0.0) == 1.0
    assert check("MI300", [1.0, 2.0**-14], [1.0, 2.0**-14], 0.0) == 1.0


def test_zero_products_take_no_part_in_alignment():
    """0 x 2**127 does not raise the alignment (a zero product has no exponent)."""
    got = check("MI300_BF16", [0.0, 1.5 * 2.0**-100], [2.0**127, 1.25 * 2.0**-20], 0.0)
    assert got == 1.875 * 2.0**-120


def test_zero_signs():
    """An exactly zero sum is +0, whatever the signs of the zeros; a negative sum that
    rounds to zero is -0, a positive one +0."""
    for a, b, c in (([-0.0] * 8, [1.0] * 8, -0.0), ([1.0, -1.0], [1.0, 1.0], -0.0),
                    ([1.0], [1.0], -1.0), ([0.0], [-1.0], -0.0)):
        got = check("MI300", a, b, c)
        assert got == 0 and not math.copysign(1, got) < 0
    got = check("MI300_BF16", [-(2.0**-100)], [2.0**-60], 0.0)
    assert got == 0 and math.copysign(1, got) < 0
    got = check("MI300_BF16", [2.0**-100], [2.0**-60], 0.0)
    assert got == 0 and math.copysign(1, got) > 0


def test_subnormals():
    """fp16 subnormal inputs are read at exponent -14; a subnormal c at -126; results
    below binary32's normal range round to its subnormals."""
    check("MI300", [2.0**-24, 3 * 2.0**-20], [2.0**-24, 2.0**-14], 0.0)
    check("MI300", [2.0**-24], [2.0**-24], 5 * 2.0**-149)
    got = check("MI300_BF16", [2.0**-70, -(2.0**-75)], [2.0**-70, 2.0**-70], 2.0**-149)
    assert 0 < got < 2.0**-126
    check("MI300_XF32", [1.5 * 2.0**-126, 2.0**-130], [2.0**-20, 1.0], -(2.0**-149))


def test_overflow():
    """A product of 2**128 or more is +-inf; a finite sum beyond binary32's range rounds
    to +-inf (nearest even); +inf and -inf products give NaN."""
    assert check("MI300_BF16", [2.0**100], [2.0**28], 1.0) == math.inf
    assert check("MI300_BF16", [2.0**100], [-(2.0**27)], 1.0) == -(2.0**127)
    assert check("MI300_BF16", [2.0**127, 2.0**127], [1.5, 1.5], 0.0) == math.inf
    assert math.isnan(check("MI300_BF16", [2.0**100, 2.0**100], [2.0**28, -(2.0**28)], 0.0))
    assert check("MI300_XF32", [2.0**127], [-2.0], float(np.float32(3.0e38))) == -math.inf


def test_nonfinite():
    assert math.isnan(check("MI300", [math.nan, 1.0], [1.0, 1.0], 1.0))
    assert math.isnan(check("MI300", [math.inf, 1.0], [0.0, 1.0], 1.0))
    assert check("MI300", [math.inf, 1.0], [2.0, 1.0], 1.0) == math.inf
    assert math.isnan(check("MI300", [math.inf], [1.0], -math.inf))
    assert check("MI300_BF16", [1.0], [1.0], -math.inf) == -math.inf


def test_absorbing_and_cancelling():
    check("MI300", [1.0] * 8, [2.0**-14] * 8, 2.0**20)
    check("MI300", [1.0, -1.0, 2.0**-10, -(2.0**-10), 3.0], [1.0] * 5, -3.0)
    check("MI300_BF16", [2.0**60, -(2.0**60), 1.0], [1.0, 1.0, 2.0**-60], 2.0**-100)


def test_chains_in_blocks():
    """K = 20 is three instructions (8, 8, 4); xf32 five of 4."""
    rng = np.random.default_rng(7)
    a = rng.integers(-2048, 2048, 20) * 2.0 ** rng.integers(-30, 0, 20)
    b = rng.integers(-2048, 2048, 20) * 2.0**-11
    a = np.asarray(a, np.float16).astype(np.float64)
    for name in PRESETS:
        fmt = PRESETS[name][1]
        x = np.asarray(fpsim.round(a, fmt), np.float64)
        y = np.asarray(fpsim.round(b, fmt), np.float64)
        check(name, x.tolist(), y.tolist(), 0.75)
    # The chain is not one block: a block of 20 gives another result here.
    # 1 and nineteen products of 2**-25: in one block each is cut away (1.0); in blocks
    # of 8 the later blocks' sums count: 1 + 2**-22, then 1 + 3 * 2**-23.
    one = dataclasses.replace(fpsim.hw.MI300, block=20)
    x, y = [1.0] + [2.0**-13] * 19, [1.0] + [2.0**-12] * 19
    assert fpsim_dot(one, x, y, 0.0) == 1.0
    assert check("MI300", x, y, 0.0) == 1 + 3 * 2.0**-23


def test_matrix_shapes_batches_and_promotion(backend_name):
    """Rows, columns and batches are independent dot products; promote_every and
    split_k chain the instructions over K's chunks as they do for the other presets."""
    rng = np.random.default_rng(3)
    a = np.asarray(fpsim.round(rng.normal(size=(2, 3, 19)), "fp16"), np.float64)
    b = np.asarray(fpsim.round(rng.normal(size=(2, 19, 4)), "fp16"), np.float64)
    c = np.asarray(fpsim.round(rng.normal(size=(3, 4)), "fp32"), np.float64)
    got = np.asarray(fpsim.matmul(a, b, c=c, model=fpsim.hw.MI300), np.float64)
    for g in range(2):
        for i in range(3):
            for j in range(4):
                want = ref_chain(a[g, i], b[g, :, j], c[i, j], "fp16", 8)
                assert same_bits(got[g, i, j], want)
    promoted = np.asarray(fpsim.matmul(a, b, c=c, model=fpsim.hw.MI300.with_promotion(8)))
    for g in range(2):
        for i in range(3):
            for j in range(4):
                acc = c[i, j]
                for k0 in range(0, 19, 8):
                    part = ref_chain(a[g, i, k0:k0 + 8], b[g, k0:k0 + 8, j], 0.0, "fp16", 8)
                    acc = float(np.float32(np.float64(acc) + np.float64(part)))
                assert same_bits(promoted[g, i, j], acc)


# --- Hypothesis: random inputs of every class, single and chained ---------------------------


def values(fmt, *, nonfinite: bool):
    f = as_format(fmt)
    top = f.emin + 2 ** f.exp_bits - 3

    def build(sign, e, m):
        v = m * 2.0 ** (f.emin - f.man_bits) if e < f.emin else (1 + m / 2**f.man_bits) * 2.0**e
        return -v if sign else v

    finite = st.builds(build, st.booleans(), st.integers(f.emin - 1, top),
                       st.integers(0, 2**f.man_bits - 1))
    # Exponents near each other too: cancellation and carries, not only absorption.
    near = st.builds(build, st.booleans(), st.integers(-3, 3), st.integers(0, 2**f.man_bits - 1))
    if not nonfinite:
        return st.one_of(finite, near)
    return st.one_of(finite, near, near, st.sampled_from([math.nan, math.inf, -math.inf]))


@st.composite
def problems(draw, name):
    _, fmt, block = PRESETS[name]
    k = draw(st.one_of(st.integers(1, block), st.integers(block + 1, 3 * block)))
    special = draw(st.booleans())
    a = draw(st.lists(values(fmt, nonfinite=special), min_size=k, max_size=k))
    b = draw(st.lists(values(fmt, nonfinite=special), min_size=k, max_size=k))
    c = draw(st.one_of(st.just(0.0), st.just(-0.0), values("fp32", nonfinite=special)))
    return a, b, c


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_against_the_rational_reference(name):
    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True)
    @given(problems(name))
    def run(problem):
        check(name, *problem)

    run()


# --- the model's parameters -----------------------------------------------------------------


def test_round_down_is_a_named_option():
    assert fpsim.hw.ALIGNMENTS == ("truncate", "round_down")
    assert fpsim.hw.H100.align == "truncate" and fpsim.hw.H100.sum_bits is None
    assert fpsim.hw.MI300_BF16.name == "MI300/bf16" and fpsim.hw.MI300_XF32.name == "MI300/tf32"


@pytest.mark.parametrize(("changes", "match"), [
    ({"align": "round_up"}, "align must be one of truncate, round_down"),
    ({"align": None}, "align must be one of"),
    ({"sum_bits": None}, "needs sum_bits"),
    ({"sum_bits": 0}, "sum_bits must be an integer in 1..40"),
    ({"sum_bits": 31.0}, "sum_bits must be an integer"),
    ({"align": "truncate"}, "sum_bits is a parameter of align=\"round_down\" only"),
    ({"block_output": "fp16"}, "takes no block_output"),
    ({"block": 1 << 27}, "does not fit the kernels' 64-bit sums"),
    ({"sum_bits": 40, "block": 1 << 18}, "does not fit"),
])
def test_bad_round_down_models_are_refused(changes, match):
    with pytest.raises(ValueError, match=match):
        dataclasses.replace(fpsim.hw.MI300, **changes)


def test_round_down_runs_in_the_kernels():
    """The kernels read the two-stage alignment from the BlockSpec; stats (which would
    not count the rounding-down stages) are refused."""
    spec = fpsim.hw.MI300.params()
    assert (spec.round_down, spec.sum_bits, spec.product_limit) == (1, 31, 2.0**128)
    assert (spec.frac_bits, spec.exp_floor, spec.signed_zero) == (24, -126, 1)
    h100 = fpsim.hw.H100.params()
    assert (h100.round_down, h100.sum_bits, h100.product_limit) == (0, 0, math.inf)
    with pytest.raises(ValueError, match="stats cannot be given"):
        fpsim.matmul([[1.0]], [[1.0]], model=fpsim.hw.MI300, stats=True)
    with pytest.raises(ValueError, match="not a value of the model's input format"):
        fpsim.matmul([[1.0 + 2.0**-20]], [[1.0]], model=fpsim.hw.MI300)
    # The largest block that fits: 2**27 - 1 products with MI300's grid of 32 bits.
    assert dataclasses.replace(fpsim.hw.MI300, block=(1 << 27) - 1).block == (1 << 27) - 1


# Models that binary64 could not hold exactly (the former whole-array code refused
# them): wide inputs, a wide exponent range, wider sums; the kernels' integers hold them.
WIDE = {
    "wide inputs": (BlockFMA("w1", block=4, frac_bits=30, exp_floor=-150,
                             input=fpsim.formats.Format(8, 26), output_rounding="nearest_even",
                             zero_sign="signed", align="round_down", sum_bits=36),
                    fpsim.formats.Format(8, 26)),
    "wide range": (BlockFMA("w2", block=3, frac_bits=12, exp_floor=None,
                            input=fpsim.formats.Format(9, 10),
                            output=fpsim.formats.Format(10, 20),
                            output_rounding="nearest_even", zero_sign="signed",
                            align="round_down", sum_bits=20), fpsim.formats.Format(9, 10)),
}


@pytest.mark.parametrize("name", sorted(WIDE))
def test_wide_round_down_models_against_the_rational_reference(name, backend_name):
    model, fmt = WIDE[name]

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True)
    @given(st.data())
    def run(data):
        k = data.draw(st.integers(1, 2 * model.block + 1))
        special = data.draw(st.booleans())
        a = data.draw(st.lists(values(fmt, nonfinite=special), min_size=k, max_size=k))
        b = data.draw(st.lists(values(fmt, nonfinite=special), min_size=k, max_size=k))
        c = data.draw(st.one_of(st.just(0.0), st.just(-0.0),
                                values(model.output, nonfinite=special)))
        want = ref_chain(a, b, c, fmt, model.block, model)
        # block_matmul: fpsim.matmul takes float32 values only (exact products there).
        got = float(fpsim.hw.block_matmul(np.array([a]), np.array([b]).T,
                                          model, c=np.array([[c]]))[0, 0])
        assert same_bits(got, want), f"{name}: a={a} b={b} c={c}: want {want!r}, got {got!r}"

    run()


def test_round_down_with_no_floor_and_empty_shapes():
    """exp_floor=None: c = 0 takes no part (the products alone set the alignment); K = 0
    gives c; empty M or N give empty results."""
    model = BlockFMA("toy", block=2, frac_bits=4, exp_floor=None, align="round_down",
                     sum_bits=6, output_rounding="nearest_even")
    # 1 + 2**-5 cuts to 1 (4 fraction bits); no c grid below the products'.
    assert fpsim_dot(model, [1.0, 2.0**-5], [1.0, 1.0], 0.0) == 1.0
    assert fpsim_dot(model, [1.0, -(2.0**-5)], [1.0, 1.0], 0.0) == 1.0
    # c = -2**-5 with the dot 1: rounded down to -2**-4 on the products' grid.
    assert fpsim_dot(model, [1.0], [1.0], -(2.0**-5)) == 1 - 2.0**-4
    assert np.asarray(fpsim.matmul(np.zeros((2, 0)), np.zeros((0, 3)), c=1.5,
                                   model=fpsim.hw.MI300)).tolist() == [[1.5] * 3] * 2
    assert fpsim.matmul(np.zeros((0, 4)), np.zeros((4, 3)), model=fpsim.hw.MI300).shape == (0, 3)


@pytest.mark.gpu
def test_round_down_on_gpu_arrays():
    """CuPy arrays in: the same bits as NumPy's, computed on the GPU."""
    from conftest import gpu_missing

    if gpu_missing():
        pytest.skip("no GPU")
    import cupy

    rng = np.random.default_rng(11)
    for model, fmt in ((fpsim.hw.MI300, "fp16"), (fpsim.hw.MI300_BF16, "bf16")):
        a = np.asarray(fpsim.round(rng.normal(size=(5, 37)) * 2.0 ** rng.integers(
            -30, 30, (5, 37)), fmt), np.float64)
        b = np.asarray(fpsim.round(rng.normal(size=(37, 6)), fmt), np.float64)
        c = np.asarray(fpsim.round(rng.normal(size=(5, 6)), "fp32"), np.float64)
        want = np.asarray(fpsim.matmul(a, b, c=c, model=model), np.float64)
        with fpsim.backend("cupy"):
            got = fpsim.matmul(cupy.asarray(a), cupy.asarray(b), c=cupy.asarray(c), model=model)
        assert isinstance(got, cupy.ndarray)
        assert same_bits(cupy.asnumpy(got).astype(np.float64), want).all()


# --- CDNA2: fpsim.hw.mi200_mfma ---------------------------------------------------------------

TINY = 2.0**-126


def flush(v: float) -> float:
    return math.copysign(0.0, v) if abs(v) < TINY else v


def ref_mi200(a, b, c: float, fmt: str, group: int) -> float:
    least = fpsim.format(fmt).smallest_normal
    a = [0.0 if abs(x) < least else x for x in a]
    b = [0.0 if abs(y) < least else y for y in b]
    products = []
    for x, y in zip(a, b, strict=True):
        if math.isfinite(x) and math.isfinite(y):
            neg = (math.copysign(1, x) < 0) != (math.copysign(1, y) < 0)
            p = ref_round(Fraction(x) * Fraction(y), "fp32", "nearest_even")[0]
            p = math.copysign(p, -1.0 if neg else 1.0)
        else:
            with np.errstate(all="ignore"):
                p = float(np.float64(x) * np.float64(y))
        products.append(flush(p))

    def fadd(u, v):
        return flush(ref_add(u, v, "fp32")[0])

    acc = 0.0 if abs(c) < TINY else c
    for k0 in range(0, len(products), group):
        p = products[k0:k0 + group]
        s = fadd(p[0], p[1]) if group == 2 else fadd(fadd(p[0], p[1]), fadd(p[2], p[3]))
        acc = fadd(acc, s)
    return acc


def check_mi200(a, b, c, fmt="fp16", group=4):
    want = ref_mi200(a, b, c, fmt, group)
    got = fpsim.hw.mi200_mfma(np.array([a], np.float64), np.array(b, np.float64)[:, None],
                              c=c, input=fmt, group=group)
    got = float(np.asarray(got, np.float64)[0, 0])
    assert same_bits(got, want), f"{fmt}/{group}: a={a} b={b} c={c}: want {want!r}, got {got!r}"
    return got


def test_mi200_adds_in_rounded_pairs():
    """(1 + 2**-24) + (2**-24 + 0): each addition rounded (a fused sum gives 1 + 2**-23)."""
    assert check_mi200([1.0, 2.0**-12, 2.0**-12, 0.0], [1.0, 2.0**-12, 2.0**-12, 0.0], 0.0) == 1
    # The pairs' order: (1 + -1) + (2**-24 + 2**-24) = 2**-23.
    assert check_mi200([1.0, -1.0, 2.0**-12, 2.0**-12], [1.0, 1.0, 2.0**-12, 2.0**-12],
                       0.0) == 2.0**-23
    # c added after the group: 2**24 + (1 + 1) = 2**24 + 2, where 2**24 + 1 + 1 = 2**24.
    assert check_mi200([1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0], 2.0**24) == 2.0**24 + 2
    assert check_mi200([1.0, 1.0], [1.0, 1.0], 2.0**24, "bf16", 2) == 2.0**24 + 2


def test_mi200_flushes_subnormals():
    """Subnormal inputs and c are +0; a subnormal product or sum a zero of its sign."""
    assert check_mi200([2.0**-20, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0], 0.0) == 0.0
    assert check_mi200([1.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0], 2.0**-130) == 1.0
    # -2**-130 flushes to -0, and -0 + -0 is -0; c = -0 is read as +0, so the sum is +0.
    got = check_mi200([-(2.0**-70), -1.0], [2.0**-60, 0.0], -0.0, "bf16", 2)
    assert got == 0 and math.copysign(1, got) > 0
    # c + s = -2**-125 + 1.5 * 2**-126 = -2**-127, flushed to -0.
    got = check_mi200([1.5 * 2.0**-63, 0.0], [2.0**-63, 0.0], -(2.0**-125), "bf16", 2)
    assert got == 0 and math.copysign(1, got) < 0
    check_mi200([-(2.0**-126), 2.0**-126], [1.5, 1.0], -0.0, "bf16", 2)
    # A product that rounds up to 2**-126 in binary32 is kept.
    check_mi200([1.0 + 2.0**-7, 1.0 - 2.0**-8], [2.0**-63, 2.0**-63], 0.0, "bf16", 2)


def test_mi200_zero_signs_overflow_and_nonfinite():
    for a, c in (([-0.0, -0.0, 0.0, 0.0], -0.0), ([1.0, -1.0, 0.0, 0.0], -0.0)):
        got = check_mi200(a, [1.0] * 4, c)
        assert got == 0
    assert check_mi200([2.0**100, 0.0], [2.0**30, 0.0], 1.0, "bf16", 2) == math.inf
    assert math.isnan(check_mi200([2.0**100, 2.0**100], [2.0**30, -(2.0**30)], 1.0, "bf16", 2))
    assert math.isnan(check_mi200([math.nan, 1.0, 1.0, 1.0], [1.0] * 4, 1.0))
    assert math.isnan(check_mi200([math.inf, 1.0, 1.0, 1.0], [0.0] * 4, 1.0))
    assert check_mi200([1.0] * 4, [1.0] * 4, -math.inf) == -math.inf


# Three CDNA2 fp16 steps (c, 4 products) and MMA-Sim 2.1.1's results (MMA_FTZ_MUL_ADD(4),
# v_mfma_f32_32x32x8f16): 1 + 2**-24 + 2**-24 gives 1; 1 + 3 * 2**-24 gives 1 + 2**-22;
# c = 1 with 2**-24 + 2**-24 in one pair gives 1 + 2**-23.
T = 2.0**-12
NOT_A_BLOCK = ([[1.0, T, T, 0.0], [1.0, 1.5 * 2.0**-11, 0.0, 0.0], [T, 0.0, T, 0.0]],
               [[1.0, T, T, 0.0], [1.0, T, 0.0, 0.0], [T, 0.0, T, 0.0]],
               [0.0, 0.0, 1.0], [1.0, 1.0 + 2.0**-22, 1.0 + 2.0**-23])


def test_mi200_is_not_a_block_fma():
    """No BlockFMA gives CDNA2's three results above (docs/hardware-models.md says why):
    one exact sum per block, cut or rounded down and rounded once, either drops both
    2**-24 terms of the first step and then cannot round 1 + 3 * 2**-24 up to 1 + 2**-22,
    or keeps them; blocks of 1 or 2 add c to a product before the pair's sum (third step).
    Swept here: blocks 1 to 4, truncation to F = 1 to 26 fraction bits (from 24 on every
    term here is kept exactly), rounding down with CDNA3-like F and sum bits, both output
    roundings."""
    for a, b, c, want in zip(*NOT_A_BLOCK, strict=True):
        assert check_mi200(a, b, c) == want
    a, b, c, want = (np.array(v, np.float64) for v in NOT_A_BLOCK)
    a, b, c = a[:, None, :], b[:, :, None], c[:, None, None]
    models = [BlockFMA("sweep", block=k, frac_bits=f, exp_floor=None, output_rounding=r)
              for k in (1, 2, 3, 4) for f in range(1, 27) for r in ("toward_zero",
                                                                     "nearest_even")]
    models += [BlockFMA("sweep", block=k, frac_bits=f, exp_floor=-126, output_rounding=r,
                        align="round_down", sum_bits=s2)
               for k in (1, 2, 3, 4) for f in (13, 24, 25, 40) for s2 in (23, 24, 31)
               for r in ("toward_zero", "nearest_even")]
    with fpsim.backend("numpy"):  # every model is its own Numba specialisation
        for model in models:
            got = np.asarray(fpsim.matmul(a, b, c=c, model=model), np.float64).ravel()
            assert not np.array_equal(got, want), model


def test_mi200_shapes_and_refusals():
    rng = np.random.default_rng(5)
    a = np.asarray(fpsim.round(rng.normal(size=(2, 3, 8)), "fp16"), np.float64)
    b = np.asarray(fpsim.round(rng.normal(size=(8, 4)), "fp16"), np.float64)
    got = fpsim.hw.mi200_mfma(a, b, c=0.5)
    assert got.shape == (2, 3, 4) and got.dtype == np.float64
    for g in range(2):
        for i in range(3):
            for j in range(4):
                assert same_bits(got[g, i, j], ref_mi200(a[g, i], b[:, j], 0.5, "fp16", 4))
    assert fpsim.hw.mi200_mfma(np.ones((2, 4), np.float32),
                               np.ones((4, 1), np.float32)).dtype == np.float32
    assert fpsim.hw.mi200_mfma(np.zeros((2, 0)), np.zeros((0, 3)), c=2.0**-130).tolist() == (
        [[0.0] * 3] * 2)
    for kwargs, match in (({"input": "fp8_e4m3"}, "input must be fp16 or bf16"),
                          ({"group": 3}, "group must be 2 or 4"),
                          ({"group": True}, "group must be 2 or 4")):
        with pytest.raises(ValueError, match=match):
            fpsim.hw.mi200_mfma([[1.0] * 4], [[1.0]] * 4, **kwargs)
    with pytest.raises(ValueError, match="multiple of 4"):
        fpsim.hw.mi200_mfma([[1.0] * 3], [[1.0]] * 3)
    with pytest.raises(ValueError, match="last and B's second-last"):
        fpsim.hw.mi200_mfma([[1.0] * 4], [[1.0]] * 3)
    with pytest.raises(ValueError, match="last and B's second-last"):
        fpsim.hw.mi200_mfma([1.0] * 4, [[1.0]] * 4)
    with pytest.raises(ValueError, match="A holds values that are not fp16"):
        fpsim.hw.mi200_mfma([[1.0 + 2.0**-12] * 4], [[1.0]] * 4)
    with pytest.raises(ValueError, match="B holds values that are not bf16"):
        fpsim.hw.mi200_mfma([[1.0] * 4], [[1.0 + 2.0**-9]] * 4, input="bf16")
    with pytest.raises(ValueError, match="c holds values that are not fp32"):
        fpsim.hw.mi200_mfma([[1.0] * 4], [[1.0]] * 4, c=0.1)


@st.composite
def steps(draw, fmt: str, step: int):
    """(a, b, c): one to three instruction steps of ``step`` products."""
    k = draw(st.integers(1, 3)) * step
    special = draw(st.booleans())
    a = draw(st.lists(values(fmt, nonfinite=special), min_size=k, max_size=k))
    b = draw(st.lists(values(fmt, nonfinite=special), min_size=k, max_size=k))
    c = draw(st.one_of(st.just(0.0), st.just(-0.0), values("fp32", nonfinite=special)))
    return a, b, c


@pytest.mark.parametrize(("fmt", "group"), [("fp16", 4), ("bf16", 4), ("bf16", 2)])
def test_mi200_against_the_rational_reference(fmt, group):
    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True)
    @given(steps(fmt, group))
    def run(problem):
        check_mi200(*problem, fmt, group)

    run()


# --- CDNA1: fpsim.hw.mi100_mfma ---------------------------------------------------------------


def ref_mi100(a, b, c: float, fmt: str) -> float:
    step = 4 if fmt == "fp16" else 2
    for k0 in range(0, len(a), step):
        pairs = list(zip(a[k0:k0 + step], b[k0:k0 + step], strict=True))
        if not all(math.isfinite(v) for v in [c, *a[k0:k0 + step], *b[k0:k0 + step]]):
            with np.errstate(all="ignore"):
                c = float(np.float64(c) + sum(np.float64(x) * np.float64(y) for x, y in pairs))
            continue
        total = Fraction(c) + sum(Fraction(x) * Fraction(y) for x, y in pairs)
        if total == 0:
            c = 0.0
        else:
            c = math.copysign(ref_round(total, "fp32", "nearest_even")[0], total)
    return c


def check_mi100(a, b, c, fmt="fp16"):
    want = ref_mi100(a, b, c, fmt)
    got = fpsim.hw.mi100_mfma(np.array([a], np.float64), np.array(b, np.float64)[:, None],
                              c=c, input=fmt)
    got = float(np.asarray(got, np.float64)[0, 0])
    assert same_bits(got, want), f"{fmt}: a={a} b={b} c={c}: want {want!r}, got {got!r}"
    return got


def test_mi100_rounds_the_exact_sum_once():
    """Ties and cancellation across the whole range: the step's exact sum, rounded once."""
    # 1 + 2**-24 + 2**-48: above the tie (one rounding of the exact sum), not 1.
    assert check_mi100([1.0, 2.0**-12, 2.0**-24, 0.0], [1.0, 2.0**-12, 2.0**-24, 0.0],
                       0.0) == 1 + 2.0**-23
    assert check_mi100([1.0, 2.0**-12, -(2.0**-24), 0.0], [1.0, 2.0**-12, 2.0**-24, 0.0],
                       0.0) == 1.0
    assert check_mi100([1.0, 2.0**-12, 0.0, 0.0], [1.0, 2.0**-12, 0.0, 0.0], 0.0) == 1.0
    # c = 2**127 cancels exactly, leaving a product 250 binades below it.
    assert check_mi100([2.0**-60, 2.0**63], [2.0**-60, 2.0**64], -(2.0**127),
                       "bf16") == 2.0**-120
    # A tie decided by a term 2**-149 far below: (2**24 + 1) + 2**-149 rounds up.
    assert check_mi100([2.0**12, 1.0], [2.0**12, 1.0], 2.0**-149, "bf16") == 2.0**24 + 2
    assert check_mi100([2.0**12, 1.0], [2.0**12, 1.0], -(2.0**-149), "bf16") == 2.0**24
    assert check_mi100([2.0**12, 1.0], [2.0**12, 1.0], 0.0, "bf16") == 2.0**24


def test_mi100_subnormals_zero_signs_overflow_and_nonfinite():
    assert check_mi100([2.0**-24, 0.0, 0.0, 0.0], [2.0**-24, 0.0, 0.0, 0.0], 0.0) == 2.0**-48
    got = check_mi100([-(2.0**-100), 0.0], [2.0**-60, 0.0], 0.0, "bf16")
    assert got == 0 and math.copysign(1, got) < 0  # a negative sum below 2**-150
    for a, c in (([-0.0] * 4, -0.0), ([1.0, -1.0, 0.0, 0.0], -0.0), ([1.0, 0, 0, 0], -1.0)):
        got = check_mi100(a, [1.0] * 4, c)
        assert got == 0 and math.copysign(1, got) > 0
    top = float(np.finfo(np.float32).max)
    assert check_mi100([2.0**15, 0.0, 0.0, 0.0], [2.0**15, 0.0, 0.0, 0.0], top) == top
    assert check_mi100([2.0**103, 0.0], [1.0, 0.0], top, "bf16") == math.inf  # the tie
    assert check_mi100([2.0**103, -1.0], [1.0, 2.0**-100], top, "bf16") == top
    assert check_mi100([2.0**100, 2.0**100], [2.0**100, -(2.0**100)], 1.0, "bf16") == 1.0
    assert math.isnan(check_mi100([math.nan, 1.0, 1.0, 1.0], [1.0] * 4, 1.0))
    assert math.isnan(check_mi100([math.inf, 1.0, 1.0, 1.0], [0.0] * 4, 1.0))
    assert check_mi100([math.inf, 1.0], [2.0, 1.0], 1.0, "bf16") == math.inf
    assert check_mi100([1.0] * 4, [1.0] * 4, -math.inf) == -math.inf


def test_mi100_shapes_and_refusals():
    rng = np.random.default_rng(9)
    a = np.asarray(fpsim.round(rng.normal(size=(3, 6)) * 2.0 ** rng.integers(-40, 40, (3, 6)),
                               "bf16"), np.float64)
    b = np.asarray(fpsim.round(rng.normal(size=(2, 6, 2)), "bf16"), np.float64)
    got = fpsim.hw.mi100_mfma(a, b, c=[[0.25, -0.5]], input="bf16")
    assert got.shape == (2, 3, 2)
    for g in range(2):
        for i in range(3):
            for j in range(2):
                want = ref_mi100(list(a[i]), list(b[g, :, j]), [0.25, -0.5][j], "bf16")
                assert same_bits(got[g, i, j], want)
    with pytest.raises(ValueError, match="mi100_mfma: input must be fp16 or bf16"):
        fpsim.hw.mi100_mfma([[1.0] * 4], [[1.0]] * 4, input="tf32")
    with pytest.raises(ValueError, match="mi100_mfma: K must be a multiple of 4"):
        fpsim.hw.mi100_mfma([[1.0] * 2], [[1.0]] * 2)
    with pytest.raises(ValueError, match="A holds values that are not bf16"):
        fpsim.hw.mi100_mfma([[1.0 + 2.0**-10] * 2], [[1.0]] * 2, input="bf16")


@pytest.mark.parametrize("fmt", ["fp16", "bf16"])
def test_mi100_against_the_rational_reference(fmt):
    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True)
    @given(steps(fmt, 4 if fmt == "fp16" else 2))
    def run(problem):
        check_mi100(*problem, fmt)

    run()


@pytest.mark.parametrize(("compute", "preset"), [("fp16", fpsim.hw.MI300),
                                                 ("bf16", fpsim.hw.MI300_BF16),
                                                 ("tf32", fpsim.hw.MI300_XF32)])
def test_a_policy_takes_the_mi300_presets(compute, preset):
    """MI300 is in fpsim.hw.PRESETS: under ``model=MI300`` a linear layer's product is
    ``fpsim.matmul(..., model=MI300)`` (fp16, or bf16 inputs) rounded to the compute format;
    with tf32 it is the xf32 instruction's (blocks of 4), not the fp16 one's reading tf32."""
    import fpsim.nn.functional as F
    from fpsim.precision import parse

    assert fpsim.hw.PRESETS["MI300"] is fpsim.hw.MI300
    rng = np.random.default_rng(9)
    x, w = rng.normal(size=(4, 24)), rng.normal(size=(3, 24))
    x[:, :2] = [2.0**12, -(2.0**12)]
    if compute == "tf32":  # cancelling products that cut the small ones of a block of 8
        x[:, :2], w[:, :2] = [2.0**24, -(2.0**24)], 1.0
    with parse(f"mixed,compute={compute},model=MI300"):
        y = F.linear(fpsim.tensor(x), fpsim.tensor(w))
    xs, ws = (fpsim.round(v, compute) for v in (x, w))
    want = fpsim.round(fpsim.matmul(xs, ws.T, model=preset), compute)
    np.testing.assert_array_equal(y.data, want)
    if compute == "tf32":  # the fp16 instruction's blocks of 8 give other bits here
        wrong = fpsim.matmul(xs, ws.T, model=fpsim.hw.MI300.with_input("tf32"))
        assert (fpsim.round(wrong, compute) != want).any()


@pytest.mark.parametrize(("name", "compute", "want"), [
    ("MI300", "tf32", fpsim.hw.MI300_XF32), ("MI300/bf16", "tf32", fpsim.hw.MI300_XF32),
    ("MI300/tf32", "fp16", fpsim.hw.MI300), ("MI300/tf32", "bf16", fpsim.hw.MI300_BF16),
    ("H100", "tf32", fpsim.hw.H100_TF32), ("H100/bf16", "fp16", fpsim.hw.H100),
    ("A100", "tf32", fpsim.hw.TF32["A100"]), ("B200", "tf32", fpsim.hw.TF32["B200"]),
    ("H100_FP8", "fp8_e5m2", fpsim.hw.H100_FP8.with_input("fp8_e5m2"))])
def test_a_policy_takes_the_instruction_of_its_compute_format(name, compute, want):
    """Policy(model=...) looks up the GPU's instruction for the compute format
    (fpsim.hw.for_input): a tf32 block holds as many bytes as an fp16 one, half the
    products; a GPU without TF32 tensor cores is refused."""
    from fpsim.precision import parse

    assert parse(f"mixed,compute={compute},model={name}").hardware_model() == want
    assert fpsim.hw.TF32["A100"].block == 4 and fpsim.hw.TF32["B200"].block == 8
    with pytest.raises(ValueError, match="V100 has no TF32 tensor cores"):
        parse("mixed,compute=tf32,model=V100").hardware_model()


# --- CDNA3 fp8 and bf8: fpsim.hw.mi300_fp8_mfma -------------------------------------------------

FNUZ = ("fp8_e4m3fnuz", "fp8_e5m2fnuz")
CDNA3_FP8 = Path(__file__).parent / "data" / "mmasim_cdna3_fp8.npz"
MI300_FP8 = dataclasses.replace(fpsim.hw.MI300, block=16)  # F, F2, floor and output


def ref_fp8_step(pairs, c: float, fmt_a: str, fmt_b: str, split: bool = True,
                 drop: bool = True) -> float:
    """One CDNA3 fp8 step (16 products): ``gtr_fdpa``; without ``split`` and ``drop``,
    ``tr_fdpa`` (the fp16 rule) on the same inputs."""
    if not all(math.isfinite(v) for v in (c, *(v for p in pairs for v in p))):
        with np.errstate(all="ignore"):
            return float(np.float64(c) + sum(np.float64(a) * np.float64(b) for a, b in pairs))
    emin_a, emin_b, frac = as_format(fmt_a).emin, as_format(fmt_b).emin, MI300_FP8.frac_bits
    halves = [aligned_sum(h, emin_a, emin_b, frac)
              for h in ((pairs[0::2], pairs[1::2]) if split else (pairs,))]
    exps = [e for _, e in halves if e is not None]
    e_dot = max(exps) if exps else None
    dot = sum((down(s, e_dot - frac) for s, _ in halves), Fraction(0)) if exps else Fraction(0)
    return second_stage(dot, e_dot, c, MI300_FP8, drop)


def ref_fp8(a, b, c: float, fmt_a: str, fmt_b: str, **rule) -> float:
    pairs = list(zip(a, b, strict=True))
    for k0 in range(0, len(pairs), 16):
        c = ref_fp8_step(pairs[k0:k0 + 16], c, fmt_a, fmt_b, **rule)
    return c


def check_fp8(a, b, c, fmt_a="fp8_e4m3fnuz", fmt_b=None):
    fmt_b = fmt_b or fmt_a
    want = ref_fp8(a, b, c, fmt_a, fmt_b)
    got = fpsim.hw.mi300_fp8_mfma(np.array([a], np.float64), np.array(b, np.float64)[:, None],
                                  c=c, input=fmt_a, input_b=fmt_b)
    got = float(np.asarray(got, np.float64)[0, 0])
    assert same_bits(got, want), f"a={a} b={b} c={c}: want {want!r}, got {got!r}"
    return got


def pad16(values):
    return list(values) + [0.0] * (16 - len(values))


def test_mi300_fp8_aligns_the_even_and_odd_products_apart():
    """2**14 at k = 0 and eight 2**-11 at odd k: the odd half keeps its 2**-8 (one
    alignment for all 16, MI300's fp16 rule, cuts every 2**-11: 25 bits below)."""
    a = pad16([128.0] + [2.0**-10, 0.0] * 7 + [2.0**-10])
    b = pad16([128.0] + [0.5, 0.0] * 7 + [0.5])
    assert check_fp8(a, b, 0.0) == 2.0**14 + 2.0**-8
    assert ref_fp8(a, b, 0.0, *FNUZ[:1] * 2, split=False, drop=False) == 2.0**14
    # In the even half they are cut: 2**14.
    a_even = pad16([128.0, 0.0] + [2.0**-10, 0.0] * 7)
    b_even = pad16([128.0, 0.0] + [0.5, 0.0] * 7)
    assert check_fp8(a_even, b_even, 0.0) == 2.0**14


def test_mi300_fp8_rounds_each_half_down_to_the_larger_ones_grid():
    """The odd half's -2**-11 alone is exact in its own alignment; against the even half's
    2**14 it is rounded down to -2**-10 (toward -inf, 24 bits below 2**14): 2**14 - 2**-10,
    a binary32 value (the exact 2**14 - 2**-11 would round to 2**14). With c = 1, 2**14 + 1
    - 2**-10 is a binary32 tie, to even: 2**14 + 1."""
    a, b = pad16([128.0, -(2.0**-10)]), pad16([128.0, 0.5])
    assert check_fp8(a, b, 0.0) == 2.0**14 - 2.0**-10
    assert check_fp8(a, b, 1.0) == 2.0**14 + 1.0


def test_mi300_fp8_drops_a_c_far_below_instead_of_rounding_it_down():
    """c = -2**-40 under a dot of 2**-10 (30 binades): dropped, not rounded down to
    -2**-34 (which MI300's fp16 rule does, pulling a tie the other way)."""
    a, b = pad16([2.0**-5, 2.0**-10]), pad16([2.0**-5, 2.0**-10])  # 2**-10 + 2**-20
    for c in (-(2.0**-40), 2.0**-40, -(2.0**-36)):
        assert check_fp8(a, b, c) == 2.0**-10 + 2.0**-20
    # 25 binades below (e_c = E - 25) is kept: rounded down to -2**-34.
    got = check_fp8(pad16([2.0**-5]), pad16([2.0**-5]), -(2.0**-35))
    assert got == np.float32(2.0**-10 - 2.0**-34)


def test_mi300_fp8_zero_signs_nan_and_infinite_c():
    assert math.copysign(1, check_fp8([-0.0] * 16, [1.0] * 16, -0.0)) == 1
    assert math.copysign(1, check_fp8(pad16([1.0, -1.0]), pad16([1.0, 1.0]), 0.0)) == 1
    assert math.isnan(check_fp8(pad16([math.nan]), pad16([1.0]), 1.0))
    assert check_fp8(pad16([240.0]), pad16([240.0]), -math.inf) == -math.inf
    assert math.isnan(check_fp8(pad16([1.0]), pad16([1.0]), math.nan))
    # Products (at most 2**28 each) cannot reach binary32's overflow: c near it absorbs them.
    big = float(np.finfo(np.float32).max)
    assert check_fp8([240.0] * 16, [57344.0] * 16, big, *FNUZ) == big


def test_mi300_fp8_shapes_and_refusals():
    rng = np.random.default_rng(8)
    values = [v for v in fpsim.from_bits(np.arange(256), "fp8_e4m3fnuz").tolist()
              if math.isfinite(v)]
    a = rng.choice(values, (2, 3, 32))
    b = rng.choice(values, (32, 2))
    got = fpsim.hw.mi300_fp8_mfma(a, b, c=0.5)
    assert got.shape == (2, 3, 2)
    for g in range(2):
        for i in range(3):
            for j in range(2):
                assert same_bits(got[g, i, j], ref_fp8(a[g, i], b[:, j], 0.5, *FNUZ[:1] * 2))
    for kwargs, match in (({"input": "fp8_e4m3"}, "input must be fp8_e4m3fnuz or fp8_e5m2fnuz"),
                          ({"input_b": "bf16"}, "input_b must be one of")):
        with pytest.raises(ValueError, match=match):
            fpsim.hw.mi300_fp8_mfma([[1.0] * 16], [[1.0]] * 16, **kwargs)
    with pytest.raises(ValueError, match="multiple of 16"):
        fpsim.hw.mi300_fp8_mfma([[1.0] * 8], [[1.0]] * 8)
    with pytest.raises(ValueError, match="A holds values that are not fp8_e4m3fnuz"):
        fpsim.hw.mi300_fp8_mfma([[448.0] * 16], [[1.0]] * 16)  # e4m3's, beyond 240
    with pytest.raises(ValueError, match="B holds values that are not fp8_e5m2fnuz"):
        fpsim.hw.mi300_fp8_mfma([[1.0] * 16], [[1.125]] * 16, input_b="fp8_e5m2fnuz")


@st.composite
def fp8_steps(draw, fmt_a: str, fmt_b: str):
    """(a, b, c): one or two steps of 16 fnuz values (NaN sometimes), c of every class."""
    k = draw(st.integers(1, 2)) * 16
    special = draw(st.booleans())

    def element(fmt):
        values = sorted(v for v in fpsim.from_bits(np.arange(256), fmt).tolist()
                        if math.isfinite(v))
        near = [v for v in values if 2.0**-3 <= abs(v) <= 8.0]
        pool = st.one_of(st.sampled_from(values), st.sampled_from(near), st.just(0.0))
        return st.one_of(pool, st.just(math.nan)) if special else pool

    a = draw(st.lists(element(fmt_a), min_size=k, max_size=k))
    b = draw(st.lists(element(fmt_b), min_size=k, max_size=k))
    c = draw(st.one_of(st.just(0.0), st.just(-0.0), values("fp32", nonfinite=special)))
    return a, b, c


@pytest.mark.parametrize(("fmt_a", "fmt_b"), [(FNUZ[0], FNUZ[0]), (FNUZ[0], FNUZ[1]),
                                              (FNUZ[1], FNUZ[1])])
def test_mi300_fp8_against_the_rational_reference(fmt_a, fmt_b):
    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True)
    @given(fp8_steps(fmt_a, fmt_b))
    def run(problem):
        check_fp8(*problem, fmt_a, fmt_b)

    run()


def test_mi300_fp8_is_mmasim_bit_for_bit():
    """MMA-Sim 2.1.1's CDNA3 fp8/bf8 mfma (tests/data/mmasim_cdna3_fp8.npz, from
    make_mmasim_records.py --cdna3-fp8): every pairing, nine classes of input, one step of
    16 and chained over K = 64, every output bit for bit (zero signs included, NaN as NaN).
    The recording tells the rule from MI300's fp16 rule and from one without the c rule."""
    data = np.load(CDNA3_FP8)
    about = json.loads(str(data["about"]))
    assert about["mmasim"] == "2.1.1" and about["K"] == 64 and len(about["classes"]) == 9
    assert sorted(about["instructions"]) == sorted(f"MI300_{a}_{b}" for a in FNUZ for b in FNUZ)
    for key, info in about["instructions"].items():
        fa, fb = info["a"], info["b"]
        assert info["instruction"][0] == "CDNA3" and info["step"] == 16
        a = np.asarray(fpsim.from_bits(data[f"{fa}_a"], fa), np.float64)
        b = np.asarray(fpsim.from_bits(data[f"{fb}_b"], fb), np.float64)
        c = data[f"{fa}_c"].astype(np.float64)
        for how, k in (("single", 16), ("chained", about["K"])):
            got = fpsim.hw.mi300_fp8_mfma(a[:, None, :k], b[:, :k, None], c=c[:, None, None],
                                          input=fa, input_b=fb)
            mine = np.asarray(got, np.float32).reshape(-1)
            theirs = data[f"{key}_{how}"].view(np.float32)
            bad = np.flatnonzero(~same_bits(mine, theirs))
            assert bad.size == 0, (key, how, bad[:5], mine[bad[:5]], theirs[bad[:5]])
        # The recording reaches each part of the rule: on its single steps, the rule
        # without the even/odd split, and without the c rule, each differ from MMA-Sim.
        theirs = data[f"{key}_single"].view(np.float32)
        for rule in ({"split": False}, {"drop": False}):
            other = np.array([ref_fp8(a[i, :16], b[i, :16], c[i], fa, fb, **rule)
                              for i in range(a.shape[0])], np.float32)
            assert (~same_bits(other, theirs)).any(), (key, rule)
