"""fpsim.hw's presets against MMA-Sim (Xie et al., arXiv 2511.10909), bit for bit.

tests/data/mmasim_records.npz holds the outputs of the ``mmasim`` package (PyPI) for
each preset's instruction (V100, A100, H100, B200; fp16, bf16 and tf32 inputs as fpsim
models them), written by tests/data/make_mmasim_records.py; this test reads only the
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
from fpsim.compare.gpu import TF32_BLOCK

DATA = Path(__file__).parent / "data" / "mmasim_records.npz"
FLT_MAX = float(np.finfo(np.float32).max)


def records():
    data = np.load(DATA)
    return data, json.loads(str(data["about"]))


ABOUT = records()[1]
INSTRUCTIONS = list(ABOUT["blocks"])


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
        model = dataclasses.replace(model, block=TF32_BLOCK[preset])
    return dataclasses.replace(model, **changes)


def run(key, **changes):
    """{"single": (fpsim, MMA-Sim), "chained": ...}: float32 results of every vector."""
    data, about = records()
    fmt = key.split("_")[1]
    a, b, c = inputs(data, fmt)
    model = preset_model(key, **changes)
    out = {}
    for how, k in (("single", model.block), ("chained", about["K"])):
        got = fpsim.matmul(a[:, None, :k], b[:, :k, None], c=c[:, None, None], model=model)
        mine = np.asarray(got, np.float64).reshape(-1)
        assert (mine.astype(np.float32).astype(np.float64) == mine)[~np.isnan(mine)].all()
        out[how] = mine.astype(np.float32), data[f"{key}_{how}"].view(np.float32)
    return out


def rows(cls):
    """The vectors of one class of input."""
    i, n = ABOUT["classes"].index(cls), ABOUT["per_class"]
    return slice(i * n, (i + 1) * n)


def same(x, y):
    return (x.view(np.uint32) == y.view(np.uint32)) | (np.isnan(x) & np.isnan(y))


def test_the_recording_says_what_it_holds():
    assert ABOUT["mmasim"] == "2.1.1" and ABOUT["K"] == 64
    assert len(ABOUT["classes"]) == 9
    assert sorted(INSTRUCTIONS) == sorted(
        f"{p}_{f}" for p in ("V100", "A100", "H100", "B200") for f in ("fp16", "bf16", "tf32")
        if not (p == "V100" and f != "fp16"))


@pytest.mark.parametrize("key", INSTRUCTIONS)
def test_blocks_are_mmasim_instruction_blocks(key):
    """fpsim's block is the number of products MMA-Sim adds in one instruction step."""
    assert preset_model(key).block == ABOUT["blocks"][key]


@pytest.mark.parametrize("key", INSTRUCTIONS)
def test_preset_is_mmasim_bit_for_bit(key, backend_name):
    for how, (mine, theirs) in run(key).items():
        bad = np.flatnonzero(~same(mine, theirs))
        assert bad.size == 0, (
            f"{key} {how}: {bad.size} differ, first vector {bad[0]} "
            f"({ABOUT['classes'][bad[0] // ABOUT['per_class']]}): fpsim {mine[bad[0]]!r}, "
            f"MMA-Sim {theirs[bad[0]]!r}")
    # The recording reaches the cases the rules govern: finite inputs that overflow.
    if not key.endswith("fp16"):
        theirs = run(key)["single"][1]
        assert np.isinf(theirs[rows("overflow")]).any()


@pytest.mark.parametrize("key", INSTRUCTIONS)
def test_the_other_rules_differ_as_documented(key):
    """overflow="saturate" and zero_sign="signed" (the rules MMA-Sim does not take) change
    exactly the overflowing results (+-inf becomes +-FLT_MAX) and the zeros of negative
    sums (+0 becomes -0); in a chain an overflow saved as FLT_MAX goes on finite."""
    out = run(key, overflow="saturate", zero_sign="signed")
    mine, theirs = out["single"]
    diff = ~same(mine, theirs)
    over = np.isinf(theirs) & (np.abs(mine) == FLT_MAX) & (np.sign(mine) == np.sign(theirs))
    zero = (theirs == 0) & ~np.signbit(theirs) & (mine == 0) & np.signbit(mine)
    assert (diff == (over | zero)).all(), key
    if not key.endswith("fp16"):  # fp16 products cannot reach either case with fp32 output
        assert over.any() and zero.any(), key
    mine, theirs = out["chained"]
    diff = ~same(mine, theirs)
    spread = np.isinf(theirs) & np.isfinite(mine)
    zero = (theirs == 0) & ~np.signbit(theirs) & (mine == 0) & np.signbit(mine)
    assert (diff == (spread | zero)).all(), key
