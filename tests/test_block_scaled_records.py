"""fpsim.hw's block-scaled presets against MMA-Sim (Xie et al., arXiv 2511.10909), bit for bit.

tests/data/mmasim_block_scaled.npz holds the outputs of the ``mmasim`` package (PyPI,
2.1.1) for Blackwell's and RTX Blackwell's block-scaled MMAs (kind::mxf8f6f4 on every
pairing of e4m3, e5m2, e3m2, e2m3 and e2m1 with E8M0 scales; kind::mxf4 and
kind::mxf4nvf4 with E8M0 scales per 32 or 16 elements and UE4M3 scales per 16), written
by tests/data/make_mmasim_records.py (``--block-scaled``); this test reads only the
recording. Nine classes of input (random, wide-ranging scales, cancelling, subnormal
elements and scales, non-finite elements, NaN scales and c, absorbing, zero elements and
scales, overflowing and underflowing); one instruction, and four (k32) or two (k64)
chained over K = 128, each instruction with its own scales. Zero signs are compared as
bits, NaN as NaN. docs/hardware-models.md gives the rules.
"""

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

import fpsim
import fpsim.hw
from fpsim.hw import block_scaled_matmul

DATA = Path(__file__).parent / "data" / "mmasim_block_scaled.npz"


def records():
    data = np.load(DATA)
    return data, json.loads(str(data["about"]))


ABOUT = records()[1]
KEYS = sorted(ABOUT["instructions"])
# MMA-Sim's instruction -> fpsim's model (kind::mxf4nvf4 with E8M0 scales is kind::mxf4's
# rule; per 16 elements it has no fpsim scheme, so the model is built here).
MODELS = {
    "B200_MXF4NVF4_E8M0": fpsim.hw.B200_MXF4,
    "B200_MXF4NVF4_B16": dataclasses.replace(fpsim.hw.B200_MXF4, scale_block=16),
}


def model_of(key):
    about = ABOUT["instructions"][key]
    name = about["model"]
    model = MODELS.get(name) or fpsim.hw.BLOCK_SCALED[name]
    return model.with_inputs(about["a"], about["b"])


def operands(key):
    """(a, b, scale_a, scale_b, c) of a recorded instruction, per element, float64."""
    data, about = records()[0], ABOUT["instructions"][key]
    a = fpsim.from_bits(data[f"{about['a'].split('_')[1]}_a"], about["a"])
    b = fpsim.from_bits(data[f"{about['b'].split('_')[1]}_b"], about["b"])
    block, fmt = about["scale_block"], about["scale"]
    sa, sb = (np.repeat(np.asarray(fpsim.from_bits(data[f"{fmt}_{block}_{x}"], fmt),
                                   np.float64), block, axis=1) for x in "ab")
    return (np.asarray(a, np.float64), np.asarray(b, np.float64), sa, sb,
            np.asarray(data["c"], np.float64))


def run(key, model=None):
    """{"single": (fpsim, MMA-Sim), "chained": ...} as float32 arrays."""
    data = records()[0]
    model = model or model_of(key)
    a, b, sa, sb, c = operands(key)
    out = {}
    for how, k in (("single", ABOUT["instructions"][key]["k"]), ("chained", ABOUT["K"])):
        got = block_scaled_matmul(a[:, None, :k], b[:, :k, None], sa[:, None, :k],
                                  sb[:, :k, None], model, c=c[:, None, None])
        out[how] = (np.asarray(got, np.float32).reshape(-1), data[f"{key}_{how}"].view(np.float32))
    return out


def rows(cls):
    i, n = ABOUT["classes"].index(cls), ABOUT["per_class"]
    return slice(i * n, (i + 1) * n)


def same(x, y):
    return (x.view(np.uint32) == y.view(np.uint32)) | (np.isnan(x) & np.isnan(y))


def test_the_recording_says_what_it_holds():
    assert ABOUT["mmasim"] == "2.1.1" and ABOUT["K"] == 128 and len(ABOUT["classes"]) == 9
    f8f6f4 = ("e4m3", "e5m2", "e3m2", "e2m3", "e2m1")
    assert KEYS == sorted(
        [f"{p}_{a}_{b}" for p in ("B200_MXF8F6F4", "RTX5090_MXF8F6F4") for a in f8f6f4
         for b in f8f6f4]
        + ["B200_MXF4", "B200_MXF4NVF4_E8M0", "B200_MXF4NVF4_B16", "B200_NVF4",
           "RTX5090_MXF4", "RTX5090_NVF4"])


def test_every_block_scaled_preset_is_recorded():
    recorded = {ABOUT["instructions"][key]["model"] for key in KEYS}
    assert set(fpsim.hw.BLOCK_SCALED) <= recorded


@pytest.mark.parametrize("key", KEYS)
def test_preset_is_mmasim_bit_for_bit(key):
    model = model_of(key)
    about = ABOUT["instructions"][key]
    assert (model.fma.block, model.scale, model.scale_block) == (
        about["k"], about["scale"], about["scale_block"])
    out = run(key, model)
    for how, (mine, theirs) in out.items():
        bad = np.flatnonzero(~same(mine, theirs))
        assert bad.size == 0, (
            f"{key} {how}: {bad.size} differ, first vector {bad[0]} "
            f"({ABOUT['classes'][bad[0] // ABOUT['per_class']]}): fpsim {mine[bad[0]]!r}, "
            f"MMA-Sim {theirs[bad[0]]!r}")
