"""Record MMA-Sim's outputs for the instructions fpsim.hw's presets model.

Writes tests/data/mmasim_records.npz, which tests/test_mmasim_records.py reads
(the test needs neither torch nor mmasim). Run it where the ``mmasim`` package
(PyPI, Xie et al., arXiv 2511.10909) and a CPU build of torch are installed:

    python3 tests/data/make_mmasim_records.py

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
"""

from __future__ import annotations

import json
from importlib.metadata import version
from pathlib import Path

import numpy as np
import torch
from mmasim.amd import MFMA
from mmasim.nv_ptx import MMA, WGMMA, TCGen05MMA

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
# Ampere, 32 on Hopper and Blackwell), and fpsim's block (fpsim.compare.gpu.TF32_BLOCK).
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
    t, emin, emax = FORMATS[fmt]
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


def main() -> None:
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
