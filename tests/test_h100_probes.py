"""fpsim's H100 presets against the tensor-core instructions themselves, bit for bit.

tests/data/h100_mma_probes.npz holds what every instruction probe of fpsim.compare.mma
returned on an NVIDIA H100 80GB HBM3 on 2026-11-25 (the inputs and the hardware's D; the
full report is docs/hardware/mma/mma_probes.md; `python3 -m fpsim.compare.mma --out DIR`
writes DIR/mma_record.npz, and `--trim` makes one from an earlier run's npz). Each
instruction's preset is recomputed here on the recorded inputs and must give the
hardware's D in every element: the same encoding (zero signs included), or NaN for NaN.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

import fpsim
from fpsim.compare import gpu, mma

DATA = Path(__file__).parent / "data" / "h100_mma_probes.npz"
HW = fpsim.hw


def record() -> dict[str, np.ndarray]:
    with np.load(DATA) as f:
        return {key: f[key] for key in f.files}


REC = record()
FP8_MMA = object()  # the sm_90 lowering of fp8 mma.sync: fpsim.hw.h100_fp8_mma

# Each probed instruction's decided model (docs/hardware-models.md, "Decided on an H100").
DECIDED = {
    "f32.f16.f16.f32": HW.H100,
    "f32.f16.f16": HW.H100,
    "f32.bf16.bf16.f32": HW.H100_BF16,
    "f32.bf16.bf16": HW.H100_BF16,
    "f32.tf32.tf32.f32": HW.H100_TF32,
    "f16.f16.f16.f16": HW.H100_F16,
    "f16.f16.f16": HW.H100_F16,
    "f32.e4m3.e4m3.f32": FP8_MMA,
    "f32.e5m2.e5m2.f32": FP8_MMA,
    "f32.e4m3.e5m2.f32": FP8_MMA,
    "f32.e4m3.e4m3": HW.H100_FP8,
    "f32.e5m2.e5m2": HW.H100_FP8.with_inputs("fp8_e5m2", "fp8_e5m2"),
    "f32.e4m3.e5m2": HW.H100_FP8.with_inputs("fp8_e4m3", "fp8_e5m2"),
    "f16.e4m3.e4m3": HW.H100_FP8_F16,
}


def operands(types: str) -> tuple[mma.Instruction, np.ndarray, np.ndarray, np.ndarray]:
    instr = mma.INSTRUCTIONS[types]
    a, b, c = (mma.decode(REC[f"{types}/{x}"], f)
               for x, f in (("a", instr.a), ("b", instr.b), ("c", instr.cd)))
    return instr, a, b, c


def emulate(types: str, model: object) -> np.ndarray:
    """The model's D on the recorded inputs, as encodings of D's format."""
    instr, a, b, c = operands(types)
    if model is FP8_MMA:
        d = HW.h100_fp8_mma(a, b, c=c)
    else:
        assert isinstance(model, fpsim.hw.BlockFMA)
        d = fpsim.matmul(a, b, c=c, model=model)
    return mma.encode(np.asarray(d, dtype=np.float64), instr.cd)


def differ(types: str, model: object, cls: str | None = None) -> int:
    """Elements where the model's D is not the hardware's (any NaN for any NaN)."""
    instr = mma.INSTRUCTIONS[types]
    same = mma.same(emulate(types, model), REC[f"{types}/hardware"], instr.cd)
    if cls is not None:
        same = same[REC[f"{types}/cls"] == mma.CLASSES.index(cls)]
    return int((~same).sum())


def test_the_record_says_where_it_comes_from_and_holds_only_what_the_tests_need():
    assert str(REC["gpu"]) == "NVIDIA H100 80GB HBM3" and str(REC["date"]) == "2026-11-25"
    versions = json.loads(str(REC["versions"]))
    assert versions["capability"] == [9, 0] and versions["driver"] == "580.159.04"
    assert {"cuda", "nvcc", "cupy", "numpy", "python"} <= set(versions)
    fields = {key.split("/")[1] for key in REC if "/" in key}
    assert fields == set(mma.RECORD_FIELDS)
    assert {key.split("/")[0] for key in REC if "/" in key} == set(mma.INSTRUCTIONS)
    assert set(DECIDED) == set(mma.INSTRUCTIONS)
    assert DATA.stat().st_size < 1_500_000


@pytest.mark.parametrize("types", list(mma.INSTRUCTIONS))
def test_the_recorded_inputs_are_the_probes_seeded_inputs(types):
    """The record is of the inputs fpsim.compare.mma draws (and MMA-Sim was recorded on)."""
    data = mma.inputs(mma.INSTRUCTIONS[types])
    for x in ("a", "b", "c", "cls"):
        assert np.array_equal(REC[f"{types}/{x}"], data[x]), (types, x)


@pytest.mark.parametrize("types", list(DECIDED))
def test_the_decided_model_is_the_h100_bit_for_bit(types):
    assert differ(types, DECIDED[types]) == 0, types


def test_every_class_of_input_is_in_the_record():
    """Each instruction's record holds every class, so the check above covers each
    disagreement's directed inputs."""
    for types in mma.INSTRUCTIONS:
        counts = np.bincount(REC[f"{types}/cls"], minlength=len(mma.CLASSES))
        assert (counts > 0).all() and len(counts) == len(mma.CLASSES), types


# --- what the H100 decided against --------------------------------------------------------


def test_the_former_rules_are_not_the_h100():
    """Each rule the probe decided against differs from the hardware on its class: the
    record separates them (counts as in docs/hardware/mma/mma_probes.md)."""
    f16_before = dataclasses.replace(HW.H100_F16, exp_floor=-133)  # fpsim's before
    assert differ("f16.f16.f16.f16", f16_before, "exponent floor") == 178
    assert differ("f16.f16.f16", f16_before, "exponent floor") == 165
    for types in ("f32.bf16.bf16.f32", "f32.tf32.tf32.f32", "f16.f16.f16.f16"):
        model = DECIDED[types]
        assert differ(types, dataclasses.replace(model, overflow="saturate"), "overflow")
        assert differ(types, dataclasses.replace(model, zero_sign="signed"), "zero sign")
    assert differ("f32.bf16.bf16.f32", dataclasses.replace(HW.H100_BF16, exp_floor=-126),
                  "exponent floor") == 384
    # fp8: the fp16 preset reading fp8 (fpsim's fp8 model before) is neither instruction,
    # and MMA-Sim's fp8 rules are not mma.sync's.
    for types in ("f32.e4m3.e4m3", "f32.e4m3.e4m3.f32", "f16.e4m3.e4m3"):
        instr = mma.INSTRUCTIONS[types]
        old = HW.H100.with_input("fp8_e4m3")
        if instr.cd == "fp16":
            old = dataclasses.replace(old, output="fp16", output_rounding="nearest_even")
        assert differ(types, old, "random") > 0, types
    for types in ("f32.e4m3.e4m3.f32", "f32.e5m2.e5m2.f32"):
        fmt = mma.INSTRUCTIONS[types].a
        assert differ(types, HW.H100_FP8.with_input(fmt), "random") > 900
        assert differ(types, HW.L40_FP8.with_input(fmt), "random") > 900


# --- the presets are what they say ---------------------------------------------------------


def test_the_h100_fp8_presets_are_mmasims_hopper_wgmma_rule():
    """Block 32, 13 fraction bits, e8m13 block output (fp32 D); fp16 D: nearest even,
    e_zero -21 (MMA-Sim 2.1.1, mmasim/nv_ptx/sim.py, WGMMA)."""
    m = HW.H100_FP8
    assert (m.block, m.frac_bits, m.exp_floor, m.output, m.output_rounding) == (
        32, 13, -133, "fp32", "toward_zero")
    assert fpsim.formats.as_format(m.block_output) == fpsim.Format(8, 13)
    f = HW.H100_FP8_F16
    assert (f.block, f.frac_bits, f.exp_floor, f.output, f.output_rounding,
            f.block_output) == (32, 13, -21, "fp16", "nearest_even", None)
    t, h = HW.H100_TF32, HW.H100_F16
    assert (t.block, t.frac_bits, t.exp_floor, t.input) == (8, 25, -133, "tf32")
    assert (h.block, h.frac_bits, h.exp_floor, h.output, h.output_rounding) == (
        16, 25, -21, "fp16", "nearest_even")


def test_the_fp8_mma_lowering_splits_k_by_k_mod_4_and_adds_c_last():
    """Exact cases: 2**24 + 3 (1 at k = 0, 2 at k = 2) rounds to nearest, 2**24 + 4; the
    HMMA of k % 4 < 2 runs first from 0: 1 - 1 (k = 0, 1) cancels there and 2**-26
    (k = 2) is kept in the second, while 1 + 2**-26 (k = 0, 1) is cut on 1's grid (F = 25)
    before the second HMMA's -1 (k = 2)."""
    a, b = np.zeros((1, 32)), np.zeros((32, 1))
    a[0, [0, 2]], b[[0, 2], 0] = [1.0, 2.0], 1.0
    assert HW.h100_fp8_mma(a, b, c=[[2.0**24]]).tolist() == [[2.0**24 + 4]]
    small = 2.0**-13  # e5m2 and fp16 values; the product 2**-26
    a, b = np.zeros((1, 32)), np.zeros((32, 1))
    a[0, :3], b[:3, 0] = [1.0, -1.0, small], [1.0, 1.0, small]
    assert HW.h100_fp8_mma(a, b).tolist() == [[2.0**-26]]
    a[0, :3], b[:3, 0] = [1.0, small, -1.0], [1.0, small, 1.0]
    assert HW.h100_fp8_mma(a, b).tolist() == [[0.0]]
    # Chained over K = 64: two instructions, c added by the first, the second's sum after.
    a2, b2 = np.zeros((1, 64)), np.zeros((64, 1))
    a2[0, [0, 32]], b2[[0, 32], 0] = 1.0, [1.0, 3.0]
    assert HW.h100_fp8_mma(a2, b2, c=[[2.0**24]]).tolist() == [[2.0**24 + 4]]


@pytest.mark.parametrize("shape", [(1, 31), (2, 16), (1, 0)])
def test_the_fp8_mma_lowering_rejects_a_k_that_is_no_instruction(shape):
    with pytest.raises(ValueError, match="multiple of 32"):
        HW.h100_fp8_mma(np.zeros(shape), np.zeros((shape[1], 1)))
    with pytest.raises(ValueError, match="multiple of 32"):
        HW.h100_fp8_mma(np.float64(1.0), np.zeros((32, 1)))


# --- fpsim compare's GEMM models take the decided rules ------------------------------------


def test_fpsim_compare_models_fp16_compute_and_fp8_as_the_h100_does():
    f16 = gpu.gemm_model("fp16", "fp16", HW.H100)
    assert dataclasses.replace(f16, name=HW.H100_F16.name) == HW.H100_F16
    assert gpu.gemm_model("fp8_e4m3", "fp32", HW.H100) is HW.H100_FP8
    assert gpu.gemm_model("fp8_e5m2", "fp32", HW.H100) == HW.H100_FP8.with_input("fp8_e5m2")
    assert gpu.gemm_model("fp8_e4m3", "fp16", HW.H100) is HW.H100_FP8_F16
    assert gpu.gemm_model("fp8_e4m3", "fp32", HW.A100) is None  # no fp8 tensor cores
    assert gpu.gemm_model("fp8_e4m3", "fp16", HW.B200) is None
    tf32 = gpu.gemm_model("fp32", "tf32", HW.H100)
    assert dataclasses.replace(tf32, name=HW.H100_TF32.name) == HW.H100_TF32


@pytest.mark.parametrize("name, block", [("T4", None), ("L40", 4), ("RTX5090", 8),
                                         ("A100", 4), ("B200", 8)])
def test_every_presets_tf32_block(name, block):
    """MMA-Sim's L_max: a tf32 block holds as many bytes as an fp16 block (half the
    products); Turing has no TF32 tensor cores."""
    model = gpu.gemm_model("fp32", "tf32", getattr(HW, name))
    if block is None:
        assert model is None
    else:
        assert model is not None and model.block == block == getattr(HW, name).block // 2


def test_the_probes_candidates_are_the_decided_presets():
    """fpsim.compare.mma puts the decided preset first for wgmma fp8 and fp16 output."""
    for types in ("f32.e4m3.e4m3", "f32.e4m3.e5m2", "f16.e4m3.e4m3", "f16.f16.f16"):
        preset = mma.models(mma.INSTRUCTIONS[types], HW.H100)["preset"]
        want = DECIDED[types]
        assert isinstance(want, fpsim.hw.BlockFMA)
        assert dataclasses.replace(preset, name=want.name) == want, types


# --- the record's writer ------------------------------------------------------------------


def small_run(layout_ok: bool = True) -> dict[str, np.ndarray]:
    t = "f32.f16.f16.f32"
    run = {f"{t}/{x}": REC[f"{t}/{x}"][:2] for x in mma.RECORD_FIELDS}
    run[f"{t}/fpsim preset"] = REC[f"{t}/hardware"][:2]
    run["about"] = np.array(json.dumps({"gpu": "G", "numpy": "2", "capability": [9, 0],
                                        "layout_ok": {t: layout_ok}}))
    return run


def test_the_trim_command_writes_the_record_of_a_run(tmp_path):
    np.savez_compressed(tmp_path / "run.npz", **small_run())
    out = tmp_path / "rec.npz"
    assert mma.main(["--trim", str(tmp_path / "run.npz"), "--record", str(out),
                     "--meta", "date=2026-11-25", "--meta", "driver=580.159.04"]) == 0
    with np.load(out) as f:
        assert sorted(f.files) == sorted([*(f"f32.f16.f16.f32/{x}" for x in
                                            mma.RECORD_FIELDS), "gpu", "date", "versions"])
        assert json.loads(str(f["versions"])) == {"capability": [9, 0], "numpy": "2",
                                                  "driver": "580.159.04"}
        assert np.array_equal(f["f32.f16.f16.f32/hardware"],
                              REC["f32.f16.f16.f32/hardware"][:2])


def test_the_record_writer_names_what_is_wrong(tmp_path, capsys):
    with pytest.raises(ValueError, match="no 'about'"):
        mma.hardware_record({"x/a": np.zeros(1)}, {"date": "d"})
    with pytest.raises(ValueError, match="date"):
        mma.hardware_record(small_run(), {})
    with pytest.raises(ValueError, match="layout check failed"):
        mma.hardware_record(small_run(layout_ok=False), {"date": "d"})
    run = small_run()
    del run["f32.f16.f16.f32/cls"]
    with pytest.raises(ValueError, match="no 'cls'"):
        mma.hardware_record(run, {"date": "d"})
    np.savez_compressed(tmp_path / "run.npz", **small_run())
    assert mma.main(["--trim", str(tmp_path / "run.npz"), "--record",
                     str(tmp_path / "r.npz"), "--meta", "nodate"]) == 2
    assert mma.main(["--trim", str(tmp_path / "run.npz"), "--record",
                     str(tmp_path / "r.npz")]) == 2
    err = capsys.readouterr().err
    assert "KEY=VALUE" in err and "date" in err and not (tmp_path / "r.npz").exists()
    with pytest.raises(SystemExit):
        mma.main(["--trim", str(tmp_path / "run.npz")])
