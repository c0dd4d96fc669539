"""Record MMA-Sim's outputs for the inputs of the instruction probes.

Writes tests/data/mma_probe_records.npz, which ``fpsim.compare.mma`` reads on the GPU
machine (where mmasim is not installed) and tests/test_mma_probes.py checks. Run it
where the ``mmasim`` package (PyPI, Xie et al., arXiv 2511.10909) and a CPU build of
torch are installed:

    python3 tests/data/make_mma_probe_records.py

For each probe's instruction it takes the probe's own seeded inputs
(``fpsim.compare.mma.inputs``) and asks MMA-Sim's ``dpa`` for every D[i, j] =
C[i, j] + A[i, :] . B[:, j] as its model of the instruction on Hopper computes it;
for the fp8 ``mma.sync``, which MMA-Sim models on Ada (not on Hopper), Ada's ``mma``
and Hopper's ``wgmma`` of the same types (m64n8k32); for the ``wgmma`` probes, its
Hopper ``wgmma``.
"""

from __future__ import annotations

import json
from importlib.metadata import version
from pathlib import Path

import numpy as np
import torch
from mmasim.nv_ptx import MMA, WGMMA

from fpsim.compare.mma import INSTRUCTIONS, PROBLEMS, SEED, Instruction, inputs

TORCH = {"fp16": torch.float16, "bf16": torch.bfloat16, "tf32": torch.float32,
         "fp32": torch.float32, "fp8_e4m3": torch.float8_e4m3fn,
         "fp8_e5m2": torch.float8_e5m2}
INT = {1: torch.uint8, 2: torch.int16, 4: torch.int32}


def tensor(bits: np.ndarray, fmt: str) -> torch.Tensor:
    """Encodings as the torch dtype MMA-Sim reads."""
    dtype = TORCH[fmt]
    signed = bits.view({1: np.uint8, 2: np.int16, 4: np.int32}[bits.dtype.itemsize])
    return torch.from_numpy(np.ascontiguousarray(signed)).view(dtype)


def models(instr: Instruction) -> dict[str, object]:
    """MMA-Sim's models of ``instr``, by a label."""
    m, n, k = instr.mnk
    types = instr.types
    if instr.wgmma:
        return {"Hopper wgmma": WGMMA("Hopper", f"{instr.shape}.{types}")}
    if instr.a.startswith("fp8"):
        wg = ".".join(types.split(".")[:3])  # wgmma's types: D.A.B
        return {"Ada mma": MMA("Ada Lovelace", f"{instr.shape}.{types}"),
                "Hopper wgmma": WGMMA("Hopper", f"m64n8k{k}.{wg}")}
    return {"Hopper mma": MMA("Hopper", f"{instr.shape}.{types}")}


def main() -> None:
    out: dict[str, np.ndarray] = {}
    for instr in INSTRUCTIONS.values():
        data = inputs(instr)
        for x in ("a", "b", "c"):
            out[f"{instr.types}/{x}"] = data[x]
        a, b, c = (tensor(data[x], f) for x, f in (("a", instr.a), ("b", instr.b),
                                                     ("c", instr.cd)))
        p, m, k = a.shape
        n = b.shape[2]
        rows = a[:, :, None, :].expand(p, m, n, k).reshape(-1, k).contiguous()
        cols = b.permute(0, 2, 1)[:, None, :, :].expand(p, m, n, k).reshape(-1, k).contiguous()
        for label, model in models(instr).items():
            d = model.dpa(rows, cols, c.reshape(-1).clone())  # type: ignore[attr-defined]
            width = d.element_size()
            bits = d.view(INT[width]).numpy().view({2: np.uint16, 4: np.uint32}[width])
            out[f"{instr.types}/mmasim {label}"] = bits.reshape(p, m, n)
    out["about"] = np.array(json.dumps({
        "mmasim": version("mmasim"), "torch": version("torch"), "seed": SEED,
        "problems": PROBLEMS, "instructions": [i.ptx for i in INSTRUCTIONS.values()]}))
    np.savez_compressed(Path(__file__).with_name("mma_probe_records.npz"), **out)


if __name__ == "__main__":
    main()
