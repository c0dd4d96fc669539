"""The products of a Linear layer under each scaling recipe, forward and both backward
products, against an exact rational reference written from the recipes' sources.

The reference is independent of fpsim: every binary32 operation is ``reference.ref_mul``,
``ref_div``, ``ref_fma`` or ``ref_add`` (exact, then rounded once), every element a
``ref_round`` (fp8) or ``test_small_formats.ref_round`` (fp4, UE4M3) with Fractions, and
the sums are ``accumulation_reference.ref_matmul`` (sequential, each addition rounded) or
MMA-Sim's tensor-core rule (``test_hw_presets.ref_chain``). The rules:

- TransformerEngine's delayed scaling (``transformer_engine/common/recipe/delayed_scaling.cu``):
  ``scale = fp32(fp8_max * 2**-margin) / amax`` in binary32 from the amax history (the
  largest of the window, 1024 steps by default), 1 before the first update;
  ``scale_inv = 1 / scale``; each element ``satfinite(fp32(x * scale))``.
- TransformerEngine's current scaling (``compute_scale_from_amax``): ``scale = max / amax``.
- MX (OCP MX v1.0, TransformerEngine's rule): ``descale = fp32(amax * fp32(1 / max))``, the
  scale ``2**ceil(log2(descale))``, each element ``x / scale`` rounded, saturating.
- NVFP4 (TransformerEngine's reference quantizer, NVIDIA arXiv 2509.25149): the tensor's
  ``global_encode = 2688 / amax``, each block's UE4M3 ``decode`` and ``encode``, in binary32.
- DeepSeek-V3's blockwise FP8 (arXiv 2412.19437, section 3.3): ``s = amax / 448`` per block,
  each element ``x / s``; products of 128-element chunks promoted to binary32 with their
  scales (one fused multiply-add).
- TransformerEngine's ``Float8BlockScaling`` (``transformer_engine/common/recipe/__init__.py``:
  ``QParams(power_2_scale=not use_f32_scales)``, ``use_f32_scales`` off unless
  ``NVTE_FP8_BLOCK_SCALING_FP32_SCALES=1``; ``compute_scale_from_amax`` in
  ``transformer_engine/common/recipe/recipe_common.cuh``): per block or tile
  ``scale = fp32(448 / amax)`` (1 for a zero amax, the input type's largest value where it
  overflows), its fraction bits cleared; ``scale_inv = 1 / scale``; each element
  ``satfinite(fp32(x * scale))``.
- Blackwell's block-scaled MMAs (MMA-Sim's ``st_fdpa`` and ``gst_fdpa``, the Fraction
  reference of ``test_block_scaled_presets``) for MX and NVFP4 operands with ``gemm=``,
  then the NVFP4 tensor scales' epilogue in binary32.
- A GEMM with one scale per operand: the element products summed, then the epilogue
  ``fp32(sum * fp32(scale_a * scale_b))``; the result rounded to the compute format (bf16).
"""

from __future__ import annotations

import math
import os
from fractions import Fraction

import numpy as np
import pytest
from accumulation_reference import ref_matmul
from reference import ref_add, ref_div, ref_fma, ref_mul, ref_round
from test_block_scaled_presets import ref_chain as ref_scaled_chain
from test_hw_presets import MMASIM_RULES, ref_chain
from test_small_formats import ref_round as ref_round_small

import fpsim
from fpsim import nn
from fpsim.nn import functional as F
from fpsim.precision import parse
from fpsim.precision.scaling import advance

FLT_MAX = float(np.finfo(np.float32).max)
# Tokens, inputs, outputs (FPSIM_RECIPE_ROWS=32 for larger M and N; the reference's sums are
# most of the time). K = 32 fills an MX block; M and N of 16 are padded for MX.
M = N = int(os.environ.get("FPSIM_RECIPE_ROWS", "16"))
K = 32


def f32(x) -> float:
    return ref_round(Fraction(x), "fp32")[0]


def mul32(a, b) -> float:
    return ref_mul(a, b, "fp32")[0]


def div32(a, b) -> float:
    return ref_div(a, b, "fp32")[0]


def element(v, fmt: str, mode: str = "nearest_even") -> float:
    """``v`` (a float or Fraction) rounded to the element format, saturating."""
    if fmt in ("fp8_e4m3", "fp8_e5m2"):
        return ref_round(Fraction(v), fmt, mode, True, True)[0]
    return ref_round_small(fmt, float(v), mode, True, True)[0]


MAXES = {"fp8_e4m3": 448.0, "fp8_e5m2": 57344.0, "fp4_e2m1": 6.0}


class Op:
    """A reference operand: elements (rows by K) and each element's decode scale."""

    def __init__(self, elements, scale, kind, block, tensor_scale=None, fmt=None):
        self.e, self.scale, self.kind, self.block = elements, scale, kind, block
        self.tensor_scale, self.fmt = tensor_scale, fmt

    def transposed(self):
        e = [list(col) for col in zip(*self.e, strict=True)]
        return Op(e, lambda i, k: self.scale(k, i), self.kind, len(e[0]))


def per_tensor(rows, fmt: str, scale: float, decode: float) -> Op:
    e = [[element(mul32(x, scale), fmt) for x in row] for row in rows]
    return Op(e, lambda i, k: decode, "tensor", len(rows[0]))


def current(rows, fmt: str) -> Op:
    amax = max(abs(x) for row in rows for x in row)
    scale = 1.0 if amax == 0 else min(div32(MAXES[fmt], amax), FLT_MAX)
    return per_tensor(rows, fmt, scale, div32(1.0, scale))


def mx_te(rows, fmt: str = "fp8_e4m3", block: int = 32) -> Op:
    """MX with TransformerEngine's scale rule, blocks along the rows."""
    inv = div32(1.0, MAXES[fmt])
    e, scales = [], []
    for row in rows:
        out, srow = [], []
        for k0 in range(0, len(row), block):
            chunk = row[k0:k0 + block]
            amax = max(abs(x) for x in chunk)
            if amax == 0:
                s = -127
            else:
                descale = Fraction(mul32(f32(amax), inv))
                s = math.frexp(descale)[1] - (descale == Fraction(2) ** (math.frexp(descale)[1]
                                                                        - 1))
            s = min(max(s, -127), 127)
            scale = Fraction(2) ** s
            out += [element(Fraction(x) / scale, fmt) for x in chunk]
            srow.append(float(scale))
        e.append(out)
        scales.append(srow)
    return Op(e, lambda i, k: scales[i][k // block], "exact", block, fmt=fmt)


def nvfp4(rows, tiles: bool = False) -> Op:
    """NVFP4's two levels, TransformerEngine's binary32 steps; 16x16 tiles or 1x16 blocks."""
    amax = max(abs(x) for row in rows for x in row)
    g_encode = min(div32(448.0 * 6.0, amax), FLT_MAX) if amax else FLT_MAX
    g_decode = div32(1.0, g_encode)
    mult = mul32(g_encode, div32(1.0, 6.0))
    n_rows, n_cols = len(rows), len(rows[0])
    decode = {}
    for i0 in range(0, n_rows, 16 if tiles else 1):
        for k0 in range(0, n_cols, 16):
            block = [rows[i][k] for i in range(i0, i0 + (16 if tiles else 1))
                     for k in range(k0, k0 + 16)]
            d = min(mul32(max(abs(x) for x in block), mult), 448.0)
            decode[(i0 // (16 if tiles else 1), k0 // 16)] = ref_round_small(
                "ue4m3", d, "nearest_even", True, False)[0]
    e = []
    for i, row in enumerate(rows):
        out = []
        for k, x in enumerate(row):
            d = decode[(i // (16 if tiles else 1), k // 16)]
            encode = min(div32(1.0, mul32(d, g_decode)), FLT_MAX)
            out.append(element(mul32(x, encode), "fp4_e2m1"))
        e.append(out)
    return Op(e, lambda i, k: decode[(i // (16 if tiles else 1), k // 16)], "exact", 16,
              tensor_scale=g_decode, fmt="fp4_e2m1")


def blockwise(rows, tiles: bool = False) -> Op:
    """DeepSeek-V3's binary32 scales amax / 448, 1x128 blocks or 128x128 tiles (padded)."""
    scales = {}
    for i0 in range(0, len(rows), 128 if tiles else 1):
        for k0 in range(0, len(rows[0]), 128):
            block = [x for row in rows[i0:i0 + (128 if tiles else 1)] for x in row[k0:k0 + 128]]
            scales[(i0 // (128 if tiles else 1), k0 // 128)] = div32(
                max(abs(x) for x in block), 448.0)

    def scale(i, k):
        return scales[(i // (128 if tiles else 1), k // 128)]

    e = [[element(div32(x, scale(i, k)), "fp8_e4m3") for k, x in enumerate(row)]
         for i, row in enumerate(rows)]
    return Op(e, scale, "blocks", 128)


def blockwise_te(rows, tiles: bool = False) -> Op:
    """TransformerEngine's Float8BlockScaling, power-of-two scales: 1x128 blocks or 128x128
    tiles (padded)."""
    scales = {}
    for i0 in range(0, len(rows), 128 if tiles else 1):
        for k0 in range(0, len(rows[0]), 128):
            amax = max(abs(x) for row in rows[i0:i0 + (128 if tiles else 1)]
                       for x in row[k0:k0 + 128])
            scale = 1.0 if amax == 0 else min(div32(448.0, f32(amax)), FLT_MAX)
            scales[(i0 // (128 if tiles else 1), k0 // 128)] = 2.0 ** math.floor(
                math.log2(scale))  # the binary32 scale's fraction bits cleared

    def scale(i, k):
        return scales[(i // (128 if tiles else 1), k // 128)]

    e = [[element(mul32(x, scale(i, k)), "fp8_e4m3") for k, x in enumerate(row)]
         for i, row in enumerate(rows)]
    return Op(e, lambda i, k: div32(1.0, scale(i, k)), "blocks", 128)


def hadamard(rows, seed: int = 0, size: int = 16):
    """Each block of 16 along the rows times Q = diag(signs) H / 4, summed in binary32 in
    order; the signs are numpy's PCG64 bits (0: +1, 1: -1), H Sylvester's."""
    bits = np.random.default_rng(seed).integers(0, 2, size)
    q = [[(-1.0 if bits[i] else 1.0) * (-1.0 if bin(i & j).count("1") % 2 else 1.0) / 4
          for j in range(size)] for i in range(size)]
    out = []
    for row in rows:
        blocks = np.array(row, dtype=np.float64).reshape(-1, size)
        out.append(ref_matmul(blocks, np.array(q), accum="fp32").reshape(-1).tolist())
    return out


def product(a: Op, b: Op, accum="fp32", gemm=None, promote=None) -> np.ndarray:
    """A @ B^T, each operand rows by K, as the recipe's GEMM computes it."""
    rows, cols, k = len(a.e), len(b.e), len(a.e[0])
    if a.kind == "exact" and gemm is not None:  # a block-scaled instruction, chained over K
        model = fpsim.hw.BLOCK_SCALED[gemm].with_inputs(a.fmt, b.fmt)
        acc = np.array([[ref_scaled_chain(model, a.e[i], b.e[j],
                                          [a.scale(i, t) for t in range(k)],
                                          [b.scale(j, t) for t in range(k)], 0.0)
                         for j in range(cols)] for i in range(rows)])
        accum = "fp32"  # the instruction's output
    elif a.kind == "exact":  # every term exact, summed in order, then the tensor scales
        da = [[a.e[i][j] * a.scale(i, j) for j in range(k)] for i in range(rows)]
        db = [[b.e[i][j] * b.scale(i, j) for j in range(k)] for i in range(cols)]
        acc = ref_matmul(np.array(da), np.array(db).T, accum=accum)
    if a.kind == "exact":
        if a.tensor_scale is None:
            return acc
        alpha = mul32(a.tensor_scale, b.tensor_scale)
        return np.array([[ref_round(Fraction(v) * Fraction(alpha), accum)[0] for v in r]
                         for r in acc.tolist()])
    ea, eb = np.array(a.e), np.array(b.e)

    def partial(k0, k1):
        if gemm is not None:
            rule = MMASIM_RULES[gemm]
            return np.array([[ref_chain(ea[i, k0:k1].tolist(), eb[j, k0:k1].tolist(), 0.0,
                                        rule, "fp8_e4m3", "fp8_e4m3", "fp32")
                              for j in range(cols)] for i in range(rows)])
        return ref_matmul(ea[:, k0:k1], eb[:, k0:k1].T, accum=accum)

    if a.kind == "tensor" and b.kind == "tensor":
        chunk = promote or k
        total = np.zeros((rows, cols))
        for k0 in range(0, k, chunk):
            part = partial(k0, k0 + chunk)
            total = part if chunk == k else np.vectorize(
                lambda s, t: ref_add(s, t, "fp32")[0])(total, part)
        alpha = mul32(a.scale(0, 0), b.scale(0, 0))
        return np.vectorize(lambda v: ref_round(Fraction(v) * Fraction(alpha), "fp32")[0])(
            total)
    chunk = min(a.block, b.block, k, promote or k)
    acc = np.zeros((rows, cols))
    for k0 in range(0, k, chunk):
        part = partial(k0, min(k0 + chunk, k))
        for i in range(rows):
            for j in range(cols):
                s = mul32(a.scale(i, k0), b.scale(j, k0))
                acc[i, j] = ref_fma(part[i, j], s, acc[i, j], "fp32")[0]
    return acc


def bf16(values) -> np.ndarray:
    return np.vectorize(lambda v: ref_round(Fraction(v) if math.isfinite(v) else v,
                                            "bf16")[0])(np.asarray(values, np.float64))


def inputs(seed: int):
    rng = np.random.default_rng(seed)
    x = fpsim.round(rng.normal(size=(M, K)) * np.exp(rng.normal(size=(M, K))), "bf16")
    x[3, 5] = 40.0  # an outlier
    w = fpsim.round(rng.normal(size=(N, K)) * 0.2, "fp32")
    g = fpsim.round(rng.normal(size=(M, N)) * 1e-3, "bf16")
    return np.asarray(x), np.asarray(w), np.asarray(g)


def run(policy, x, w, g, layer_weight=None):
    """(y, dx, dw) from fpsim: one Linear product forward, and backward from ``g``."""
    weight = layer_weight if layer_weight is not None else nn.Parameter(w)
    xt = fpsim.tensor(x, requires_grad=True, format="bf16")
    with policy:
        y = F.linear(xt, weight)
        y.backward(g)
    return y.data, xt.grad, weight.grad, weight


def reference(quantize, x, w, g, *, rht=False, accum="fp32", gemm=None, promote=None,
              wgrad=lambda v: np.vectorize(f32)(v)):
    """(y, dx, dw) of the reference: ``quantize(category, rows)`` gives each operand."""
    xr, wr, gr = x.tolist(), w.tolist(), g.tolist()
    opts = dict(accum=accum, gemm=gemm, promote=promote)
    qx, qw = quantize("act", xr), quantize("weight", wr)
    y = bf16(product(qx, qw, **opts))
    qg = quantize("grad", gr)
    qw_col = qw.transposed() if qw.kind == "tensor" else quantize("weight", w.T.tolist())
    dx = bf16(product(qg, qw_col, **opts))
    gt, xt = g.T.tolist(), x.T.tolist()
    if rht:
        gt, xt = hadamard(gt), hadamard(xt)
    qgt = qg.transposed() if qg.kind == "tensor" and not rht else quantize("grad", gt)
    qxt = qx.transposed() if qx.kind == "tensor" and not rht else quantize("act", xt)
    return y, dx, wgrad(product(qgt, qxt, **opts))


def assert_bits(got, want, what):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    bad = ~((got == want) & (np.signbit(got) == np.signbit(want)))
    assert not bad.any(), f"{what}: {bad.sum()} differ, first at {np.argwhere(bad)[0]}: " \
                          f"{got[bad][0]!r} != {want[bad][0]!r}"


def check(policy, quantize, seed=0, **ref):
    x, w, g = inputs(seed)
    y, dx, dw, _ = run(policy, x, w, g)
    want = reference(quantize, x, w, g, **ref)
    for got, exp, what in zip((y, dx, dw), want, ("y", "dx", "dw"), strict=True):
        assert_bits(got, exp, what)


HYBRID = {"act": "fp8_e4m3", "weight": "fp8_e4m3", "grad": "fp8_e5m2"}


def test_current_scaling_against_the_reference():
    check(parse("fp8_hybrid_current,order=sequential"),
          lambda cat, rows: current(rows, HYBRID[cat]))


def test_no_scaling_rounds_to_the_format_with_a_scale_of_one():
    check(parse("bf16,order=sequential,act=fp8_e4m3,weight=fp8_e4m3,grad=fp8_e5m2"),
          lambda cat, rows: per_tensor(rows, HYBRID[cat], 1.0, 1.0),
          wgrad=bf16)  # no wgrad scaling: the compute format


def test_delayed_scaling_uses_the_last_steps_amaxes():
    policy = parse("fp8_hybrid_delayed,order=sequential")
    x1, w, g1 = inputs(1)
    _, _, _, weight = run(policy, x1, w, g1)  # step 1: every scale is 1
    advance([weight])
    x2, _, g2 = inputs(2)
    weight.grad = None
    y, dx, dw, _ = run(policy, x2, w, g2, layer_weight=weight)
    amax = {"act": np.abs(x1).max(), "weight": np.abs(w).max(), "grad": np.abs(g1).max()}

    def quantize(cat, rows):
        scale = div32(MAXES[HYBRID[cat]], float(amax[cat]))  # margin 0: fp8_max * 2**0
        return per_tensor(rows, HYBRID[cat], scale, div32(1.0, scale))

    for got, exp, what in zip((y, dx, dw), reference(quantize, x2, w, g2),
                              ("y", "dx", "dw"), strict=True):
        assert_bits(got, exp, what)


def test_mxfp8_against_the_reference():
    mx = "mxfp8_e4m3:rule=transformer_engine:pad=on"
    check(parse(f"mxfp8,order=sequential,act={mx},weight={mx},grad={mx}"),
          lambda cat, rows: mx_te(rows))


def test_nvfp4_with_its_hadamard_transform_against_the_reference():
    # Gradients rounded to nearest here (stochastic rounding: test_recipes_training).
    policy = parse("nvfp4,order=sequential,grad=nvfp4")
    check(policy, lambda cat, rows: nvfp4(rows, tiles=cat == "weight"), rht=True)


@pytest.mark.parametrize("preset, gemm", [("mxfp8", "B200_MXF8F6F4"), ("nvfp4", "B200_NVF4")])
def test_block_scaled_instructions_against_the_reference(preset, gemm):
    # MX and NVFP4 operands multiplied by Blackwell's block-scaled MMAs, every product
    # (forward, data gradient, weight gradient over 16 tokens: one short block).
    if preset == "mxfp8":
        mx = "mxfp8_e4m3:rule=transformer_engine:pad=on"
        check(parse(f"mxfp8,gemm={gemm},act={mx},weight={mx},grad={mx}"),
              lambda cat, rows: mx_te(rows), gemm=gemm)
    else:
        check(parse(f"nvfp4,gemm={gemm},grad=nvfp4"),
              lambda cat, rows: nvfp4(rows, tiles=cat == "weight"), rht=True, gemm=gemm)


def test_a_block_scaled_instruction_cuts_what_an_accumulator_keeps():
    # Row 0 of X: 448, -448 and 2**-9 (e4m3's least subnormal) times W's 1, 1, 2**-9: the
    # instruction aligns the products at 448's exponent and cuts 2**-18 (25 fraction bits
    # below 2**8), where a binary32 accumulator adds it after the cancellation.
    x, w, g = inputs(0)
    x[0] = 0.0
    x[0, :3] = [448.0, -448.0, 2.0**-9]
    w[:, :3] = [1.0, 1.0, 2.0**-9]
    mx = "mxfp8_e4m3:rule=transformer_engine:pad=on"
    policy = f"mxfp8,act={mx},weight={mx},grad={mx}"
    want = reference(lambda cat, rows: mx_te(rows), x, w, g, gemm="B200_MXF8F6F4")
    for got, exp, what in zip(run(parse(f"{policy},gemm=B200_MXF8F6F4"), x, w, g), want,
                              ("y", "dx", "dw"), strict=False):
        assert_bits(got, exp, what)
    assert not want[0][0].any()
    y_acc = run(parse(f"{policy},order=sequential"), x, w, g)[0]
    assert (y_acc[0] == bf16(2.0**-18)).all()


def test_transformer_engines_blockwise_power_of_two_scales_against_the_reference():
    # The fp8_blockwise preset's scales (pad=on: K = 32 and 16 tokens are short blocks).
    pad = ",".join(f"{c}={s}:pow2=on:pad=on" for c, s in (
        ("act", "fp8_block1x128"), ("weight", "fp8_block128x128"), ("grad", "fp8_block1x128")))
    check(parse(f"fp8_blockwise,{pad}"),
          lambda cat, rows: blockwise_te(rows, tiles=cat == "weight"), gemm="H100_FP8")


def test_blockwise_fp8_on_hoppers_accumulator_against_the_reference():
    # DeepSeek-V3's scales, amax / 448 (pow2 off).
    pad = ",".join(f"{c}={s}:pad=on" for c, s in (
        ("act", "fp8_block1x128"), ("weight", "fp8_block128x128"), ("grad", "fp8_block1x128")))
    check(parse(f"fp8_blockwise,{pad}"),
          lambda cat, rows: blockwise(rows, tiles=cat == "weight"), gemm="H100_FP8")


@pytest.mark.parametrize("accum", ["bf16", "fp32"])
def test_a_reduced_accumulator_promoted_every_n_against_the_reference(accum):
    check(parse(f"fp8_hybrid_current,order=sequential,accum={accum},promote=8"),
          lambda cat, rows: current(rows, HYBRID[cat]), accum=accum, promote=8)


def test_blockwise_chunks_promoted_with_their_scales_against_the_reference():
    # DeepSeek-V3's promotion inside a block: each chunk of 8 products added as
    # fp32(acc + chunk * fp32(scale_a * scale_b)), one fused multiply-add.
    pad = ",".join(f"{c}={s}:pad=on" for c, s in (
        ("act", "fp8_block1x128"), ("weight", "fp8_block128x128"), ("grad", "fp8_block1x128")))
    check(parse(f"fp8_blockwise,gemm=none,promote=8,order=sequential,{pad}"),
          lambda cat, rows: blockwise(rows, tiles=cat == "weight"), promote=8)


def test_the_epilogue_rounds_the_scaled_sum_to_binary32_once():
    # sum (1 + 2**-8 - 2**-23) times alpha (1 + 2**-23) is 1 + 2**-8 + 2**-31 - 2**-46:
    # binary32 rounds it to 1 + 2**-8, a tie that bf16 then breaks to 1.0; without the
    # binary32 step bf16 would round it up.
    from fpsim.precision.recipes import Recipe
    from fpsim.precision.scaling import Operand, product

    a = Operand(np.array([[1 + 2**-8 - 2**-23]]), fpsim.format("fp32"),
                np.array([[1 + 2**-23]]), 1)
    b = Operand(np.array([[1.0]]), fpsim.format("fp32"), np.array([[1.0]]), 1)
    got = product(a, b, parse("bf16,order=sequential"), Recipe(), ("act", "weight"))
    alpha = mul32(1 + 2**-23, 1.0)
    assert got[0, 0] == ref_round(Fraction(1 + 2**-8 - 2**-23) * Fraction(alpha), "fp32")[0]
    assert bf16(got)[0, 0] == 1.0
