"""Blackwell's block-scaled MMAs (``fpsim.hw.B200_MXF8F6F4``, ``B200_MXF4``, ``B200_NVF4`` and
the RTX 5090's) against an exact rational reference, and ``fpsim.matmul`` of ``Quantized``
operands with a block-scaled ``model``.

The reference is MMA-Sim's rule (Xie et al., arXiv 2511.10909; ``mmasim`` 2.1.1,
``mmasim/arithmetic/fdpa.py``), written here with Fractions:

- kind::mxf8f6f4 (``st_fdpa``): each element is read as s * 2**e, e at least its format's
  least normal exponent; each product's term is s_a * s_b at e_a + e_b plus its two E8M0
  scales' exponents; a zero product, and c = 0, count at e_zero = -133; every term is cut
  toward zero to F = 25 fraction bits below the largest exponent.
- kind::mxf4 and kind::mxf4nvf4 (``gst_fdpa``): each group of 16 products is summed
  exactly; its term is that sum times the two scales' significands, at the scales'
  exponents (E8M0, or UE4M3 read as s * 2**e with e at least -6); a group whose products
  are all zero, or whose scales' significands multiply to zero, counts at e_zero = -139
  (a group whose products cancel does not); c = 0 also; every term is cut toward zero to
  F = 35 fraction bits below the largest exponent.

The sum is then cut toward zero to binary32 (+-inf at 2**128 and beyond), a zero result is
+0; a NaN scale, or an infinite or NaN element or c, gives the IEEE sum of c and the
scaled products. Instructions chain over K (32 or 64 products each), each result the next
one's c. fpsim computes the rules with the shared block-FMA kernels' integer steps
(``fpsim.accumulation.scaled``), so agreement is evidence for both.
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
from reference import ref_round, same_bits
from test_amd_presets import read

import fpsim
import fpsim.hw
from fpsim.formats import as_format
from fpsim.hw import block_scaled_matmul

EXAMPLES = int(os.environ.get("FPSIM_HW_EXAMPLES", "15"))
TWO = Fraction(2)
# model -> (F, e_zero, products per instruction, group): mmasim/nv_ptx/sim.py.
RULES = {
    "B200_MXF8F6F4": (25, -133, 32, None), "RTX5090_MXF8F6F4": (25, -133, 32, None),
    "B200_MXF4": (35, -139, 64, 16), "RTX5090_MXF4": (35, -139, 64, 16),
    "B200_NVF4": (35, -139, 64, 16), "RTX5090_NVF4": (35, -139, 64, 16),
}


def ieee_sum(a, b, sa, sb, c) -> float:
    with np.errstate(all="ignore"):
        total = np.float64(c)
        for x, y, s, t in zip(a, b, sa, sb, strict=True):
            total = total + np.float64(x) * np.float64(y) * np.float64(s) * np.float64(t)
    return float(total)


def finish(terms, e_zero: int, frac: int) -> float:
    """The terms (s, e) cut to ``frac`` bits below the largest exponent, summed, cut to
    binary32."""
    top = max(e for _, e in terms)
    total = sum((Fraction(math.trunc(s * TWO ** (e - top + frac))) for s, e in terms),
                Fraction(0)) * TWO ** (top - frac)
    if abs(total) >= TWO**128:
        return math.copysign(math.inf, total)
    return ref_round(total, "fp32", "toward_zero")[0] + 0.0  # a zero result is +0


def ref_instruction(model, a, b, sa, sb, c: float) -> float:
    """One instruction: c + sum of the scaled products, under MMA-Sim's rule."""
    frac, e_zero, _, group = RULES[model.name.split("/")[0]]
    fa, fb, fs = as_format(model.fma.input), as_format(model.fma.input_b or model.fma.input), \
        as_format(model.scale)
    if (not all(math.isfinite(v) for v in (c, *a, *b))
            or any(math.isnan(s) for s in (*sa, *sb))):
        return ieee_sum(a, b, sa, sb, c)
    sc, ec = read(Fraction(c), -126)
    terms = [(sc, ec if c != 0 else e_zero)]
    if group is None:
        for x, y, s, t in zip(a, b, sa, sb, strict=True):
            (px, ex), (py, ey) = read(Fraction(x), fa.emin), read(Fraction(y), fb.emin)
            es, et = read(Fraction(s), fs.emin)[1], read(Fraction(t), fs.emin)[1]
            terms.append((px * py, ex + ey + es + et) if px * py != 0 else (Fraction(0), e_zero))
    else:
        for g0 in range(0, len(a), group):
            xs, ys = a[g0:g0 + group], b[g0:g0 + group]
            total = sum((Fraction(x) * Fraction(y) for x, y in zip(xs, ys, strict=True)),
                        Fraction(0))
            (ss, es), (st_, et) = read(Fraction(sa[g0]), fs.emin), read(Fraction(sb[g0]), fs.emin)
            zero = all(x * y == 0 for x, y in zip(xs, ys, strict=True)) or ss * st_ == 0
            terms.append((Fraction(0), e_zero) if zero else (total * ss * st_, es + et))
    return finish(terms, e_zero, frac)


def ref_chain(model, a, b, sa, sb, c: float) -> float:
    k = RULES[model.name.split("/")[0]][2]
    for k0 in range(0, len(a), k):
        s = slice(k0, k0 + k)
        c = ref_instruction(model, a[s], b[s], sa[s], sb[s], c)
    return c


def fpsim_dot(model, a, b, sa, sb, c) -> float:
    row, col = (np.array(v, np.float64).reshape(1, -1) for v in (a, sa))
    got = block_scaled_matmul(row, np.array(b, np.float64).reshape(-1, 1), col,
                              np.array(sb, np.float64).reshape(-1, 1), model,
                              c=np.array([[c]]))
    return float(np.asarray(got, np.float64)[0, 0])


def check(model, a, b, sa, sb, c):
    """fpsim equals the reference; ``sa``/``sb`` one scale per block of ``scale_block``
    (repeated here per element)."""
    n = model.scale_block
    sa = [s for s in sa for _ in range(n)][:len(a)]
    sb = [s for s in sb for _ in range(n)][:len(b)]
    want = ref_chain(model, a, b, sa, sb, c)
    got = fpsim_dot(model, a, b, sa, sb, c)
    assert same_bits(got, want), f"{model.name}: a={a} b={b} sa={sa} sb={sb} c={c}: " \
                                 f"want {want!r}, got {got!r}"
    return got


MXF8 = fpsim.hw.B200_MXF8F6F4.with_inputs("fp8_e4m3", "fp8_e4m3")
E5M2 = fpsim.hw.B200_MXF8F6F4.with_inputs("fp8_e5m2", "fp8_e5m2")


def pad(values, k):
    return list(values) + [0.0] * (k - len(values))


# --- the presets are MMA-Sim's parameters ----------------------------------------------------


@pytest.mark.parametrize("name", sorted(RULES))
def test_preset_parameters_are_mmasims(name):
    frac, e_zero, k, group = RULES[name]
    m = fpsim.hw.BLOCK_SCALED[name]
    assert (m.fma.frac_bits, m.fma.exp_floor, m.fma.block, m.group) == (frac, e_zero, k, group)
    assert (m.fma.output, m.fma.output_rounding, m.fma.overflow, m.fma.zero_sign) == (
        "fp32", "toward_zero", "inf", "positive")
    assert (m.scale, m.scale_block) == (("ue4m3", 16) if "NVF4" in name else ("e8m0", 32))


# --- directed cases -------------------------------------------------------------------------


def test_scales_shift_each_product():
    """3 * 0.5 with scales 2**-3 and 2**5: 1.5 * 2**2 = 6, for each of the 32 products."""
    assert check(MXF8, [3.0] * 32, [0.5] * 32, [2.0**-3], [2.0**5], 0.0) == 192.0


def test_subnormal_elements_are_read_at_their_least_exponent_then_scaled():
    """e4m3's 2**-9 is read as 2**-3 * 2**-6: the product 2**-9 * 2**-9 aligns at -12 (+20
    from the scales 2**10 * 2**10), so c = 2**-18 (26 bits below) is cut: 4.0, where a
    normalised reading (alignment at 2**2) would keep it."""
    a, b = pad([2.0**-9], 32), pad([2.0**-9], 32)
    assert check(MXF8, a, b, [2.0**10], [2.0**10], 2.0**-18) == 4.0
    assert check(MXF8, a, b, [2.0**10], [2.0**10], 2.0**-17) == 4.0 + 2.0**-17


def test_c_is_not_scaled_and_small_products_are_cut():
    """Scaled products far above c cut it away (25 bits); c far above them cuts them."""
    a, b = pad([1.0], 32), pad([1.0], 32)
    assert check(MXF8, a, b, [2.0**100], [1.0], 1.0) == 2.0**100
    assert check(MXF8, a, b, [2.0**-100], [1.0], 1.0) == 1.0
    assert check(MXF8, a, b, [2.0**-11], [2.0**-12], 1.0) == 1.0 + 2.0**-23
    assert check(MXF8, a, b, [2.0**-13], [2.0**-13], 1.0) == 1.0  # 2**-26: cut (F = 25)


def test_nan_scales_nan_elements_and_infinities():
    a, b = [0.0] * 32, [0.0] * 32
    assert math.isnan(check(MXF8, a, b, [math.nan], [1.0], 1.0))  # NaN scale, zero elements
    assert math.isnan(check(fpsim.hw.B200_NVF4, [0.0] * 64, [0.0] * 64, [1.0, 1.0, math.nan, 1.0],
                            [1.0] * 4, 0.0))
    assert check(E5M2, pad([math.inf], 32), pad([2.0], 32), [2.0**-127], [1.0], 1.0) == math.inf
    assert math.isnan(check(E5M2, pad([math.inf, -math.inf], 32), pad([1.0, 1.0], 32), [1.0],
                            [1.0], 0.0))
    assert math.isnan(check(E5M2, pad([math.inf], 32), [0.0] * 32, [1.0], [1.0], 0.0))
    assert check(fpsim.hw.B200_MXF4, [1.0] * 64, [1.0] * 64, [1.0] * 2, [1.0] * 2,
                 -math.inf) == -math.inf
    assert math.isnan(check(MXF8, [1.0] * 32, [1.0] * 32, [1.0], [1.0], math.nan))


def test_zero_blocks_and_zero_scales_take_no_part():
    """All-zero elements (any scale) leave c as it is, to its last bit; so does a zero
    UE4M3 scale."""
    c = 1.0 + 2.0**-23
    assert check(MXF8, [0.0] * 32, [-0.0] * 32, [2.0**127], [2.0**127], c) == c
    assert check(fpsim.hw.B200_MXF4, [0.0] * 64, [1.0] * 64, [2.0**127] * 2, [1.0] * 2, c) == c
    assert check(fpsim.hw.B200_NVF4, [6.0] * 64, [6.0] * 64, [0.0] * 4, [448.0] * 4, c) == c
    assert check(fpsim.hw.B200_NVF4, [0.0] * 64, [0.0] * 64, [0.0] * 4, [0.0] * 4, -0.0) == 0.0


def test_a_cancelling_group_still_aligns_at_its_scales():
    """kind::mxf4: a group of 16 whose products cancel (6 - 6) is not a zero group: it
    counts at its scales' exponent 2**100, so c = 1 + 2**-23 is cut to 0. A group of zero
    products leaves c."""
    a = [6.0, -6.0] + [0.0] * 62
    c = 1.0 + 2.0**-23
    assert check(fpsim.hw.B200_MXF4, a, [1.0] * 64, [2.0**100] * 2, [1.0] * 2, c) == 0.0
    assert check(fpsim.hw.B200_MXF4, [0.0] * 64, [1.0] * 64, [2.0**100] * 2, [1.0] * 2, c) == c
    # kind::mxf8f6f4 scales each product: the two cancelling products raise the alignment too.
    assert check(MXF8, pad([6.0, -6.0], 32), pad([1.0, 1.0], 32), [2.0**100], [1.0], c) == 0.0


def test_groups_align_at_their_scales_not_their_sums():
    """kind::mxf4: a group's term sits at its scales' exponent, however large its sum (up to
    16 * 36 = 576, 2**9.2): two groups of +-576 at scale 2**100 cancel, and c = 2**66, 34
    bits below 2**100, stays (F = 35); aligned at the sums' 2**109 it would be cut. c =
    2**64 (36 bits below) is cut."""
    a, b = [6.0] * 16 + [-6.0] * 16 + [0.0] * 32, [6.0] * 64
    model = fpsim.hw.B200_MXF4
    assert check(model, a, b, [2.0**100] * 2, [1.0] * 2, 2.0**66) == 2.0**66
    assert check(model, a, b, [2.0**100] * 2, [1.0] * 2, 2.0**64) == 0.0
    # A single product 2**-2 at scale 2**-36 is 2**-38: below c = 1's grid 2**-35, cut.
    one = [0.5] + [0.0] * 63
    assert check(model, one, one, [2.0**-36] * 2, [1.0] * 2, -1.0) == -1.0


def test_ue4m3_scales_multiply_their_significands():
    """NVFP4: scales 1.5 and 0.875 (UE4M3) multiply each group's sum exactly; a subnormal
    UE4M3 scale (2**-9) is read at exponent -6."""
    a = [1.5] * 16 + [0.0] * 48
    got = check(fpsim.hw.B200_NVF4, a, [2.0] * 64, [1.5, 1.0, 1.0, 1.0], [0.875] * 4, 0.0)
    assert got == 16 * 3.0 * 1.5 * 0.875
    assert check(fpsim.hw.B200_NVF4, a, [2.0] * 64, [2.0**-9] * 4, [1.0] * 4, 0.0) == \
        48 * 2.0**-9


def test_overflow_underflow_and_zero_signs():
    """+-inf beyond binary32 (cut toward zero, MMA-Sim's RZ-FP32 then a conversion); a
    negative sum below binary32's subnormals is +0 (the +0.0 of st_fdpa); the floor
    e_zero = -133 cuts products 25 bits below it when c = 0."""
    big = [448.0] * 32
    assert check(MXF8, big, big, [2.0**127], [2.0**-20], 0.0) == math.inf
    assert check(MXF8, [-448.0] * 32, big, [2.0**127], [2.0**-20], 0.0) == -math.inf
    assert check(MXF8, big, big, [2.0**127], [2.0**-60], 0.0) == 32 * 448.0**2 * 2.0**67
    got = check(MXF8, pad([-1.0], 32), pad([1.0], 32), [2.0**-127], [2.0**-27], 0.0)
    assert same_bits(got, 0.0)
    # Products at 2**-150 and 2**-159 with c = 0: the floor -133 puts the grid at 2**-158.
    a = pad([1.0, 1.0], 32)
    b = pad([1.0, 2.0**-9], 32)
    assert check(MXF8, a, b, [2.0**-75], [2.0**-75], 0.0) == 0.0  # 2**-150: below fp32
    assert check(fpsim.hw.B200_MXF4, [6.0] * 64, [6.0] * 64, [2.0**127] * 2, [2.0**127] * 2,
                 0.0) == math.inf


def test_chains_use_each_instructions_scales():
    """K = 64 is two kind::mxf8f6f4 instructions, each with its own scales: the second's
    products are aligned with c = 32 (the first's result), on the grid 2**(5 - 25)."""
    a, b = [1.0] * 64, [1.0] * 64
    assert check(MXF8, a, b, [1.0, 2.0**-20], [1.0, 1.0], 0.0) == 32 + 32 * 2.0**-20
    assert check(MXF8, a, b, [1.0, 2.0**-21], [1.0, 1.0], 0.0) == 32.0  # each one cut


# --- Hypothesis: random inputs of every class, single and chained ---------------------------


def elements(fmt: str):
    f = as_format(fmt)
    codes = st.integers(0, (1 << f.bits) - 1)
    return codes.map(lambda code: float(fpsim.from_bits(np.array([code]), f)[0]))


def scales(fmt: str, nan: bool):
    f = as_format(fmt)
    top = (1 << f.bits) - (1 if nan else 2)
    return st.integers(0, top).map(lambda code: float(fpsim.from_bits(np.array([code]), f)[0]))


CASES = [("B200_MXF8F6F4", "fp8_e4m3", "fp8_e5m2"), ("B200_MXF8F6F4", "fp6_e3m2", "fp4_e2m1"),
         ("RTX5090_MXF8F6F4", "fp6_e2m3", "fp8_e4m3"), ("B200_MXF4", None, None),
         ("B200_NVF4", None, None), ("RTX5090_NVF4", None, None)]


@st.composite
def problems(draw, model):
    k = RULES[model.name.split("/")[0]][2]
    n = draw(st.sampled_from([k, 2 * k]))
    special = draw(st.booleans())
    fa, fb = model.fma.input, model.fma.input_b or model.fma.input
    a = draw(st.lists(elements(fa), min_size=n, max_size=n))
    b = draw(st.lists(elements(fb), min_size=n, max_size=n))
    if not special:  # finite elements (fp8's inf and NaN codes in the special draws only)
        a = [x if math.isfinite(x) else 1.0 for x in a]
        b = [y if math.isfinite(y) else 1.0 for y in b]
    blocks = n // model.scale_block
    sa = draw(st.lists(scales(model.scale, special), min_size=blocks, max_size=blocks))
    sb = draw(st.lists(scales(model.scale, special), min_size=blocks, max_size=blocks))
    c = draw(st.one_of(st.just(0.0), st.just(-0.0), st.floats(width=32, allow_nan=special,
                                                              allow_infinity=special)))
    return a, b, sa, sb, c


@pytest.mark.parametrize(("name", "fa", "fb"), CASES)
def test_against_the_rational_reference(name, fa, fb):
    model = fpsim.hw.BLOCK_SCALED[name]
    if fa is not None:
        model = model.with_inputs(fa, fb)

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True)
    @given(problems(model))
    def run(problem):
        check(model, *problem)

    run()


# --- fpsim.matmul of Quantized operands -------------------------------------------------------


def test_matmul_of_quantized_operands_is_the_instruction():
    """MX operands: the instruction on the elements and their block scales, for every row
    and column; the element formats are the operands' own (any pairing)."""
    rng = np.random.default_rng(4)
    x, y = rng.normal(size=(3, 64)) * 8, rng.normal(size=(64, 2))
    qa, qb = fpsim.quantize(x, "mxfp8_e4m3"), fpsim.quantize(y, "mxfp6_e2m3", axis=0)
    got = fpsim.matmul(qa, qb, model=fpsim.hw.B200_MXF8F6F4)
    model = fpsim.hw.B200_MXF8F6F4.with_inputs("fp8_e4m3", "fp6_e2m3")
    for i in range(3):
        for j in range(2):
            sa = np.repeat(qa.scales[i], 32)
            sb = np.repeat(qb.scales[:, j], 32)
            want = ref_chain(model, qa.values[i].tolist(), qb.values[:, j].tolist(),
                             sa.tolist(), sb.tolist(), 0.0)
            assert same_bits(float(got[i, j]), want)
    assert (np.asarray(got, np.float32) == got).all()


def test_nvfp4_tensor_scales_in_the_epilogue():
    """NVFP4: the instruction over the elements and UE4M3 block scales (1-D and 16x16
    tiles), then alpha = fp32(ts_a * ts_b) and the product rounded once to fp32 (nearest
    even)."""
    rng = np.random.default_rng(8)
    x, y = rng.normal(size=(16, 64)), rng.normal(size=(64, 16)) * 100
    for scheme_b in ("nvfp4", "nvfp4_16x16"):
        qa = fpsim.quantize(x, "nvfp4")
        qb = fpsim.quantize(y, scheme_b, axis=0) if scheme_b == "nvfp4" else \
            fpsim.quantize(y, scheme_b)
        got = fpsim.matmul(qa, qb, model=fpsim.hw.B200_NVF4)
        sb_each = (np.repeat(qb.scales, 16, axis=0) if scheme_b == "nvfp4"
                   else np.repeat(np.repeat(qb.scales, 16, axis=0), 16, axis=1))
        alpha = float(np.float32(qa.tensor_scale) * np.float32(qb.tensor_scale))
        for i, j in ((0, 0), (5, 11), (15, 15)):
            acc = ref_chain(fpsim.hw.B200_NVF4, qa.values[i].tolist(), qb.values[:, j].tolist(),
                            np.repeat(qa.scales[i], 16).tolist(), sb_each[:, j].tolist(), 0.0)
            want = ref_round(Fraction(acc) * Fraction(alpha), "fp32", "nearest_even")[0]
            assert same_bits(float(got[i, j]), want), (scheme_b, i, j)


def test_c_and_out_with_a_model():
    qa = fpsim.quantize(np.full((1, 32), 3.0), "mxfp8_e4m3")
    qb = fpsim.quantize(np.full((32, 1), 0.5), "mxfp8_e4m3", axis=0)
    model = fpsim.hw.B200_MXF8F6F4
    assert fpsim.matmul(qa, qb, model=model, c=[[0.5]]).tolist() == [[48.5]]
    assert fpsim.matmul(qa, qb, model=model, c=[[2.0**-20]], out="bf16").tolist() == [[48.0]]
    q4 = fpsim.quantize(np.full((1, 64), 1.0), "mxfp4_e2m1")
    assert fpsim.matmul(q4, fpsim.quantize(np.ones((64, 1)), "mxfp4_e2m1", axis=0),
                        model=fpsim.hw.RTX5090_MXF4).tolist() == [[64.0]]


def test_bad_models_and_operands_are_refused():
    qa = fpsim.quantize(np.ones((2, 32)), "mxfp8_e4m3")
    qb = fpsim.quantize(np.ones((32, 2)), "mxfp8_e4m3", axis=0)
    with pytest.raises(ValueError, match="takes a block-scaled instruction"):
        fpsim.matmul(qa, qb, model=fpsim.hw.B200_FP8)
    with pytest.raises(ValueError, match="accum cannot be given"):
        fpsim.matmul(qa, qb, model=fpsim.hw.B200_MXF8F6F4, accum="fp32")
    with pytest.raises(ValueError, match="stats cannot be given"):
        fpsim.matmul(qa, qb, model=fpsim.hw.B200_MXF8F6F4, stats=True)
    with pytest.raises(ValueError, match="reads ue4m3 scales, one per 16"):
        fpsim.matmul(qa, qb, model=fpsim.hw.B200_NVF4)
    with pytest.raises(ValueError, match="takes elements of fp4_e2m1, not fp8_e4m3"):
        fpsim.matmul(qa, qb, model=fpsim.hw.B200_MXF4)
    n4 = fpsim.quantize(np.ones((2, 64)), "nvfp4")
    with pytest.raises(ValueError, match="c: an initial accumulator with an NVFP4"):
        fpsim.matmul(n4, fpsim.quantize(np.ones((64, 2)), "nvfp4", axis=0),
                     model=fpsim.hw.B200_NVF4, c=1.0)
    with pytest.raises(ValueError, match="takes elements of"):
        fpsim.hw.B200_MXF8F6F4.with_inputs("fp16", "fp8_e4m3")
    with pytest.raises(ValueError, match="not a value of e8m0"):
        block_scaled_matmul(np.ones((1, 32)), np.ones((32, 1)), np.full((1, 32), 3.0),
                            np.ones((32, 1)), fpsim.hw.B200_MXF8F6F4)
    with pytest.raises(ValueError, match="not a value of fp8_e4m3"):
        block_scaled_matmul(np.full((1, 32), 0.1), np.ones((32, 1)), np.ones((1, 32)),
                            np.ones((32, 1)), fpsim.hw.B200_MXF8F6F4)
    with pytest.raises(ValueError, match="must be the elements'"):
        block_scaled_matmul(np.ones((1, 32)), np.ones((32, 1)), np.ones((1, 16)),
                            np.ones((32, 1)), fpsim.hw.B200_MXF8F6F4)


@pytest.mark.parametrize(("changes", "match"), [
    ({"scale": "fp8_e4m3"}, "scale must be one of e8m0, ue4m3"),
    ({"scale": "ue4m3"}, "scales per product .* are E8M0"),
    ({"scale_block": 0}, "scale_block must be an integer"),
    ({"group": 24}, "group 24 must divide"),
    ({"elements": ()}, "elements must be a tuple"),
    ({"fma": fpsim.hw.MI300}, "aligns by truncation"),
    ({"fma": fpsim.hw.B200_FP8.with_promotion(64)}, "promote_every"),
    ({"fma": "B200"}, "fma must be a fpsim.hw.BlockFMA"),
])
def test_bad_block_scaled_models_are_refused(changes, match):
    base = fpsim.hw.B200_MXF4 if "group" in changes else fpsim.hw.B200_MXF8F6F4
    with pytest.raises(ValueError, match=match):
        dataclasses.replace(base, **changes)


def test_empty_shapes():
    model = fpsim.hw.B200_MXF8F6F4
    assert block_scaled_matmul(np.zeros((0, 32)), np.zeros((32, 2)), np.ones((0, 32)),
                               np.ones((32, 2)), model).shape == (0, 2)
    got = block_scaled_matmul(np.zeros((2, 0)), np.zeros((0, 3)), np.ones((2, 0)),
                              np.ones((0, 3)), model, c=1.5)
    assert got.tolist() == [[1.5] * 3] * 2


def test_every_backend_gives_the_same_bits(backend_name):
    """The instructions run in the shared block-FMA kernels as the NumPy reference backend
    evaluates them, whatever backend is in force."""
    rng = np.random.default_rng(12)
    x, y = rng.normal(size=(4, 64)) * 30, rng.normal(size=(64, 3))
    qa, qb = fpsim.quantize(x, "nvfp4"), fpsim.quantize(y, "nvfp4", axis=0)
    got = fpsim.matmul(qa, qb, model=fpsim.hw.B200_NVF4)
    with fpsim.backend("numpy"):
        want = fpsim.matmul(qa, qb, model=fpsim.hw.B200_NVF4)
    assert same_bits(np.asarray(got), np.asarray(want)).all()
