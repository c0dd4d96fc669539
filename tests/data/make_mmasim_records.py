"""Record MMA-Sim's outputs for the instructions fpsim.hw's presets model.

Writes tests/data/mmasim_records.npz and tests/data/mmasim_block_scaled.npz, which
tests/test_mmasim_records.py and tests/test_block_scaled_records.py read (the tests need
neither torch nor mmasim). Run it where the ``mmasim`` package (PyPI, Xie et al., arXiv
2511.10909) and a CPU build of torch are installed:

    python3 tests/data/make_mmasim_records.py [--block-scaled | --promoted | --cdna3-fp8]

(``--block-scaled``: only the second file; ``--promoted``: only
tests/data/mmasim_promoted.npz, which tests/test_promoted_products.py reads;
``--cdna3-fp8``: only tests/data/mmasim_cdna3_fp8.npz, which tests/test_amd_presets.py
reads.)

For each input format (fp16, bf16, tf32, fp8 e4m3 and e5m2) it draws vectors a,
b of K = 64 values and an fp32 c in nine classes of input (random, wide range,
cancelling, subnormal, non-finite, absorbing, zero factors, overflowing,
underflowing), and asks MMA-Sim's ``dpa`` for c + a.b as each preset's
instruction computes it: one instruction (the first block of K) and the
instruction chained over all of K (MMA-Sim's dpa adds K in blocks, each block's
result the next one's c). fp8 instructions read A in one fp8 format and B in
either (every pairing); the fp16-output one reads c rounded to fp16 (clamped
to its largest finite value, so that the overflowing class overflows from
finite inputs). AMD's mfma instructions (``AMD``: CDNA3's fp16, bf16 and xf32,
CDNA2's and CDNA1's fp16 and bf16) read the fp16, bf16 and tf32 data, and fp32's
(``FP32_MFMA``) its own.

The block-scaled instructions (``BLOCK_SCALED``: Blackwell's and RTX Blackwell's
kind::mxf8f6f4 with E8M0 scales, kind::mxf4 and kind::mxf4nvf4 with E8M0 or UE4M3
scales) get their own draws (``block_scaled``): element codes, scale codes and an fp32 c
in nine classes of input, asked of MMA-Sim's ``dpa`` one instruction at a time (each
with its own scales) and chained over K = 128, each result the next instruction's c.

DeepSeek-V3's FP8 GEMM (``promoted``): rows of K = 256 in eight classes of input, each
quantized per 128 of K as DeepSeek-V3 does (e4m3, binary32 scales amax / 448), and
MMA-Sim's Hopper fp8 ``wgmma`` chained over each chunk of 128 from +0: the partial sums
that ``fpsim.accumulation.scaled.promoted_matmul`` promotes with the scales.

AMD CDNA3's fp8 and bf8 ``mfma`` (``cdna3_fp8``): e4m3fnuz and e5m2fnuz data of the nine
classes (as ``draw``), every pairing, one step of 16 products and chained over K = 64.
"""

from __future__ import annotations

import json
import sys
from importlib.metadata import version
from pathlib import Path

import numpy as np
import torch
from mmasim.amd import MFMA
from mmasim.nv_ptx import MMA, WGMMA, MMABlockScale, TCGen05MMA, TCGen05MMABlockScale

K = 64
PER_CLASS = 32
CLASSES = ("random", "wide", "cancel", "subnormal", "nonfinite", "absorb", "zeros",
           "overflow", "underflow")
# format -> (fraction bits, emin, emax)
FORMATS = {"fp16": (10, -14, 15), "bf16": (7, -126, 127), "tf32": (10, -126, 127),
           "fp8_e4m3": (3, -6, 8), "fp8_e5m2": (2, -14, 15), "fp32": (23, -126, 127)}
# AMD's fp32 mfma (MMA-Sim: a chain of fp32 FMAs, mmasim/arithmetic/fma.py) per CDNA
# architecture; fpsim.matmul's sequential fp32 accumulation with exact products.
FP32_MFMA = {"CDNA1": "f32_16x16x4f32", "CDNA2": "f32_16x16x4f32", "CDNA3": "f32_16x16x4_f32"}
TORCH_FP8 = {"fp8_e4m3": torch.float8_e4m3fn, "fp8_e5m2": torch.float8_e5m2}
# AMD CDNA3's fp8 (e4m3fnuz) and bf8 (e5m2fnuz): (fraction bits, emin, emax), torch dtype.
FNUZ = {"fp8_e4m3fnuz": (3, -7, 7), "fp8_e5m2fnuz": (2, -15, 15)}
TORCH_FNUZ = {"fp8_e4m3fnuz": torch.float8_e4m3fnuz, "fp8_e5m2fnuz": torch.float8_e5m2fnuz}
# CDNA3's fp8 mfma (MMA_GTR_FDPA, 16 products a step) by (A's, B's format).
CDNA3_FP8 = {("fp8_e4m3fnuz", "fp8_e4m3fnuz"): "f32_32x32x16_fp8_fp8",
             ("fp8_e4m3fnuz", "fp8_e5m2fnuz"): "f32_32x32x16_fp8_bf8",
             ("fp8_e5m2fnuz", "fp8_e4m3fnuz"): "f32_32x32x16_bf8_fp8",
             ("fp8_e5m2fnuz", "fp8_e5m2fnuz"): "f32_32x32x16_bf8_bf8"}
# (preset, input format) -> (MMA-Sim architecture, instruction)
INSTRUCTIONS = {
    ("V100", "fp16"): ("Volta", "m8n8k4.f32.f16.f16.f32"),
    ("A100", "fp16"): ("Ampere", "m16n8k16.f32.f16.f16.f32"),
    ("A100", "bf16"): ("Ampere", "m16n8k16.f32.bf16.bf16.f32"),
    ("A100", "tf32"): ("Ampere", "m16n8k8.f32.tf32.tf32.f32"),
    ("H100", "fp16"): ("Hopper", "m16n8k16.f32.f16.f16.f32"),
    ("H100", "bf16"): ("Hopper", "m16n8k16.f32.bf16.bf16.f32"),
    ("H100", "tf32"): ("Hopper", "m16n8k8.f32.tf32.tf32.f32"),
    ("B200", "fp16"): ("Blackwell", "m16n8k16.f32.f16.f16.f32"),
    ("B200", "bf16"): ("Blackwell", "m16n8k16.f32.bf16.bf16.f32"),
    ("B200", "tf32"): ("Blackwell", "m16n8k8.f32.tf32.tf32.f32"),
    ("T4", "fp16"): ("Turing", "m16n8k8.f32.f16.f16.f32"),
    ("L40", "fp16"): ("Ada Lovelace", "m16n8k16.f32.f16.f16.f32"),
    ("L40", "bf16"): ("Ada Lovelace", "m16n8k16.f32.bf16.bf16.f32"),
    ("L40", "tf32"): ("Ada Lovelace", "m16n8k8.f32.tf32.tf32.f32"),
    ("RTX5090", "fp16"): ("RTX Blackwell", "m16n8k16.f32.f16.f16.f32"),
    ("RTX5090", "bf16"): ("RTX Blackwell", "m16n8k16.f32.bf16.bf16.f32"),
    ("RTX5090", "tf32"): ("RTX Blackwell", "m16n8k8.f32.tf32.tf32.f32"),
}
# AMD matrix cores (preset, input format) -> (MMA-Sim architecture, mfma suffix,
# products per block): CDNA3's fused dot product (fpsim.hw.MI300, MI300_BF16 and
# MI300_XF32, mmasim/arithmetic/fdpa.py's tr_fdpa); CDNA2's flush-to-zero adds in pairs
# (ftz_mul_add.py: fp16 and bf16_1k in groups of 4, bf16 in pairs) and CDNA1's exact
# dot product (fdpa.py's e_fdpa), recorded for the comparison docs/hardware-models.md
# gives (fpsim has no preset of them).
AMD = {
    ("MI300", "fp16"): ("CDNA3", "f32_32x32x8_f16", 8),
    ("MI300", "bf16"): ("CDNA3", "f32_32x32x8_bf16", 8),
    ("MI300", "tf32"): ("CDNA3", "f32_32x32x4_xf32", 4),
    ("MI200", "fp16"): ("CDNA2", "f32_32x32x8f16", 4),
    ("MI200", "bf16"): ("CDNA2", "f32_32x32x8bf16_1k", 4),
    ("MI200", "bf16pairs"): ("CDNA2", "f32_32x32x4bf16", 2),
    ("MI100", "fp16"): ("CDNA1", "f32_32x32x8f16", 4),
    ("MI100", "bf16"): ("CDNA1", "f32_32x32x4bf16", 2),
}
# Products per instruction block: MMA-Sim's L_max (8 bytes of inputs on Volta, 16 on
# Ampere, 32 on Hopper and Blackwell), and fpsim's block (fpsim.hw.TF32's presets).
BLOCK = {("V100", "fp16"): 4, ("A100", "fp16"): 8, ("A100", "bf16"): 8, ("A100", "tf32"): 4,
         ("H100", "fp16"): 16, ("H100", "bf16"): 16, ("H100", "tf32"): 8,
         ("B200", "fp16"): 16, ("B200", "bf16"): 16, ("B200", "tf32"): 8,
         ("T4", "fp16"): 8, ("L40", "fp16"): 8, ("L40", "bf16"): 8, ("L40", "tf32"): 4,
         ("RTX5090", "fp16"): 16, ("RTX5090", "bf16"): 16, ("RTX5090", "tf32"): 8}
# fp8 presets -> (MMA-Sim class, architecture, instruction with {d}, {a}, {b} to fill
# in, output format, products per block); each is recorded for every pairing of A's
# and B's fp8 formats.
FP8 = {
    "L40_FP8": (MMA, "Ada Lovelace", "m16n8k32.f32.{a}.{b}.f32", "fp32", 16),
    "H100_FP8": (WGMMA, "Hopper", "m64n8k32.f32.{a}.{b}", "fp32", 32),
    "H100_FP8_F16": (WGMMA, "Hopper", "m64n8k32.f16.{a}.{b}", "fp16", 32),
    "B200_FP8": (TCGen05MMA, "Blackwell", "m64n8k32.kind::f8f6f4.f32.{a}.{b}", "fp32", 32),
    "RTX5090_FP8": (MMA, "RTX Blackwell", "m16n8k32.kind::f8f6f4.f32.{a}.{b}.f32", "fp32", 32),
}
# Blackwell's kind::f8f6f4 also reads fp6 and fp4 (MMA-Sim: one code per uint8, fp6 in
# bits 5:0, fp4 in bits 5:2): every pairing with at least one of them, random codes.
F8F6F4 = ("B200_FP8", "RTX5090_FP8")
FP6_FP4 = {"fp6_e3m2": 0, "fp6_e2m3": 0, "fp4_e2m1": 2}  # format -> shift of its code


def to_format(x: np.ndarray, fmt: str) -> torch.Tensor:
    """float64 values rounded (nearest even) to fmt, as the torch dtype MMA-Sim reads."""
    t = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float64))
    if fmt == "fp16":
        return t.to(torch.float16)
    if fmt in TORCH_FP8:
        return t.to(torch.float32).to(TORCH_FP8[fmt])
    if fmt in TORCH_FNUZ:
        return t.to(torch.float32).to(TORCH_FNUZ[fmt])
    if fmt == "fp32":
        return t.to(torch.float32)
    if fmt == "bf16":
        return t.to(torch.float32).to(torch.bfloat16)
    bits = t.to(torch.float32).view(torch.int32)
    # tf32: 10 fraction bits, nearest even on the 13 bits dropped (no NaN/inf rounding).
    finite = t.to(torch.float32).isfinite()
    low = bits & 0x1FFF
    keep = bits & ~0x1FFF
    up = (low > 0x1000) | ((low == 0x1000) & ((keep >> 13) & 1).bool())
    rounded = torch.where(finite & up, keep + 0x2000, torch.where(finite, keep, bits))
    return rounded.view(torch.float32)


def draw(rng: np.random.Generator, cls: str, fmt: str) -> tuple[np.ndarray, ...]:
    """(a, b, c) of one class: a, b (PER_CLASS, K) in float64, c (PER_CLASS,)."""
    t, emin, emax = {**FORMATS, **FNUZ}[fmt]
    n = (PER_CLASS, K)
    sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)

    def vals(lo: int, hi: int) -> np.ndarray:
        s = np.where(rng.random(n) < 0.5, -1.0, 1.0)
        return s * (1 + rng.integers(0, 1 << t, n) / 2.0**t) * np.exp2(rng.integers(lo, hi + 1, n))

    c_sign = np.where(rng.random(PER_CLASS) < 0.5, -1.0, 1.0)
    c = c_sign * (1 + rng.random(PER_CLASS)) * np.exp2(rng.integers(-6, 7, PER_CLASS))
    a, b = vals(-6, 6), vals(-6, 6)
    if cls == "wide":
        a, b = vals(emin - t, emax), vals(emin - t, emax)
        c = c_sign * (1 + rng.random(PER_CLASS)) * np.exp2(rng.integers(-149, 128, PER_CLASS))
    elif cls == "cancel":
        # The second half of each vector cancels the first exactly, plus a few tiny terms.
        a[:, K // 2:], b[:, K // 2:] = -a[:, : K // 2], b[:, : K // 2]
        a[:, ::7] *= 2.0**-20
        c = np.where(rng.random(PER_CLASS) < 0.5, 0.0, c * 2.0**-30)
    elif cls == "subnormal":
        sub = sign * rng.integers(1, 1 << t, n) * 2.0 ** (emin - t)
        a = np.where(rng.random(n) < 0.5, sub, vals(emin, emin + 4))
        b = np.where(rng.random(n) < 0.3, sub, vals(-3, 3))
        c = c_sign * rng.integers(0, 1 << 23, PER_CLASS) * 2.0**-149
    elif cls == "nonfinite":
        special = np.array([np.inf, -np.inf, np.nan])
        for x in (a, b):
            hit = rng.random(n) < 0.03
            x[hit] = rng.choice(special, hit.sum())
        hit = rng.random(PER_CLASS) < 0.2
        c[hit] = rng.choice(special, hit.sum())
    elif cls == "absorb":
        c = c_sign * (1 + rng.random(PER_CLASS)) * np.exp2(rng.integers(10, 40, PER_CLASS))
    elif cls == "zeros":
        big = np.exp2(emax) * np.where(rng.random(n) < 0.5, -1.0, 1.0)
        zero = rng.random(n) < 0.3
        huge = rng.random(n) < 0.5
        a = np.where(zero, 0.0 * sign, vals(emin // 2, emin // 4 + 2))
        b = np.where(zero & huge, big, vals(emin // 2, emin // 4 + 2))
        c = np.where(rng.random(PER_CLASS) < 0.6, 0.0 * c_sign, c * 2.0 ** (emin // 2))
    elif cls == "overflow":
        hi = min(emax, 63)
        a, b = np.abs(vals(hi - 2, hi)), np.abs(vals(hi - 2, hi))
        a *= np.where(rng.random((PER_CLASS, 1)) < 0.5, -1.0, 1.0)
        c = np.sign(a[:, 0]) * (2 - 2.0**-23) * 2.0**127 * np.where(
            rng.random(PER_CLASS) < 0.5, 1.0, 2.0**-3)
    elif cls == "underflow":
        # Products below fp32's smallest subnormal 2**-149 (bf16, tf32), kept on the
        # 2**(E - F) grid: a nonzero sum that truncates to zero (fp16: its smallest).
        lo = -77 if fmt in ("bf16", "tf32") else emin - t
        a, b = vals(lo - 2, lo + 2), vals(lo - 2, lo + 2)
        c = np.where(rng.random(PER_CLASS) < 0.8, 0.0 * c_sign, c_sign * 2.0**-149)
    return a, b, c


# Block-scaled instructions: name -> (MMA-Sim class, architecture, instruction with {a},
# {b} to fill in, scale format, elements per scale, products per instruction).
BLOCK_SCALED = {
    "B200_MXF8F6F4": (TCGen05MMABlockScale, "Blackwell",
                      "m128n8k32.kind::mxf8f6f4.block32.f32.{a}.{b}.ue8m0", "e8m0", 32, 32),
    "RTX5090_MXF8F6F4": (MMABlockScale, "RTX Blackwell",
                         "m16n8k32.kind::mxf8f6f4.block32.f32.{a}.{b}.f32.ue8m0", "e8m0", 32,
                         32),
    "B200_MXF4": (TCGen05MMABlockScale, "Blackwell",
                  "m128n8k64.kind::mxf4.block32.f32.e2m1.e2m1.ue8m0", "e8m0", 32, 64),
    "B200_MXF4NVF4_E8M0": (TCGen05MMABlockScale, "Blackwell",
                           "m128n8k64.kind::mxf4nvf4.block32.f32.e2m1.e2m1.ue8m0", "e8m0", 32,
                           64),
    "B200_MXF4NVF4_B16": (TCGen05MMABlockScale, "Blackwell",
                          "m128n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.ue8m0", "e8m0", 16,
                          64),
    "B200_NVF4": (TCGen05MMABlockScale, "Blackwell",
                  "m128n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.ue4m3", "ue4m3", 16, 64),
    "RTX5090_MXF4": (MMABlockScale, "RTX Blackwell",
                     "m16n8k64.kind::mxf4.block32.f32.e2m1.e2m1.f32.ue8m0", "e8m0", 32, 64),
    "RTX5090_NVF4": (MMABlockScale, "RTX Blackwell",
                     "m16n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.f32.ue4m3", "ue4m3", 16, 64),
}
SCALED_K = 128
# Element formats of kind::mxf8f6f4: (PTX name, fpsim name, bits).
F8F6F4_TYPES = {"e4m3": ("fp8_e4m3", 8), "e5m2": ("fp8_e5m2", 8), "e3m2": ("fp6_e3m2", 6),
                "e2m3": ("fp6_e2m3", 6), "e2m1": ("fp4_e2m1", 4)}


# The largest finite magnitude code of each element format (above it: inf/NaN in fp8).
TOP_CODE = {"e4m3": 0x7E, "e5m2": 0x7B, "e3m2": 0x1F, "e2m3": 0x1F, "e2m1": 0x7}


def draw_codes(rng: np.random.Generator, cls: str, ptx: str, n: tuple[int, ...]) -> np.ndarray:
    """Element codes of one class (sign in the top bit); inf and NaN codes in the
    non-finite class only."""
    bits = F8F6F4_TYPES[ptx][1]
    top = TOP_CODE[ptx]
    sign = rng.integers(0, 2, n) << (bits - 1)
    mag = rng.integers(0, top + 1, n)
    if cls in ("subnormal", "underflow"):  # zero exponent field: the smallest magnitudes
        fraction = {8: 3, 6: 2, 4: 1}[bits]  # at most the e4m3/e3m2/e2m1 fraction widths
        mag = np.where(rng.random(n) < 0.6, rng.integers(0, 1 << fraction, n), mag)
    elif cls == "zeros":
        mag = np.where(rng.random(n) < 0.5, 0, mag)
    elif cls == "overflow":  # the largest finite magnitudes
        mag = top - rng.integers(0, 4, n)
    elif cls == "nonfinite" and bits == 8:  # a few infinities (e5m2) and NaNs
        special = np.where(rng.random(n) < 0.5, 0x7F, 0x7C if ptx == "e5m2" else 0x7F)
        mag = np.where(rng.random(n) < 0.01, special, mag)
    codes = sign | mag
    if cls == "cancel":  # in each group of 16, the second half negates the first
        g = codes.reshape(*n[:-1], -1, 2, 8)
        g[..., 1, :] = g[..., 0, :] ^ (1 << (bits - 1))
    return codes.astype(np.uint8)


def rows_of(cls: str) -> slice:
    i = CLASSES.index(cls)
    return slice(i * PER_CLASS, (i + 1) * PER_CLASS)


def draw_scales(rng: np.random.Generator, cls: str, fmt: str, n: tuple[int, ...]) -> np.ndarray:
    """Scale codes of one class: E8M0 (0..254 values, 255 NaN) or UE4M3 (0..126, 127 NaN)."""
    if fmt == "e8m0":
        codes = rng.integers(120, 135, n)
        if cls in ("wide", "absorb"):
            codes = rng.integers(0, 255, n)
        elif cls == "overflow":
            codes = rng.integers(240, 255, n)
        elif cls == "subnormal":
            codes = rng.integers(0, 12, n)
        elif cls == "underflow":  # tiny scaled products: sums near 2**-149 and the floor
            codes = rng.integers(56, 72, n)
        elif cls == "nonfinite":
            codes = np.where(rng.random(n) < 0.1, 255, codes)
    else:
        codes = rng.integers(48, 72, n)  # around 1 (exponent field 6..8)
        if cls in ("wide", "absorb"):
            codes = rng.integers(0, 127, n)
        elif cls == "overflow":
            codes = rng.integers(112, 127, n)
        elif cls in ("underflow", "subnormal"):
            codes = rng.integers(0, 8, n)  # zero and the subnormals
        elif cls == "zeros":
            codes = np.where(rng.random(n) < 0.3, 0, codes)
        elif cls == "nonfinite":
            codes = np.where(rng.random(n) < 0.1, 127, codes)
    return codes.astype(np.uint8)


def draw_c(rng: np.random.Generator, cls: str, n: int) -> np.ndarray:
    """fp32 c of one class."""
    sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    c = sign * (1 + rng.random(n)) * np.exp2(rng.integers(-6, 7, n))
    if cls == "wide":
        c = sign * (1 + rng.random(n)) * np.exp2(rng.integers(-149, 128, n))
    elif cls in ("zeros", "cancel", "underflow"):
        c = np.where(rng.random(n) < 0.6, 0.0 * sign, sign * 2.0 ** rng.integers(-149, -120, n))
    elif cls == "subnormal":
        c = sign * rng.integers(0, 1 << 23, n) * 2.0**-149
    elif cls == "nonfinite":
        c = np.where(rng.random(n) < 0.3, rng.choice([np.inf, -np.inf, np.nan], n), c)
    elif cls == "absorb":
        c = sign * (1 + rng.random(n)) * np.exp2(rng.integers(20, 60, n))
    elif cls == "overflow":
        c = sign * (2 - 2.0**-23) * 2.0**127 * np.where(rng.random(n) < 0.5, 1.0, 2.0**-3)
    return np.asarray(c, np.float32)


def element_tensor(codes: np.ndarray, ptx: str) -> torch.Tensor:
    """Element codes as MMA-Sim reads them: fp8 as its torch dtype, fp6/fp4 as uint8 codes
    (fp6 in bits 5:0, fp4 in bits 5:2) for kind::mxf8f6f4, fp4 values for kind::mxf4*."""
    t = torch.from_numpy(np.ascontiguousarray(codes))
    if ptx == "e4m3":
        return t.view(torch.float8_e4m3fn)
    if ptx == "e5m2":
        return t.view(torch.float8_e5m2)
    return t << (2 if ptx == "e2m1" else 0)


FP4_VALUES = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                           -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0], dtype=torch.float16)


def scale_tensor(codes: np.ndarray, fmt: str) -> torch.Tensor:
    t = torch.from_numpy(np.ascontiguousarray(codes))
    return t.view(torch.float8_e8m0fnu if fmt == "e8m0" else torch.float8_e4m3fn)


def block_scaled(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Records of every block-scaled instruction (``BLOCK_SCALED``), every pairing of
    kind::mxf8f6f4's element formats."""
    out: dict[str, np.ndarray] = {}
    for ptx in F8F6F4_TYPES:
        for x in "ab":
            out[f"{ptx}_{x}"] = np.concatenate(
                [draw_codes(rng, cls, ptx, (PER_CLASS, SCALED_K)) for cls in CLASSES])
        # B's second half of each group of 16 repeats its first: A's negation cancels it.
        cancel = out[f"{ptx}_b"][rows_of("cancel")].reshape(PER_CLASS, -1, 2, 8)
        cancel[..., 1, :] = cancel[..., 0, :]
        out[f"{ptx}_b"][rows_of("cancel")] = cancel.reshape(PER_CLASS, SCALED_K)
    for fmt in ("e8m0", "ue4m3"):
        for x in "ab":
            for block in (32, 16):
                if fmt == "ue4m3" and block == 32:
                    continue
                out[f"{fmt}_{block}_{x}"] = np.concatenate(
                    [draw_scales(rng, cls, fmt, (PER_CLASS, SCALED_K // block))
                     for cls in CLASSES])
    out["c"] = np.concatenate([draw_c(rng, cls, PER_CLASS) for cls in CLASSES])
    about = {}
    for name, (kind, arch, shape, fmt, block, k) in BLOCK_SCALED.items():
        pairs = ([(a, b) for a in F8F6F4_TYPES for b in F8F6F4_TYPES] if "{a}" in shape
                 else [("e2m1", "e2m1")])
        for pa, pb in pairs:
            key = name if "{a}" not in shape else f"{name}_{pa}_{pb}"
            mma = kind(arch, shape.format(a=pa, b=pb))
            a, b = out[f"{pa}_a"], out[f"{pb}_b"]
            if k == 32:
                ta, tb = element_tensor(a, pa), element_tensor(b, pb)
            else:  # kind::mxf4*: fp4 values (MMA-Sim unpacks only uint8 pairs)
                ta = FP4_VALUES[torch.from_numpy(a.astype(np.int64))]
                tb = FP4_VALUES[torch.from_numpy(b.astype(np.int64))]
            sa = scale_tensor(out[f"{fmt}_{block}_a"], fmt)
            sb = scale_tensor(out[f"{fmt}_{block}_b"], fmt)
            c = torch.from_numpy(out["c"].copy())
            results = []
            for k0 in range(0, SCALED_K, k):
                s0, s1 = k0 // block, (k0 + k) // block
                c = mma.dpa(ta[:, k0:k0 + k].contiguous(), tb[:, k0:k0 + k].contiguous(), c,
                            sa[:, s0:s1].contiguous(), sb[:, s0:s1].contiguous())
                results.append(c.clone())
            out[f"{key}_single"] = results[0].view(torch.int32).numpy().view(np.uint32)
            out[f"{key}_chained"] = results[-1].view(torch.int32).numpy().view(np.uint32)
            about[key] = {"model": name, "a": F8F6F4_TYPES[pa][0], "b": F8F6F4_TYPES[pb][0],
                          "scale": fmt, "scale_block": block, "k": k,
                          "instruction": [arch, mma.shape_and_type]}
    out["about"] = np.array(json.dumps({
        "mmasim": version("mmasim"), "torch": version("torch"), "K": SCALED_K,
        "per_class": PER_CLASS, "classes": CLASSES, "instructions": about}))
    return out


# DeepSeek-V3's FP8 GEMM on Hopper: wgmma k32 e4m3 chained over each chunk of 128 of K,
# from +0 (MMA-Sim's WGMMA, as H100_FP8), on blockwise-quantized data.
PROMOTED_K, PROMOTED_CHUNK = 256, 128
PROMOTED_CLASSES = ("random", "wide", "cancel", "outlier", "zeros", "nonfinite", "tiny",
                    "huge")


def draw_blockwise(rng: np.random.Generator, cls: str, operand: str) -> np.ndarray:
    """float32 data (PER_CLASS, PROMOTED_K) of one class, to be quantized per 128 of K."""
    n = (PER_CLASS, PROMOTED_K)
    x = rng.normal(size=n)
    if cls == "wide":
        x = np.where(rng.random(n) < 0.5, -1.0, 1.0) * np.exp2(rng.uniform(-30, 30, n))
    elif cls == "cancel":
        # In each wgmma's 32 products, A's second 16 negate its first and B's repeat; a
        # tenth of A's first ones are 9/8 of their partner's magnitude: small residuals.
        g = x.reshape(PER_CLASS, -1, 2, 16)
        g[:, :, 1] = -g[:, :, 0] if operand == "a" else g[:, :, 0]
        if operand == "a":
            g[:, :, 0] *= np.where(rng.random(g[:, :, 0].shape) < 0.1, 1.125, 1.0)
    elif cls == "outlier":  # one large value per block: the others small or subnormal
        x[:, ::PROMOTED_CHUNK] *= 2.0**14
    elif cls == "zeros":
        x = np.where(rng.random(n) < 0.3, 0.0, x)
        x[rng.random(PER_CLASS) < 0.5, :PROMOTED_CHUNK] = 0.0
    elif cls == "nonfinite":
        x = np.where(rng.random(n) < 0.005, np.nan, x)
    elif cls == "tiny":  # scales below binary32's normals
        x = x * 2.0**-135
    elif cls == "huge":  # scales whose products overflow binary32
        x = x * 2.0**120
    return x.astype(np.float32)


def quantize_blockwise(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(e4m3 codes, binary32 scales per 128 of K): DeepSeek-V3's s = amax / 448 and
    x / s, each in binary32 (a zero block keeps its zeros)."""
    blocks = x.reshape(PER_CLASS, -1, PROMOTED_CHUNK)
    with np.errstate(all="ignore"):
        amax = np.abs(blocks).max(axis=-1)
        amax = np.where(np.isnan(blocks).any(axis=-1), np.nan, amax).astype(np.float32)
        s = (amax / np.float32(448.0)).astype(np.float32)
        y = np.where(s[..., None] == 0, blocks, blocks / s[..., None]).astype(np.float32)
    t = torch.from_numpy(y.reshape(PER_CLASS, PROMOTED_K).copy()).to(torch.float8_e4m3fn)
    return t.view(torch.uint8).numpy(), s


def promoted(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Blockwise-quantized A and B rows (codes, scales), c, and MMA-Sim's wgmma partial sum
    of each chunk of 128 (from +0): the records of ``promoted_matmul``."""
    out: dict[str, np.ndarray] = {}
    for x in "ab":
        parts = [quantize_blockwise(draw_blockwise(rng, cls, x)) for cls in PROMOTED_CLASSES]
        out[f"{x}_codes"] = np.concatenate([p[0] for p in parts])
        out[f"{x}_scales"] = np.concatenate([p[1] for p in parts])
    out["c"] = np.concatenate([draw_c(rng, "random", PER_CLASS) for _ in PROMOTED_CLASSES])
    mma = WGMMA("Hopper", "m64n8k32.f32.e4m3.e4m3")
    a = torch.from_numpy(out["a_codes"]).view(torch.float8_e4m3fn)
    b = torch.from_numpy(out["b_codes"]).view(torch.float8_e4m3fn)
    partials = []
    for k0 in range(0, PROMOTED_K, PROMOTED_CHUNK):
        zero = torch.zeros(a.shape[0], dtype=torch.float32)
        d = mma.dpa(a[:, k0:k0 + PROMOTED_CHUNK].contiguous(),
                    b[:, k0:k0 + PROMOTED_CHUNK].contiguous(), zero)
        partials.append(d.view(torch.int32).numpy().view(np.uint32))
    out["partials"] = np.stack(partials, axis=-1)
    out["about"] = np.array(json.dumps({
        "mmasim": version("mmasim"), "torch": version("torch"), "K": PROMOTED_K,
        "chunk": PROMOTED_CHUNK, "per_class": PER_CLASS, "classes": PROMOTED_CLASSES,
        "instruction": ["Hopper", mma.shape_and_type]}))
    return out


def cdna3_fp8(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """AMD CDNA3's fp8/bf8 mfma on every pairing of e4m3fnuz and e5m2fnuz (MMA-Sim's
    MMA_GTR_FDPA, 16 products a step): nine classes of input, one step and chained over K."""
    out: dict[str, np.ndarray] = {}
    data = {}
    for fmt in FNUZ:
        parts = [draw(rng, cls, fmt) for cls in CLASSES]
        a = to_format(np.concatenate([p[0] for p in parts]), fmt)
        b = to_format(np.concatenate([p[1] for p in parts]), fmt)
        c = torch.from_numpy(np.concatenate([p[2] for p in parts])).to(torch.float32)
        out[f"{fmt}_a"], out[f"{fmt}_b"] = a.view(torch.uint8).numpy(), b.view(torch.uint8).numpy()
        out[f"{fmt}_c"] = c.numpy()
        data[fmt] = a, b, c
    about = {}
    for (fa, fb), suffix in CDNA3_FP8.items():
        mfma = MFMA("CDNA3", suffix)
        key = f"MI300_{fa}_{fb}"
        a, b, c = data[fa][0], data[fb][1], data[fa][2]
        for how, k in (("single", 16), ("chained", K)):
            d = mfma.dpa(a[:, :k].contiguous(), b[:, :k].contiguous(), c.clone())
            out[f"{key}_{how}"] = d.view(torch.int32).numpy().view(np.uint32)
        about[key] = {"a": fa, "b": fb, "instruction": ["CDNA3", suffix], "step": 16}
    out["about"] = np.array(json.dumps({
        "mmasim": version("mmasim"), "torch": version("torch"), "K": K,
        "per_class": PER_CLASS, "classes": CLASSES, "instructions": about}))
    return out


def main() -> None:
    flags = set(sys.argv[1:])
    if "--cdna3-fp8" in flags:
        np.savez_compressed(Path(__file__).with_name("mmasim_cdna3_fp8.npz"),
                            **cdna3_fp8(np.random.default_rng(20261129)))
        return
    if "--promoted" in flags:
        np.savez_compressed(Path(__file__).with_name("mmasim_promoted.npz"),
                            **promoted(np.random.default_rng(20261128)))
        return
    rng = np.random.default_rng(20261127)
    np.savez_compressed(Path(__file__).with_name("mmasim_block_scaled.npz"), **block_scaled(rng))
    if "--block-scaled" in flags:
        return
    out: dict[str, np.ndarray] = {}
    rng = np.random.default_rng(20261125)
    inputs: dict[str, tuple[torch.Tensor, ...]] = {}
    for fmt in FORMATS:
        parts = [draw(rng, cls, fmt) for cls in CLASSES]
        a = to_format(np.concatenate([p[0] for p in parts]), fmt)
        b = to_format(np.concatenate([p[1] for p in parts]), fmt)
        c = torch.from_numpy(np.concatenate([p[2] for p in parts])).to(torch.float32)
        if fmt in ("tf32", "fp32"):
            out[f"{fmt}_a"], out[f"{fmt}_b"] = a.numpy(), b.numpy()
        elif fmt not in TORCH_FP8:
            out[f"{fmt}_a"] = a.view(torch.int16).numpy().view(np.uint16)
            out[f"{fmt}_b"] = b.view(torch.int16).numpy().view(np.uint16)
        out[f"{fmt}_c"] = c.numpy()
        if fmt in TORCH_FP8:
            out[f"{fmt}_a"] = a.view(torch.uint8).numpy()
            out[f"{fmt}_b"] = b.view(torch.uint8).numpy()
            # fp16 output: c rounded to fp16, finite c beyond its range clamped to +-65504.
            c16 = torch.where(c.isfinite() & (c.abs() > 65504), c.sign() * 65504, c)
            c16 = c16.to(torch.float16)
            out[f"{fmt}_c16"] = c16.view(torch.int16).numpy().view(np.uint16)
            inputs[fmt] = a, b, c, c16
        for (preset, f), (arch, shape) in INSTRUCTIONS.items():
            if f != fmt:
                continue
            mma = MMA(arch, shape)
            block = BLOCK[preset, f]
            for how, k in (("single", block), ("chained", K)):
                d = mma.dpa(a[:, :k].contiguous(), b[:, :k].contiguous(), c.clone())
                out[f"{preset}_{fmt}_{how}"] = d.view(torch.int32).numpy().view(np.uint32)
        for (preset, f), (arch, suffix, block) in AMD.items():
            if f.removesuffix("pairs") != fmt:
                continue
            mfma = MFMA(arch, suffix)
            for how, k in (("single", block), ("chained", K)):
                d = mfma.dpa(a[:, :k].contiguous(), b[:, :k].contiguous(), c.clone())
                out[f"{preset}_{f}_{how}"] = d.view(torch.int32).numpy().view(np.uint32)
    fp8 = {}
    for preset, (kind, arch, shape, d_fmt, block) in FP8.items():
        for fa in TORCH_FP8:
            for fb in TORCH_FP8:
                key = f"{preset}_{fa[4:]}_{fb[4:]}"
                mma = kind(arch, shape.format(a=fa[4:], b=fb[4:]))
                a, b = inputs[fa][0], inputs[fb][1]
                c = inputs[fa][2 if d_fmt == "fp32" else 3]
                bits = torch.int32 if d_fmt == "fp32" else torch.int16
                for how, k in (("single", block), ("chained", K)):
                    d = mma.dpa(a[:, :k].contiguous(), b[:, :k].contiguous(), c.clone())
                    out[f"{key}_{how}"] = d.view(bits).numpy().view(
                        np.uint32 if d_fmt == "fp32" else np.uint16)
                fp8[key] = {"preset": preset, "a": fa, "b": fb, "output": d_fmt,
                            "block": block, "instruction": [arch, mma.shape_and_type]}
    a, b, c = (out[f"fp32_{x}"] for x in "abc")
    for arch, suffix in FP32_MFMA.items():
        d = MFMA(arch, suffix).dpa(torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(c))
        out[f"{arch}_fp32_chained"] = d.view(torch.int32).numpy().view(np.uint32)
    codes = {}
    for fmt, shift in FP6_FP4.items():
        width = 6 if shift == 0 else 4
        for x in "ab":
            code = rng.integers(0, 1 << width, (PER_CLASS * len(CLASSES), K)).astype(np.uint8)
            out[f"{fmt}_{x}"] = code
            codes[fmt, x] = torch.from_numpy(code << shift)
    for preset in F8F6F4:
        kind, arch, shape, d_fmt, block = FP8[preset]
        names = [*TORCH_FP8, *FP6_FP4]
        for fa in names:
            for fb in names:
                if fa in TORCH_FP8 and fb in TORCH_FP8:
                    continue
                key = f"{preset}_{fa.split('_')[1]}_{fb.split('_')[1]}"
                mma = kind(arch, shape.format(a=fa.split("_")[1], b=fb.split("_")[1]))
                a = inputs[fa][0] if fa in TORCH_FP8 else codes[fa, "a"]
                b = inputs[fb][1] if fb in TORCH_FP8 else codes[fb, "b"]
                c = inputs["fp8_e4m3"][2]
                for how, k in (("single", block), ("chained", K)):
                    d = mma.dpa(a[:, :k].contiguous(), b[:, :k].contiguous(), c.clone())
                    out[f"{key}_{how}"] = d.view(torch.int32).numpy().view(np.uint32)
                fp8[key] = {"preset": preset, "a": fa, "b": fb, "output": d_fmt, "c": "fp8_e4m3",
                            "block": block, "instruction": [arch, mma.shape_and_type]}
    out["about"] = np.array(json.dumps({
        "mmasim": version("mmasim"), "torch": version("torch"), "K": K,
        "per_class": PER_CLASS, "classes": CLASSES, "blocks": {
            f"{p}_{f}": n for (p, f), n in BLOCK.items()},
        "instructions": {f"{p}_{f}": list(v) for (p, f), v in INSTRUCTIONS.items()},
        "fp8": fp8,
        "fp32_mfma": FP32_MFMA,
        "amd": {f"{p}_{f}": list(v) for (p, f), v in AMD.items()},
    }))
    np.savez_compressed(Path(__file__).with_name("mmasim_records.npz"), **out)


if __name__ == "__main__":
    main()
