"""Block quantization (fpsim.quantize): the MX schemes against an exact rational reference
written from OCP MX v1.0 section 6.3 and the scale rules' sources, against gfloat's MX
implementation, and on hostile input."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from reference import PRESETS as REF_FORMATS
from reference import ref_round as ref_round_fp8
from test_small_formats import floor_log2
from test_small_formats import ref_round as ref_round_small

import fpsim
from fpsim.quantize import SCALE_RULES, SCHEMES

MX = [name for name, s in SCHEMES.items() if s.kind == "mx"]

MODES = ("nearest_even", "nearest_away", "toward_zero", "up", "down", "odd")
# scheme: (element preset, emax, man_bits, largest element)
ELEMENTS = {
    "mxfp8_e4m3": ("fp8_e4m3", 8, 3, 448.0),
    "mxfp8_e5m2": ("fp8_e5m2", 15, 2, 57344.0),
    "mxfp6_e2m3": ("fp6_e2m3", 2, 3, 7.5),
    "mxfp6_e3m2": ("fp6_e3m2", 4, 2, 28.0),
    "mxfp4_e2m1": ("fp4_e2m1", 2, 1, 6.0),
}


def ref_exponent(amax: Fraction, scheme: str, rule: str) -> int | None:
    """The block's scale exponent before clamping (amax > 0); None: a NaN scale."""
    _, emax, man_bits, top = ELEMENTS[scheme]
    fl = floor_log2(amax)
    if rule == "ocp":
        return fl - emax
    if rule == "ceil":
        return fl + (amax != Fraction(2) ** fl) - emax
    if rule == "torchao_even":  # amax's significand rounded half up to man_bits bits
        sig = amax / Fraction(2) ** fl
        return fl + (sig >= 2 - Fraction(1, 2 ** (man_bits + 1))) - emax
    assert rule == "transformer_engine"
    descale32 = np.float32(float(amax)) * np.float32(1.0 / top)  # binary32 throughout
    if not np.isfinite(descale32):
        return None  # amax beyond binary32: a NaN scale
    descale = Fraction(float(descale32))
    if descale == 0:
        return -(10**6)
    fd = floor_log2(descale)
    return fd + (descale != Fraction(2) ** fd)


def ref_element(v: Fraction, scheme: str, mode: str, subnormals: bool) -> float:
    name = ELEMENTS[scheme][0]
    if name.startswith("fp8"):
        if not subnormals and v != 0 and abs(v) < Fraction(2) ** REF_FORMATS[name].emin:
            return -0.0 if v < 0 else 0.0
        out, _ = ref_round_fp8(v, REF_FORMATS[name], mode, subnormals, True)
        return out
    return ref_round_small(name, v, mode, subnormals, True)[0]  # type: ignore[arg-type]


def ref_quantize(blocks: list[list[float]], scheme: str, rule: str, mode: str,
                 subnormals: bool = True):
    """(element values, scales) of each block, with Fractions."""
    values, scales = [], []
    for block in blocks:
        amax = max(abs(Fraction(v)) for v in block) if all(map(math.isfinite, block)) else 0
        e = ref_exponent(amax, scheme, rule) if amax else -127
        if e is None or not all(map(math.isfinite, block)):
            values.append([0.0] * len(block))
            scales.append(math.nan)
            continue
        s = min(max(e, -127), 127)
        scale = Fraction(2) ** s
        values.append([ref_element(Fraction(v) / scale, scheme, mode, subnormals)
                       if v else v for v in block])
        scales.append(float(scale))
    return values, scales


def hard_blocks(rng: np.random.Generator) -> np.ndarray:
    """Rows of 64 (two blocks of 32): ordinary, near each rule's thresholds, zeros, tiny
    and huge magnitudes, NaN and infinity."""
    rows = [rng.standard_normal(64), rng.standard_normal(64) * 1e-3,
            np.zeros(64), np.full(64, -0.0)]
    for top in (448.0, 57344.0, 7.5, 28.0, 6.0):
        r = rng.uniform(-1, 1, 64)
        r[[0, 40]] = [top * (1 - 2.0**-12), -top * 0.999]  # just below the element max
        rows.append(r)
    for sig in (1.0, 1.5, 1.75, 1.875, 1.9375, 1.96875, 2 - 2.0**-20):
        r = rng.uniform(-1, 1, 64) * 2.0**3
        r[[5, 37]] = [sig * 2.0**3, -sig * 2.0**3]  # amax just under a power of two
        rows.append(r)
    tiny = rng.uniform(-1, 1, 64) * 2.0**-135  # scale clamped at 2**-127
    tiny[3] = 2.0**-149
    huge = rng.uniform(-1, 1, 64) * 2.0**140  # scale clamped at 2**127: elements saturate
    huge[9] = 2.0**-1000  # its scaled value lies below binary64's normals
    special = rng.standard_normal(64)
    special[[2, 50]] = [np.nan, np.inf]
    rows += [tiny, huge, special]
    return np.array(rows)


def same(a, b) -> bool:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return bool(np.all((a == b) & (np.signbit(a) == np.signbit(b)) | (np.isnan(a) & np.isnan(b))))


@pytest.mark.parametrize("scheme", MX)
@pytest.mark.parametrize("rule", list(SCALE_RULES))
def test_mx_against_the_exact_reference(scheme, rule):
    x = hard_blocks(np.random.default_rng(sum(map(ord, scheme + rule))))
    with np.errstate(over="ignore"):  # the transformer_engine rule reads amax as float32
        for mode in MODES:
            for subnormals in (True, False) if mode == "nearest_even" else (True,):
                q = fpsim.quantize(x, scheme, scale_rule=rule, rounding=mode,
                                   subnormals=subnormals)
                blocks = [list(row[i:i + 32]) for row in x.tolist() for i in (0, 32)]
                want_values, want_scales = ref_quantize(blocks, scheme, rule, mode,
                                                        subnormals)
                got_values = q.values.reshape(-1, 32)
                for i, (g, w) in enumerate(zip(got_values, want_values, strict=True)):
                    assert same(g, w), (scheme, rule, mode, i, g, w)
                assert same(q.scales.ravel(), want_scales), (scheme, rule, mode)
                deq = fpsim.dequantize(q).reshape(-1, 32)
                want = [[v * s for v in vs] for vs, s in zip(want_values, want_scales,
                                                              strict=True)]
                assert same(deq, want)


@pytest.mark.parametrize("scheme", MX)
def test_bits_are_the_encodings_of_the_values_and_scales(scheme):
    x = hard_blocks(np.random.default_rng(5))
    q = fpsim.quantize(x, scheme)
    element = fpsim.format(ELEMENTS[scheme][0])
    assert q.bits.dtype == np.uint8 and q.scale_bits.dtype == np.uint8
    assert same(fpsim.from_bits(q.bits, element), q.values)
    nan = np.isnan(q.scales)
    assert np.all(q.scale_bits[nan] == 0xFF)
    assert np.all(q.scale_bits[~nan] == np.log2(q.scales[~nan]).astype(int) + 127)


def test_columnwise_is_rowwise_of_the_transpose():
    x = np.random.default_rng(1).standard_normal((64, 96)) * np.logspace(-3, 3, 96)
    rows = fpsim.quantize(x.T, "mxfp8_e4m3", axis=-1)
    cols = fpsim.quantize(x, "mxfp8_e4m3", axis=0)
    assert cols.scales.shape == (2, 96) and rows.scales.shape == (96, 2)
    assert same(cols.values, rows.values.T) and same(cols.scales, rows.scales.T)
    assert same(fpsim.dequantize(cols), fpsim.dequantize(rows).T)


def test_a_shorter_last_block_with_pad():
    x = np.random.default_rng(2).standard_normal((3, 70))
    q = fpsim.quantize(x, "mxfp4_e2m1", pad=True)
    assert q.scales.shape == (3, 3) and q.values.shape == (3, 70)
    blocks = [list(row[i:i + 32]) for row in x.tolist() for i in (0, 32, 64)]
    want_values, want_scales = ref_quantize(blocks, "mxfp4_e2m1", "ocp", "nearest_even")
    assert same(q.scales.ravel(), want_scales)
    assert same(q.values.ravel(), [v for vs in want_values for v in vs])
    with pytest.raises(ValueError, match="70 elements along axis 1, not a multiple.*pad=True"):
        fpsim.quantize(x, "mxfp4_e2m1")


@pytest.mark.parametrize("scheme", MX)
def test_stochastic_elements_are_a_neighbour_and_follow_the_seed(scheme):
    x = np.random.default_rng(3).standard_normal((4, 64))
    q = fpsim.quantize(x, scheme, rounding="stochastic", seed=11)
    lo = fpsim.quantize(x, scheme, rounding="toward_zero")
    hi = [fpsim.quantize(x, scheme, rounding=m).values for m in ("up", "down")]
    away = np.where(x > 0, hi[0], hi[1])
    assert np.all((q.values == lo.values) | (q.values == away))
    again = fpsim.quantize(x, scheme, rounding="stochastic", seed=11)
    assert same(q.values, again.values)
    with fpsim.backend("numba"):
        assert same(fpsim.quantize(x, scheme, rounding="stochastic", seed=11).values, q.values)


@pytest.mark.parametrize("scheme", MX)
def test_mx_agrees_with_gfloat(scheme):
    gf = pytest.importorskip("gfloat")
    from gfloat import formats

    fi = getattr(formats, f"format_info_{scheme}")
    rng = np.random.default_rng(4)
    x = np.concatenate([rng.standard_normal((20, 32)) * np.logspace(-8, 8, 20)[:, None],
                        np.zeros((1, 32))])
    got = fpsim.dequantize(fpsim.quantize(x, scheme))
    for row, ours in zip(x, got, strict=True):
        theirs = gf.quantize_block(fi, row, gf.compute_scale_amax)
        assert same(ours, theirs), (scheme, row[:4], ours[:4], theirs[:4])


def test_zero_size_and_zero_blocks():
    q = fpsim.quantize(np.zeros((0, 64)), "mxfp8_e4m3")
    assert q.values.shape == (0, 64) and q.scales.shape == (0, 2)
    assert fpsim.dequantize(q).shape == (0, 64)
    q = fpsim.quantize(np.zeros((3, 0)), "mxfp8_e4m3")
    assert q.scales.shape == (3, 0) and fpsim.dequantize(q).shape == (3, 0)
    q = fpsim.quantize(np.zeros(32), "mxfp6_e3m2")
    assert q.scales.tolist() == [2.0**-127] and q.scale_bits.tolist() == [0]
    assert not fpsim.dequantize(q).any()


def test_nan_and_infinite_blocks_have_a_nan_scale():
    x = np.ones(96)
    x[40], x[70] = np.nan, -np.inf
    q = fpsim.quantize(x, "mxfp4_e2m1")
    assert q.scale_bits.tolist() == [127 - 2, 255, 255]  # 2**(0 - emax) for the ones
    deq = fpsim.dequantize(q)
    assert np.all(deq[:32] == 1.0) and np.all(np.isnan(deq[32:]))
    assert not q.values[32:].any() and not q.bits[32:].any()


@pytest.mark.parametrize("call, error, match", [
    (lambda: fpsim.quantize(np.ones(32), "mxfp9"), ValueError,
     "unknown scheme 'mxfp9'; known schemes: mxfp8_e4m3, mxfp8_e5m2"),
    (lambda: fpsim.quantize(np.ones(32), "mxfp8_e4m3", scale_rule="round"), ValueError,
     "unknown scale_rule 'round' for mxfp8_e4m3; known rules: ocp, ceil"),
    (lambda: fpsim.quantize(np.ones(32), "mxfp8_e4m3", axis=1), np.exceptions.AxisError, "axis"),
    (lambda: fpsim.quantize(np.float64(1.0), "mxfp8_e4m3"), np.exceptions.AxisError, "axis"),
    (lambda: fpsim.quantize(np.ones(32), "mxfp8_e4m3", axis=0.0), ValueError, "axis"),
    (lambda: fpsim.quantize(np.ones(32), "mxfp8_e4m3", rounding="nearest"), ValueError,
     "nearest"),
    (lambda: fpsim.quantize(np.ones(32), "mxfp8_e4m3", pad="yes"), ValueError, "pad"),
    (lambda: fpsim.quantize(["a"] * 32, "mxfp8_e4m3"), ValueError, "x"),
    (lambda: fpsim.dequantize(np.ones(3)), ValueError, "expected a Quantized"),
])
def test_bad_input_is_refused_with_a_clear_error(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_options_once_accepted_do_not_let_their_lookalikes_through():
    """quantize keeps its checked options per option set: True is not the axis 1, nor 1 the
    pad True, because an earlier call took 1 and True; unhashable options are still
    checked (and refused) by name."""
    x = np.ones((2, 32))
    fpsim.quantize(x, "mxfp8_e4m3", axis=1, pad=True)
    for options, match in (({"axis": True}, "axis must be an integer, got True"),
                           ({"pad": 1}, "pad must be True or False, got 1"),
                           ({"scale_rule": ["ocp"]}, r"unknown scale_rule \['ocp'\]"),
                           ({"rounding": ["up"]}, "unknown rounding mode"),
                           ({"random_bits": [3]}, "random_bits must be an integer")):
        with pytest.raises(ValueError, match=match):
            fpsim.quantize(x, "mxfp8_e4m3", **{"axis": 1, "pad": True, **options})


def test_the_block_scaled_page_examples_run():
    import doctest
    from pathlib import Path

    page = Path(__file__).resolve().parent.parent / "docs" / "block-scaled.md"
    result = doctest.testfile(str(page), module_relative=False,
                              optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 5 and result.failed == 0


# --- NVFP4 -----------------------------------------------------------------------------
FLT_MAX = Fraction(float(np.finfo(np.float32).max))


def r32_signed(v: float, product: Fraction) -> Fraction | float:
    """r32(product) where product has v's sign; a product that rounds to zero keeps it."""
    out = r32(product)
    return out if out != 0 else math.copysign(0.0, v)


def r32(v: Fraction) -> Fraction:
    """v rounded to binary32 (nearest even), +-FLT_MAX for what overflows (every NVFP4 scale
    step caps at FLT_MAX; an element's -inf is clipped to -6 as -FLT_MAX is)."""
    out, _ = ref_round_fp8(v, REF_FORMATS["fp32"], "nearest_even", True, False)
    return (FLT_MAX if out > 0 else -FLT_MAX) if math.isinf(out) else Fraction(out)


def tiles(x: np.ndarray, rows: int, cols: int):
    """Each block's flat indices into x (2-D): 1 x cols blocks along the rows, or tiles."""
    m, n = x.shape
    for i in range(0, m, rows):
        for j in range(0, n, cols):
            yield [r * n + c for r in range(i, min(i + rows, m))
                   for c in range(j, min(j + cols, n))]


def ref_nvfp4(x32: np.ndarray, mode: str, rows: int = 1):
    """(elements, block scales, tensor scale): 16-wide blocks (16x16 tiles with rows=16),
    the steps of docs/block-scaled.md in Fractions; elements in x's C order, scales in
    block order."""
    x2 = np.atleast_2d(x32)
    floats = x2.ravel().tolist()
    flat = [Fraction(v) for v in floats]
    amax = max((abs(v) for v in flat), default=Fraction(0))
    g_enc = FLT_MAX if amax == 0 else r32(Fraction(448 * 6) / amax)
    g_enc = Fraction(1) if g_enc == 0 else g_enc
    g_dec = r32(1 / g_enc)
    mult = r32(g_enc * r32(Fraction(1, 6)))
    elements: list[float] = [0.0] * len(flat)
    scales = []
    for idx in tiles(x2, rows, 16):
        d = min(r32(max(abs(flat[i]) for i in idx) * mult), Fraction(448))
        e = Fraction(ref_round_fp8(d, REF_FORMATS["fp8_e4m3"], "nearest_even")[0])
        p = r32(e * g_dec)
        enc = FLT_MAX if p == 0 else min(r32(1 / p), FLT_MAX)
        for i in idx:
            v = flat[i]
            s = min(max(r32(v * enc), Fraction(-6)), Fraction(6))
            negative = math.copysign(1.0, floats[i]) < 0  # -0.0 keeps its sign
            elements[i] = ref_round_small("fp4_e2m1", -0.0 if negative and s == 0 else s,
                                          mode, True, True)[0]
        scales.append(float(e))
    return elements, scales, float(g_dec)


def nvfp4_inputs(rng):
    yield rng.standard_normal((4, 64)).astype(np.float32)
    x = rng.standard_normal((3, 48)).astype(np.float32)
    x[1, 5] = 3.0e4  # one outlier: the other blocks' scales shrink
    x[2, 16:32] = 0.0  # a zero block
    x[0, :16] *= np.float32(1e-6)
    yield x
    yield (rng.standard_normal((2, 32)) * 1e-35).astype(np.float32)  # binary32 subnormals
    yield (rng.standard_normal((2, 32)) * 1e30).astype(np.float32)
    yield np.zeros((1, 16), np.float32)


@pytest.mark.parametrize("mode", MODES)
def test_nvfp4_against_the_exact_reference(mode):
    for x in nvfp4_inputs(np.random.default_rng(8)):
        q = fpsim.quantize(x, "nvfp4", rounding=mode)
        elements, scales, tensor_scale = ref_nvfp4(x, mode)
        assert q.tensor_scale == tensor_scale
        assert same(q.scales.ravel(), scales), (mode, q.scales.ravel(), scales)
        assert same(q.values.ravel(), elements), (mode, x)
        deq = [e * s * tensor_scale for e, s in zip(elements, np.repeat(scales, 16),
                                                     strict=True)]
        assert same(fpsim.dequantize(q).ravel(), deq)
        assert np.all(q.scale_bits < 0x80) and q.bits.max() < 16


def test_nvfp4_columnwise_and_float64_input():
    x = np.random.default_rng(9).standard_normal((32, 16))
    cols = fpsim.quantize(x, "nvfp4", axis=0)
    rows = fpsim.quantize(x.T.astype(np.float32), "nvfp4")
    assert same(cols.values, rows.values.T) and same(cols.scales, rows.scales.T)
    assert cols.tensor_scale == rows.tensor_scale  # float64 input is read as binary32


def test_nvfp4_nan_and_infinity():
    x = np.ones((2, 16), np.float32)
    x[1, 3] = np.inf
    q = fpsim.quantize(x, "nvfp4")
    assert q.tensor_scale == 1.0  # 2688 / inf is 0, which TransformerEngine replaces by 1
    assert q.scales.tolist() == [[0.171875], [448.0]]  # e4m3(1 / 6); clipped to 448
    assert q.values[1, 3] == 6.0
    x[1, 3] = np.nan
    q = fpsim.quantize(x, "nvfp4")
    assert np.all(np.isnan(q.scales)) and not q.values.any()
    assert np.all(np.isnan(fpsim.dequantize(q)))
    with pytest.raises(ValueError, match="known rules: transformer_engine"):
        fpsim.quantize(x, "nvfp4", scale_rule="ocp")


# --- DeepSeek-V3's blockwise FP8 ---------------------------------------------------------
def ref_blockwise(x32: np.ndarray, mode: str, rows: int = 1):
    """(elements, scales) of 1x128 blocks (128x128 tiles with rows=128), in Fractions:
    s = amax / 448 and x / s, each rounded to binary32; a zero block keeps its zeros."""
    x2 = np.atleast_2d(x32)
    flat = x2.ravel().tolist()
    elements: list[float] = [0.0] * len(flat)
    scales = []
    for idx in tiles(x2, rows, 128):
        s = r32(max(abs(Fraction(flat[i])) for i in idx) / 448)
        for i in idx:
            v = flat[i]
            if s == 0:
                y = v if v == 0 else math.copysign(math.inf, v)
            else:
                y = r32_signed(v, Fraction(v) / s) if v else v
            elements[i] = ref_round_fp8(y, REF_FORMATS["fp8_e4m3"], mode, True, True)[0]
        scales.append(float(s))
    return elements, scales


@pytest.mark.parametrize("mode", MODES)
def test_blockwise_fp8_against_the_exact_reference(mode):
    rng = np.random.default_rng(10)
    x = (rng.standard_normal((3, 256)) * np.logspace(-30, 30, 3)[:, None]).astype(np.float32)
    x[0, 128:] = 0.0
    x[1, :128] = np.float32(2.0**-149) * rng.integers(-3, 4, 128)  # amax / 448 is 0
    q = fpsim.quantize(x, "fp8_block1x128", rounding=mode)
    elements, scales = ref_blockwise(x, mode)
    assert same(q.scales.ravel(), scales)
    assert same(q.values.ravel(), elements), mode
    assert same(fpsim.dequantize(q).ravel(),
                [e * s for e, s in zip(elements, np.repeat(scales, 128), strict=True)])
    assert q.scale_bits.dtype == np.uint32


def test_blockwise_fp8_nan_and_infinity_follow_the_kernel():
    x = np.ones((2, 128), np.float32)
    x[0, 3], x[1, 5] = np.nan, np.inf
    q = fpsim.quantize(x, "fp8_block1x128")
    assert np.isnan(q.scales[0, 0]) and np.all(np.isnan(q.values[0]))
    assert q.scales[1, 0] == np.inf and np.isnan(q.values[1, 5])  # inf / inf
    assert not q.values[1, :5].any()  # 1 / inf
    assert np.all(np.isnan(fpsim.dequantize(q)))
    with pytest.raises(ValueError, match="not a multiple of the block of 128"):
        fpsim.quantize(np.ones(130), "fp8_block1x128")


@pytest.mark.parametrize("mode", ["nearest_even", "up"])
def test_tiles_of_the_last_two_axes_against_the_exact_reference(mode):
    rng = np.random.default_rng(12)
    x = (rng.standard_normal((32, 48)) * np.logspace(-3, 3, 48)).astype(np.float32)
    x[16:, :16] = 0.0  # a zero tile
    q = fpsim.quantize(x, "nvfp4_16x16", rounding=mode)
    elements, scales, tensor_scale = ref_nvfp4(x, mode, rows=16)
    assert q.scales.shape == (2, 3) and q.tensor_scale == tensor_scale
    assert same(q.scales.ravel(), scales) and same(q.values.ravel(), elements)
    deq = np.array(elements).reshape(32, 48) * np.repeat(np.repeat(np.reshape(
        scales, (2, 3)), 16, 0), 16, 1) * tensor_scale
    assert same(fpsim.dequantize(q), deq)
    y = (rng.standard_normal((2, 130, 140)) * 10.0**rng.integers(-20, 20, (2, 1, 140))).astype(
        np.float32)
    q = fpsim.quantize(y, "fp8_block128x128", rounding=mode, pad=True)
    assert q.scales.shape == (2, 2, 2)
    for k in range(2):
        elements, scales = ref_blockwise(y[k], mode, rows=128)
        assert same(q.scales[k].ravel(), scales) and same(q.values[k].ravel(), elements)
    with pytest.raises(ValueError, match="not a multiple of the 128x128 tile"):
        fpsim.quantize(y, "fp8_block128x128")
    with pytest.raises(ValueError, match="leave axis at -1"):
        fpsim.quantize(x, "nvfp4_16x16", axis=0)
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        fpsim.quantize(np.ones(16), "nvfp4_16x16")


# --- FP8 current scaling, per tensor and per row ----------------------------------------
def ref_current(rows: list[list[float]], mode: str, pow2: bool):
    """(elements, decode scales) with one scale per list of values, in Fractions:
    scale = 448 / amax rounded to binary32 (FLT_MAX on overflow; 1 for a zero amax),
    a power of two rounded down with pow2, decode = 1 / scale, elements x * scale."""
    elements, scales = [], []
    for row in rows:
        amax = max((abs(Fraction(v)) for v in row), default=Fraction(0))
        scale = Fraction(1) if amax == 0 else r32(Fraction(448) / amax)
        if pow2:
            scale = Fraction(2) ** floor_log2(scale)
        elements += [ref_round_fp8(r32_signed(v, Fraction(v) * scale) if v else v,
                                   REF_FORMATS["fp8_e4m3"], mode, True, True)[0] for v in row]
        scales.append(float(r32(1 / scale)))
    return elements, scales


@pytest.mark.parametrize("pow2", [False, True])
@pytest.mark.parametrize("mode", ["nearest_even", "toward_zero", "up", "stochastic"])
def test_current_scaling_against_the_exact_reference(mode, pow2):
    rule = "transformer_engine_pow2" if pow2 else "transformer_engine"
    rng = np.random.default_rng(13)
    x = (rng.standard_normal((4, 40)) * np.array([[1e-3], [1.0], [1e30], [1e-40]])).astype(
        np.float32)
    x[0] = 0.0
    if mode == "stochastic":  # a neighbour of the exact scaled value, nothing else
        q = fpsim.quantize(x, "per_row", rounding=mode, scale_rule=rule, seed=1)
        lo = ref_current(x.tolist(), "toward_zero", pow2)[0]
        hi = ref_current(x.tolist(), "nearest_away", pow2)[0]
        up = ref_current(x.tolist(), "up", pow2)[0]
        down = ref_current(x.tolist(), "down", pow2)[0]
        away = [u if v > 0 else d for u, d, v in zip(up, down, x.ravel(), strict=True)]
        assert all(g in (a, b, c) for g, a, b, c in zip(q.values.ravel(), lo, away, hi,
                                                          strict=True))
        return
    rows = fpsim.quantize(x, "per_row", rounding=mode, scale_rule=rule)
    elements, scales = ref_current(x.tolist(), mode, pow2)
    assert rows.scales.shape == (4, 1) and same(rows.scales.ravel(), scales)
    assert same(rows.values.ravel(), elements)
    assert same(fpsim.dequantize(rows).ravel(),
                [e * s for e, s in zip(elements, np.repeat(scales, 40), strict=True)])
    whole = fpsim.quantize(x, "per_tensor", rounding=mode, scale_rule=rule)
    elements, scales = ref_current([x.ravel().tolist()], mode, pow2)
    assert whole.scales.shape == (1, 1) and same(whole.scales.ravel(), scales)
    assert same(whole.values.ravel(), elements) and whole.block == x.size
    cols = fpsim.quantize(x, "per_row", axis=0, rounding=mode, scale_rule=rule)
    assert same(cols.values, fpsim.quantize(x.T, "per_row", rounding=mode,
                                            scale_rule=rule).values.T)


def test_current_scaling_special_values():
    x = np.array([[1.0, np.inf, 2.0], [1.0, np.nan, 2.0]], np.float32)
    q = fpsim.quantize(x, "per_row")
    assert q.scales.ravel().tolist() == [1.0, 1.0]  # an infinite or NaN amax: scale 1
    assert q.values[0].tolist() == [1.0, 448.0, 2.0] and np.isnan(q.values[1, 1])
    tiny = np.full((1, 4), np.float32(2.0**-149))  # 448 / amax overflows: FLT_MAX
    assert fpsim.quantize(tiny, "per_tensor").scales.ravel()[0] == np.float32(
        1 / np.finfo(np.float32).max)
    assert fpsim.quantize(np.zeros((0, 3)), "per_tensor").scales.tolist() == [[1.0]]


def test_telemetry_counts_what_the_elements_lost():
    x = np.ones((2, 32))
    x[0, :3] = [7.9, 0.2, -0.5]
    x[1, :3] = [np.nan, 1.0, 1.0]
    q = fpsim.quantize(x, "mxfp4_e2m1")
    s = q.stats()
    # Block 0: scale 2**(floor(log2 7.9) - 2) = 1; 7.9 rounds past 6 and saturates, 0.2
    # flushes to zero (below 0.25), -0.5 is subnormal in e2m1 (smallest normal 1).
    assert q.values[0, :3].tolist() == [6.0, 0.0, -0.5]
    assert (s.saturated, s.flushed, s.subnormal) == (1 / 64, 1 / 64, 1 / 64)
    assert np.isnan(s.amax)
    assert s.scale_histogram[0] == (1.0, 1) and np.isnan(s.scale_histogram[1][0])
    assert fpsim.quantize(x[:1], "mxfp4_e2m1").stats().amax == 7.9
    empty = fpsim.quantize(np.zeros((0, 32)), "mxfp4_e2m1").stats()
    assert (empty.saturated, empty.flushed, empty.scale_histogram) == (0.0, 0.0, ())
    nv = fpsim.quantize(np.float32([[100.0] + [0.25] * 15]), "nvfp4").stats()
    assert nv.flushed == 15 / 16  # 0.25 * encode lies below a quarter: zero


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_mx_any_shape_axis_rule_and_mode_against_the_reference(data):
    scheme = data.draw(st.sampled_from(MX), label="scheme")
    rule = data.draw(st.sampled_from(list(SCALE_RULES)), label="rule")
    mode = data.draw(st.sampled_from(MODES), label="mode")
    ndim = data.draw(st.integers(1, 3), label="ndim")
    axis = data.draw(st.integers(-ndim, ndim - 1), label="axis")
    shape = [data.draw(st.integers(1, 70 if i == axis % ndim else 3)) for i in range(ndim)]
    values = st.floats(allow_nan=False, allow_infinity=False, width=32) | st.sampled_from(
        [0.0, -0.0, 2.0**-149, 448.0, 6.0, 7.5, 28.0, 57344.0])
    x = data.draw(hnp.arrays(np.float64, shape, elements=values), label="x")
    q = fpsim.quantize(x, scheme, axis=axis, scale_rule=rule, rounding=mode, pad=True)
    moved = np.moveaxis(x, axis, -1).reshape(-1, x.shape[axis])
    blocks = [list(row[i:i + 32]) for row in moved.tolist() for i in range(0, len(row), 32)]
    want_values, want_scales = ref_quantize(blocks, scheme, rule, mode)
    got = np.moveaxis(q.values, axis, -1).reshape(-1, x.shape[axis])
    got_blocks = [list(row[i:i + 32]) for row in got.tolist() for i in range(0, len(row), 32)]
    assert all(same(g, w) for g, w in zip(got_blocks, want_values, strict=True))
    assert same(np.moveaxis(q.scales, axis, -1).ravel(), want_scales)


# --- numpydoc: every public function of fpsim.quantize has an example, and they run -----
QUANTIZE_MODULES = ["fpsim.quantize.quantized", "fpsim.quantize.schemes",
                    "fpsim.quantize.telemetry", "fpsim.quantize.hadamard", "fpsim.stochastic"]


@pytest.mark.parametrize("name", QUANTIZE_MODULES)
def test_the_docstring_examples_run(name):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(name),
                             optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


def test_every_public_function_has_a_numpydoc_example():
    import importlib
    import inspect

    lacking = []
    for package in ("fpsim.quantize", "fpsim.stochastic"):
        module = importlib.import_module(package)
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isfunction(obj) or inspect.isclass(obj):
                doc = inspect.getdoc(obj) or ""
                sections = ("Parameters", "Returns", "Attributes")
                if ">>>" not in doc or not any(s in doc for s in sections):
                    lacking.append(f"{package}.{name}")
    assert lacking == []


# --- Hypothesis over every scheme, axis and rounding mode, stochastic included -----------
def _reference(x: np.ndarray, name: str, axis: int, mode: str, rule: str):
    """Every element's value by the scheme's reference, in the C order of ``x`` with
    ``axis`` moved last (tiles: of ``x``)."""
    sch = SCHEMES[name]
    if sch.rows > 1:
        fn = ref_nvfp4 if sch.kind == "nvfp4" else ref_blockwise
        return fn(x, mode, rows=sch.rows)[0]
    moved = np.moveaxis(x, axis, -1).reshape(-1, x.shape[axis])
    if sch.kind == "mx":
        blocks = [list(row[i:i + 32]) for row in moved.tolist()
                  for i in range(0, len(row), 32)]
        return [v for vs in ref_quantize(blocks, name, rule, mode)[0] for v in vs]
    if sch.kind == "nvfp4":
        return ref_nvfp4(moved, mode)[0]
    if sch.kind == "blockwise":
        return ref_blockwise(moved, mode)[0]
    pow2 = rule == "transformer_engine_pow2"
    if name == "per_tensor":
        return ref_current([x.ravel().tolist()], mode, pow2)[0]
    return ref_current(moved.tolist(), mode, pow2)[0]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_scheme_axis_and_mode_against_the_reference(data):
    """Every scheme (each scale rule of it), axis and rounding mode: the exact references
    above. Stochastic: each element is one of the two neighbours of its scaled value."""
    name = data.draw(st.sampled_from(list(SCHEMES)), label="scheme")
    sch = SCHEMES[name]
    rule = data.draw(st.sampled_from(sch.rules), label="rule")
    mode = data.draw(st.sampled_from(fpsim.ROUNDING_MODES), label="mode")
    if sch.rows > 1:
        ndim, axis = 2, -1
        shape = [data.draw(st.integers(1, 20)) for _ in range(2)]
    else:
        ndim = data.draw(st.integers(1, 3), label="ndim")
        axis = data.draw(st.integers(-ndim, ndim - 1), label="axis")
        longest = 140 if sch.block == 128 else 70
        shape = [data.draw(st.integers(1, longest if i == axis % ndim else 3))
                 for i in range(ndim)]
    values = st.floats(allow_nan=False, allow_infinity=False, width=32) | st.sampled_from(
        [0.0, -0.0, 2.0**-149, 448.0, 6.0, 7.5, 28.0, 57344.0, -3e38])
    x = data.draw(hnp.arrays(np.float32, shape, elements=values), label="x")
    seed = 5 if mode == "stochastic" else None
    q = fpsim.quantize(x, name, axis=axis, scale_rule=rule, rounding=mode, seed=seed,
                       pad=True)
    ax = q.axis
    got = (q.values if sch.rows > 1 else np.moveaxis(q.values, ax, -1)).ravel()
    with np.errstate(over="ignore"):
        if mode != "stochastic":
            assert same(got, _reference(x, name, ax, mode, rule)), (name, rule, mode)
            return
        lo = _reference(x, name, ax, "toward_zero", rule)
        up = _reference(x, name, ax, "up", rule)
        down = _reference(x, name, ax, "down", rule)
    for g, a, b, c in zip(got.tolist(), lo, up, down, strict=True):
        assert any(same([g], [w]) for w in (a, b, c)), (name, rule, g, a, b, c)
