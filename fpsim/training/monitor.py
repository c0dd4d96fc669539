"""What gradients look like in a format: zeros, subnormals, overflows, exponents."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from fpsim.autograd.tensor import Tensor, grad_observers
from fpsim.formats import Format, as_format
from fpsim.nn.module import Parameter
from fpsim.rounding import round as round_to


@dataclass(frozen=True)
class GradientCounts:
    """How many gradient values are zero, subnormal, or overflowed (inf/NaN)."""

    total: int = 0
    zero: int = 0
    subnormal: int = 0
    overflow: int = 0

    @classmethod
    def of(cls, values: Iterable[np.ndarray], fmt: Format | str) -> GradientCounts:
        """The counts over ``values`` (arrays), subnormal meaning below ``fmt``'s normals."""
        fmt = as_format(fmt)
        total = zero = subnormal = overflow = 0
        for v in values:
            a = np.abs(np.asarray(v, dtype=np.float64))
            total += a.size
            zero += int(np.count_nonzero(a == 0))
            subnormal += int(np.count_nonzero((a > 0) & (a < fmt.smallest_normal)))
            overflow += int(np.count_nonzero(~np.isfinite(a)))
        return cls(total, zero, subnormal, overflow)

    def fraction(self, name: str) -> float:
        return getattr(self, name) / self.total if self.total else 0.0


class FlushCounter:
    """While active (``with``): of the gradient values rounded to ``fmt`` during
    backward, how many were nonzero and how many of those the rounding made zero."""

    def __init__(self, fmt: Format | str):
        self.fmt = as_format(fmt)
        self.nonzero = 0
        self.flushed = 0

    def __call__(self, unrounded: np.ndarray, rounded: np.ndarray, fmt: Format) -> None:
        if fmt == self.fmt:
            nonzero = np.asarray(unrounded) != 0
            self.nonzero += int(np.count_nonzero(nonzero))
            self.flushed += int(np.count_nonzero(nonzero & (np.asarray(rounded) == 0)))

    @property
    def fraction(self) -> float:
        return self.flushed / self.nonzero if self.nonzero else 0.0

    def __enter__(self) -> FlushCounter:
        grad_observers.append(self)
        return self

    def __exit__(self, *exc) -> None:
        grad_observers.remove(self)


def gradients(loss: Tensor, fmt: Format) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """After ``loss.backward()``: (activation gradients, weight gradients) held in ``fmt``.

    Weight gradients are those of the parameters' ``fmt`` copies (the cast of a
    master weight, or the parameter itself when it is stored in ``fmt``).
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


def exponent_histogram(values: Iterable[np.ndarray], lo: int = -64, hi: int = 16):
    """``(exponents, counts, zeros)``: counts of floor(log2|v|) for lo <= e < hi
    (values outside are counted at the ends) and the number of zeros."""
    exps = np.arange(lo, hi)
    counts = np.zeros(hi - lo, dtype=np.int64)
    zeros = 0
    for v in values:
        a = np.abs(np.asarray(v, dtype=np.float64)).reshape(-1)
        a = a[np.isfinite(a)]
        zeros += int(np.count_nonzero(a == 0))
        e = np.floor(np.log2(a[a > 0])).astype(np.int64)
        np.add.at(counts, np.clip(e, lo, hi - 1) - lo, 1)
    return exps, counts, zeros


def flushed_fraction(values: Iterable[np.ndarray], fmt: Format | str = "fp16",
                     scale: float = 1.0) -> float:
    """Of the nonzero finite values, the fraction that ``value * scale`` rounds to zero
    in ``fmt`` (nearest even): what loss scaling by ``scale`` would still lose."""
    fmt = as_format(fmt)
    lost = nonzero = 0
    for v in values:
        a = np.asarray(v, dtype=np.float64).reshape(-1)
        a = a[np.isfinite(a) & (a != 0)] * scale
        nonzero += a.size
        lost += int(np.count_nonzero(round_to(a, fmt) == 0))
    return lost / nonzero if nonzero else 0.0
