"""Loss scaling: none, a constant S, or dynamic (PyTorch GradScaler's rule, with
DeepSpeed's optional minimum scale and hysteresis)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fpsim._checks import integer, real


class NoLossScale:
    """Scale 1: gradients as they come (a step with an inf or NaN is applied).

    Attributes
    ----------
    scale : float
        1.0.

    Examples
    --------
    >>> from fpsim.training import NoLossScale
    >>> NoLossScale().scale
    1.0
    """

    scale = 1.0

    def update(self, found_inf: bool) -> None:
        """Nothing: the scale stays 1.

        Parameters
        ----------
        found_inf : bool
            Ignored.
        """

    def __repr__(self) -> str:
        return "NoLossScale()"


@dataclass
class StaticLossScale:
    """A constant scale S (the paper used 8 to 32K).

    Parameters
    ----------
    scale : float
        S, positive.

    Raises
    ------
    ValueError
        If ``scale`` is not a positive number.

    Examples
    --------
    >>> from fpsim.training import StaticLossScale
    >>> StaticLossScale(1024).scale
    1024.0
    """

    scale: float

    def __post_init__(self) -> None:
        self.scale = real(self.scale, "scale", 0.0, low_open=True)

    def update(self, found_inf: bool) -> None:
        """Nothing: the scale is constant (a step with an inf or NaN is skipped).

        Parameters
        ----------
        found_inf : bool
            Ignored.
        """


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

    Parameters
    ----------
    scale : float, default 2**16
        The initial scale (rounded to binary32).
    growth_factor : float, default 2.0
        The factor of a growth (above 1).
    backoff_factor : float, default 0.5
        The factor of a backoff (in (0, 1)).
    growth_interval : int, default 2000
        Good steps in a row before a growth.
    min_scale : float, optional
        The scale never backs off below it.
    hysteresis : int, default 1
        Overflows in a row before a backoff.

    Attributes
    ----------
    good_steps : int
        Good steps since the last growth or overflow.
    tolerance : int
        Overflows still tolerated before the next backoff.

    Raises
    ------
    ValueError
        For a value out of range, or an initial scale beyond binary32's range.

    Examples
    --------
    >>> from fpsim.training import DynamicLossScale
    >>> s = DynamicLossScale(scale=1024.0, growth_interval=2)
    >>> s.update(found_inf=True)
    >>> s.scale
    512.0
    >>> s.update(False); s.update(False)
    >>> s.scale
    1024.0
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
        """Advance after a step whose gradients were (not) all finite.

        Parameters
        ----------
        found_inf : bool
            Whether the step's gradients had an inf or NaN (the step was skipped).
        """
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


def as_loss_scale(spec: NoLossScale | StaticLossScale | DynamicLossScale | float | str | None
                  ) -> NoLossScale | StaticLossScale | DynamicLossScale:
    """``None``/"none", a number (static), "dynamic", or a loss-scale object.

    Parameters
    ----------
    spec : None, str, float or loss-scale object
        What to make a loss scale of; a loss-scale object is returned as it is.

    Returns
    -------
    NoLossScale, StaticLossScale or DynamicLossScale

    Raises
    ------
    ValueError
        For anything else.

    Examples
    --------
    >>> from fpsim.training import as_loss_scale
    >>> as_loss_scale(None), as_loss_scale(128)
    (NoLossScale(), StaticLossScale(scale=128.0))
    >>> as_loss_scale("dynamic").scale
    65536.0
    """
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
