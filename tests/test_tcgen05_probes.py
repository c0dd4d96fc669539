"""Blackwell's tcgen05.mma probes (fpsim.compare.mma.TCGEN05), offline: the instruction
descriptors against the PTX ISA's table, the shared-memory images against the canonical
K-major layout without swizzle, and the kernels compiled for sm_100a by nvcc 13 with the
tensor-core instruction in their SASS; the Prober and `fpsim compare --suite gpu` on a
stand-in Blackwell (compute capability 10.x) and elsewhere. No Blackwell GPU has run them
(issue 31 item 2)."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest
from test_mma_probes import nvdisasm

import fpsim
from fpsim.compare import mma


def field(value, lo, hi):
    return (value >> lo) & ((1 << (hi - lo + 1)) - 1)


# PTX ISA, "Instruction descriptor" (kind::tf32, f16, f8f6f4): atype/btype codes.
CODES = {"fp16": 0, "bf16": 1, "tf32": 2, "fp8_e4m3": 0, "fp8_e5m2": 1}


@pytest.mark.parametrize("types", sorted(mma.TCGEN05))
def test_instruction_descriptors_are_the_isas_table(types):
    instr = mma.TCGEN05[types]
    d = instr.idesc
    m, n, k = instr.mnk
    assert (m, n) == (128, 16) and k * mma.WIDTH[instr.a] == 256  # 32 bytes of K
    assert field(d, 0, 3) == 0  # dense, no saturation
    assert field(d, 4, 5) == 1  # D: F32
    assert field(d, 7, 9) == CODES[instr.a] and field(d, 10, 12) == CODES[instr.b]
    assert field(d, 13, 16) == 0  # no negation, A and B K-major
    assert field(d, 17, 22) == n >> 3 and field(d, 23, 23) == 0
    assert field(d, 24, 28) == m >> 4 and field(d, 29, 31) == 0


@pytest.mark.parametrize(("rows", "k_len", "size"), [(128, 16, 2), (16, 16, 2), (128, 8, 4),
                                                     (16, 32, 1)])
def test_the_image_is_k_major_core_matrices_without_swizzle(rows, k_len, size):
    """Each element once; a core matrix is 8 rows of 16 contiguous bytes; the next core
    matrix along K is 128 bytes on (the descriptor's leading byte offset), the next 8 rows
    128 * (K bytes / 16) on (its stride byte offset)."""
    r, k = np.meshgrid(np.arange(rows), np.arange(k_len), indexing="ij")
    off = mma.tcgen05_offset(r, k, size, k_len)
    assert sorted(off.ravel().tolist()) == list(range(0, rows * k_len * size, size))
    per = 16 // size
    assert (off[1:8, :] - off[0:7, :] == 16).all()
    assert (off[:, per:] - off[:, :-per] == 128).all()
    assert (off[8:, :] - off[:-8, :] == 128 * (k_len * size // 16)).all()
    bits = np.arange(rows * k_len, dtype={1: np.uint8, 2: np.uint16, 4: np.uint32}[size])
    words = mma.tcgen05_image(bits.reshape(1, rows, k_len))
    flat = words.view(bits.dtype).reshape(-1)
    assert (flat[off.ravel() // size] == bits).all()


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
def test_every_probe_compiles_for_sm_100a_to_its_tensor_core_instruction(tmp_path):
    """kind::f16 and kind::tf32 become UTCHMMA, kind::f8f6f4 UTCQMMA, each once, issued
    from the descriptors in uniform registers; the commit is a UTCBAR; tensor memory is
    allocated and freed (UTCATOMSWS)."""
    source = tmp_path / "probes.cu"
    source.write_text("\n".join(mma.tcgen05_source(i) for i in mma.TCGEN05.values()))
    cubin = tmp_path / "probes.cubin"
    run = subprocess.run(["nvcc", "-arch=sm_100a", "-cubin", "-o", str(cubin), str(source)],
                         capture_output=True, text=True)
    if run.returncode and "sm_100a" in run.stderr and "not defined" in run.stderr:
        pytest.skip(f"this nvcc has no sm_100a: {run.stderr.strip()[:200]}")
    assert run.returncode == 0, run.stderr
    tool = nvdisasm()
    if tool is None:
        pytest.skip("nvdisasm not found: the kernels compiled, their SASS is not read")
    sass = subprocess.run([tool, "-c", str(cubin)], check=True, capture_output=True,
                          text=True).stdout
    bodies = {part.split(":", 1)[0].split()[0].rstrip(",\""): part
              for part in sass.split(".text.")[1:]}
    for instr in mma.TCGEN05.values():
        body = "".join(v for k, v in bodies.items() if k == instr.kernel)
        unit = "UTCQMMA" if instr.kind == "f8f6f4" else "UTCHMMA"
        assert body.count(unit + " ") == 1 and "gdesc" in body, (instr.types, body[:400])
        assert "UTCBAR" in body and "UTCATOMSWS" in body


# --- the Prober and fpsim compare --suite gpu, with a stand-in Blackwell ----------------------


class HostModule:
    """A stand-in for CuPy's RawModule of the tcgen05 probes: each kernel reads A and B back
    from their shared-memory images by the canonical K-major offsets (``tcgen05_offset``,
    checked above against the ISA's layout), computes D = A B + C with ``model`` (the GPU a
    planted rule), and stores row t of each problem from thread t, as the kernel does."""

    def __init__(self, model_name="preset"):
        self.model_name = model_name

    def get_function(self, kernel):
        instr = next(t for t in mma.PROBES.values() if t.kernel == kernel)

        def launch(grid, block, args):
            a_image, b_image, c, d = args
            assert block == (128,) and grid == (a_image.size * 4 // (128 * 32),)
            m, n, k = instr.mnk
            a = unimage(a_image, grid[0], m, k, mma.WIDTH[instr.a])
            b = np.swapaxes(unimage(b_image, grid[0], n, k, mma.WIDTH[instr.b]), 1, 2)
            data = {"a": a, "b": b, "c": c.reshape(grid[0], m, n)}
            model = mma.models(instr, fpsim.hw.B200)[self.model_name]
            d[:] = mma.emulate(model, instr, data).reshape(-1)

        return launch


def unimage(words, problems, rows, k_len, width):
    """The (problems, rows, K) encodings of a shared-memory image."""
    dtype = {8: np.uint8, 16: np.uint16, 32: np.uint32}[width]
    flat = words.reshape(problems, -1).view(dtype)
    r, k = np.meshgrid(np.arange(rows), np.arange(k_len), indexing="ij")
    return flat[:, mma.tcgen05_offset(r, k, width // 8, k_len) // (width // 8)]


def stand_in(capability, module):
    """A CuPy-like device on the host whose nvcc-built modules are ``module``."""
    from types import SimpleNamespace

    xp = SimpleNamespace(__name__="cupy", asarray=np.asarray, asnumpy=np.asarray,
                         zeros_like=np.zeros_like, RawModule=lambda **kw: module)
    return SimpleNamespace(xp=xp, name=f"stand-in {capability}", capability=capability,
                           preset=fpsim.hw.B200)


@pytest.fixture
def tcgen05_only(monkeypatch):
    """The probe list cut to the tcgen05 ones (the others' kernels have no stand-in here)."""
    monkeypatch.setattr(mma, "INSTRUCTIONS", {})
    monkeypatch.setattr(mma, "PROBES", {t.key: t for t in mma.TCGEN05.values()})


def test_on_a_blackwell_the_probes_run_through_the_prober(monkeypatch, tcgen05_only):
    """Compute capability 10.0: the Prober builds the tcgen05 kernels for sm_100a and runs
    each on the probe's inputs; its packing (A's image, B transposed into its K-major image,
    C and D a row per thread) gives back the planted GPU's D, the layout check passes, and
    ``fpsim compare --suite gpu``'s cases come out identical to the B200 presets."""
    from fpsim.compare import evaluate

    # Each width of input once (2, 4 and 1 bytes, mixed fp8), to keep the test short.
    probes = [mma.TCGEN05[t] for t in ("f32.bf16.bf16", "f32.tf32.tf32", "f32.e4m3.e5m2")]
    monkeypatch.setattr(mma, "TCGEN05", {t.types: t for t in probes})
    monkeypatch.setattr(mma, "PROBES", {t.key: t for t in probes})
    built = []

    def nvcc(self, probes, source, arch):  # nvcc's cubin, loaded: the device's stand-in
        built.append((arch, [p.key for p in probes], source))
        return self.device.xp.RawModule(path="probes.cubin") if probes else None

    monkeypatch.setattr(mma.Prober, "_nvcc", nvcc)
    device = stand_in((10, 0), HostModule())
    prober = mma.Prober(device)
    assert prober.reasons == {} and [p.key for p in prober.instructions] == list(mma.PROBES)
    arch, keys, source = built[-1]
    assert arch == "sm_100a" and keys == [t.key for t in mma.TCGEN05.values()]
    assert all(t.kernel in source for t in mma.TCGEN05.values())
    with fpsim.backend("numpy"):
        records = [evaluate(c) if isinstance(c, mma.Case) else c for c in mma.cases(device)]
    assert [r.name for r in records] == [f"gpu {t.label}" for t in mma.TCGEN05.values()]
    for r in records:
        assert r.best == "fpsim preset" and r.verdict == "identical", (r.name, r.verdict)


def test_the_packing_is_checked_by_the_layout_class(monkeypatch, tcgen05_only):
    """B left untransposed (a packing bug) fails the layout check, which skips the probe."""
    real = mma.tcgen05_arguments
    monkeypatch.setattr(mma, "tcgen05_arguments", lambda data: real(
        {**data, "b": np.ascontiguousarray(np.swapaxes(data["b"], 1, 2)).reshape(
            data["b"].shape)}))
    monkeypatch.setattr(mma.Prober, "_nvcc",
                        lambda self, probes, source, arch: self.device.xp.RawModule())
    device = stand_in((10, 0), HostModule())
    with fpsim.backend("numpy"):
        r = mma.probe(mma.Prober(device), mma.TCGEN05["f32.f16.f16"], fpsim.hw.B200, {})
    assert not r.layout_ok


@pytest.mark.parametrize("capability", [(9, 0), (12, 0), (8, 9)])
def test_elsewhere_the_tcgen05_probes_are_skipped_with_the_reason(capability, tcgen05_only):
    device = stand_in(capability, HostModule())
    prober = mma.Prober(device)
    assert prober.instructions == []
    records = list(mma.cases(device))
    assert [r.name for r in records] == [f"gpu {t.label}" for t in mma.TCGEN05.values()]
    assert {r.verdict for r in records} == {
        "skipped: tcgen05.mma needs a Blackwell data-center GPU (compute capability 10.x: "
        "sm_100a, sm_103a)"}


def test_without_nvcc_the_reason_says_so(monkeypatch, tcgen05_only):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    prober = mma.Prober(stand_in((10, 3), HostModule()))
    assert set(prober.reasons.values()) == {"needs nvcc (sm_103a) on PATH"}


def test_labels_and_keys_name_each_probe_once():
    assert len({p.label for p in mma.PROBES.values()}) == len(mma.PROBES)
    assert mma.PROBES["tcgen05.f32.bf16.bf16"].label == (
        "tcgen05.mma.cta_group::1.kind::f16 .f32.bf16.bf16")
    assert mma.PROBES["f32.bf16.bf16"].label == (
        "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16")
