"""The paper's ablations: each technique of mixed precision training switched off in turn."""

from __future__ import annotations

import re
from dataclasses import dataclass

from fpsim.precision.policy import Policy, parse


@dataclass(frozen=True)
class Ablation:
    """A precision policy (see ``fpsim.precision.parse``) and a loss scale (None,
    "dynamic", or a number: static)."""

    name: str
    policy: str
    loss_scale: str | float | None
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


_SHRUNK = re.compile(r"no_loss_scaling@2\^(-[1-9][0-9]*)")


def shrunk(exponent: int) -> Ablation:
    """``no_loss_scaling`` with every gradient held in fp16 ``2**exponent`` times its size
    (``exponent`` < 0), as a mean loss over ``2**-exponent`` times as many samples would
    make it. A static loss scale of ``2**exponent`` does this: the weight gradients are
    divided by it again in fp32, so the optimizer sees the same gradients as ever."""
    if not isinstance(exponent, int) or exponent >= 0:
        raise ValueError(f"the exponent of a shrunk gradient must be a negative integer, "
                         f"got {exponent!r}")
    return Ablation(f"no_loss_scaling@2^{exponent}", "mixed", 2.0**exponent,
                    f"as no_loss_scaling, with gradients 2^{-exponent} times smaller in fp16")


def ablation(name: str) -> Ablation:
    """The ablation called ``name``: one of ``ABLATIONS``, or ``no_loss_scaling@2^-k``
    (see ``shrunk``)."""
    if name in ABLATIONS:
        return ABLATIONS[name]
    match = _SHRUNK.fullmatch(name) if isinstance(name, str) else None
    if match:
        return shrunk(int(match.group(1)))
    raise ValueError(f"unknown policy {name!r}; known policies: {', '.join(ABLATIONS)}, "
                     "or no_loss_scaling@2^-k")
