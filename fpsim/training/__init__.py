"""The training policy: master weights, loss scaling, clipping, and instrumentation."""

from fpsim.training.loss_scale import (
    DynamicLossScale,
    NoLossScale,
    StaticLossScale,
    as_loss_scale,
)
from fpsim.training.monitor import (
    FlushCounter,
    GradientCounts,
    RecipeMonitor,
    TensorStep,
    exponent_histogram,
    flushed_fraction,
    gradients,
)
from fpsim.training.trainer import StepReport, Trainer

__all__ = [
    "DynamicLossScale", "FlushCounter", "GradientCounts", "NoLossScale", "RecipeMonitor",
    "StaticLossScale", "StepReport", "TensorStep", "Trainer", "as_loss_scale",
    "exponent_histogram", "flushed_fraction", "gradients",
]
