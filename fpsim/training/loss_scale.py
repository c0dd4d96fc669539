"""Loss scaling: none, a constant S, or dynamic (PyTorch GradScaler's rule, with
DeepSpeed's optional minimum scale and hysteresis)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fpsim._checks import integer, real


class NoLossScale:
    """Scale 1: gradients as they come."""

    scale = 1.0

    def update(self, found_inf: bool) -> None:
        pass

    def __repr__(self) -> str:
        return "NoLossScale()"


@dataclass
class StaticLossScale:
    """A constant scale S (the paper used 8 to 32K)."""

    scale: float

    def __post_init__(self) -> None:
        self.scale = real(self.scale, "scale", 0.0, low_open=True)

    def update(self, found_inf: bool) -> None:
        pass


def _float32(x: float) -> float:
    """``x`` rounded to binary32, as PyTorch stores its scale (inf beyond the range)."""
    with np.errstate(over="ignore"):
        return float(np.float32(x))


@dataclass
class DynamicLossScale:
    """Halve on overflow (the step is skipped), double after ``growth_interval`` good steps.

    PyTorch's GradScaler, its defaults and its arithmetic: the scale is a binary32
    value, each update is computed in binary64 and rounded to binary32, and a growth
    that would make it infinite is not made (the scale stops at 2**127 when doubling).
    ``hysteresis`` (DeepSpeed) is how many overflows in a row are tolerated before
    backing off; ``min_scale`` a floor.
    """

    scale: float = 2.0**16
    growth_factor: float = 2.0
    backoff_factor: float = 0.5
    growth_interval: int = 2000
    min_scale: float | None = None
    hysteresis: int = 1

    def __post_init__(self) -> None:
        scale = real(self.scale, "scale", 0.0, low_open=True)
        self.scale = _float32(scale)
        if not math.isfinite(self.scale):
            raise ValueError(f"the initial scale {scale!r} is beyond binary32's range, where "
                             "the scale is kept")
        self.growth_factor = real(self.growth_factor, "growth_factor", 1.0, low_open=True)
        self.backoff_factor = real(self.backoff_factor, "backoff_factor", 0.0, 1.0,
                                   low_open=True, high_open=True)
        self.growth_interval = integer(self.growth_interval, "growth_interval", 1)
        self.hysteresis = integer(self.hysteresis, "hysteresis", 1)
        if self.min_scale is not None:
            self.min_scale = real(self.min_scale, "min_scale", 0.0, self.scale, low_open=True)
        self.good_steps = 0
        self.tolerance = self.hysteresis

    def update(self, found_inf: bool) -> None:
        """Advance after a step whose gradients were (not) all finite."""
        if found_inf:
            self.good_steps = 0
            if self.tolerance > 1:  # DeepSpeed: tolerated until the hysteresis is spent
                self.tolerance -= 1
                return
            self.scale = _float32(self.scale * self.backoff_factor)
            if self.min_scale is not None:
                self.scale = max(self.scale, _float32(self.min_scale))
            return
        self.good_steps += 1
        if self.good_steps == self.growth_interval:
            grown = _float32(self.scale * self.growth_factor)
            if math.isfinite(grown):
                self.scale = grown
            self.good_steps = 0
            self.tolerance = self.hysteresis


def as_loss_scale(spec) -> NoLossScale | StaticLossScale | DynamicLossScale:
    """``None``/"none", a number (static), "dynamic", or a loss-scale object."""
    if spec is None or spec == "none":
        return NoLossScale()
    if spec == "dynamic":
        return DynamicLossScale()
    if isinstance(spec, (NoLossScale, StaticLossScale, DynamicLossScale)):
        return spec
    if isinstance(spec, (int, float)) and not isinstance(spec, bool):
        return StaticLossScale(float(spec))
    raise ValueError(f"unknown loss scale {spec!r}: use None, 'none', 'dynamic', a number, "
                     "or a loss-scale object")
