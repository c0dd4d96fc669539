"""Blackwell's tcgen05.mma probes (fpsim.compare.mma.TCGEN05), offline: the instruction
descriptors against the PTX ISA's table, the shared-memory images against the canonical
K-major layout without swizzle, and the kernels compiled for sm_100a by nvcc 13 with the
tensor-core instruction in their SASS. No Blackwell GPU has run them (issue 31 item 2)."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest
from test_mma_probes import nvdisasm

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
