"""Layers with PyTorch's names, shapes and default initialisation."""

from __future__ import annotations

import math

import numpy as np

from fpsim.autograd import dot, losses, normalization, pointwise, shape
from fpsim.nn import init
from fpsim.nn.module import Module, Parameter
from fpsim.precision import numerics
from fpsim.precision.policy import current


class Linear(Module):
    """``x @ weight.T + bias``; ``weight`` (out_features, in_features)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True):
        bound = 1 / math.sqrt(in_features)
        self.weight = Parameter(init.uniform((out_features, in_features), bound))
        self.bias = Parameter(init.uniform((out_features,), bound)) if bias else None

    def forward(self, x):
        return dot.linear(x, self.weight, self.bias)


class Conv2d(Module):
    """2-D convolution (cross-correlation), NCHW."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 bias: bool = True):
        kh, kw = (kernel_size, kernel_size) if np.ndim(kernel_size) == 0 else kernel_size
        bound = 1 / math.sqrt(in_channels * kh * kw)
        self.weight = Parameter(init.uniform((out_channels, in_channels, kh, kw), bound))
        self.bias = Parameter(init.uniform((out_channels,), bound)) if bias else None
        self.stride, self.padding = stride, padding

    def forward(self, x):
        return dot.conv2d(x, self.weight, self.bias, self.stride, self.padding)


class Embedding(Module):
    """Rows of ``weight`` (num_embeddings, embedding_dim) looked up by integer ids."""

    def __init__(self, num_embeddings: int, embedding_dim: int):
        self.weight = Parameter(init.normal((num_embeddings, embedding_dim)))

    def forward(self, ids):
        return shape.embedding(ids, self.weight)


class _BatchNorm(Module):
    _buffer_names = ("running_mean", "running_var")

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1):
        self.weight = Parameter(np.ones(num_features))
        self.bias = Parameter(np.zeros(num_features))
        policy = current()
        self.running_mean = numerics.round(np.zeros(num_features), policy.reduce, policy)
        self.running_var = numerics.round(np.ones(num_features), policy.reduce, policy)
        self.eps, self.momentum = eps, momentum

    def forward(self, x):
        return normalization.batch_norm(x, self.running_mean, self.running_var, self.weight,
                                        self.bias, self.training, self.momentum, self.eps)


class BatchNorm1d(_BatchNorm):
    """Batch normalization of (N, C) or (N, C, L)."""


class BatchNorm2d(_BatchNorm):
    """Batch normalization of (N, C, H, W) over N, H and W."""


class LayerNorm(Module):
    def __init__(self, normalized_shape, eps: float = 1e-5):
        self.normalized_shape = (
            (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        )
        self.weight = Parameter(np.ones(self.normalized_shape))
        self.bias = Parameter(np.zeros(self.normalized_shape))
        self.eps = eps

    def forward(self, x):
        return normalization.layer_norm(x, self.normalized_shape, self.weight, self.bias,
                                        self.eps)


class Dropout(Module):
    def __init__(self, p: float = 0.5):
        if not 0 <= p < 1:
            raise ValueError(f"dropout probability must be in [0, 1), got {p}")
        self.p = p

    def forward(self, x):
        return pointwise.dropout(x, self.p, self.training)


class ReLU(Module):
    def forward(self, x):
        return pointwise.relu(x)


class Tanh(Module):
    def forward(self, x):
        return pointwise.tanh(x)


class Sigmoid(Module):
    def forward(self, x):
        return pointwise.sigmoid(x)


class Flatten(Module):
    """(N, ...) to (N, -1)."""

    def forward(self, x):
        return shape.reshape(x, (x.shape[0], -1))


class Sequential(Module):
    def __init__(self, *layers: Module):
        self.layers = list(layers)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x

    def __getitem__(self, i: int) -> Module:
        return self.layers[i]


class CrossEntropyLoss(Module):
    def forward(self, logits, target):
        return losses.cross_entropy(logits, target)
