"""Ablations: named training policies (a precision policy and a loss scale), and the
paper's seven as presets, each technique of mixed precision training switched off in turn.

Master weights are the policy's ``params`` format (``params=fp16``: none), the
accumulation its ``accum`` and ``order`` (see ``fpsim.precision.parse``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from fpsim._checks import real
from fpsim.precision.policy import Policy, parse


@dataclass(frozen=True)
class Ablation:
    """A named training policy.

    Parameters
    ----------
    name : str
        What records, tables and verdicts call it.
    policy : str or Policy
        The precision policy, as ``fpsim.precision.parse`` reads it
        (``"mixed,params=fp16"``), or a ``Policy`` (kept as its string).
    loss_scale : None, "dynamic" or float
        No loss scaling, PyTorch GradScaler's dynamic scale, or a static scale.
    summary : str
        One line saying what it is.
    update : str or Policy, optional
        The policy the optimizer rounds the weight update under, when it is not
        ``policy`` (e.g. stochastic rounding of bf16 weights, the passes to nearest).

    Raises
    ------
    ValueError
        For an empty name, a policy that does not parse, or a loss scale that is not
        None, "dynamic" or a positive finite number.

    Examples
    --------
    >>> Ablation("bf16_sr", "bf16,params=bf16,rounding=stochastic,seed=0").precision().params
    Format(8, 7, name='bf16')
    """

    name: str
    policy: str
    loss_scale: str | float | None = None
    summary: str = ""
    update: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError(f"an ablation's name must be a non-empty string, got {self.name!r}")
        for field_name in ("policy", "update"):
            value = getattr(self, field_name)
            if isinstance(value, Policy):
                object.__setattr__(self, field_name, value := str(value))
            if value is None and field_name == "update":
                continue
            if not isinstance(value, str):
                raise ValueError(f"ablation {self.name!r}: {field_name} must be a policy "
                                 f"string or a Policy, got {value!r}")
            try:
                parse(value)
            except ValueError as exc:
                raise ValueError(f"ablation {self.name!r}: {field_name}: {exc}") from None
        if self.loss_scale is not None and self.loss_scale != "dynamic":
            if isinstance(self.loss_scale, str):
                raise ValueError(f"ablation {self.name!r}: loss_scale must be None, 'dynamic' "
                                 f"or a number, got {self.loss_scale!r}")
            real(self.loss_scale, f"ablation {self.name!r}: loss_scale", 0, low_open=True)
        if not isinstance(self.summary, str):
            raise ValueError(f"ablation {self.name!r}: summary must be a string")

    def precision(self) -> Policy:
        """The precision policy (a fresh object: its stochastic stream starts anew)."""
        return parse(self.policy)

    def config(self) -> dict[str, Any]:
        """Everything of the ablation that determines a run (part of its cache key)."""
        config = dict(policy=self.name, precision=self.policy, loss_scale=self.loss_scale)
        if self.update is not None:
            config["update"] = self.update
        return config


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
"""The paper's ablations, by name: fp32, mixed, no_master, no_loss_scaling, fp16_accum,
bf16 and native_fp16."""

NATIVE_ABLATIONS: dict[str, Ablation] = {a.name: a for a in (
    Ablation("native_no_master", "native_fp16,params=fp16", "dynamic",
             "as no_master, in hardware half precision (the weights fp16 arrays)"),
    Ablation("native_no_loss_scaling", "native_fp16", None,
             "as no_loss_scaling, in hardware half precision"),
)}
"""The native counterparts of the ablations that ``native_fp16`` (mixed's) and
``fp32`` (native already) leave out: on a GPU, each beside its emulated one. There is
no native ``fp16_accum`` (CuPy's float16 products accumulate in fp32) nor ``bf16``
(CuPy has no bfloat16 arrays)."""


_SHRUNK = re.compile(r"no_loss_scaling@2\^(-[1-9][0-9]*)")


def shrunk(exponent: int) -> Ablation:
    """``no_loss_scaling`` with every gradient held in fp16 ``2**exponent`` times its size.

    A mean loss over ``2**-exponent`` times as many samples would make it so. A static
    loss scale of ``2**exponent`` does this: the weight gradients are divided by it
    again in fp32, so the optimizer sees the same gradients as ever.

    Parameters
    ----------
    exponent : int
        A negative integer.

    Returns
    -------
    Ablation
        Named ``no_loss_scaling@2^<exponent>``.

    Raises
    ------
    ValueError
        When ``exponent`` is not a negative integer.

    Examples
    --------
    >>> a = shrunk(-8)
    >>> a.name, a.policy, a.loss_scale
    ('no_loss_scaling@2^-8', 'mixed', 0.00390625)
    """
    if not isinstance(exponent, int) or isinstance(exponent, bool) or exponent >= 0:
        raise ValueError(f"the exponent of a shrunk gradient must be a negative integer, "
                         f"got {exponent!r}")
    return Ablation(f"no_loss_scaling@2^{exponent}", "mixed", 2.0**exponent,
                    f"as no_loss_scaling, with gradients 2^{-exponent} times smaller in fp16")


def ablation(name: str | Ablation) -> Ablation:
    """The ablation called ``name``: a preset, or ``no_loss_scaling@2^-k`` (see ``shrunk``).

    Parameters
    ----------
    name : str or Ablation
        A preset's name; an ``Ablation`` is returned as it is.

    Returns
    -------
    Ablation

    Raises
    ------
    ValueError
        For an unknown name (the message lists the presets).

    Examples
    --------
    >>> ablation("no_master").policy
    'mixed,params=fp16'
    >>> ablation("no_loss_scaling@2^-4").loss_scale
    0.0625
    """
    if isinstance(name, Ablation):
        return name
    if isinstance(name, str) and name in ABLATIONS:
        return ABLATIONS[name]
    if isinstance(name, str) and name in NATIVE_ABLATIONS:
        return NATIVE_ABLATIONS[name]
    match = _SHRUNK.fullmatch(name) if isinstance(name, str) else None
    if match:
        return shrunk(int(match.group(1)))
    known = ", ".join([*ABLATIONS, *NATIVE_ABLATIONS])
    raise ValueError(f"unknown policy {name!r}; known policies: {known}, "
                     "or no_loss_scaling@2^-k")
