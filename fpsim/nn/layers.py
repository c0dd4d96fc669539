"""Layers with PyTorch's names, shapes and default initialisation."""

from __future__ import annotations

import math

import numpy as np

from fpsim._checks import boolean, integer, integer_pair, real
from fpsim.autograd import dot, losses, normalization, pointwise, shape
from fpsim.nn import init
from fpsim.nn.module import Module, Parameter
from fpsim.precision import numerics
from fpsim.precision.policy import current


def _bound(fan_in: int) -> float:
    """PyTorch's default init bound 1/sqrt(fan_in); 0 for a layer with no inputs."""
    return 1 / math.sqrt(fan_in) if fan_in > 0 else 0.0


class Linear(Module):
    """``x @ weight.T + bias``; ``weight`` (out_features, in_features)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True):
        in_features = integer(in_features, "in_features", 0)
        out_features = integer(out_features, "out_features", 0)
        bound = _bound(in_features)
        self.weight = Parameter(init.uniform((out_features, in_features), bound))
        self.bias = Parameter(init.uniform((out_features,), bound)) if boolean(
            bias, "bias") else None

    def forward(self, x):
        return dot.linear(x, self.weight, self.bias)


class Conv2d(Module):
    """2-D convolution (cross-correlation), NCHW."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 bias: bool = True):
        in_channels = integer(in_channels, "in_channels", 0)
        out_channels = integer(out_channels, "out_channels", 0)
        kh, kw = integer_pair(kernel_size, "kernel_size", 1)
        bound = _bound(in_channels * kh * kw)
        self.weight = Parameter(init.uniform((out_channels, in_channels, kh, kw), bound))
        self.bias = Parameter(init.uniform((out_channels,), bound)) if boolean(
            bias, "bias") else None
        self.stride = integer_pair(stride, "stride", 1)
        self.padding = integer_pair(padding, "padding", 0)

    def forward(self, x):
        return dot.conv2d(x, self.weight, self.bias, self.stride, self.padding)


class Embedding(Module):
    """Rows of ``weight`` (num_embeddings, embedding_dim) looked up by integer ids."""

    def __init__(self, num_embeddings: int, embedding_dim: int):
        num_embeddings = integer(num_embeddings, "num_embeddings", 0)
        embedding_dim = integer(embedding_dim, "embedding_dim", 0)
        self.weight = Parameter(init.normal((num_embeddings, embedding_dim)))

    def forward(self, ids):
        return shape.embedding(ids, self.weight)


class _BatchNorm(Module):
    _buffer_names = ("running_mean", "running_var")

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1):
        num_features = integer(num_features, "num_features", 0)
        eps = real(eps, "eps", 0.0)
        momentum = real(momentum, "momentum", 0.0, 1.0)
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
        dims = (normalized_shape if isinstance(normalized_shape, (tuple, list))
                else (normalized_shape,))
        self.normalized_shape = tuple(integer(d, "normalized_shape", 0) for d in dims)
        eps = real(eps, "eps", 0.0)
        self.weight = Parameter(np.ones(self.normalized_shape))
        self.bias = Parameter(np.zeros(self.normalized_shape))
        self.eps = eps

    def forward(self, x):
        return normalization.layer_norm(x, self.normalized_shape, self.weight, self.bias,
                                        self.eps)


class Dropout(Module):
    def __init__(self, p: float = 0.5):
        self.p = real(p, "dropout probability p", 0.0, 1.0, high_open=True)

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
