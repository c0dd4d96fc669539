"""What gradients look like in a format: zeros, subnormals, overflows, exponents."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from fpsim import _device
from fpsim.autograd.tensor import Tensor, grad_observers
from fpsim.formats import Format, as_format
from fpsim.nn.module import Parameter
from fpsim.rounding import round as round_to


@dataclass(frozen=True)
class GradientCounts:
    """How many gradient values are zero, subnormal, or overflowed (inf/NaN).

    Parameters
    ----------
    total : int
        The number of values.
    zero : int
        Of them, zeros.
    subnormal : int
        Nonzero values below the format's smallest normal.
    overflow : int
        Infinities and NaNs.

    Examples
    --------
    >>> import numpy as np
    >>> from fpsim.training import GradientCounts
    >>> counts = GradientCounts.of([np.array([0.0, 1e-6, 1.0, np.inf])], "fp16")
    >>> counts
    GradientCounts(total=4, zero=1, subnormal=1, overflow=1)
    >>> counts.fraction("zero")
    0.25
    """

    total: int = 0
    zero: int = 0
    subnormal: int = 0
    overflow: int = 0

    @classmethod
    def of(cls, values: Iterable[np.ndarray], fmt: Format | str) -> GradientCounts:
        """The counts over ``values`` (arrays), subnormal meaning below ``fmt``'s normals.

        Parameters
        ----------
        values : iterable of array_like
            The gradients.
        fmt : Format or str
            The format whose smallest normal bounds the subnormals.

        Returns
        -------
        GradientCounts
        """
        total, counts = tally(values, fmt)
        return cls(total, *(int(c) for c in counts))

    def fraction(self, name: str) -> float:
        """The count ``name`` ("zero", "subnormal" or "overflow") over ``total`` (0 if none).

        Parameters
        ----------
        name : str
            One of the counts.

        Returns
        -------
        float
        """
        return getattr(self, name) / self.total if self.total else 0.0


def tally(values: Iterable[Any], fmt: Format | str) -> tuple[int, list[Any]]:
    """``GradientCounts.of``'s counts where the values are: the total, and the zeros,
    subnormals and overflows as 0-d arrays on the values' device (nothing read on a GPU).

    Examples
    --------
    >>> import numpy as np
    >>> total, counts = tally([np.array([0.0, 1e-6, 1.0])], "fp16")
    >>> total, [int(c) for c in counts]
    (3, [1, 1, 0])
    """
    fmt = as_format(fmt)
    total = 0
    counts: list[Any] = [0, 0, 0]
    for v in values:
        xp = _device.array_module(v)
        a = xp.abs(_device.binary64(xp.asarray(v)))
        total += a.size
        masks = (a == 0, (a > 0) & (a < fmt.smallest_normal), ~xp.isfinite(a))
        counts = [c + xp.count_nonzero(m) for c, m in zip(counts, masks, strict=True)]
    return total, counts


class FlushCounter:
    """While active (``with``): of the gradient values rounded to ``fmt`` during
    backward, how many were nonzero and how many of those the rounding made zero.

    Parameters
    ----------
    fmt : Format or str
        The format whose gradient roundings are counted.

    Attributes
    ----------
    fmt : Format
        As given.
    nonzero : int
        Nonzero gradient values rounded to ``fmt``.
    flushed : int
        Of them, those rounded to zero.
    counts : tuple
        ``(flushed, nonzero)`` where the values are: on a GPU, 0-d arrays there, read
        on the host only when ``flushed``, ``nonzero`` or ``fraction`` is.

    Examples
    --------
    >>> import fpsim
    >>> from fpsim import nn, training
    >>> w = nn.Parameter([1.0])
    >>> with fpsim.precision.parse("mixed"):
    ...     loss = (w * 1e-4 * 1e-4).sum()
    ...     with training.FlushCounter("fp16") as counter:
    ...         loss.backward()
    >>> counter.flushed, counter.nonzero, w.grad  # 1e-8 is below fp16's subnormals
    (1, 4, array([0.]))
    """

    def __init__(self, fmt: Format | str):
        self.fmt = as_format(fmt)
        # The counts where the values are (0-d arrays on a GPU: read when asked for).
        self.counts: tuple[Any, Any] = (0, 0)

    def __call__(self, unrounded: np.ndarray, rounded: np.ndarray, fmt: Format) -> None:
        if fmt == self.fmt:
            xp = _device.array_module(rounded)
            nonzero = xp.asarray(unrounded) != 0
            flushed = xp.count_nonzero(nonzero & (xp.asarray(rounded) == 0))
            self.counts = (self.counts[0] + flushed, self.counts[1] + xp.count_nonzero(nonzero))

    @property
    def flushed(self) -> int:
        """Of the nonzero gradient values rounded to ``fmt``, those rounded to zero."""
        return int(self.counts[0])

    @property
    def nonzero(self) -> int:
        """Nonzero gradient values rounded to ``fmt``."""
        return int(self.counts[1])

    @property
    def fraction(self) -> float:
        """``flushed / nonzero`` (0 when nothing was counted)."""
        return self.flushed / self.nonzero if self.nonzero else 0.0

    def __enter__(self) -> FlushCounter:
        grad_observers.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        grad_observers.remove(self)


def gradients(loss: Tensor, fmt: Format) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """After ``loss.backward()``: (activation gradients, weight gradients) held in ``fmt``.

    Weight gradients are those of the parameters' ``fmt`` copies (the cast of a
    master weight, or the parameter itself when it is stored in ``fmt``).

    Parameters
    ----------
    loss : Tensor
        The loss, after ``backward()``.
    fmt : Format
        The format of the gradients to collect (the compute format).

    Returns
    -------
    (list of numpy.ndarray, list of numpy.ndarray)
        The activations' gradients and the weights'.

    Examples
    --------
    >>> import fpsim
    >>> from fpsim import nn, training
    >>> w = nn.Parameter([1.0, 2.0])
    >>> with fpsim.precision.parse("mixed"):
    ...     loss = (w * 3).sum()
    ...     loss.backward()
    >>> activations, weights = training.gradients(loss, fpsim.format("fp16"))
    >>> weights
    [array([3., 3.])]
    """
    activations, weights = [], []
    for t in loss.graph():
        if t.grad is None or t.format != fmt:
            continue
        if isinstance(t, Parameter) or (t.op == "cast" and isinstance(t._parents[0], Parameter)):
            weights.append(t.grad)
        elif t.op != "leaf" and t.op != "cast":
            activations.append(t.grad)
    return activations, weights


def exponent_histogram(values: Iterable[np.ndarray], lo: int = -64,
                       hi: int = 16) -> tuple[np.ndarray, np.ndarray, int]:
    """``(exponents, counts, zeros)``: counts of floor(log2|v|) for lo <= e < hi
    (values outside are counted at the ends) and the number of zeros.

    Parameters
    ----------
    values : iterable of array_like
        The values (infinities and NaNs are left out), on the host or a GPU.
    lo, hi : int, default -64, 16
        The range of exponents.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray, int)
        ``arange(lo, hi)``, the count of each exponent, and the number of zeros.

    Examples
    --------
    >>> import numpy as np
    >>> from fpsim.training import exponent_histogram
    >>> exponents, counts, zeros = exponent_histogram([np.array([0.0, 0.75, 3.0, 1e-30])],
    ...                                               lo=-4, hi=4)
    >>> exponents, counts, zeros
    (array([-4, -3, -2, -1,  0,  1,  2,  3]), array([1, 0, 0, 1, 0, 1, 0, 0]), 1)
    """
    exps = np.arange(lo, hi)
    counts = np.zeros(hi - lo, dtype=np.int64)
    zeros = 0
    for v in values:
        xp = _device.array_module(v)
        a = xp.abs(_device.binary64(xp.asarray(v))).reshape(-1)
        a = a[xp.isfinite(a)]
        zeros += int(xp.count_nonzero(a == 0))
        e = xp.floor(xp.log2(a[a > 0])).astype(np.int64)
        # Counted where the values are; the counts alone come to the host.
        counts += _device.transfer(xp.bincount(xp.clip(e, lo, hi - 1) - lo,
                                               minlength=hi - lo), "cpu")
    return exps, counts, zeros


def flushed_fraction(values: Iterable[np.ndarray], fmt: Format | str = "fp16",
                     scale: float = 1.0) -> float:
    """Of the nonzero finite values, the fraction that ``value * scale`` rounds to zero
    in ``fmt`` (nearest even): what loss scaling by ``scale`` would still lose.

    Parameters
    ----------
    values : iterable of array_like
        The values (gradients, unscaled).
    fmt : Format or str, default "fp16"
        The format they would be rounded to.
    scale : float, default 1.0
        The loss scale.

    Returns
    -------
    float
        0 when there are no nonzero finite values.

    Raises
    ------
    ValueError
        If ``scale`` is not a finite positive number.

    Examples
    --------
    >>> import numpy as np
    >>> from fpsim.training import flushed_fraction
    >>> grads = [np.array([1e-8, 1e-3])]
    >>> flushed_fraction(grads, "fp16"), flushed_fraction(grads, "fp16", scale=1024)
    (0.5, 0.0)
    """
    fmt = as_format(fmt)
    if (isinstance(scale, bool) or not isinstance(scale, (int, float, np.integer, np.floating))
            or not (np.isfinite(scale) and scale > 0)):
        raise ValueError(f"scale must be a finite positive number, got {scale!r}")
    lost = nonzero = 0
    for v in values:
        xp = _device.array_module(v)
        a = _device.binary64(xp.asarray(v)).reshape(-1)
        a = a[xp.isfinite(a) & (a != 0)] * scale
        nonzero += a.size
        with _device.kernels(a):
            lost += int(xp.count_nonzero(round_to(a, fmt) == 0))
    return lost / nonzero if nonzero else 0.0


@dataclass(frozen=True)
class TensorStep:
    """What a recipe's quantizations of one tensor did in one step (``RecipeMonitor``).

    Attributes
    ----------
    amax : float
        The largest magnitude quantized in the step.
    scale : float
        The largest decode scale used (an element times it is the value); for a delayed
        scaling, ``1 / scale`` of its state.
    saturated, flushed : float
        The shares of the step's elements clamped to the format's largest value, and of
        nonzero values made zero.
    scale_underflow : float
        The share of blocks with a nonzero amax whose scale sat at the bottom of its format
        (zero or subnormal UE4M3 or binary32, E8M0's 2**-127).
    stale : bool
        A delayed scale that made elements of the step overflow the format (they
        saturated): a scale computed from the history before a spike.
    history : tuple of float
        A delayed scaling's amax history at the end of the step (``history[0]``: the
        step's), empty for the others.
    quantizations : int
        Quantizations counted (an LSTM's recurrent weight: one per time step for ``act``).
    """

    amax: float
    scale: float
    saturated: float
    flushed: float
    scale_underflow: float
    stale: bool
    history: tuple[float, ...]
    quantizations: int


class RecipeMonitor:
    """While active (``with``): every quantization of a scaling recipe, per tensor and per
    step, as ``TensorStep`` records.

    A step ends when an optimizer steps (``fpsim.precision.scaling.advance``) or when
    ``end_step()`` is called. Tensors are named after their layer's weight
    (``model.named_parameters()``) and category: ``("layers.0.weight", "act")``.

    Parameters
    ----------
    model : Module, optional
        Names the layers; without it, ``repr`` of the weight's id.
    evaluation : bool, default True
        Whether quantizations under ``fpsim.no_grad()`` (an evaluation's forward passes)
        count; False keeps the training steps' alone.

    Attributes
    ----------
    steps : list of dict
        Per ended step, ``{(layer, category): TensorStep}``.
    names : dict of int to str
        The model's parameters' names, by the ``id`` of each parameter.

    Examples
    --------
    >>> import numpy as np
    >>> import fpsim
    >>> from fpsim import nn, optim, training
    >>> from fpsim.nn import functional as F
    >>> nn.manual_seed(0)
    >>> model = nn.Linear(4, 2)
    >>> trainer = training.Trainer(model, optim.SGD(model.parameters(), lr=0.1),
    ...                            "fp8_hybrid_delayed")
    >>> x = np.ones((3, 4))
    >>> with training.RecipeMonitor(model) as monitor:
    ...     for scale in (1.0, 1.0, 100.0):  # a spike at the third step
    ...         _ = trainer.step(lambda: F.mse_loss(model(x * scale), np.zeros((3, 2))))
    >>> [round(s[("weight", "act")].saturated, 2) for s in monitor.steps]
    [0.0, 0.0, 1.0]
    >>> monitor.series("weight", "act", "stale")
    [False, False, True]
    """

    def __init__(self, model: Any = None, evaluation: bool = True) -> None:
        from fpsim._checks import boolean

        self.evaluation = boolean(evaluation, "evaluation")
        self.names: dict[int, str] = {}
        """The model's parameters' names, by the ``id`` of each parameter."""
        if model is not None:
            self.names = {id(p): name for name, p in model.named_parameters()}
        self.steps: list[dict[tuple[str, str], TensorStep]] = []
        self._open: dict[tuple[str, str], list[Any]] = {}

    def _name(self, owner: Any) -> str:
        return self.names.get(id(owner), f"tensor@{id(owner):x}")

    def __call__(self, event: Any) -> None:
        if not self.evaluation:
            from fpsim.autograd.tensor import grad_enabled

            if not grad_enabled():
                return
        self._open.setdefault((self._name(event.owner), event.category), []).append(event)

    def end_step(self, params: Any = None) -> None:
        """Close the step: summarize its quantizations (an optimizer's step calls it)."""
        if not self._open:
            return
        record: dict[tuple[str, str], TensorStep] = {}
        for key, events in self._open.items():
            size = sum(e.size for e in events) or 1
            blocks = sum(e.blocks for e in events) or 1
            amax = max(e.amax for e in events)
            state = events[-1].state
            # A delayed scale that made this step's largest values overflow the format.
            stale = state is not None and any(e.saturated for e in events)
            record[key] = TensorStep(
                amax=amax, scale=max(e.scale for e in events),
                saturated=sum(e.saturated for e in events) / size,
                flushed=sum(e.flushed for e in events) / size,
                scale_underflow=sum(e.scale_underflow for e in events) / blocks,
                stale=stale,
                history=tuple(float(h) for h in state.history) if state is not None else (),
                quantizations=len(events))
        self.steps.append(record)
        self._open = {}

    def series(self, layer: str, category: str, field: str) -> list[Any]:
        """One field of one tensor over the ended steps (None where it was not quantized).

        Parameters
        ----------
        layer, category : str
            The tensor's name (``"layers.0.weight"``, ``"act"``).
        field : str
            A ``TensorStep`` field (``"amax"``, ``"scale"``, ``"saturated"``, ...).

        Returns
        -------
        list
        """
        return [getattr(step[(layer, category)], field) if (layer, category) in step
                else None for step in self.steps]

    def __enter__(self) -> RecipeMonitor:
        from fpsim.precision import scaling

        scaling.observers.append(self)
        scaling.step_observers.append(self.end_step)
        return self

    def __exit__(self, *exc: object) -> None:
        from fpsim.precision import scaling

        scaling.observers.remove(self)
        scaling.step_observers.remove(self.end_step)
        self.end_step()
