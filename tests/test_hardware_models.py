"""Hardware block-FMA models (fpsim.hw) against the exact reference and published cases.

Sources of the corner cases (see ../shared/notes/tensor-cores.md):
[FHMP21] Fasi, Higham, Mikaitis, Pranesh, "Numerical behavior of NVIDIA tensor
         cores", PeerJ Comput. Sci. 7:e330, 2021.
[KM25]   Khattak and Mikaitis, "Accurate models of NVIDIA tensor cores", 2025.
[MMA25]  Xie, Wang, Yang, Yang, "MMA-Sim: bit-accurate reference model of tensor cores and
         matrix cores", arXiv 2511.10909, 2025; the ``mmasim`` package 2.1.1.
"""

import dataclasses
import functools

import numpy as np
import pytest
from accumulation_reference import ref_block_fma
from hypothesis import given, settings
from hypothesis import strategies as st
from reference import as_fmt, same_bits
from reference import assert_same_bits as check

import fpsim
import fpsim.hw

PRESET_TABLE = {  # tensor-cores.md: products per block, F, exponent floor
    "V100": (4, 23, None),
    "A100": (8, 24, -132),
    "H100": (16, 25, -133),
    "B200": (16, 25, -133),
}
PRESETS = list(PRESET_TABLE)


def model(name, input_fmt="fp16", **changes):
    """A preset, with its input format (and any other field) replaced."""
    m = getattr(fpsim.hw, name)
    field = "inputs" if hasattr(m, "inputs") else "input"
    changes[field] = input_fmt
    return dataclasses.replace(m, **changes)


def params(m):
    """The model's parameters, as the reference reads them."""
    inputs = getattr(m, "inputs", None) or m.input
    return dict(
        block=m.block,
        frac_bits=m.frac_bits,
        exp_floor=m.exp_floor,
        inputs=inputs,
        output=m.output,
        output_rounding=m.output_rounding,
        overflow=m.overflow,
        zero_sign=m.zero_sign,
    )


def one_block(name, a, b, c, **changes):
    """d = c + sum_k a_k * b_k through the model: A is 1 x K, B is K x 1, c is 1 x 1."""
    A = np.array([a], dtype=np.float64)
    B = np.array(b, dtype=np.float64).reshape(-1, 1)
    C = np.array([[c]], dtype=np.float64)
    m = model(name, **changes)
    got = float(np.asarray(fpsim.matmul(A, B, c=C, model=m))[0, 0])
    ref = float(ref_block_fma(A, B, C, params(m))[0, 0])
    assert same_bits(got, ref), f"{name}: a={a} b={b} c={c}: model {ref!r}, fpsim {got!r}"
    return got


# --- presets -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", PRESETS)
def test_preset_parameters(name):
    m = getattr(fpsim.hw, name)
    assert isinstance(m, fpsim.hw.BlockFMA)
    assert (m.block, m.frac_bits, m.exp_floor) == PRESET_TABLE[name]
    assert as_fmt(m.output) == as_fmt("fp32")
    assert m.output_rounding == "toward_zero"
    # docs/hardware-models.md: overflow and zero sign decided after [MMA25] (and [KM25]).
    assert (m.overflow, m.zero_sign) == ("inf", "positive")


# --- random inputs against the reference ---------------------------------------------------


def _values(rng, fmt, shape, lo, hi, zero=0.1, sub=0.05):
    """Values of fmt: random significands, exponents in [lo, hi], some zeros and subnormals."""
    f = as_fmt(fmt)
    size = int(np.prod(shape))
    mant = rng.integers(0, 1 << f.man_bits, size)
    e = rng.integers(lo, hi + 1, size)
    v = (1 + mant / 2.0**f.man_bits) * np.exp2(e)
    subv = mant * 2.0 ** (f.emin - f.man_bits)
    r = rng.random(size)
    v = np.where(r < sub, subv, v)
    v = np.where(r > 1 - zero, 0.0, v)
    v = np.where(rng.random(size) < 0.5, -v, v)
    return v.reshape(shape)


@pytest.mark.parametrize("name", PRESETS)
@pytest.mark.parametrize("in_fmt", ["fp16", "bf16"])
def test_random_against_reference(name, in_fmt, backend_name):
    """Random fp16/bf16 inputs, K up to 40 (several blocks), c random fp32 values."""
    rng = np.random.default_rng(abs(hash((name, in_fmt))) % 2**32)
    m = model(name, in_fmt)
    lo, hi = (-14, 6) if in_fmt == "fp16" else (-80, 30)
    for k in (0, 1, 3, 4, 5, 8, 9, 16, 17, 33, 40):
        for spread in (2, hi - lo):
            A = _values(rng, in_fmt, (2, 3, k), max(lo, hi - spread), hi)
            B = _values(rng, in_fmt, (k, 2), max(lo, hi - spread), hi)
            C = _values(rng, "fp32", (3, 2), -10, 12, zero=0.3, sub=0.0)
            got = fpsim.matmul(A, B, c=C, model=m)
            check(got, ref_block_fma(A, B, C, params(m)), f"{name} {in_fmt} K={k}")
            got = fpsim.matmul(A, B, model=m)
            check(got, ref_block_fma(A, B, None, params(m)), f"{name} {in_fmt} K={k}, no c")


@pytest.mark.parametrize("frac_bits", [3, 10])
@pytest.mark.parametrize("block", [1, 2, 3, 5])
def test_custom_model(block, frac_bits, backend_name):
    """A custom BlockFMA with few fraction bits, so truncation bites often."""
    rng = np.random.default_rng(block * 100 + frac_bits)
    m = dataclasses.replace(fpsim.hw.A100, name="toy", block=block, frac_bits=frac_bits)
    A = _values(rng, "fp16", (4, 11), -6, 3)
    B = _values(rng, "fp16", (11, 3), -6, 3)
    C = _values(rng, "fp32", (4, 3), -4, 6, zero=0.3, sub=0.0)
    check(fpsim.matmul(A, B, c=C, model=m), ref_block_fma(A, B, C, params(m)), "toy model")


def test_exponent_floor(backend_name):
    """bf16 products 2**-149 and -2**-170: the floor E >= -132 cuts the small one away.

    Floor -132 (A100): grid 2**-156, the sum is 2**-149. No floor: E = -149, the sum
    2**-149 - 2**-170 is truncated toward zero to fp32's subnormal grid: 0.
    """
    a, b = [2.0**-75, -(2.0**-85)], [2.0**-74, 2.0**-85]
    assert one_block("A100", a, b, 0.0, input_fmt="bf16") == 2.0**-149
    assert one_block("A100", a, b, 0.0, input_fmt="bf16", exp_floor=None) == 0.0


def test_fp16_subnormal_inputs_use_emin(backend_name):
    """An fp16 subnormal input has exponent emin = -14 (significand below 1)."""
    # 2**-24 * 2**-1 = 2**-25 has exponent -14 + -1 = -15 as a product, E = -15 and the
    # grid 2**-38 (V100) keeps 2**-38 * 3; with c = 0 all terms survive.
    a = [2.0**-24, 2.0**-14 * 1.5]
    b = [0.5, 2.0**-24 * 3]
    one_block("V100", a, b, 0.0)
    one_block("A100", a, b, 0.0)


def test_block_boundaries(backend_name):
    """V100: 1 + 4 products 2**-24 in one block then more blocks; K = 5 splits 4 + 1."""
    # One block of four 2**-24 on c = 1: E = 0, grid 2**-23, all cut: 1. A fifth product in
    # its own block: E = 0 again, cut again: 1.
    a = [2.0**-12] * 5
    assert one_block("V100", a, a, 1.0) == 1.0
    # c = 1 - 2**-24 (E = -1, grid 2**-24): four products kept: 1 + 2**-23 after block 1.
    assert one_block("V100", a[:4], a[:4], 1 - 2.0**-24) == 1 + 2.0**-23


def test_zero_result_is_plus_zero(backend_name):
    for name in PRESETS:
        r = one_block(name, [1.0, -1.0], [1.0, 1.0], -0.0)
        assert r == 0 and np.signbit(r) == False  # noqa: E712
    A, B = np.zeros((1, 0)), np.zeros((0, 1))
    check(fpsim.matmul(A, B, c=np.array([[1.5]]), model=fpsim.hw.A100), [[1.5]], "K=0 gives c")


# --- published corner cases ---------------------------------------------------------------


@pytest.mark.parametrize("name", PRESETS)
def test_products_are_exact(name, backend_name):
    # [FHMP21]: (1 - 2**-11)**2 is exact in fp32 output (products exact, not rounded).
    x = 1 - 2.0**-11
    assert one_block(name, [x], [x], 0.0) == x * x == 1 - 2.0**-10 + 2.0**-22


@pytest.mark.parametrize("name", PRESETS)
def test_small_products_vanish_on_alignment(name, backend_name):
    # [FHMP21]: 1 + 4 * (0.5 * 2**-24) gives 1 in fp32 output (V100, T4, A100): the small
    # products fall below the 2**(E - F) grid. H100/B200 keep F = 25 bits [KM25]: the
    # model then gives 1 + 2**-23.
    a, b = [2.0**-13] * 4, [2.0**-12] * 4
    r = one_block(name, a, b, 1.0)
    assert r == (1.0 if PRESET_TABLE[name][1] <= 24 else 1 + 2.0**-23)
    # The same with 1 as a product 1 * 1 in the block instead of c (three small ones: with
    # F = 25 they are kept, 1 + 3 * 2**-25, and the fp32 output truncates that to 1).
    r = one_block(name, [1.0] + a[:3], [1.0] + b[:3], 0.0)
    assert r == 1.0


@pytest.mark.parametrize("name", PRESETS)
def test_fp32_output_truncates(name, backend_name):
    # [FHMP21]: 2 + (2**-23 + 2**-24) gives 2, and -2 - (2**-23 + 2**-24) gives -2:
    # the fp32 output is rounded toward zero.
    p = 3 * 2.0**-13, 2.0**-11  # product 2**-23 + 2**-24
    assert one_block(name, [p[0]], [p[1]], 2.0) == 2.0
    assert one_block(name, [-p[0]], [p[1]], -2.0) == -2.0
    assert one_block(name, [1.0, p[0]], [2.0, p[1]], 0.0) == 2.0
    assert one_block(name, [-1.0, -p[0]], [2.0, p[1]], 0.0) == -2.0


@pytest.mark.parametrize("name", PRESETS)
def test_extra_alignment_bit(name, backend_name):
    # [FHMP21]: 1*1 + c with c = -(1 - 2**-24): V100 gives 2**-23 (c cut to 23 fraction
    # bits), T4/A100 give 2**-24 (one extra bit). [KM25]: H100/B200 (F = 25) give 2**-24.
    r = one_block(name, [1.0], [1.0], -(1 - 2.0**-24))
    assert r == (2.0**-23 if name == "V100" else 2.0**-24)


def test_v100_non_monotonic(backend_name):
    # [FHMP21]: V100, c = 1 - 2**-24 plus four products 2**-24 gives 1 + 2**-23, while the
    # larger c = 1 gives 1: the sum is not monotonic.
    a = [2.0**-12] * 4
    assert one_block("V100", a, a, 1 - 2.0**-24) == 1 + 2.0**-23
    assert one_block("V100", a, a, 1.0) == 1.0


@pytest.mark.parametrize("name", ["A100", "H100", "B200"])
def test_a100_non_monotonic(name, backend_name):
    # [FHMP21]: T4/A100 variant: products 2**-25 three times and 2**-24 + 2**-25 once;
    # c = 1 - 2**-24 gives 1 + 2**-23, c = 1 gives 1. With F = 25 (H100/B200 [KM25]) the
    # model keeps 2**-25 and c = 1 gives 1 + 2**-23 too.
    a = [2.0**-13] * 3 + [3 * 2.0**-13]
    b = [2.0**-12] * 4
    assert one_block(name, a, b, 1 - 2.0**-24) == 1 + 2.0**-23
    assert one_block(name, a, b, 1.0) == (1.0 if name == "A100" else 1 + 2.0**-23)


@pytest.mark.parametrize("name", PRESETS)
def test_carry_bits(name, backend_name):
    # [FHMP21]: 1 + 1.5 + 1.75 + 1.875 + 1.875 = 8 exactly: at least three carry bits.
    assert one_block(name, [1.5, 1.75, 1.875, 1.875], [1.0] * 4, 1.0) == 8.0


def test_fp16_output_rounds_to_nearest(backend_name):
    # [FHMP21]: fp16 output: 0.5 * 2**-24 + 0.25 * 2**-24 gives 2**-24 (round to nearest).
    r = one_block(
        "V100",
        [2.0**-13, 2.0**-13],
        [2.0**-12, 2.0**-13],
        0.0,
        output="fp16",
        output_rounding="nearest_even",
    )
    assert r == 2.0**-24


@pytest.mark.parametrize("overflow", ["inf", "saturate"])
@pytest.mark.parametrize("rounding", ["toward_zero", "nearest_even"])
def test_overflow_then_more_blocks(rounding, overflow, backend_name):
    """A block result that overflows is +-inf (overflow="inf", whatever the rounding) or
    +-FLT_MAX ("saturate"), and is the next block's c: an infinite c gives the next
    block's IEEE sum, so the inf stays; a row with an infinite input gives its IEEE sum."""
    m = dataclasses.replace(fpsim.hw.H100_BF16, name="h", block=2, output_rounding=rounding,
                            overflow=overflow)
    big = float(fpsim.round(2.0**127, "bf16"))
    A = np.array([[big, big, 1.0, -1.0, 2.0], [-big, -big, 0.5, 0.0, 1.0]])
    B = np.full((5, 2), 4.0)
    C = np.array([[1.0, -big], [-1.0, big]])
    got = fpsim.matmul(A, B, c=C, model=m)
    check(got, ref_block_fma(A, B, C, params(m)), f"overflow {overflow}, {rounding}")
    if overflow == "inf":  # 2**130 and 2**130 - 2**127 overflow; the inf spreads
        check(got, np.array([[np.inf, np.inf], [-np.inf, -np.inf]]), "overflow to inf")
    else:
        assert np.isfinite(got).all()
    A[1, 1] = np.inf
    assert (fpsim.matmul(A, B, c=C, model=m)[1] == np.inf).all()


@pytest.mark.parametrize("name", PRESETS)
def test_overflow_is_infinite(name, backend_name):
    """[MMA25] (mmasim 2.1.1, arithmetic/fdpa.py, ldexp_and_normalize) and [KM25]'s
    toolbox (Generic_BFMA_TC, ExceptionalCasesTest test 1): an fp32 result past FLT_MAX
    is +-inf although the output truncates toward zero (bf16 inputs: fp16 products are
    too small to carry an fp32 c past FLT_MAX, they vanish on its grid)."""
    top = float(np.finfo(np.float32).max)
    for sign in (1.0, -1.0):
        a, b, c = [sign * 2.0**127], [1.0], sign * 2.0**127
        assert one_block(name, a, b, c, input_fmt="bf16") == sign * np.inf
        r = one_block(name, a, b, c, input_fmt="bf16", overflow="saturate")
        assert r == sign * top
        # FLT_MAX + 2**103 is below 2**128 and truncates to FLT_MAX: no overflow.
        r = one_block(name, [sign * 2.0**103], [1.0], sign * top, input_fmt="bf16")
        assert r == sign * top


@pytest.mark.parametrize("name", ["A100", "H100", "B200"])
def test_zero_sign_of_an_underflow(name, backend_name):
    """bf16 product -2**-154 alone: on the 2**(E - F) grid it is kept, and the fp32 result
    truncates it to zero. [MMA25] gives +0 (zero_sign "positive", the presets'); the IEEE
    sign rule of [KM25]'s toolbox gives -0 ("signed"). An exact zero is +0 in both."""
    a, b = [-(2.0**-77)], [2.0**-77]
    r = one_block(name, a, b, 0.0, input_fmt="bf16")
    assert r == 0 and not np.signbit(r)
    r = one_block(name, a, b, 0.0, input_fmt="bf16", zero_sign="signed")
    assert r == 0 and np.signbit(r)
    r = one_block(name, [1.0, -1.0], [1.0, 1.0], -0.0, zero_sign="signed")
    assert r == 0 and not np.signbit(r)


@pytest.mark.parametrize("name", ["A100", "H100", "B200"])
def test_zero_factor_takes_no_part_in_alignment(name, backend_name):
    """0 * 0x1.fep+127 + 0x1.52p-9 * 0x1.1ep-15 (bf16) is 0x33bcce00 in fp32: the zero
    product does not raise the alignment exponent. [MMA25]'s release 2.1.1 gives the same
    (zero terms take the exponent -132/-133, the presets' floor); its January 2026 source
    gave zero inputs the exponent -126 and 0x33800000."""
    a = [0.0, float.fromhex("0x1.52p-9")]
    b = [float.fromhex("0x1.fep+127"), float.fromhex("0x1.1ep-15")]
    r = one_block(name, a, b, 0.0, input_fmt="bf16")
    assert np.float32(r).view(np.uint32) == 0x33BCCE00


@pytest.mark.parametrize("name, floor", [("V100", -19), ("A100", -20), ("H100", -21)])
def test_fp16_output_floor_at_a_tie(name, floor, backend_name):
    """fp16 output: 2**-12 * 2**-13 + 2**-24 * 2**-24 (c = 0). With [MMA25]'s fp16-output
    floor (its e_zero) the 2**-48 product is cut and the tie 2**-25 rounds to even: 0, as
    mmasim 2.1.1 gives; with the fp32 floor (or none) it is kept and the sum rounds up."""
    a, b = [2.0**-12, 2.0**-24], [2.0**-13, 2.0**-24]
    fp16 = dict(output="fp16", output_rounding="nearest_even")
    assert one_block(name, a, b, 0.0, exp_floor=floor, **fp16) == 0.0
    assert one_block(name, a, b, 0.0, **fp16) == 2.0**-24


@pytest.mark.parametrize("field, value", [
    ("overflow", "max"), ("overflow", None), ("zero_sign", "negative"), ("zero_sign", 0),
    ("output_rounding", "up"),
])
def test_bad_rules_are_refused(field, value):
    with pytest.raises(ValueError, match=field):
        dataclasses.replace(fpsim.hw.H100, **{field: value})


def _bf16(draw, lo, hi):
    """A bf16 value: zero, a subnormal, or a normal with exponent in [lo, hi], either sign."""
    kind = draw(st.sampled_from(["zero", "sub", "normal", "normal"]))
    sign = draw(st.sampled_from([1.0, -1.0]))
    if kind == "zero":
        return sign * 0.0
    mant = draw(st.integers(0, 127))
    if kind == "sub":
        return sign * max(mant, 1) * 2.0**-133
    return sign * (1 + mant / 128) * 2.0 ** draw(st.integers(max(lo, -126), hi))


@st.composite
def _block_case(draw):
    k = draw(st.integers(1, 12))
    lo, hi = draw(st.sampled_from([(-133, -60), (-80, -60), (-10, 10), (40, 127), (-133, 127)]))
    a = [_bf16(draw, lo, hi) for _ in range(k)]
    b = [_bf16(draw, lo, hi) for _ in range(k)]
    c = draw(st.sampled_from([0.0, -0.0, 2.0**-149, -(2.0**-149), 1.5, -(2.0**127) * 1.5,
                              float(np.finfo(np.float32).max)]))
    return a, b, c


@settings(max_examples=100, deadline=None)
@given(case=_block_case(), block=st.sampled_from([1, 3, 8, 16]),
       overflow=st.sampled_from(["inf", "saturate"]),
       zero_sign=st.sampled_from(["positive", "signed"]),
       rounding=st.sampled_from(["toward_zero", "nearest_even"]))
def test_rules_against_reference(case, block, overflow, zero_sign, rounding):
    """Every overflow and zero-sign rule, chained blocks, bf16 products from below fp32's
    subnormals to past its range: bit for bit the exact reference. (NumPy backend: the
    Numba tiled loop compiles per model; the presets' rules run there in the tests above
    and in test_mmasim_records.py.)"""
    a, b, c = case
    with fpsim.backend("numpy"):
        one_block("H100", a, b, c, input_fmt="bf16", block=block, overflow=overflow,
                  zero_sign=zero_sign, output_rounding=rounding)


# --- the Numba backend's tiled loops (several tiles, padded blocks, both working types) ------

TILED_CASES = {  # model, input exponent range: binary32 and binary64 products, BLOCK % 4 != 0
    "H100 fp16": (fpsim.hw.H100, (-14, 6)),
    "V100 fp16": (fpsim.hw.V100, (-14, 6)),
    "H100 bf16": (fpsim.hw.H100_BF16, (-80, 30)),
    "block 5, fp8": (dataclasses.replace(fpsim.hw.A100, name="b5", block=5, frac_bits=10,
                                         input="fp8_e4m3"), (-6, 5)),
    "tf32, nearest": (dataclasses.replace(fpsim.hw.A100, name="t", input="tf32",
                                          output_rounding="nearest_even"), (-30, 20)),
}


@functools.cache
def _tiled_case(case: str):
    """The operands of a tiled case and their exact reference (computed once per process;
    a case's backends run on one worker: ``xdist_group``)."""
    m, (lo, hi) = TILED_CASES[case]
    rng = np.random.default_rng(len(case))
    fmt = m.input
    A = _values(rng, fmt, (2, 37, 35), lo, hi)
    B = _values(rng, fmt, (2, 35, 133), lo, hi)
    A[0, 3] = 0.0  # a row of zero products: the block's exponent comes from c alone
    C = _values(rng, "fp32", (2, 37, 133), -126, 40, zero=0.2, sub=0.1)
    return A, B, C, ref_block_fma(A, B, C, params(m))


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.xdist_group(f"tiled {c}"))
                                  for c in TILED_CASES])
def test_tiled_shapes_against_reference(case, backend_name):
    """Batches, rows and columns over several tiles (32 x 128), K not a whole number of
    blocks, c from fp32 subnormals to large values: bit for bit the reference."""
    A, B, C, want = _tiled_case(case)
    check(fpsim.matmul(A, B, c=C, model=TILED_CASES[case][0]), want, case)


# The published corner cases above, one (a, b, c) per row: fp16 inputs, then those that
# need bf16's range (overflow past FLT_MAX, an underflow's zero sign, a zero factor).
_FLT_MAX = float(np.finfo(np.float32).max)
DIRECTED_FP16 = [
    ([1 - 2.0**-11], [1 - 2.0**-11], 0.0), ([2.0**-13] * 4, [2.0**-12] * 4, 1.0),
    ([1.0] + [2.0**-13] * 3, [1.0] + [2.0**-12] * 3, 0.0), ([3 * 2.0**-13], [2.0**-11], 2.0),
    ([-3 * 2.0**-13], [2.0**-11], -2.0), ([1.0, -3 * 2.0**-13], [-2.0, 2.0**-11], 0.0),
    ([1.0], [1.0], -(1 - 2.0**-24)), ([2.0**-12] * 4, [2.0**-12] * 4, 1 - 2.0**-24),
    ([2.0**-12] * 5, [2.0**-12] * 5, 1.0), ([2.0**-13] * 3 + [3 * 2.0**-13], [2.0**-12] * 4, 1.0),
    ([1.5, 1.75, 1.875, 1.875], [1.0] * 4, 1.0), ([1.0, -1.0], [1.0, 1.0], -0.0),
    ([2.0**-12, 2.0**-24], [2.0**-13, 2.0**-24], 0.0),
    ([2.0**-24, 1.5 * 2.0**-14], [0.5, 3 * 2.0**-24], 0.0),
    ([2.0**-13, 2.0**-13], [2.0**-12, 2.0**-13], 0.0), ([-(2.0**-12)], [2.0**-13], 2.0**-30),
]
DIRECTED_BF16 = [
    ([2.0**127], [1.0], 2.0**127), ([-(2.0**127)], [1.0], -(2.0**127)),
    ([2.0**103], [1.0], _FLT_MAX), ([-(2.0**103)], [1.0], -_FLT_MAX),
    ([-(2.0**-77)], [2.0**-77], 0.0),
    ([0.0, float.fromhex("0x1.52p-9")],
     [float.fromhex("0x1.fep+127"), float.fromhex("0x1.1ep-15")], 0.0),
    ([2.0**-75, -(2.0**-85)], [2.0**-74, 2.0**-85], 0.0),
    ([2.0**100] * 3, [2.0**27] * 3, -(2.0**127)),
]
# Each preset's tiled loop (binary32 work for fp16, binary64 for bf16), and the rules the
# presets do not take (fp16 output with its exponent floor, a signed zero, saturation).
TILED_MODELS = [(name, fmt) for name in PRESETS for fmt in ("fp16", "bf16")] + [
    ("V100", "fp16", dict(output="fp16", output_rounding="nearest_even", exp_floor=-19)),
    ("H100", "bf16", dict(zero_sign="signed", overflow="saturate")),
]


def _stacked(cases):
    """The cases as one batched product: A (n, 1, K), B (n, K, 1), c (n, 1, 1), K padded with
    zero products (which change no block)."""
    k = max(len(a) for a, _, _ in cases)
    A = np.zeros((len(cases), 1, k))
    B = np.zeros((len(cases), k, 1))
    for i, (a, b, _) in enumerate(cases):
        A[i, 0, : len(a)] = a
        B[i, : len(b), 0] = b
    return A, B, np.array([c for _, _, c in cases]).reshape(-1, 1, 1)


@pytest.mark.parametrize("case", TILED_MODELS, ids=lambda c: "-".join(map(str, c[:2])) + (
    "-rules" if len(c) > 2 else ""))
def test_tiled_loop_on_the_published_corner_cases(case, monkeypatch):
    """The Numba backend's tiled loop (compiled per model, so used by products of
    ``TILED_FROM`` multiply-adds or more) on every corner case above, chained blocks
    included: bit for bit the exact reference, as the generic loop is."""
    from fpsim.backends import numba_backend, numba_loops

    name, fmt, *changes = case
    m = model(name, fmt, **(changes[0] if changes else {}))
    cases = DIRECTED_FP16 + (DIRECTED_BF16 if fmt == "bf16" else [])
    A, B, C = _stacked([(a, b, c) for a, b, c in cases  # those the model's formats hold
                        if all(fpsim.round(v, fmt) == v for v in a + b)
                        and fpsim.round(c, m.output) == c])
    ref = ref_block_fma(A, B, C, params(m))
    monkeypatch.setattr(numba_backend, "TILED_FROM", 0)
    with fpsim.backend("numba"):
        backend = fpsim.backends.get_backend()
        used = []
        loop = backend._loop
        monkeypatch.setattr(backend, "_loop", lambda t, *a, **k: used.append(t) or loop(t, *a, **k))
        check(fpsim.matmul(A, B, c=C, model=m), ref, f"{case}: tiled")
        assert numba_loops.accumulate_blocks_tiled in used
        assert numba_loops.accumulate_blocks not in used


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_largest_block_sum(sign, backend_name, monkeypatch):
    """Sixteen products of the largest fp16 significand, one sign, one exponent: the
    block's terms sum to just under 2**31 (the binary32 loop's int32 limit; the Numba
    backend's tiled loop, which a product this small would not use on its own)."""
    from fpsim.backends import numba_backend

    monkeypatch.setattr(numba_backend, "TILED_FROM", 0)
    top = 2.0 - 2.0**-10
    A = np.full((1, 32), top * 2.0**3)
    B = np.full((32, 1), sign * top * 2.0**-5)
    for c in (0.0, sign * 3.0, -sign * 2.0**-30, sign * 2.0**40):
        C = np.array([[c]])
        check(fpsim.matmul(A, B, c=C, model=fpsim.hw.H100),
              ref_block_fma(A, B, C, params(fpsim.hw.H100)), f"c={c}")


def test_tiled_loop_is_used(monkeypatch):
    """The Numba backend runs finite-input products without stats in the tiled loop, in
    binary32 for fp16-like inputs and binary64 for wide exponent ranges, from
    ``TILED_FROM`` multiply-adds (a product below it runs in the generic loop: the tiled
    one is compiled per model)."""
    from fpsim.backends import numba_backend, numba_loops

    assert numba_backend._block_work(fpsim.hw.H100.params(), 16) == (np.float32, np.int32)
    assert numba_backend._block_work(fpsim.hw.H100_BF16.params(), 16) == (np.float64, np.int64)
    assert numba_backend._block_work(fpsim.hw.H100.params(), 17) == (np.float64, np.int64)
    wide = dataclasses.replace(fpsim.hw.H100, frac_bits=40)
    assert numba_backend._block_work(wide.params(), 4096) is None  # sums over 2**53
    with fpsim.backend("numba"):
        backend = fpsim.backends.get_backend()
        used = []
        loop = backend._loop

        def record(template, *args, **kwargs):
            used.append(template)
            return loop(template, *args, **kwargs)

        backend._loop = record
        try:
            A = np.ones((3, 20))
            fpsim.matmul(A, A.T, model=fpsim.hw.H100)
            assert numba_loops.accumulate_blocks_tiled not in used  # 180 multiply-adds
            monkeypatch.setattr(numba_backend, "TILED_FROM", 180)
            used.clear()
            fpsim.matmul(A, A.T, model=fpsim.hw.H100)
            assert numba_loops.accumulate_blocks_tiled in used
            used.clear()
            fpsim.matmul(A, A.T, model=fpsim.hw.H100, stats=True)
            assert numba_loops.accumulate_blocks in used
            assert numba_loops.accumulate_blocks_tiled not in used
            used.clear()
            A[1, 2] = np.inf  # an infinite input: its IEEE sums are the generic loop's job
            got = fpsim.matmul(A, A.T, model=fpsim.hw.H100)
            assert numba_loops.accumulate_blocks in used
            assert numba_loops.accumulate_blocks_tiled not in used
            assert got[1, 1] == got[1, 0] == np.inf and got[0, 0] == 20.0
        finally:
            del backend._loop


def test_accumulation_loops_ask_for_wide_vectors():
    """``wide_vectors()`` puts LLVM's per-function vector-width hint on the function that
    calls it (see fpsim.backends.numba_vectors); the hint changes instructions, not
    values (the tests above compare those)."""
    import numba

    from fpsim.backends.numba_vectors import ATTRIBUTE, wide_vectors

    @numba.njit
    def hinted(x):
        wide_vectors()
        return x + 1.0

    assert hinted(1.0) == 2.0
    assert ATTRIBUTE in next(iter(hinted.inspect_llvm().values()))
