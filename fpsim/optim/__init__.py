"""Optimizers whose updates are rounded to each parameter's format."""

from fpsim.optim.adam import Adam
from fpsim.optim.optimizer import Optimizer
from fpsim.optim.sgd import SGD

__all__ = ["SGD", "Adam", "Optimizer"]
