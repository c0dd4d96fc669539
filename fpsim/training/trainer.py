"""One training step under a precision policy and a loss scale (the paper's recipe):
forward and backward in the policy's formats with the loss scaled by S, gradients
unscaled into the parameters' format, a skipped step on inf/NaN, optional
clipping, the optimizer's update, and what happened, measured."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from fpsim import _device
from fpsim.autograd.tensor import Tensor
from fpsim.nn.module import Module
from fpsim.optim.optimizer import Optimizer
from fpsim.precision import numerics
from fpsim.precision.policy import Policy, as_policy
from fpsim.training.loss_scale import NoLossScale, as_loss_scale

if TYPE_CHECKING:
    from fpsim.training.loss_scale import DynamicLossScale, StaticLossScale
from fpsim.training.monitor import FlushCounter, GradientCounts, gradients


@dataclass(frozen=True)
class StepReport:
    """What one step did (``Trainer.step`` returns it).

    Parameters
    ----------
    loss : float
        The loss (unscaled).
    loss_scale : float
        The scale the loss was multiplied by in backward.
    skipped : bool
        Whether the step was skipped (inf or NaN gradients under a loss scale).
    grad_norm : float
        The global norm of the (unscaled) weight gradients, before clipping; NaN when
        the step was skipped.
    absorbed_fraction : float
        Of the nonzero weight updates, those that left the weight unchanged.
    flushed_fraction : float
        Of the nonzero gradient values rounded to the compute format in backward (at the
        loss scale), those made zero (NaN when the trainer's ``monitor`` is off).
    activation_grads : GradientCounts
        Zeros, subnormals and overflows among the activation gradients (compute format).
    weight_grads : GradientCounts
        The same among the weight gradients in the compute format.
    """

    loss: float
    loss_scale: float
    skipped: bool
    grad_norm: float
    absorbed_fraction: float
    flushed_fraction: float
    activation_grads: GradientCounts
    weight_grads: GradientCounts


class Trainer:
    """Trains ``model`` with ``optimizer`` under ``policy`` and ``loss_scale``.

    The model's parameters are rounded to ``policy.params`` (fp32 with a master
    copy; the compute format without one). ``loss_scale``: None, a number, "dynamic"
    or a loss-scale object. With a loss scale, a step whose gradients are not all
    finite is skipped; without one it is applied (and may diverge).

    Parameters
    ----------
    model : Module
        The model (its parameters are rounded to ``policy.params`` in place).
    optimizer : Optimizer
        The optimizer of the model's parameters (it is set to update under ``policy``).
    policy : Policy or str, default "mixed"
        The precision policy of every step.
    loss_scale : None, str, float or loss-scale object, optional
        As ``as_loss_scale`` takes it: none by default.
    clip_norm : float, optional
        Rescale the gradients to this global norm when it is above it.
    monitor : bool, default True
        Count flushed gradients and collect the gradient counts of each step.

    Attributes
    ----------
    model, optimizer, policy, loss_scale, clip_norm, monitor
        As given (``policy`` and ``loss_scale`` as objects).
    steps : int
        Steps run.
    skipped : int
        Of them, steps skipped.

    Raises
    ------
    ValueError
        For a ``clip_norm`` that is not positive, or an unknown policy or loss scale.

    Examples
    --------
    >>> import numpy as np
    >>> from fpsim import nn, optim, training
    >>> from fpsim.nn import functional as F
    >>> nn.manual_seed(0)
    >>> model = nn.Linear(4, 2)
    >>> opt = optim.SGD(model.parameters(), lr=0.1)
    >>> trainer = training.Trainer(model, opt, "mixed", loss_scale="dynamic")
    >>> x = np.full((3, 4), 30.0)
    >>> report = trainer.step(lambda: F.mse_loss(model(x), np.zeros((3, 2)), "sum"))
    >>> report.skipped, report.loss_scale, trainer.loss_scale.scale  # fp16 overflowed
    (True, 65536.0, 32768.0)
    >>> report.weight_grads
    GradientCounts(total=10, zero=0, subnormal=0, overflow=10)
    """

    def __init__(self, model: Module, optimizer: Optimizer, policy: Policy | str = "mixed",
                 loss_scale: NoLossScale | StaticLossScale | DynamicLossScale | float | str | None
                 = None, clip_norm: float | None = None, monitor: bool = True):
        self.policy = as_policy(policy)
        self.model = model.to(self.policy)
        self.optimizer = optimizer
        optimizer.policy = self.policy
        self.loss_scale = as_loss_scale(loss_scale)
        if clip_norm is not None and not clip_norm > 0:
            raise ValueError(f"clip_norm must be positive, got {clip_norm}")
        self.clip_norm = clip_norm
        self.monitor = monitor
        self.steps = 0
        self.skipped = 0

    def step(self, closure: Callable[[], Tensor]) -> StepReport:
        """Run ``closure()`` (forward, returning the loss) and one optimizer step.

        Under the policy: the forward pass, backward from the loss times the scale, the
        gradients unscaled into the parameters' format, the step skipped on an inf or
        NaN (with a loss scale), clipping, the optimizer's update and the loss scale's.

        Parameters
        ----------
        closure : callable
            Runs the forward pass and returns the loss, a one-element Tensor.

        Returns
        -------
        StepReport

        Raises
        ------
        ValueError
            If the closure does not return a one-element Tensor.
        """
        p = self.policy
        params = self.optimizer.params
        with p:
            loss = closure()
            if not isinstance(loss, Tensor) or loss.size != 1:
                raise ValueError("the closure must return the scalar loss Tensor")
            for t in params:
                t.grad = None
            scale = self.loss_scale.scale
            flushes = FlushCounter(p.compute)
            with flushes if self.monitor else contextlib.nullcontext():
                loss.backward(scale)
            acts, weights = gradients(loss, p.compute) if self.monitor else ([], [])
            grads = [t.grad for t in params if t.grad is not None]
            found_inf = not _all_finite(grads)
            skip = found_inf and not isinstance(self.loss_scale, NoLossScale)
            norm = float("nan")
            absorbed = 0.0
            if not skip:
                for t in params:
                    if t.grad is not None and scale != 1:
                        t.grad = numerics.round(t.grad / scale, t.format, p)
                norm = self._clip([t for t in params if t.grad is not None], p)
                self.optimizer.step()
                absorbed = self.optimizer.absorbed_fraction
            self.loss_scale.update(found_inf)
        self.steps += 1
        self.skipped += int(skip)
        return StepReport(
            loss=float(loss.item()), loss_scale=scale, skipped=skip, grad_norm=norm,
            absorbed_fraction=absorbed,
            flushed_fraction=flushes.fraction if self.monitor else float("nan"),
            activation_grads=GradientCounts.of(acts, p.compute),
            weight_grads=GradientCounts.of(weights, p.compute),
        )

    def _clip(self, params: list[Any], p: Policy) -> float:  # Parameters with a .grad
        """The global gradient norm (in binary64); rescale to ``clip_norm`` if above."""
        if not params:
            return 0.0
        xp = _device.array_module(params[0].grad)
        # One copy to the host on a GPU, where the sums are CuPy's (binary64, its order).
        norm = float(xp.sqrt(sum(xp.sum(xp.square(t.grad.astype(np.float64))) for t in params)))
        if self.clip_norm is not None and norm > self.clip_norm:
            factor = self.clip_norm / (norm + 1e-6)
            for t in params:
                t.grad = numerics.round(t.grad * factor, t.format, p)
        return norm


def _all_finite(grads: list[Any]) -> bool:
    """Whether every gradient is finite: one answer read on the host (on a GPU, the step's
    one synchronisation of the loss scale, as in PyTorch's GradScaler)."""
    if not grads:
        return True
    xp = _device.array_module(grads[0])
    return bool(xp.stack([xp.isfinite(g).all() for g in grads]).all())
