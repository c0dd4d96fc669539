"""What gradients look like in a format: zeros, subnormals, overflows, exponents."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from fpsim.autograd.tensor import Tensor
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
    def of(cls, values: Iterable[np.ndarray], fmt: Format) -> GradientCounts:
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
