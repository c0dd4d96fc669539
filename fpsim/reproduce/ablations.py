"""The paper's ablations: each technique of mixed precision training switched off in turn."""

from __future__ import annotations

from dataclasses import dataclass

from fpsim.precision.policy import Policy, parse


@dataclass(frozen=True)
class Ablation:
    """A precision policy (see ``fpsim.precision.parse``) and a loss scale (None, "dynamic")."""

    name: str
    policy: str
    loss_scale: str | None
    summary: str

    def precision(self) -> Policy:
        return parse(self.policy)

    def config(self) -> dict:
        return dict(policy=self.name, precision=self.policy, loss_scale=self.loss_scale)


ABLATIONS: dict[str, Ablation] = {a.name: a for a in (
    Ablation("fp32", "native_fp32", None, "float32 throughout (NumPy float32, the baseline)"),
    Ablation("mixed", "mixed", "dynamic",
             "fp16 compute, fp32 master weights, fp32 accumulation, dynamic loss scaling"),
    Ablation("no_master", "mixed,params=fp16", "dynamic",
             "as mixed, but the weights (and optimizer state) are fp16, updated in fp16"),
    Ablation("no_loss_scaling", "mixed", None, "as mixed, without loss scaling"),
    Ablation("fp16_accum", "mixed,accum=fp16,order=sequential", "dynamic",
             "as mixed, but dot products accumulate in fp16 (sequentially)"),
    Ablation("bf16", "bf16", None, "bf16 compute, fp32 master weights, no loss scaling"),
    Ablation("native_fp16", "native_fp16", "dynamic",
             "as mixed, in hardware half precision (NumPy float16) instead of emulation"),
)}


def ablation(name: str) -> Ablation:
    """The ablation called ``name``."""
    if name not in ABLATIONS:
        raise ValueError(f"unknown policy {name!r}; known policies: {', '.join(ABLATIONS)}")
    return ABLATIONS[name]
