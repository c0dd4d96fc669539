"""fpsim.hw's presets against MMA-Sim (Xie et al., arXiv 2511.10909), bit for bit.

tests/data/mmasim_records.npz holds the outputs of the ``mmasim`` package (PyPI) for
each preset's instruction (V100, T4, A100, L40, H100, B200, RTX5090 on fp16, bf16 and
tf32 inputs as fpsim models them; the fp8 presets on every pairing of e4m3 and e5m2,
and Blackwell's f8f6f4 ones on every pairing with fp6 e3m2/e2m3 and fp4 e2m1; AMD's
fp32 mfma of CDNA1-3, CDNA3's fp16, bf16 and xf32 mfma as fpsim.hw.MI300, MI300_BF16
and MI300_XF32, CDNA2's fp16 and bf16 as fpsim.hw.mi200_mfma and CDNA1's as
fpsim.hw.mi100_mfma),
written by tests/data/make_mmasim_records.py; this test reads only the
recording (neither torch nor mmasim is needed). Nine classes of input: random, wide
range, cancelling, subnormal, non-finite, absorbing, zero factors, overflowing and
underflowing; one instruction (the first block) and the instruction chained over
K = 64. Zero signs are compared as bits, NaN as NaN. docs/hardware-models.md gives
the decisions this checks.
"""

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

import fpsim
import fpsim.hw
from fpsim.compare.gpu import gemm_model

DATA = Path(__file__).parent / "data" / "mmasim_records.npz"


def records():
    data = np.load(DATA)
    return data, json.loads(str(data["about"]))


ABOUT = records()[1]
INSTRUCTIONS = list(ABOUT["blocks"])
FP8 = list(ABOUT["fp8"])
# AMD CDNA3's mfma instructions and fpsim's presets of them.
CDNA3 = {"MI300_fp16": fpsim.hw.MI300, "MI300_bf16": fpsim.hw.MI300_BF16,
         "MI300_tf32": fpsim.hw.MI300_XF32}


def inputs(data, fmt):
    """(a, b, c) of one input format, as float64 arrays."""
    a, b = data[f"{fmt}_a"], data[f"{fmt}_b"]
    if fmt == "fp16":
        a, b = a.view(np.float16), b.view(np.float16)
    elif fmt == "bf16":
        a, b = fpsim.from_bits(a, "bf16"), fpsim.from_bits(b, "bf16")
    return (np.asarray(a, np.float64), np.asarray(b, np.float64),
            np.asarray(data[f"{fmt}_c"], np.float64))


def preset_model(key, **changes):
    """fpsim's model of the recorded instruction ("H100_bf16": fpsim.hw.H100 reading bf16)."""
    preset, fmt = key.split("_")
    model = getattr(fpsim.hw, preset).with_input(fmt)
    if fmt == "tf32":
        # A block holds as many bytes of inputs as with fp16 (MMA-Sim's L_max): half the
        # products, fpsim.hw.TF32's preset (which fpsim.compare.gpu's GEMM model is).
        block = model.block // 2
        model = fpsim.hw.TF32[preset]
        assert model == dataclasses.replace(getattr(fpsim.hw, preset).with_input(fmt),
                                            block=block)
        assert block == fpsim.hw.for_input(preset, fmt).block
        assert gemm_model("fp32", "tf32", getattr(fpsim.hw, preset)) is model
    return dataclasses.replace(model, **changes)


def fp8_case(data, key, **changes):
    """(model, a, b, c, result dtype) of a recorded fp8 instruction."""
    about = ABOUT["fp8"][key]
    model = getattr(fpsim.hw, about["preset"]).with_inputs(about["a"], about["b"])
    a = np.asarray(fpsim.from_bits(data[f"{about['a']}_a"], about["a"]), np.float64)
    b = np.asarray(fpsim.from_bits(data[f"{about['b']}_b"], about["b"]), np.float64)
    c_data = about.get("c", about["a"])  # fp6/fp4 pairings read the fp8 data's c
    c = (data[f"{c_data}_c"] if about["output"] == "fp32"
         else data[f"{c_data}_c16"].view(np.float16))
    dtype = np.float32 if about["output"] == "fp32" else np.float16
    return dataclasses.replace(model, **changes), a, b, np.asarray(c, np.float64), dtype


def run(key, **changes):
    """{"single": (fpsim, MMA-Sim), "chained": ...}: results of every vector, as the
    instruction's output type (float32 or float16)."""
    data, about = records()
    if key in about["fp8"]:
        model, a, b, c, dtype = fp8_case(data, key, **changes)
    else:
        a, b, c = inputs(data, key.split("_")[1])
        model, dtype = preset_model(key, **changes), np.float32
    out = {}
    for how, k in (("single", model.block), ("chained", about["K"])):
        got = fpsim.matmul(a[:, None, :k], b[:, :k, None], c=c[:, None, None], model=model)
        mine = np.asarray(got, np.float64).reshape(-1)
        assert (mine.astype(dtype).astype(np.float64) == mine)[~np.isnan(mine)].all()
        out[how] = mine.astype(dtype), data[f"{key}_{how}"].view(dtype)
    return out


def rows(cls):
    """The vectors of one class of input."""
    i, n = ABOUT["classes"].index(cls), ABOUT["per_class"]
    return slice(i * n, (i + 1) * n)


def same(x, y):
    bits = np.uint32 if x.dtype == np.float32 else np.uint16
    return (x.view(bits) == y.view(bits)) | (np.isnan(x) & np.isnan(y))


def test_the_recording_says_what_it_holds():
    assert ABOUT["mmasim"] == "2.1.1" and ABOUT["K"] == 64
    assert len(ABOUT["classes"]) == 9
    assert sorted(INSTRUCTIONS) == sorted(
        f"{p}_{f}" for p in ("V100", "T4", "A100", "L40", "H100", "B200", "RTX5090")
        for f in ("fp16", "bf16", "tf32") if not (p in ("V100", "T4") and f != "fp16"))
    fp8, f8f6f4 = ("e4m3", "e5m2"), ("e4m3", "e5m2", "e3m2", "e2m3", "e2m1")
    assert sorted(FP8) == sorted(
        [f"{p}_{a}_{b}" for p in ("L40_FP8", "H100_FP8", "H100_FP8_F16", "B200_FP8",
                                  "RTX5090_FP8") for a in fp8 for b in fp8]
        + [f"{p}_{a}_{b}" for p in ("B200_FP8", "RTX5090_FP8") for a in f8f6f4 for b in f8f6f4
           if not (a in fp8 and b in fp8)])


def test_the_recording_holds_amds_instructions():
    assert ABOUT["amd"] == {
        "MI300_fp16": ["CDNA3", "f32_32x32x8_f16", 8],
        "MI300_bf16": ["CDNA3", "f32_32x32x8_bf16", 8],
        "MI300_tf32": ["CDNA3", "f32_32x32x4_xf32", 4],
        "MI200_fp16": ["CDNA2", "f32_32x32x8f16", 4],
        "MI200_bf16": ["CDNA2", "f32_32x32x8bf16_1k", 4],
        "MI200_bf16pairs": ["CDNA2", "f32_32x32x4bf16", 2],
        "MI100_fp16": ["CDNA1", "f32_32x32x8f16", 4], "MI100_bf16": ["CDNA1", "f32_32x32x4bf16", 2]}


def test_every_preset_is_recorded():
    """Each fpsim.hw preset is checked here against MMA-Sim: by its key, or (fp8) by name."""
    recorded = {getattr(fpsim.hw, key[:-5]).name for key in INSTRUCTIONS if key.endswith("fp16")}
    recorded |= {preset_model(key).name for key in INSTRUCTIONS if key.endswith("bf16")}
    recorded |= {ABOUT["fp8"][key]["preset"] for key in FP8}
    recorded |= {model.name for model in CDNA3.values()}
    assert recorded == set(fpsim.hw.PRESETS)


@pytest.mark.parametrize("key", INSTRUCTIONS)
def test_blocks_are_mmasim_instruction_blocks(key):
    """fpsim's block is the number of products MMA-Sim adds in one instruction step."""
    assert preset_model(key).block == ABOUT["blocks"][key]


@pytest.mark.parametrize("key", FP8)
def test_fp8_blocks_are_mmasim_instruction_blocks(key):
    about = ABOUT["fp8"][key]
    assert getattr(fpsim.hw, about["preset"]).block == about["block"]


@pytest.mark.parametrize("key", INSTRUCTIONS + FP8)
def test_preset_is_mmasim_bit_for_bit(key, backend_name):
    for how, (mine, theirs) in run(key).items():
        bad = np.flatnonzero(~same(mine, theirs))
        assert bad.size == 0, (
            f"{key} {how}: {bad.size} differ, first vector {bad[0]} "
            f"({ABOUT['classes'][bad[0] // ABOUT['per_class']]}): fpsim {mine[bad[0]]!r}, "
            f"MMA-Sim {theirs[bad[0]]!r}")
    # The recording reaches the cases the rules govern: finite inputs that overflow
    # (fp16 products cannot overflow fp32, nor can fp8 products in a block of 32).
    if overflows(key):
        theirs, c = run(key)["single"][1][rows("overflow")], c_values(key)[rows("overflow")]
        assert (np.isinf(theirs) & np.isfinite(c)).any()


def overflows(key):
    """Whether finite inputs of the recording can overflow the instruction's output."""
    return key.endswith(("bf16", "tf32")) or ABOUT["fp8"].get(key, {}).get("output") == "fp16"


def c_values(key):
    data = records()[0]
    return fp8_case(data, key)[3] if key in FP8 else inputs(data, key.split("_")[1])[2]


def test_fp8_mixed_inputs_read_each_format():
    """Mixed e4m3 x e5m2: reading B as e4m3 (one format for both) gives other results,
    so the recording tells the two-format model from a one-format one."""
    data = records()[0]
    model, a, b, c, _ = fp8_case(data, "H100_FP8_e4m3_e5m2")
    k = model.block
    theirs = data["H100_FP8_e4m3_e5m2_single"].view(np.float32)
    mine = fpsim.matmul(a[:, None, :k], b[:, :k, None], c=c[:, None, None], model=model)
    assert same(np.asarray(mine, np.float32).reshape(-1), theirs).all()
    # The block output: without the cut to 13 bits, results differ from MMA-Sim's.
    wide = dataclasses.replace(model, block_output=None)
    mine = fpsim.matmul(a[:, None, :k], b[:, :k, None], c=c[:, None, None], model=wide)
    assert not same(np.asarray(mine, np.float32).reshape(-1), theirs).all()


@pytest.mark.parametrize("key", INSTRUCTIONS + FP8)
def test_the_other_rules_differ_as_documented(key):
    """overflow="saturate" and zero_sign="signed" (the rules MMA-Sim does not take) change
    exactly the overflowing results (+-inf becomes +-FLT_MAX) and the zeros of negative
    sums (+0 becomes -0); in a chain an overflow saved as FLT_MAX goes on finite."""
    out = run(key, overflow="saturate", zero_sign="signed")
    mine, theirs = out["single"]
    diff = ~same(mine, theirs)
    top = np.finfo(mine.dtype).max
    over = np.isinf(theirs) & (np.abs(mine) == top) & (np.sign(mine) == np.sign(theirs))
    zero = (theirs == 0) & ~np.signbit(theirs) & (mine == 0) & np.signbit(mine)
    assert (diff == (over | zero)).all(), key
    if overflows(key):  # fp16 and fp8 products with fp32 output reach neither case
        assert over.any() and (zero.any() or key in FP8), key
    mine, theirs = out["chained"]
    diff = ~same(mine, theirs)
    spread = np.isinf(theirs) & np.isfinite(mine)
    zero = (theirs == 0) & ~np.signbit(theirs) & (mine == 0) & np.signbit(mine)
    assert (diff == (spread | zero)).all(), key


@pytest.mark.parametrize("arch", sorted(ABOUT["fp32_mfma"]))
def test_amd_fp32_mfma_is_fpsims_fp32_accumulation(arch, backend_name):
    """AMD's fp32 mfma (CDNA1-3) is a chain of fp32 FMAs in MMA-Sim (no block FMA):
    fpsim.matmul's default, c then each exact product added in k order and rounded to
    nearest even, gives its outputs bit for bit, zero signs included."""
    data = records()[0]
    a, b, c = (np.asarray(data[f"fp32_{x}"], np.float64) for x in "abc")
    got = fpsim.matmul(a[:, None, :], b[:, :, None], c=c[:, None, None], accum="fp32")
    mine = np.asarray(got, np.float32).reshape(-1)
    theirs = data[f"{arch}_fp32_chained"].view(np.float32)
    bad = np.flatnonzero(~same(mine, theirs))
    assert bad.size == 0, (arch, bad[:5], mine[bad[:5]], theirs[bad[:5]])
    # The recording reaches zeros of both signs and infinities.
    assert (np.signbit(theirs) & (theirs == 0)).any() and np.isinf(theirs).any()


def amd_run(key, model):
    """{"single": (fpsim, MMA-Sim), "chained": ...} of a recorded AMD instruction."""
    data, about = records()
    fmt = key.split("_")[1].removesuffix("pairs")
    a, b, c = inputs(data, fmt)
    out = {}
    for how, k in (("single", about["amd"][key][2]), ("chained", about["K"])):
        got = fpsim.matmul(a[:, None, :k], b[:, :k, None], c=c[:, None, None], model=model)
        out[how] = (np.asarray(got, np.float32).reshape(-1),
                    data[f"{key}_{how}"].view(np.float32))
    return out


@pytest.mark.parametrize("key", sorted(CDNA3))
def test_cdna3_preset_is_mmasim_bit_for_bit(key, backend_name):
    """MI300, MI300_BF16 and MI300_XF32 equal MMA-Sim's CDNA3 mfma (tr_fdpa) on every
    class, one instruction and chained, zero signs included; the recording reaches -0,
    +-inf from finite inputs (bf16, xf32) and NaN."""
    model = CDNA3[key]
    assert model.block == ABOUT["amd"][key][2]
    out = amd_run(key, model)
    for how, (mine, theirs) in out.items():
        bad = np.flatnonzero(~same(mine, theirs))
        assert bad.size == 0, (
            f"{key} {how}: {bad.size} differ, first vector {bad[0]} "
            f"({ABOUT['classes'][bad[0] // ABOUT['per_class']]}): fpsim {mine[bad[0]]!r}, "
            f"MMA-Sim {theirs[bad[0]]!r}")
    theirs = np.concatenate([out["single"][1], out["chained"][1]])
    assert np.isnan(theirs).any()
    if key != "MI300_fp16":  # fp16 products neither overflow nor fall below 2**-150
        assert ((theirs == 0) & np.signbit(theirs)).any()
        over = out["single"][1][rows("overflow")]
        assert (np.isinf(over) & np.isfinite(c_values(key)[rows("overflow")])).any()


@pytest.mark.parametrize("key", sorted(CDNA3))
def test_cdna3_rounding_down_is_what_the_recording_tells(key):
    """The recording tells CDNA3's rule from nearby ones: aligning c with the products by
    truncation (NVIDIA's rule, with CDNA3's F = 24 and floor -126), or +0 for every zero
    (bf16, xf32), gives other results on some vectors."""
    model = CDNA3[key]
    others = [dataclasses.replace(model, align="truncate", sum_bits=None)]
    if key != "MI300_fp16":  # fp16 products reach no zero of a negative sum
        others.append(dataclasses.replace(model, zero_sign="positive"))
    for other in others:
        mine, theirs = amd_run(key, other)["chained"]
        assert not same(mine, theirs).all(), (key, other)


@pytest.mark.parametrize(("key", "group"), [("MI200_fp16", 4), ("MI200_bf16", 4),
                                            ("MI200_bf16pairs", 2)])
def test_cdna2_mfma_is_mmasim_bit_for_bit(key, group):
    """fpsim.hw.mi200_mfma equals MMA-Sim's CDNA2 fp16 and bf16 mfma (MMA_FTZ_MUL_ADD) on
    every class, one instruction and chained, zero signs included; the recording reaches
    results flushed to zero (subnormal class), NaN and +-inf from finite inputs (bf16)."""
    data = records()[0]
    fmt = key.split("_")[1].removesuffix("pairs")
    assert ABOUT["amd"][key][2] == group
    a, b, c = inputs(data, fmt)
    for how, k in (("single", group), ("chained", ABOUT["K"])):
        got = fpsim.hw.mi200_mfma(a[:, None, :k], b[:, :k, None], c=c[:, None, None],
                                  input=fmt, group=group)
        mine = np.asarray(got, np.float32).reshape(-1)
        theirs = data[f"{key}_{how}"].view(np.float32)
        bad = np.flatnonzero(~same(mine, theirs))
        assert bad.size == 0, (key, how, bad[:5], mine[bad[:5]], theirs[bad[:5]])
    theirs = data[f"{key}_single"].view(np.float32)
    assert (theirs[rows("subnormal")] == 0).any() and np.isnan(theirs).any()
    if fmt == "bf16":
        assert (np.isinf(theirs) & np.isfinite(c))[rows("overflow")].any()


@pytest.mark.parametrize("key", ["MI100_fp16", "MI100_bf16"])
def test_cdna1_mfma_is_mmasim_bit_for_bit(key):
    """fpsim.hw.mi100_mfma equals MMA-Sim's CDNA1 fp16 and bf16 mfma (MMA_E_FDPA: the exact
    sum of 4 or 2 products and c, rounded once to nearest even) on every class, one
    instruction and chained, zero signs included; the recording reaches NaN, and +-inf
    from finite inputs (bf16)."""
    data = records()[0]
    fmt = key.split("_")[1]
    a, b, c = inputs(data, fmt)
    step = ABOUT["amd"][key][2]
    assert step == (4 if fmt == "fp16" else 2)
    for how, k in (("single", step), ("chained", ABOUT["K"])):
        got = fpsim.hw.mi100_mfma(a[:, None, :k], b[:, :k, None], c=c[:, None, None],
                                  input=fmt)
        mine = np.asarray(got, np.float32).reshape(-1)
        theirs = data[f"{key}_{how}"].view(np.float32)
        bad = np.flatnonzero(~same(mine, theirs))
        assert bad.size == 0, (key, how, bad[:5], mine[bad[:5]], theirs[bad[:5]])
    theirs = data[f"{key}_single"].view(np.float32)
    assert np.isnan(theirs).any()
    if fmt == "bf16":
        assert (np.isinf(theirs) & np.isfinite(c))[rows("overflow")].any()
