"""Functional forms of every differentiable operation (PyTorch's names)."""

from fpsim.autograd.dot import conv2d, linear, matmul
from fpsim.autograd.losses import cross_entropy, mse_loss
from fpsim.autograd.normalization import batch_norm, layer_norm
from fpsim.autograd.pointwise import (
    add,
    div,
    dropout,
    exp,
    log,
    mul,
    neg,
    pow,
    relu,
    sigmoid,
    sub,
    tanh,
)
from fpsim.autograd.reductions import log_softmax, mean, softmax, sum
from fpsim.autograd.shape import cat, embedding, getitem, reshape, stack, transpose

__all__ = [
    "add", "batch_norm", "cat", "conv2d", "cross_entropy", "div", "dropout", "embedding", "exp",
    "getitem", "layer_norm", "linear", "log", "log_softmax", "matmul", "mean", "mse_loss", "mul",
    "neg", "pow", "relu", "reshape", "sigmoid", "softmax", "stack", "sub", "sum", "tanh",
    "transpose",
]
