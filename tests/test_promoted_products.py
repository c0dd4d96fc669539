"""DeepSeek-V3's FP8 GEMM on Hopper: blockwise FP8 operands on ``fpsim.hw.H100_FP8`` with
promotion, the binary32 scales applied at each promotion.

The rule (DeepSeek-V3, arXiv 2412.19437, sections 3.3.1-3.3.2; DeepGEMM's
``sm90_fp8_gemm_1d2d.cuh``): activations in 1x128 blocks and weights in 128x128 tiles,
e4m3 elements and binary32 scales; K is cut into chunks of N products (N = 128, four
``wgmma`` k32); each chunk is accumulated from +0 by the tensor core (MMA-Sim's Hopper fp8
rule: blocks of 32, 13 fraction bits, each result cut to e8m13); the chunk's sum is
promoted on the CUDA cores as ``acc = fma(chunk, fp32(scale_a * scale_b), acc)``, the
scale product and the fused multiply-add each rounded to nearest even binary32, from
``acc = c`` (or +0). The reference here is that rule with Fractions (the wgmma chain is
``test_hw_presets``'s reference of MMA-Sim's rule); MMA-Sim's own wgmma partial sums are
checked from ``tests/data/mmasim_promoted.npz`` (``make_mmasim_records.py --promoted``).
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reference import ref_fma, ref_mul, same_bits
from test_hw_presets import EXAMPLES, MMASIM_RULES, ref_chain
from test_mma_probes import nvdisasm

import fpsim
import fpsim.hw
from fpsim.accumulation.scaled import promoted_matmul

DATA = Path(__file__).parent / "data" / "mmasim_promoted.npz"
WGMMA = MMASIM_RULES["H100_FP8"]
DEEPSEEK = fpsim.hw.H100_FP8.with_promotion(128)


def ref_promoted(a, b, sa, sb, c: float, every: int) -> float:
    """One output: per chunk of ``every`` products the wgmma chain from +0, then
    ``acc = fma(chunk, fp32(sa * sb), acc)`` in binary32, nearest even."""
    acc = c
    for k0 in range(0, len(a), every):
        part = ref_chain(a[k0:k0 + every], b[k0:k0 + every], 0.0, WGMMA, "fp8_e4m3",
                         "fp8_e4m3", "fp32")
        scale = ref_mul(sa[k0], sb[k0], "fp32")[0]
        acc = ref_fma(part, scale, acc, "fp32")[0]
    return acc


def dot(a, b, sa, sb, c=0.0, model=DEEPSEEK) -> float:
    """promoted_matmul of one row and one column, per-element scales."""
    row = np.array(a, np.float64).reshape(1, -1)
    col = np.array(b, np.float64).reshape(-1, 1)
    got = promoted_matmul(row, col, np.broadcast_to(np.array(sa, np.float64).reshape(1, -1),
                                                    row.shape),
                          np.broadcast_to(np.array(sb, np.float64).reshape(-1, 1), col.shape),
                          model, c=np.array([[c]]))
    return float(np.asarray(got, np.float64)[0, 0])


def check(a, b, sa, sb, c=0.0, every=128):
    k = len(a)
    sa = [sa] * k if np.isscalar(sa) else sa
    sb = [sb] * k if np.isscalar(sb) else sb
    want = ref_promoted(a, b, sa, sb, c, every)
    got = dot(a, b, sa, sb, c, fpsim.hw.H100_FP8.with_promotion(every))
    assert same_bits(got, want), f"a={a} b={b} sa={sa[0]} sb={sb[0]} c={c}: want {want!r}, " \
                                 f"got {got!r}"
    return got


def pad(values, k=128):
    return list(values) + [0.0] * (k - len(values))


# --- directed cases, by hand ------------------------------------------------------------------


def test_the_scale_product_is_rounded_to_binary32_first():
    """fp32((1 + 2**-12)**2) = 1 + 2**-11 (the 2**-24 a tie, to even), so a chunk of 3
    gives 3 + 3 * 2**-11; with the exact scale it would round to 3 + 3 * 2**-11 + 2**-22."""
    s = 1.0 + 2.0**-12
    assert check(pad([3.0]), pad([1.0]), s, s) == 3.0 + 3 * 2.0**-11


def test_the_promotion_is_one_fused_multiply_add():
    """The chunk 1 + 2**-13 times the scale 1 + 2**-23, plus c = -1, rounded once:
    2**-13 + 2**-23 + 2**-36 (rounding the product first would lose the 2**-36)."""
    a, b = pad([1.0, 2.0**-6]), pad([1.0, 2.0**-7])
    assert check(a, b, 1.0 + 2.0**-23, 1.0, c=-1.0) == 2.0**-13 + 2.0**-23 + 2.0**-36


def test_a_chunk_keeps_13_bits_and_the_promotion_keeps_binary32():
    """In one wgmma, 1 + 2**-14 is cut to 1 (13 fraction bits); in another chunk the
    2**-14 is kept by the binary32 accumulator."""
    one, tiny = [1.0], [2.0**-7]
    assert check(pad(one + tiny), pad(one + tiny), 1.0, 1.0) == 1.0
    assert check(pad(one) + pad(tiny), pad(one) + pad(tiny), 1.0, 1.0) == 1.0 + 2.0**-14
    # Promotion every 32: each wgmma is a chunk of its own, scaled by its block's scales.
    a = pad(one, 32) + pad(tiny, 96)
    assert check(a, a, 1.0, 1.0, every=32) == 1.0 + 2.0**-14


def test_each_chunk_takes_its_own_blocks_scales():
    a, b = [2.0] * 256, [3.0] * 256
    sa = [0.5] * 128 + [2.0**-20] * 128
    assert check(a, b, sa, [1.0] * 256) == 384.0 + 768 * 2.0**-20


def test_scales_in_binary32_range_edges():
    """A scale product below binary32's normals is kept (no flush); one beyond its range is
    inf, and 0 * inf a NaN; a NaN scale gives NaN; a zero scale leaves c."""
    a = pad([3.0])
    assert check(a, a, 2.0**-100, 2.0**-40) == 9 * 2.0**-140
    assert check(a, a, 2.0**100, 2.0**100) == math.inf
    assert math.isnan(check(pad([]), pad([]), 2.0**100, 2.0**100))
    assert math.isnan(check(a, a, math.nan, 1.0, c=1.0))
    assert check(a, a, 0.0, 1.0, c=-2.5) == -2.5


# --- against the reference --------------------------------------------------------------------

CLASSES = ("normal", "wide", "outlier", "zeros", "tiny", "huge", "nan")


def data(rng, cls, shape):
    x = rng.normal(size=shape)
    if cls == "wide":
        x = np.where(rng.random(shape) < 0.5, -1.0, 1.0) * np.exp2(rng.uniform(-40, 40, shape))
    elif cls == "outlier":
        x[..., ::37] *= 2.0**14
    elif cls == "zeros":
        x = np.where(rng.random(shape) < 0.5, 0.0, x)
    elif cls == "tiny":
        x = x * 2.0**-130
    elif cls == "huge":
        x = x * 2.0**110
    elif cls == "nan":
        x = np.where(rng.random(shape) < 0.01, np.nan, x)
    return x.astype(np.float32)


def scales_of(q, k_axis):
    """Each element's scale (the Quantized's blocks, tiles included)."""
    from fpsim.quantize.product import _element_scales

    s = _element_scales(q)
    assert s.shape == q.values.shape and k_axis in (0, 1)
    return s


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True)
@given(st.integers(0, 2**32 - 1), st.sampled_from(CLASSES), st.sampled_from(CLASSES),
       st.sampled_from([128, 64, 32]), st.sampled_from(["1x128", "128x128"]),
       st.sampled_from([256, 200]), st.booleans())
def test_quantized_products_equal_the_rule(seed, cls_a, cls_b, every, weights, k, with_c):
    """fpsim.matmul(qa, qb, model=H100_FP8.with_promotion(N)) of fpsim.quantize's blockwise
    operands (A 1x128, B 1x128 along K or 128x128 tiles; K = 200 pads a shorter last
    block) against the reference, element by element."""
    rng = np.random.default_rng(seed)
    x, w = data(rng, cls_a, (2, k)), data(rng, cls_b, (k, 3))
    qa = fpsim.quantize(x, "fp8_block1x128", pad=True)
    qb = (fpsim.quantize(w, "fp8_block1x128", axis=0, pad=True) if weights == "1x128"
          else fpsim.quantize(w, "fp8_block128x128", pad=True))
    c = rng.normal(size=(2, 3)).astype(np.float32).astype(np.float64) if with_c else None
    got = np.asarray(fpsim.matmul(qa, qb, model=fpsim.hw.H100_FP8.with_promotion(every), c=c),
                     np.float64)
    sa, sb = scales_of(qa, 1), scales_of(qb, 0)
    for m in range(2):
        for n in range(3):
            want = ref_promoted(list(qa.values[m]), list(qb.values[:, n]), list(sa[m]),
                                list(sb[:, n]), 0.0 if c is None else float(c[m, n]), every)
            assert same_bits(got[m, n], want), (m, n, got[m, n], want)


def test_weight_tiles_scale_each_block_of_columns():
    """N = 130: B's columns 128 and 129 are another 128x128 tile, with its own scale."""
    rng = np.random.default_rng(3)
    w = rng.normal(size=(128, 130))
    w[:, 128:] *= 2.0**-9
    qa = fpsim.quantize(rng.normal(size=(1, 128)), "fp8_block1x128")
    qb = fpsim.quantize(w, "fp8_block128x128", pad=True)
    assert qb.scales.shape == (1, 2) and qb.scales[0, 0] != qb.scales[0, 1]
    got = np.asarray(fpsim.matmul(qa, qb, model=DEEPSEEK), np.float64)
    for n in (0, 127, 128, 129):
        want = ref_promoted(list(qa.values[0]), list(qb.values[:, n]), [qa.scales[0, 0]] * 128,
                            [qb.scales[0, n // 128]] * 128, 0.0, 128)
        assert same_bits(got[0, n], want)


def test_out_rounds_the_result_once():
    rng = np.random.default_rng(4)
    qa = fpsim.quantize(rng.normal(size=(2, 128)), "fp8_block1x128")
    qb = fpsim.quantize(rng.normal(size=(128, 2)), "fp8_block128x128", pad=True)
    full = fpsim.matmul(qa, qb, model=DEEPSEEK)
    np.testing.assert_array_equal(fpsim.matmul(qa, qb, model=DEEPSEEK, out="bf16"),
                                  fpsim.round(np.asarray(full, np.float64), "bf16"))


def test_every_backend_gives_the_same_bits(backend_name):
    rng = np.random.default_rng(5)
    a = fpsim.round(rng.normal(size=(2, 256)) * 64, "fp8_e4m3")
    b = fpsim.round(rng.normal(size=(256, 2)) * 64, "fp8_e4m3")
    sa = np.repeat(np.float32(rng.random((2, 2))).astype(np.float64), 128, axis=1)
    sb = np.repeat(np.float32(rng.random((2, 2))).astype(np.float64), 128, axis=0)
    got = np.asarray(promoted_matmul(a, b, sa, sb, DEEPSEEK), np.float64)
    for m in range(2):
        for n in range(2):
            want = ref_promoted(list(a[m]), list(b[:, n]), list(sa[m]), list(sb[:, n]), 0.0, 128)
            assert same_bits(got[m, n], want)


# --- MMA-Sim's wgmma partial sums ------------------------------------------------------------


def test_the_promotion_of_mmasims_partial_sums():
    """MMA-Sim's Hopper fp8 wgmma chained over each chunk of 128 (from +0) equals fpsim's
    H100_FP8 chunk by chunk, bit for bit; and fpsim's promoted result equals the promotion
    rule applied, in Fractions, to MMA-Sim's partial sums and the recorded scales."""
    data_ = np.load(DATA)
    about = json.loads(str(data_["about"]))
    assert about["mmasim"] == "2.1.1" and (about["K"], about["chunk"]) == (256, 128)
    assert about["instruction"] == ["Hopper", "m64n8k32.f32.e4m3.e4m3"]
    a = np.asarray(fpsim.from_bits(data_["a_codes"], "fp8_e4m3"), np.float64)
    b = np.asarray(fpsim.from_bits(data_["b_codes"], "fp8_e4m3"), np.float64)
    sa_block, sb_block = (data_[f"{x}_scales"].astype(np.float64) for x in "ab")
    c = data_["c"].astype(np.float64)
    partials = data_["partials"].view(np.float32)
    rows = a.shape[0]
    for j, k0 in enumerate(range(0, 256, 128)):
        mine = fpsim.matmul(a[:, None, k0:k0 + 128], b[:, k0:k0 + 128, None],
                            model=fpsim.hw.H100_FP8)
        mine = np.asarray(mine, np.float32).reshape(-1)
        assert (same_bits(mine, partials[:, j]) | (np.isnan(mine) & np.isnan(partials[:, j]))
                ).all()
    sa, sb = np.repeat(sa_block, 128, axis=1), np.repeat(sb_block, 128, axis=1)
    got = np.asarray(promoted_matmul(a[:, None, :], b[:, :, None], sa[:, None, :],
                                     sb[:, :, None], DEEPSEEK, c=c[:, None, None]),
                     np.float64).reshape(-1)
    per_class = about["per_class"]
    for i in range(rows):
        acc = c[i]
        for j in range(2):
            scale = ref_mul(sa_block[i, j], sb_block[i, j], "fp32")[0]
            acc = ref_fma(float(partials[i, j]), scale, acc, "fp32")[0]
        assert same_bits(got[i], acc) or (math.isnan(got[i]) and math.isnan(acc)), (
            f"row {i} ({about['classes'][i // per_class]}): fpsim {got[i]!r}, rule {acc!r}")
    # The classes reach what the rule governs: NaN blocks, scale products beyond and below
    # binary32's normals.
    with np.errstate(over="ignore"):
        scale = np.float32(sa_block) * np.float32(sb_block)
    assert np.isnan(got).any() and np.isinf(scale).any() and (scale < 2.0**-126).any()


# --- DeepGEMM's promotion compiles to FMUL then FFMA --------------------------------------------

# DeepGEMM's promotion (sm90_fp8_gemm_1d2d.cuh: ``float scale_0_0 = scale_a_0 * scale_b_0;``
# then ``final_accum[i] += scale_0_0 * accum[i];``), written out, compiled with nvcc's
# defaults (DeepGEMM's JIT passes no --use_fast_math and no --fmad=false).
PROMOTION = r"""
extern "C" __global__ void promote(const float* accum, const float* sa, const float* sb,
                                   float* final_accum) {
    int i = threadIdx.x;
    float scale = sa[i] * sb[0];
    final_accum[i] += scale * accum[i];
}
"""


@pytest.mark.skipif(shutil.which("nvcc") is None or nvdisasm() is None,
                    reason="nvcc and nvdisasm are needed to compile the promotion")
def test_the_promotion_compiles_to_one_multiply_and_one_fused_multiply_add(tmp_path):
    source, cubin = tmp_path / "promote.cu", tmp_path / "promote.cubin"
    source.write_text(PROMOTION)
    subprocess.run(["nvcc", "-O3", "-arch=sm_90a", "-cubin", "-o", str(cubin), str(source)],
                   check=True, capture_output=True, text=True)
    sass = subprocess.run([nvdisasm(), str(cubin)], check=True, capture_output=True,
                          text=True).stdout
    ops = [op for op in ("FMUL", "FFMA", "FADD") for line in sass.splitlines()
           if f" {op} " in line or f" {op}." in line]
    assert sorted(ops) == ["FFMA", "FMUL"], sass


# --- refusals ---------------------------------------------------------------------------------


def test_refusals():
    rng = np.random.default_rng(6)
    qa = fpsim.quantize(rng.normal(size=(2, 256)), "fp8_block1x128")
    qb = fpsim.quantize(rng.normal(size=(256, 2)), "fp8_block128x128", pad=True)
    with pytest.raises(ValueError, match=r"must promote every N products, N dividing the "
                                         r"scale block of 128 .*with_promotion\(128\)"):
        fpsim.matmul(qa, qb, model=fpsim.hw.H100_FP8)
    with pytest.raises(ValueError, match="N dividing the scale block of 128"):
        fpsim.matmul(qa, qb, model=fpsim.hw.H100_FP8.with_promotion(96))
    with pytest.raises(ValueError, match="fixes how the products are added up; accum"):
        fpsim.matmul(qa, qb, model=DEEPSEEK, accum="fp32")
    with pytest.raises(ValueError, match="with_promotion"):  # no model: not exact per term
        fpsim.matmul(qa, qb)
    mx = fpsim.quantize(rng.normal(size=(256, 2)), "mxfp8_e4m3", axis=0)
    with pytest.raises(ValueError, match="B: a product of mxfp8_e4m3 operands takes a "
                                         "block-scaled instruction"):
        fpsim.matmul(qa, mx, model=DEEPSEEK)
    current = fpsim.quantize(rng.normal(size=(256, 2)), "per_row", axis=0)
    with pytest.raises(ValueError, match="B: a tensor core with promote_every applies "
                                         "DeepSeek-V3's blockwise binary32 scales"):
        fpsim.matmul(qa, current, model=DEEPSEEK)
    with pytest.raises(ValueError, match="change within the chunk of K 0..255"):
        promoted_matmul(np.ones((1, 256)), np.ones((256, 1)),
                        np.repeat([[1.0, 2.0]], 128, axis=1), np.ones((256, 1)),
                        fpsim.hw.H100_FP8.with_promotion(256))
    with pytest.raises(ValueError, match="not a binary32 value"):
        promoted_matmul(np.ones((1, 128)), np.ones((128, 1)), np.full((1, 128), 0.1),
                        np.ones((128, 1)), DEEPSEEK)
    with pytest.raises(ValueError, match="with promote_every"):
        promoted_matmul(np.ones((1, 128)), np.ones((128, 1)), np.ones((1, 128)),
                        np.ones((128, 1)), fpsim.hw.H100_FP8)
