"""The tensor-core instruction probes (fpsim.compare.mma): fragment layouts against the
PTX ISA's formulas, packing, the kernels' SASS (offline, with nvcc), the seeded inputs
against the recorded MMA-Sim outputs, and the probes themselves where a GPU exists."""

from __future__ import annotations

import shutil
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import fpsim
from fpsim.compare import mma

SHAPES = [("m16n8k16", "a", 16, (16, 16)), ("m16n8k16", "b", 16, (16, 8)),
          ("m16n8k16", "c", 32, (16, 8)), ("m16n8k16", "c", 16, (16, 8)),
          ("m16n8k8", "a", 32, (16, 8)), ("m16n8k8", "b", 32, (8, 8)),
          ("m16n8k8", "c", 32, (16, 8)), ("m16n8k32", "a", 8, (16, 32)),
          ("m16n8k32", "b", 8, (32, 8)), ("m16n8k32", "c", 32, (16, 8))]


def isa(shape, operand, width, lane, i):
    """(row, col) of element i of a lane, as the PTX ISA writes it ("Matrix Fragments for
    mma.m16n8k8 / k16 / k32", "row = groupID for ai where ..."), case by case."""
    group, tig = lane >> 2, lane % 4
    if operand == "c":  # every shape here, f32 and f16 accumulators
        return (group if i < 2 else group + 8), tig * 2 + (i & 0x1)
    if shape == "m16n8k16" and operand == "a":
        row = group if (i < 2 or 4 <= i < 6) else group + 8
        col = tig * 2 + (i & 0x1) if i < 4 else tig * 2 + (i & 0x1) + 8
        return row, col
    if shape == "m16n8k16" and operand == "b":
        return (tig * 2 + (i & 0x1) if i < 2 else tig * 2 + (i & 0x1) + 8), group
    if shape == "m16n8k8" and operand == "a":  # .tf32
        row = group if i in (0, 2) else group + 8
        col = tig if i in (0, 1) else tig + 4
        return row, col
    if shape == "m16n8k8" and operand == "b":  # .tf32
        return (tig if i == 0 else tig + 4), group
    if shape == "m16n8k32" and operand == "a":  # .e4m3 / .e5m2
        row = group if (0 <= i < 4 or 8 <= i < 12) else group + 8
        col = tig * 4 + (i & 0x3) if i < 8 else tig * 4 + (i & 0x3) + 16
        return row, col
    if shape == "m16n8k32" and operand == "b":
        return (tig * 4 + (i & 0x3) if i < 4 else tig * 4 + (i & 0x3) + 16), group
    raise AssertionError((shape, operand))


@pytest.mark.parametrize("shape, operand, width, size", SHAPES)
def test_layouts_are_the_isa_formulas_and_cover_each_element_once(shape, operand, width,
                                                                    size):
    rows, cols = mma.layout(shape, operand, width)
    per_lane = size[0] * size[1] // 32
    assert rows.shape == cols.shape == (32, per_lane)
    for lane in range(32):
        for i in range(per_lane):
            assert (rows[lane, i], cols[lane, i]) == isa(shape, operand, width, lane, i)
    hits = np.zeros(size, dtype=int)
    np.add.at(hits, (rows, cols), 1)
    assert (hits == 1).all()


@pytest.mark.parametrize("shape, operand, width, size", SHAPES)
def test_packing_puts_each_element_where_the_isa_says_and_unpacking_inverts_it(
        shape, operand, width, size):
    dtype = {8: np.uint8, 16: np.uint16, 32: np.uint32}[width]
    rng = np.random.default_rng(5)
    bits = rng.integers(0, 1 << width, (3, *size), dtype=np.uint64).astype(dtype)
    regs = mma.pack(bits, shape, operand)
    per = 32 // width
    assert regs.dtype == np.uint32 and regs.shape == (3, 32, size[0] * size[1] // 32 // per)
    for p in range(3):
        for lane in range(32):
            for i in range(size[0] * size[1] // 32):
                row, col = isa(shape, operand, width, lane, i)
                got = (int(regs[p, lane, i // per]) >> (width * (i % per))) & ((1 << width) - 1)
                assert got == int(bits[p, row, col])
    back = mma.unpack(regs, shape, operand, width, size)
    assert back.dtype == dtype and np.array_equal(back, bits)


def test_bad_layout_requests_and_classes_are_named():
    with pytest.raises(ValueError, match="no fragment layout"):
        mma.layout("m16n8k16", "a", 8)
    with pytest.raises(ValueError, match="no fragment layout"):
        mma.layout("m8n8k4", "c", 32)
    with pytest.raises(ValueError, match="unknown class"):
        mma.draw(np.random.default_rng(0), "bogus", mma.INSTRUCTIONS["f32.f16.f16.f32"])


def test_the_layout_class_is_exact_in_every_format_and_each_model_gives_it():
    """Small integers: A @ B + C is exact (Fractions), so the GPU's check is sound."""
    for instr in mma.INSTRUCTIONS.values():
        data = mma.inputs(instr, problems=1)
        sel = data["cls"] == mma.CLASSES.index("layout")
        a, b, c = (mma.decode(data[x][sel], f) for x, f in
                   (("a", instr.a), ("b", instr.b), ("c", instr.cd)))
        assert (a == np.round(a)).all() and (b == np.round(b)).all()
        assert np.abs(a).max() <= 4 and np.abs(b).max() <= 4 and np.abs(c).max() <= 8
        want = [[float(sum((Fraction(a[0, i, t]) * Fraction(b[0, t, j])
                            for t in range(a.shape[2])), Fraction(c[0, i, j])))
                 for j in range(b.shape[2])] for i in range(a.shape[1])]
        assert np.array_equal(mma.exact(a, b, c)[0], want)
        for name, model in mma.models(instr, fpsim.hw.H100).items():
            d = mma.emulate(model, instr, {k: v[sel] for k, v in data.items()})
            assert np.array_equal(d[0], mma.encode(np.array(want), instr.cd)), (instr, name)


def test_the_sm90_fp8_lowering_model_rounds_c_last_to_nearest():
    """hmma_pair: two fp16 blocks from 0, then FADD c (nearest even): 2**24 + 3 -> 2**24 + 4
    (the fused preset truncates: 2**24 + 2)."""
    instr = mma.INSTRUCTIONS["f32.e4m3.e4m3.f32"]
    a = np.zeros((1, 16, 32))
    b = np.zeros((1, 32, 8))
    a[0, :, 0], a[0, :, 2], b[0, 0, :], b[0, 2, :] = 1.0, 2.0, 1.0, 1.0  # 1 + 2 = 3
    c = np.full((1, 16, 8), 2.0**24)
    data = {"a": mma.encode(a, instr.a), "b": mma.encode(b, instr.b),
            "c": mma.encode(c, instr.cd)}
    pair = mma.decode(mma.hmma_pair(instr, data, fpsim.hw.H100), "fp32")
    assert (pair == 2.0**24 + 4).all()
    fused = mma.decode(mma.emulate(mma.models(instr, fpsim.hw.H100)["preset"], instr, data),
                       "fp32")
    assert (fused == 2.0**24 + 2).all()


RECORDS = mma.load_records()


@pytest.mark.skipif(not RECORDS, reason="tests/data/mma_probe_records.npz is missing")
def test_the_inputs_are_the_ones_mmasim_was_recorded_on():
    for instr in mma.INSTRUCTIONS.values():
        data = mma.inputs(instr)
        for x in ("a", "b", "c"):
            assert np.array_equal(RECORDS[f"{instr.types}/{x}"], data[x]), (instr.types, x)
        assert mma.mmasim_outputs(instr, data, RECORDS), instr.types


@pytest.mark.skipif(not RECORDS, reason="tests/data/mma_probe_records.npz is missing")
def test_mmasim_agrees_with_the_presets_and_the_13_bit_models_where_expected():
    """MMA-Sim 2.1.1's Hopper mma equals the H100 presets on every class (fp16 output
    too, with the floor -21 the H100 probe decided; fpsim's former -133 differs on the
    exponent floor class); the fp8 models built here equal MMA-Sim's Hopper wgmma
    (block 32) and Ada mma (block 16) on every class, every pairing."""
    for instr in mma.INSTRUCTIONS.values():
        data = mma.inputs(instr)
        sims = mma.mmasim_outputs(instr, data, RECORDS)
        models = mma.models(instr, fpsim.hw.H100)
        floor = data["cls"] == mma.CLASSES.index("exponent floor")
        if instr.a.startswith("fp8") and instr.wgmma:  # the 13-bit block of 32, everywhere
            tail = "fp16 nearest" if instr.cd == "fp16" else "e8m13"
            got = mma.emulate(models[f"block 32, F 13, {tail} (MMA-Sim's Hopper wgmma rule)"],
                              instr, data)
            agree = mma.same(got, sims["Hopper wgmma"], instr.cd)
            assert agree.all(), instr.types
            continue
        if instr.a.startswith("fp8"):
            pairs = [("block 32, F 13, e8m13 (MMA-Sim's Hopper wgmma rule)", "Hopper wgmma"),
                     ("block 16, F 13, e8m13 (MMA-Sim's Ada mma rule)", "Ada mma")]
            for model, sim in pairs:
                agree = mma.same(mma.emulate(models[model], instr, data), sims[sim], instr.cd)
                assert agree.all(), (instr.types, model)
            preset = mma.emulate(models["preset"], instr, data)
            rand = data["cls"] == mma.CLASSES.index("random")
            assert mma.share(preset[rand], sims["Hopper wgmma"][rand], instr.cd) < 0.1
            continue
        preset = mma.emulate(models["preset"], instr, data)
        agree = mma.same(preset, sims["Hopper wgmma" if instr.wgmma else "Hopper mma"],
                         instr.cd)
        assert agree.all(), instr.types
        if instr.cd == "fp16":
            old = next(n for n in models if n.startswith("exp_floor="))
            alt = mma.same(mma.emulate(models[old], instr, data),
                           sims["Hopper wgmma" if instr.wgmma else "Hopper mma"], instr.cd)
            assert alt[~floor].all() and not alt[floor].all()


def test_each_disagreement_class_separates_the_preset_from_its_alternative():
    """The directed classes reach the cases they are for: on bf16 and fp16 output the
    alternative (floor -126 / -133, saturation, signed zero) differs from the preset."""
    for types, classes in (("f32.bf16.bf16.f32", ("exponent floor", "overflow", "zero sign")),
                           ("f32.tf32.tf32.f32", ("exponent floor", "overflow", "zero sign")),
                           ("f16.f16.f16.f16", ("exponent floor", "overflow", "zero sign"))):
        instr = mma.INSTRUCTIONS[types]
        data = mma.inputs(instr)
        models = mma.models(instr, fpsim.hw.H100)
        preset = mma.emulate(models["preset"], instr, data)
        for cls in classes:
            sel = data["cls"] == mma.CLASSES.index(cls)
            name = next(n for n in models if n.startswith(mma.ALTERNATIVE[cls]))
            alt = mma.emulate(models[name], instr, data)
            assert not mma.same(preset[sel], alt[sel], instr.cd).all(), (types, cls)


def nvdisasm():
    found = shutil.which("nvdisasm")
    if found:
        return found
    try:
        import nvidia
    except ImportError:
        return None
    for root in nvidia.__path__:
        for path in sorted(Path(root).glob("cu*/bin/nvdisasm")):
            return str(path)
    return None


# The tensor-core SASS each kernel must hold, by target.
SASS = {
    "sm_90a": {"f32.f16.f16.f32": ["HMMA.16816.F32 "], "f32.bf16.bf16.f32": ["HMMA.16816.F32.BF16"],
               "f32.tf32.tf32.f32": ["HMMA.1688.F32.TF32"], "f16.f16.f16.f16": ["HMMA.16816.F16"],
               # sm_90 has no mma.sync fp8 unit: F2FP to fp16, then two HMMA.
               "f32.e4m3.e4m3.f32": ["F2FP.F16.E4M3.UNPACK_B", "HMMA.16816.F32 "] * 1,
               "f32.e5m2.e5m2.f32": ["F2FP.F16.E5M2.UNPACK_B", "HMMA.16816.F32 "],
               "f32.e4m3.e5m2.f32": ["F2FP.F16.E4M3.UNPACK_B", "F2FP.F16.E5M2.UNPACK_B"]},
    "sm_90a wgmma": {"f32.f16.f16": ["HGMMA.64x8x16.F32 "],
                     "f32.bf16.bf16": ["HGMMA.64x8x16.F32.BF16"],
                     "f16.f16.f16": ["HGMMA.64x8x16.F16"],
                     "f32.e4m3.e4m3": ["QGMMA.64x8x32.F32.E4M3.E4M3"],
                     "f32.e5m2.e5m2": ["QGMMA.64x8x32.F32.E5M2.E5M2"],
                     "f32.e4m3.e5m2": ["QGMMA.64x8x32.F32.E4M3.E5M2"],
                     "f16.e4m3.e4m3": ["QGMMA.64x8x32.F16.E4M3.E4M3"]},
    "sm_89": {"f32.e4m3.e4m3.f32": ["QMMA.16832.F32.E4M3.E4M3"],
              "f32.e5m2.e5m2.f32": ["QMMA.16832.F32.E5M2.E5M2"],
              "f32.e4m3.e5m2.f32": ["QMMA.16832.F32.E4M3.E5M2"]},
}


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
@pytest.mark.parametrize("arch", sorted(SASS))
def test_every_kernel_compiles_to_its_tensor_core_instruction(arch, tmp_path):
    key, wgmma = arch, arch.endswith("wgmma")
    instructions = [i for i in mma.INSTRUCTIONS.values() if i.wgmma == wgmma]
    arch = arch.split()[0]
    source = tmp_path / "probes.cu"
    source.write_text(mma.module_source(instructions))
    cubin = tmp_path / "probes.cubin"
    subprocess.run(["nvcc", f"-arch={arch}", "-cubin", "-o", str(cubin), str(source)],
                   check=True, capture_output=True, text=True)
    tool = nvdisasm()
    if tool is None:
        pytest.skip("nvdisasm not found: the kernels compiled, their SASS is not read")
    sass = subprocess.run([tool, "-c", str(cubin)], check=True, capture_output=True,
                          text=True).stdout
    by_kernel = {}
    for part in sass.split(".text.")[1:]:
        name = part.split(":", 1)[0].split()[0].rstrip(",\"")
        by_kernel.setdefault(name, "")
        by_kernel[name] += part
    for types, wanted in SASS[key].items():
        body = by_kernel[mma.INSTRUCTIONS[types].kernel]
        for w in wanted:
            assert w in body, (arch, types, w)
        if arch == "sm_90a" and not wgmma and types.startswith("f32.e"):
            assert body.count("HMMA.16816.F32 ") == 2 and "QMMA" not in body


def test_without_a_gpu_the_command_fails_in_one_line(tmp_path):
    from fpsim.backends import gpu_missing

    if not gpu_missing():
        pytest.skip("a GPU is here")
    run = subprocess.run([sys.executable, "-m", "fpsim.compare.mma", "--out", str(tmp_path)],
                         capture_output=True, text=True, cwd=Path(__file__).parents[1])
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.count("\n") == 1 and run.stderr.startswith("fpsim.compare.mma: no ")
    assert not list(tmp_path.iterdir())


@pytest.mark.gpu
def test_the_probes_run_on_the_gpu(tmp_path):
    from fpsim.backends import gpu_missing

    if gpu_missing():
        pytest.skip("no GPU (fpsim.backends.gpu_missing() says why)")
    assert mma.main(["--out", str(tmp_path)]) == 0
    with np.load(tmp_path / "mma_probes.npz") as f:
        import json

        about = json.loads(str(f["about"]))
    assert about["instructions"] and all(about["layout_ok"].values()), about["layout_ok"]
    assert (tmp_path / "mma_probes.md").read_text().count("Layout check") == len(
        about["instructions"])


class PlantedProber:
    """A stand-in GPU whose instruction is one of fpsim's models (to test the report)."""

    def __init__(self, model_name):
        self.model_name = model_name

    def run(self, instr, data):
        return mma.emulate(mma.models(instr, fpsim.hw.H100)[self.model_name], instr, data)


def test_the_report_says_which_rule_a_planted_gpu_follows():
    instr = mma.INSTRUCTIONS["f32.bf16.bf16.f32"]
    r = mma.probe(PlantedProber("zero_sign=signed"), instr, fpsim.hw.H100, RECORDS)
    assert r.layout_ok
    said = mma.sided(r, "zero sign")
    n = int(said.split("vs fpsim zero_sign=signed: ")[1].split(" differ")[0])
    assert n > 0 and f"= preset 0, = other {n}" in said
    assert mma.sided(r, "random") == "-"
    text = mma.table([r], "planted")
    assert "Layout check (small integers against the exact product): passed" in text
    row = next(line for line in text.splitlines() if line.startswith("| zero sign |"))
    cells = [c.strip() for c in row.split("|")[1:-1]]
    names = list(r.candidates)
    assert float(cells[2 + names.index("fpsim zero_sign=signed")]) == 1.0
    assert float(cells[2 + names.index("fpsim preset")]) < 1.0
    # Issue 31's zero-factor example: 0x33bcce00 from the preset's rule.
    assert "the hardware gives 0x33bcce00" in text


def test_a_layout_failure_is_reported_as_such():
    class Transposed(PlantedProber):
        def run(self, instr, data):
            d = super().run(instr, data)
            return d[:, ::-1, :].copy()  # rows swapped: what a wrong layout would give

    r = mma.probe(Transposed("preset"), mma.INSTRUCTIONS["f32.f16.f16.f32"], fpsim.hw.H100,
                  RECORDS)
    assert not r.layout_ok
    assert "FAILED: the numerics below are not read" in mma.table([r], "planted")


def test_the_probes_as_compare_cases(monkeypatch):
    """``cases`` (what ``fpsim compare --suite gpu`` runs) on a planted GPU of capability
    8.0: the fp8 instructions are skipped by name, the others evaluate."""
    from types import SimpleNamespace

    from fpsim.compare import evaluate

    class Planted(PlantedProber):
        def __init__(self, device):
            super().__init__("preset")
            self.reasons = {i.types: f"needs compute capability {i.capability}"
                            for i in mma.INSTRUCTIONS.values()
                            if device.capability < i.capability}
            self.reasons.update({t.key: "tcgen05.mma needs compute capability 10.x"
                                 for t in mma.TCGEN05.values()})

    monkeypatch.setattr(mma, "Prober", Planted)
    device = SimpleNamespace(xp=SimpleNamespace(__name__="cupy"), name="planted",
                             capability=(8, 0), preset=fpsim.hw.H100)
    records = [evaluate(c) if isinstance(c, mma.Case) else c for c in mma.cases(device)]
    assert [r.name for r in records] == [f"gpu {i.label}" for i in mma.PROBES.values()]
    for r in records:
        if "tcgen05" in r.name:
            assert r.verdict == "skipped: tcgen05.mma needs compute capability 10.x"
        elif "wgmma" in r.name:
            assert r.verdict == "skipped: needs compute capability (9, 0)"
        elif "e4m3" in r.name or "e5m2" in r.name:
            assert r.verdict == "skipped: needs compute capability (8, 9)"
        else:
            assert r.best == "fpsim preset" and r.verdict == "identical", r.name
    stand_in = SimpleNamespace(xp=np, name="NumPy")
    assert [r.verdict for r in mma.cases(stand_in)] == [
        "skipped: the instruction probes need CuPy on a GPU"]


@pytest.mark.parametrize("types", ["f32.f16.f16", "f32.e4m3.e4m3", "f16.f16.f16"])
def test_warpgroup_fragments_stack_the_warps_and_invert(types):
    """wgmma A and D: warp w holds rows 16w..16w+15 as mma.m16n8k* holds rows 0..15."""
    instr = mma.INSTRUCTIONS[types]
    m, n, k = instr.mnk
    rng = np.random.default_rng(7)
    for operand, cols, width in (("a", k, mma.WIDTH[instr.a]), ("c", n, mma.WIDTH[instr.cd])):
        dtype = {8: np.uint8, 16: np.uint16, 32: np.uint32}[width]
        bits = rng.integers(0, 1 << width, (2, m, cols), dtype=np.uint64).astype(dtype)
        regs = mma.fragments(bits, instr, operand)
        per = 32 // width
        assert regs.shape[:2] == (2, 128)
        for thread in range(128):
            warp, lane = divmod(thread, 32)
            for i in range(16 * cols // 32):
                row, col = isa(instr.warp_shape, operand, width, lane, i)
                got = (int(regs[1, thread, i // per]) >> (width * (i % per))) & ((1 << width) - 1)
                assert got == int(bits[1, 16 * warp + row, col])
        if operand == "c":
            assert np.array_equal(mma.unfragment(regs, instr), bits)


@pytest.mark.parametrize("size, k_len", [(2, 16), (1, 32)])
def test_the_shared_memory_image_is_k_major_core_matrices(size, k_len):
    """No swizzle, K-major: 8 rows (n) of 16 bytes (k) a core matrix, 128 bytes each,
    consecutive along K; every byte of the image holds exactly one byte of B."""
    k, n = np.meshgrid(np.arange(k_len), np.arange(8), indexing="ij")
    offsets = mma.smem_offset(k, n, size)
    per = 16 // size
    assert np.array_equal(offsets, (k // per) * 128 + n * 16 + (k % per) * size)
    assert sorted(offsets.ravel().tolist()) == list(range(0, 8 * k_len * size, size))
    dtype = {1: np.uint8, 2: np.uint16}[size]
    bits = np.random.default_rng(1).integers(0, 1 << (8 * size), (3, k_len, 8)).astype(dtype)
    image = mma.smem_image(bits)
    assert image.dtype == np.uint32 and image.shape == (3, 8 * k_len * size // 4)
    flat = image.view(np.uint8).reshape(3, -1)
    for p in range(3):
        for kk in range(k_len):
            for nn in range(8):
                o = int(offsets[kk, nn])
                assert int.from_bytes(bytes(flat[p, o:o + size]), "little") == bits[p, kk, nn]
