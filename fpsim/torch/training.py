"""Training a torch model under a policy: master weights, loss scaling, telemetry.

- ``MasterWeights``: an optimizer wrapper. The torch optimizer updates float64 copies of
  the stored weights; each new weight is rounded once into the stored format (fp32
  masters beside the model's fp16/bf16 working weights, or, without masters, the working
  weights themselves: stochastic rounding makes small updates count on average).
- ``LossScaler``: ``torch.amp.GradScaler``'s calls (``scale``, ``unscale_``, ``step``,
  ``update``, ``state_dict``) over fpsim's loss scales (``fpsim.training``: none, static,
  dynamic with GradScaler's rule and DeepSpeed's hysteresis).
- ``Trainer``: one step of an emulated model, reported as ``fpsim.training.StepReport``
  (underflowing and overflowing gradients, flushed gradients, absorbed updates), counted
  by ``fpsim.training``'s monitors.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import torch

from fpsim._checks import integer
from fpsim.formats import Format, as_format
from fpsim.precision.numerics import _seed, covers, float64_sum
from fpsim.precision.policy import SEED_LIMIT, Policy, as_policy
from fpsim.torch.emulation import DTYPE_FORMATS, emulate
from fpsim.torch.exchange import float_tensor, to_array
from fpsim.torch.rounding import Rounding
from fpsim.training.loss_scale import (
    DynamicLossScale,
    NoLossScale,
    StaticLossScale,
    as_loss_scale,
)
from fpsim.training.monitor import FlushCounter, GradientCounts
from fpsim.training.trainer import StepReport

LossScale = NoLossScale | StaticLossScale | DynamicLossScale


class MasterWeights:
    """An optimizer wrapper that keeps each weight in a policy's formats.

    With master weights (``policy.params`` wider than ``policy.compute``, as ``"mixed"``):
    the masters are values of ``params`` (fp32) kept here, and the model's parameters, the
    working weights, are the masters rounded to ``compute`` (fp16, bf16) after each step.
    Without (``"mixed,params=fp16"``): the working weights are stored in ``params`` and
    updated there. Either way the torch optimizer computes each step in float64 on copies
    of the stored weights (its state kept there too), and each new weight is rounded once
    into the stored format by ``rounding``: ``"stochastic"`` gives stochastic-rounding
    updates. An update is *absorbed* when it moved the float64 copy but the rounded weight
    is the old one (``fpsim.optim``'s count).

    Parameters
    ----------
    params : iterable of torch.Tensor
        The model's parameters (any floating dtype: float32 under ``emulate``, or a
        float16/bfloat16 model's own).
    optimizer : callable
        Makes the torch optimizer of a list of tensors:
        ``lambda ps: torch.optim.SGD(ps, lr=0.1)``.
    policy : Policy or str, default "mixed"
        Its ``params`` and ``compute`` formats and its rounding (as ``emulate`` takes it).
    rounding : str, optional
        The rounding of each update into the stored format (default: the policy's).
    seed : int, optional
        The seed of stochastic rounding (each step draws a new one from it).

    Attributes
    ----------
    optimizer : torch.optim.Optimizer
        The torch optimizer, over the float64 copies (attach learning-rate schedulers to it).
    params : list of torch.Tensor
        The working weights.
    absorbed, updated : int
        Of the last step's nonzero updates: how many were lost, and how many there were.

    Raises
    ------
    TypeError
        ``params`` not floating tensors; ``optimizer`` not callable, or making no
        ``torch.optim.Optimizer``.
    ValueError
        No parameters; an unknown policy or rounding mode.

    Examples
    --------
    >>> import torch
    >>> import fpsim.torch
    >>> w = torch.nn.Parameter(torch.tensor([1.0, 1.0]))
    >>> opt = fpsim.torch.MasterWeights([w], lambda ps: torch.optim.SGD(ps, lr=1.0),
    ...                                 "mixed,params=fp16")
    >>> w.grad = torch.tensor([1e-4, 0.5])
    >>> opt.step()  # 1 - 1e-4 rounds back to 1 in fp16: that update is absorbed
    >>> w.tolist(), opt.absorbed, opt.updated
    ([1.0, 0.5], 1, 2)
    """

    def __init__(self, params: Iterable[torch.Tensor],
                 optimizer: Callable[[list[torch.Tensor]], torch.optim.Optimizer],
                 policy: Policy | str = "mixed", *, rounding: str | None = None,
                 seed: int | None = None) -> None:
        self.params = [float_tensor(p, "a parameter") for p in params]
        if not self.params:
            raise ValueError("MasterWeights got no parameters")
        if not callable(optimizer):
            raise TypeError("optimizer must make the torch optimizer of a list of tensors "
                            f"(lambda ps: torch.optim.SGD(ps, lr=0.1)), got "
                            f"{type(optimizer).__name__}")
        self.policy = as_policy(policy)
        p = self.policy
        self.stored: Format = p.params
        self.working: Format = p.compute if p.master_weights else p.params
        if seed is not None:
            seed = integer(seed, "seed", 0, SEED_LIMIT - 1)
        self.update_rounding = Rounding(self.stored, rounding or p.rounding,
                                        subnormals=p.subnormals, seed=seed)
        to_stored = Rounding(self.stored, p.rounding, subnormals=p.subnormals)
        # Copies (never views of the working weights, even where no rounding is needed).
        self.masters = [_rounded(w.detach().to(torch.float64, copy=True), to_stored)
                        for w in self.params]
        made = optimizer(self.masters)
        if not isinstance(made, torch.optim.Optimizer):
            raise TypeError(f"optimizer made a {type(made).__name__}, not a "
                            "torch.optim.Optimizer")
        self.optimizer = made
        self._steps = 0
        self.counts: tuple[int, int] = (0, 0)
        self._write_working()

    def _rounding_of_step(self) -> Rounding:
        """The update's rounding for this step (stochastic: a seed of its own)."""
        r = self.update_rounding
        if r.rounding != "stochastic" or r.seed is None:
            return r
        self._steps += 1
        return dataclasses.replace(r, seed=r.seed * SEED_LIMIT + self._steps)

    def _write_working(self) -> None:
        working = Rounding(self.working, self.policy.rounding, subnormals=self.policy.subnormals,
                           seed=_seed(self.policy, self.policy.rounding))
        with torch.no_grad():
            for w, m in zip(self.params, self.masters, strict=True):
                w.copy_(_rounded(m, working))

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear the working weights' gradients (None, or zeros)."""
        for w in self.params:
            if w.grad is not None:
                if set_to_none:
                    w.grad = None
                else:
                    w.grad.zero_()

    @property
    def param_groups(self) -> list[dict[str, Any]]:
        """The torch optimizer's parameter groups (its learning rates)."""
        groups: list[dict[str, Any]] = self.optimizer.param_groups
        return groups

    def step(self) -> None:
        """One update from the working weights' gradients (None: that weight is left as it
        is): the gradients in the stored format, the torch optimizer's step on the float64
        copies, each result rounded into the stored format, the working weights rounded
        from it; absorbed updates counted."""
        p = self.policy
        to_stored = Rounding(self.stored, p.rounding, subnormals=p.subnormals,
                             seed=_seed(p, p.rounding))
        for w, m in zip(self.params, self.masters, strict=True):
            m.grad = None if w.grad is None else _rounded(w.grad.detach().double(), to_stored)
        before = [m.detach().clone() for m in self.masters]
        self.optimizer.step()
        rounding = self._rounding_of_step()
        absorbed = updated = 0
        with torch.no_grad():
            for m, old in zip(self.masters, before, strict=True):
                moved = m != old
                m.copy_(_rounded(m, rounding))
                updated += int(moved.sum())
                absorbed += int((moved & (m == old)).sum())
        self.counts = (absorbed, updated)
        self._write_working()

    @property
    def absorbed(self) -> int:
        """Of the last step's nonzero updates, how many left the stored weight unchanged."""
        return self.counts[0]

    @property
    def updated(self) -> int:
        """The last step's nonzero updates."""
        return self.counts[1]

    @property
    def absorbed_fraction(self) -> float:
        """``absorbed / updated`` (0 when there were none)."""
        return self.absorbed / self.updated if self.updated else 0.0

    def state_dict(self) -> dict[str, Any]:
        """The torch optimizer's state and the stored weights (float64 tensors)."""
        return {"optimizer": self.optimizer.state_dict(),
                "masters": [m.detach().clone() for m in self.masters]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what ``state_dict`` gave (the working weights follow the masters)."""
        masters = state["masters"]
        if len(masters) != len(self.masters):
            raise ValueError(f"the state has {len(masters)} weights, this has "
                             f"{len(self.masters)}")
        with torch.no_grad():
            for m, saved in zip(self.masters, masters, strict=True):
                m.copy_(saved)
        self.optimizer.load_state_dict(state["optimizer"])
        self._write_working()


def _rounded(t: torch.Tensor, rounding: Rounding) -> torch.Tensor:
    """``t`` rounded (no copy made when its dtype's values are all of the format)."""
    own = DTYPE_FORMATS.get(t.dtype)
    if own == rounding.fmt.name and rounding.subnormals:
        return t
    return rounding.apply(t)[0]


def _gradients(optimizer: torch.optim.Optimizer | MasterWeights) -> list[torch.Tensor]:
    """The gradients an optimizer will use: its parameters' (a MasterWeights': its working
    weights')."""
    params: Sequence[torch.Tensor] = (
        optimizer.params if isinstance(optimizer, MasterWeights)
        else [p for group in optimizer.param_groups for p in group["params"]])
    return [p.grad for p in params if p.grad is not None]


class LossScaler:
    """``torch.amp.GradScaler``'s calls over an fpsim loss scale.

    ``scaler.scale(loss).backward(); scaler.step(optimizer); scaler.update()``, with
    ``unscale_`` (before clipping), ``get_scale``, ``state_dict`` and ``load_state_dict``
    as GradScaler has them. The scale is ``fpsim.training``'s: None (none: a step with an
    inf or NaN is applied), a number (static), ``"dynamic"`` (GradScaler's rule and
    defaults) or a loss-scale object (``DynamicLossScale(hysteresis=2)``, ...).
    ``unscale_`` divides each gradient by the scale in its own dtype, once per step; for
    a scale that is a power of two (a dynamic scale always is, from a power of two) that is
    GradScaler's multiplication by the reciprocal, bit for bit. A dynamic scale's
    ``state_dict`` has GradScaler's keys: each can load the other's.

    Parameters
    ----------
    loss_scale : None, float, str or loss-scale object, default "dynamic"
        As ``fpsim.training.as_loss_scale`` takes it.
    enabled : bool, default True
        False: every call passes through (scale 1, nothing skipped), as GradScaler's.

    Attributes
    ----------
    loss_scale : NoLossScale, StaticLossScale or DynamicLossScale
        The scale (``fpsim.training``'s object).

    Examples
    --------
    >>> import torch
    >>> import fpsim.torch
    >>> w = torch.nn.Parameter(torch.tensor([1.0]))
    >>> opt = torch.optim.SGD([w], lr=0.5)
    >>> scaler = fpsim.torch.LossScaler("dynamic")
    >>> scaler.scale((w * 2.0).sum()).backward()
    >>> w.grad.item()  # scaled by 2**16
    131072.0
    >>> scaler.step(opt); scaler.update()
    >>> w.item(), scaler.get_scale()
    (0.0, 65536.0)
    """

    def __init__(self, loss_scale: LossScale | float | str | None = "dynamic", *,
                 enabled: bool = True) -> None:
        self.loss_scale: LossScale = as_loss_scale(loss_scale)
        self._enabled = bool(enabled)
        # Of this step: the optimizers unscaled (by id), and whether each found an inf/NaN.
        self._found: dict[int, bool] = {}
        self._stepped: set[int] = set()

    def is_enabled(self) -> bool:
        """Whether the scaler scales (GradScaler's ``is_enabled``)."""
        return self._enabled

    def get_scale(self) -> float:
        """The current scale (1.0 when disabled)."""
        return float(self.loss_scale.scale) if self._enabled else 1.0

    def scale(self, outputs: Any) -> Any:
        """``outputs`` (a tensor, or lists and tuples of them) times the scale."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, torch.Tensor):
            return outputs * torch.tensor(self.get_scale(), dtype=torch.float32,
                                          device=outputs.device)
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        raise TypeError(f"outputs must be a tensor or a list or tuple of tensors, got "
                        f"{type(outputs).__name__}")

    def unscale_(self, optimizer: torch.optim.Optimizer | MasterWeights) -> None:
        """Divide the optimizer's gradients by the scale, in place, and note whether one is
        infinite or NaN (once per step: a second call raises, as GradScaler's)."""
        if not self._enabled:
            return
        key = id(optimizer)
        if key in self._found:
            raise RuntimeError("unscale_() has already been called on this optimizer since "
                               "the last update()")
        scale = self.get_scale()
        found = False
        with torch.no_grad():
            for g in _gradients(optimizer):
                found = found or not bool(torch.isfinite(g).all())
                if scale != 1.0:
                    g.div_(scale)
        self._found[key] = found

    def step(self, optimizer: torch.optim.Optimizer | MasterWeights, *args: Any,
             **kwargs: Any) -> Any:
        """``unscale_`` (unless called), then ``optimizer.step(*args, **kwargs)`` unless a
        gradient was infinite or NaN under a loss scale (the step is skipped: None)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("a closure is not supported with loss scaling (as GradScaler)")
        key = id(optimizer)
        if key in self._stepped:
            raise RuntimeError("step() has already been called since the last update()")
        if key not in self._found:
            self.unscale_(optimizer)
        self._stepped.add(key)
        if self._found[key] and not isinstance(self.loss_scale, NoLossScale):
            return None
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale: float | torch.Tensor | None = None) -> None:
        """Advance the scale after this step's ``step`` calls (or set it to ``new_scale``)."""
        if not self._enabled:
            return
        if new_scale is not None:
            value = float(new_scale.item() if isinstance(new_scale, torch.Tensor)
                          else new_scale)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"new_scale must be a finite positive number, got {value!r}")
            if isinstance(self.loss_scale, NoLossScale):
                raise ValueError("new_scale: this scaler has no loss scale (None)")
            self.loss_scale.scale = float(np.float32(value))
        elif not self._found:
            raise RuntimeError("update() without a step: no gradients were checked since the "
                               "last update() (as GradScaler)")
        else:
            self.loss_scale.update(any(self._found.values()))
        self._found.clear()
        self._stepped.clear()

    @property
    def found_inf(self) -> bool:
        """Whether this step's unscaled gradients had an inf or NaN (so far)."""
        return any(self._found.values())

    def state_dict(self) -> dict[str, Any]:
        """The scale's state: GradScaler's keys for a dynamic scale (and fpsim's
        hysteresis), the scale alone otherwise; empty when disabled."""
        if not self._enabled:
            return {}
        s = self.loss_scale
        if not isinstance(s, DynamicLossScale):
            return {"scale": self.get_scale()}
        return {"scale": s.scale, "growth_factor": s.growth_factor,
                "backoff_factor": s.backoff_factor, "growth_interval": s.growth_interval,
                "_growth_tracker": s.good_steps, "hysteresis": s.hysteresis,
                "min_scale": s.min_scale, "_tolerance": s.tolerance}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a ``state_dict`` (this scaler's or a ``torch.amp.GradScaler``'s)."""
        if not self._enabled:
            return
        if not state:
            raise RuntimeError("the state dict is empty (saved from a disabled scaler)")
        s = self.loss_scale
        if isinstance(s, DynamicLossScale):
            restored = DynamicLossScale(
                scale=state["scale"], growth_factor=state["growth_factor"],
                backoff_factor=state["backoff_factor"],
                growth_interval=state["growth_interval"],
                min_scale=state.get("min_scale"), hysteresis=state.get("hysteresis", 1))
            restored.good_steps = int(state["_growth_tracker"])
            restored.tolerance = int(state.get("_tolerance", restored.hysteresis))
            self.loss_scale = restored
        elif isinstance(s, StaticLossScale):
            self.loss_scale = StaticLossScale(state["scale"])


class Trainer:
    """Trains a torch model under a policy: ``fpsim.training.Trainer``'s step, torch's
    autograd and optimizer.

    Each ``step(closure)``: the closure's forward and loss under the policy (``emulate``),
    the backward from the loss times the scale, the gradients unscaled, the step skipped
    on an inf or NaN (with a loss scale), the optimizer's update, the scale's; and a
    ``fpsim.training.StepReport`` of what happened, counted by ``fpsim.training``'s
    monitors: zeros, subnormals and overflows among the activation and weight gradients
    (in the compute format, at the loss scale), the gradients flushed to zero by their
    rounding to the compute format (``FlushCounter``), and the absorbed updates
    (``MasterWeights``; NaN for another optimizer, whose updates are not rounded here).

    Parameters
    ----------
    model : torch.nn.Module
        A model not emulated yet (``emulate`` is applied to it).
    optimizer : MasterWeights or torch.optim.Optimizer
        A ``MasterWeights`` where the policy stores weights narrower than the parameters'
        dtype (its updates must be rounded there); a torch optimizer otherwise.
    policy : Policy or str, default "mixed"
        The policy.
    loss_scale : None, float, str or loss-scale object, optional
        As ``LossScaler`` takes it (none by default, as ``fpsim.training.Trainer``).
    monitor : bool, default True
        Count the gradients of each step.

    Attributes
    ----------
    emulation : Emulation
        The model's emulation (``with trainer.emulation:`` runs code under the policy).
    scaler : LossScaler
        The loss scaling.
    steps, skipped : int
        Steps run, and of them steps skipped.

    Raises
    ------
    ValueError
        A torch optimizer where the policy stores weights narrower than their dtype.

    Examples
    --------
    >>> import torch
    >>> import torch.nn.functional as F
    >>> import fpsim.torch
    >>> torch.manual_seed(0)  # doctest: +ELLIPSIS
    <torch._C.Generator object at ...>
    >>> model = torch.nn.Linear(4, 2)
    >>> trainer = fpsim.torch.Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1),
    ...                               "mixed", loss_scale="dynamic")
    >>> x = torch.full((3, 4), 30.0)
    >>> report = trainer.step(lambda: F.mse_loss(model(x), torch.zeros(3, 2), reduction="sum"))
    >>> report.skipped, report.loss_scale, trainer.scaler.get_scale()  # fp16 overflowed
    (True, 65536.0, 32768.0)
    """

    def __init__(self, model: torch.nn.Module,
                 optimizer: MasterWeights | torch.optim.Optimizer,
                 policy: Policy | str = "mixed",
                 loss_scale: LossScale | float | str | None = None,
                 monitor: bool = True) -> None:
        p = as_policy(policy)
        if not isinstance(optimizer, MasterWeights):
            for param in model.parameters():
                own = DTYPE_FORMATS.get(param.dtype)
                if own is not None and not covers(p.params, as_format(own)):
                    raise ValueError(
                        f"the policy stores weights in {p.params.name}, narrower than the "
                        f"parameters' {param.dtype}: give a fpsim.torch.MasterWeights, which "
                        "rounds each update there")
        self.emulation = emulate(model, p)
        self.model = model
        self.optimizer = optimizer
        self.policy = p
        self.scaler = LossScaler(loss_scale)
        self.monitor = bool(monitor)
        self.steps = 0
        self.skipped = 0

    def _params(self) -> list[torch.Tensor]:
        if isinstance(self.optimizer, MasterWeights):
            return self.optimizer.params
        return [q for group in self.optimizer.param_groups for q in group["params"]]

    def step(self, closure: Callable[[], torch.Tensor]) -> StepReport:
        """Run ``closure()`` (forward and loss, returning the loss) and one update.

        Returns
        -------
        StepReport
            As ``fpsim.training.Trainer.step``'s.

        Raises
        ------
        ValueError
            The closure did not return a one-element tensor.
        """
        p = self.policy
        activations: list[torch.Tensor] = []
        flushes = FlushCounter(p.compute)
        # The results rounded in the forward keep their rounded gradients in activations.
        self.emulation.activation_grads = activations if self.monitor else None
        try:
            with self.emulation:
                loss = closure()
            if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
                raise ValueError("the closure must return the loss, a one-element tensor")
            params = self._params()
            for q in params:
                q.grad = None
            scale = self.scaler.get_scale()
            if self.monitor:
                with flushes:
                    self.scaler.scale(loss).backward()
            else:
                self.scaler.scale(loss).backward()
        finally:
            self.emulation.activation_grads = None
        weights = [q.grad for q in params if q.grad is not None]
        counts = [GradientCounts.of([_host(g) for g in grads], p.compute)
                  for grads in (activations, weights)]
        self.scaler.unscale_(self.optimizer)
        skip = self.scaler.found_inf and not isinstance(self.scaler.loss_scale, NoLossScale)
        norm = math.nan if skip else math.sqrt(sum(
            float(float64_sum(np.square(_host(g).astype(np.float64))))
            for g in _gradients(self.optimizer)))
        self.scaler.step(self.optimizer)
        self.scaler.update()
        absorbed = (math.nan if not isinstance(self.optimizer, MasterWeights)
                    else 0.0 if skip else self.optimizer.absorbed_fraction)
        self.steps += 1
        self.skipped += int(skip)
        return StepReport(loss=float(loss.detach().item()), loss_scale=scale, skipped=skip,
                          grad_norm=norm, absorbed_fraction=absorbed,
                          flushed_fraction=flushes.fraction if self.monitor else math.nan,
                          activation_grads=counts[0], weight_grads=counts[1])


def _host(t: torch.Tensor) -> Any:
    """A gradient's values as a host array (the monitors count on NumPy arrays)."""
    return to_array(t.detach().cpu())
