"""One training step under a precision policy and a loss scale (the paper's recipe):
forward and backward in the policy's formats with the loss scaled by S, gradients
unscaled into the parameters' format, a skipped step on inf/NaN, optional
clipping, the optimizer's update, and what happened, measured."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fpsim import _device
from fpsim.autograd.tensor import Tensor
from fpsim.formats import Format
from fpsim.nn.module import Module
from fpsim.optim.optimizer import Optimizer
from fpsim.precision import numerics
from fpsim.precision.policy import Policy, as_policy
from fpsim.training.loss_scale import NoLossScale, as_loss_scale

if TYPE_CHECKING:
    from fpsim.training.loss_scale import DynamicLossScale, StaticLossScale
from fpsim.training.monitor import FlushCounter, GradientCounts, gradients, tally


class StepReport:
    """What one step did (``Trainer.step`` returns it).

    On a GPU, what was counted stays there until a field is read: each field is read on
    the host (once) when first asked for. On the CPU every field is a number already.
    Compared, hashed and shown as a frozen dataclass of its fields.

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

    Examples
    --------
    >>> from fpsim.training import GradientCounts, StepReport
    >>> r = StepReport(0.5, 1.0, False, 2.0, 0.0, 0.0, GradientCounts(), GradientCounts())
    >>> r.loss, r.grad_norm
    (0.5, 2.0)
    """

    __slots__ = ("_fields",)
    _fields: dict[str, Any]
    FIELDS = ("loss", "loss_scale", "skipped", "grad_norm", "absorbed_fraction",
              "flushed_fraction", "activation_grads", "weight_grads")
    """The fields' names, in the order the constructor takes them."""

    def __init__(self, loss: float | Deferred, loss_scale: float, skipped: bool,
                 grad_norm: float | Deferred, absorbed_fraction: float | Deferred,
                 flushed_fraction: float | Deferred,
                 activation_grads: GradientCounts | Deferred,
                 weight_grads: GradientCounts | Deferred) -> None:
        values = (loss, loss_scale, skipped, grad_norm, absorbed_fraction, flushed_fraction,
                  activation_grads, weight_grads)
        object.__setattr__(self, "_fields", dict(zip(self.FIELDS, values, strict=True)))

    def _read(self, name: str) -> Any:
        value = self._fields[name]
        if isinstance(value, Deferred):
            value = self._fields[name] = value.read()
        return value

    @property
    def loss(self) -> float:
        """The loss (unscaled)."""
        return float(self._read("loss"))

    @property
    def loss_scale(self) -> float:
        """The scale the loss was multiplied by in backward."""
        return float(self._read("loss_scale"))

    @property
    def skipped(self) -> bool:
        """Whether the step was skipped."""
        return bool(self._read("skipped"))

    @property
    def grad_norm(self) -> float:
        """The global norm of the unscaled weight gradients, before clipping."""
        return float(self._read("grad_norm"))

    @property
    def absorbed_fraction(self) -> float:
        """Of the nonzero weight updates, those that left the weight unchanged."""
        return float(self._read("absorbed_fraction"))

    @property
    def flushed_fraction(self) -> float:
        """Of the nonzero gradient values rounded in backward, those made zero."""
        return float(self._read("flushed_fraction"))

    @property
    def activation_grads(self) -> GradientCounts:
        """Zeros, subnormals and overflows among the activation gradients."""
        counts: GradientCounts = self._read("activation_grads")
        return counts

    @property
    def weight_grads(self) -> GradientCounts:
        """The same among the weight gradients in the compute format."""
        counts: GradientCounts = self._read("weight_grads")
        return counts

    def _read_all(self) -> None:
        for name in self.FIELDS:
            self._read(name)

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.FIELDS)

    def __repr__(self) -> str:
        shown = ", ".join(f"{n}={v!r}" for n, v in zip(self.FIELDS, self._values(), strict=True))
        return f"StepReport({shown})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, StepReport)
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __setattr__(self, name: str, value: object) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")

    def __reduce__(self) -> tuple[type[StepReport], tuple[Any, ...]]:
        return (StepReport, self._values())


class Deferred:
    """A value still on the device: ``read()`` copies its arrays to the host (one read)
    and makes it of them with ``make``.

    Examples
    --------
    >>> import numpy as np
    >>> Deferred(lambda a, b: int(a) + int(b), np.int64(2), np.int64(3)).read()
    5
    """

    __slots__ = ("make", "arrays")

    def __init__(self, make: Callable[..., Any], *arrays: Any) -> None:
        self.make = make
        self.arrays = arrays

    def read(self) -> Any:
        """The value, its arrays read on the host together."""
        on_gpu = [a for a in self.arrays if _device.device_of(a) == "cuda"]
        if not on_gpu:
            return self.make(*self.arrays)
        xp = _device.array_module(on_gpu[0])
        host = xp.asnumpy(xp.stack([_device.binary64(xp.asarray(a)) for a in self.arrays]))
        return self.make(*(host[i] for i in range(len(self.arrays))))


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
            If the closure does not return a one-element Tensor; on a GPU, also if a check
            of the step's inputs deferred to its one read fails (``cross_entropy``'s target
            classes, ``embedding``'s ids): raised there, before anything is updated.
        """
        p = self.policy
        params = self.optimizer.params
        with p, _device.deferring() as pending:
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
            scaled = not isinstance(self.loss_scale, NoLossScale)
            # The step's one read on a GPU: finiteness (with a loss scale) and the checks
            # of its inputs deferred on the device (cross_entropy's target classes).
            found_inf = not _all_finite(grads if scaled else [], pending)
            skip = found_inf and scaled
            norm: Any = float("nan")
            absorbed: Any = 0.0
            if not skip:
                for t in params:
                    if t.grad is not None and scale != 1:
                        t.grad = numerics.round(t.grad / scale, t.format, p)
                norm = self._clip([t for t in params if t.grad is not None], p)
                self.optimizer.step()
                absorbed = Deferred(_fraction, *self.optimizer.counts)
            self.loss_scale.update(found_inf)
        self.steps += 1
        self.skipped += int(skip)
        report = StepReport(
            loss=Deferred(float, loss.data.reshape(())), loss_scale=scale, skipped=skip,
            grad_norm=Deferred(float, norm), absorbed_fraction=absorbed,
            flushed_fraction=Deferred(_fraction, *flushes.counts) if self.monitor
            else float("nan"),
            activation_grads=_counts(acts, p.compute),
            weight_grads=_counts(weights, p.compute),
        )
        if _device.device_of(loss.data) == "cpu":
            report._read_all()  # nothing to wait for: plain numbers, as they always were
        return report

    def _clip(self, params: list[Any], p: Policy) -> Any:  # Parameters with a .grad
        """The global gradient norm (in binary64, NumPy's sums: the same bits on either
        device; a 0-d array on the gradients' device); rescale to ``clip_norm`` if above
        (on a GPU, the comparison is a read)."""
        if not params:
            return 0.0
        xp = _device.array_module(params[0].grad)
        # NumPy's sums on either device (on a GPU, its order by elementwise additions).
        norm = xp.sqrt(sum(numerics.float64_sum(xp.square(_device.binary64(t.grad)))
                           for t in params))
        if self.clip_norm is not None and norm > self.clip_norm:
            factor = self.clip_norm / (norm + 1e-6)
            for t in params:
                t.grad = numerics.round(t.grad * factor, t.format, p)
        return norm


def _fraction(part: Any, whole: Any) -> float:
    """``part / whole`` as a Python float, 0 when ``whole`` is 0."""
    return float(part) / float(whole) if whole else 0.0


def _counts(values: list[Any], fmt: Format) -> Deferred:
    """``GradientCounts`` of ``values``: counted now where they are, made when read."""
    total, counts = tally(values, fmt)
    return Deferred(functools.partial(_gradient_counts, total), *counts)


def _gradient_counts(total: int, *counts: Any) -> GradientCounts:
    return GradientCounts(total, *(int(c) for c in counts))


def _all_finite(grads: list[Any], pending: list[tuple[Any, str]]) -> bool:
    """Whether every gradient is finite, and the ``pending`` checks raised if one failed:
    one read on the host (on a GPU, the step's one synchronisation, as in PyTorch's
    GradScaler)."""
    if not grads and not pending:
        return True
    if not grads:  # only the deferred checks (no loss scale)
        xp = _device.array_module(pending[0][0])
        _device.raise_failed(pending, xp.asnumpy(xp.stack([ok for ok, _ in pending])))
        return True
    xp = _device.array_module(grads[0])
    finite = xp.stack([xp.isfinite(g).all() for g in grads]).all()
    if not pending:
        return bool(finite)
    host = xp.asnumpy(xp.stack([finite] + [ok for ok, _ in pending]))
    _device.raise_failed(pending, host[1:])
    return bool(host[0])
