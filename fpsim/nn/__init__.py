"""Layers (PyTorch's names), ``Module`` and ``Parameter``; ``fpsim.nn.functional``."""

from fpsim.nn import functional, init
from fpsim.nn.init import manual_seed
from fpsim.nn.layers import (
    BatchNorm1d,
    BatchNorm2d,
    Conv2d,
    CrossEntropyLoss,
    Dropout,
    Embedding,
    Flatten,
    LayerNorm,
    Linear,
    ReLU,
    Sequential,
    Sigmoid,
    Tanh,
)
from fpsim.nn.lstm import LSTM
from fpsim.nn.module import Module, Parameter

__all__ = [
    "LSTM", "BatchNorm1d", "BatchNorm2d", "Conv2d", "CrossEntropyLoss", "Dropout", "Embedding",
    "Flatten", "LayerNorm", "Linear", "Module", "Parameter", "ReLU", "Sequential", "Sigmoid",
    "Tanh", "functional", "init", "manual_seed",
]
