"""Loss scaling: none, a constant S, or dynamic (PyTorch GradScaler's rule, with
DeepSpeed's optional minimum scale and hysteresis)."""

from __future__ import annotations

import math
from dataclasses import dataclass


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
        if not (math.isfinite(self.scale) and self.scale > 0):
            raise ValueError(f"a loss scale must be positive and finite, got {self.scale}")

    def update(self, found_inf: bool) -> None:
        pass


@dataclass
class DynamicLossScale:
    """Halve on overflow (the step is skipped), double after ``growth_interval`` good steps.

    Defaults are PyTorch's GradScaler. ``hysteresis`` (DeepSpeed) is how many
    overflows in a row are tolerated before backing off; ``min_scale`` a floor.
    """

    scale: float = 2.0**16
    growth_factor: float = 2.0
    backoff_factor: float = 0.5
    growth_interval: int = 2000
    min_scale: float | None = None
    hysteresis: int = 1

    def __post_init__(self) -> None:
        if not (math.isfinite(self.scale) and self.scale > 0):
            raise ValueError(f"the initial scale must be positive and finite, got {self.scale}")
        if self.growth_factor <= 1 or not 0 < self.backoff_factor < 1:
            raise ValueError("growth_factor must exceed 1 and backoff_factor lie in (0, 1)")
        if self.growth_interval < 1 or self.hysteresis < 1:
            raise ValueError("growth_interval and hysteresis must be at least 1")
        if self.min_scale is not None and not 0 < self.min_scale <= self.scale:
            raise ValueError("min_scale must be positive and at most the initial scale")
        self.good_steps = 0
        self.tolerance = self.hysteresis

    def update(self, found_inf: bool) -> None:
        """Advance after a step whose gradients were (not) all finite."""
        if found_inf:
            self.good_steps = 0
            if self.tolerance > 1:  # DeepSpeed: tolerated until the hysteresis is spent
                self.tolerance -= 1
                return
            self.scale *= self.backoff_factor
            if self.min_scale is not None:
                self.scale = max(self.scale, self.min_scale)
            return
        self.good_steps += 1
        if self.good_steps == self.growth_interval:
            grown = self.scale * self.growth_factor
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
