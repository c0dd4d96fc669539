"""Pointwise operations: inputs and result in the compute format.

Each operation evaluates its forward and backward formulas in the storage
arithmetic (binary64 under emulation) and rounds the result once: the forward
value to the compute format here, each gradient to its tensor's format.
"""

from __future__ import annotations

import numpy as np

from fpsim._checks import real
from fpsim.autograd.cast import compute, op_policy
from fpsim.autograd.tensor import Tensor
from fpsim.precision import numerics


def _unary(name: str, x, forward, backward, exact: bool = False) -> Tensor:
    """``exact``: the result is always a value of the input's format (nothing to round)."""
    p = op_policy(name)
    x = compute(x, p)
    with np.errstate(all="ignore"):
        y = numerics.round(forward(x.data), p.compute, p, p.compute if exact else None)

    def grads(g):
        with np.errstate(all="ignore"):
            return (backward(g, x.data, y),)

    return Tensor.node(y, p.compute, (x,), grads, p, name)


def _binary(name: str, a, b, forward, backward) -> Tensor:
    p = op_policy(name)
    a, b = compute(a, p), compute(b, p)
    with np.errstate(all="ignore"):
        y = numerics.round(forward(a.data, b.data), p.compute, p)

    def grads(g):
        with np.errstate(all="ignore"):
            return backward(g, a.data, b.data)

    return Tensor.node(y, p.compute, (a, b), grads, p, name)


def add(a, b) -> Tensor:
    return _binary("add", a, b, np.add, lambda g, x, y: (g, g))


def sub(a, b) -> Tensor:
    return _binary("sub", a, b, np.subtract, lambda g, x, y: (g, -g))


def mul(a, b) -> Tensor:
    return _binary("mul", a, b, np.multiply, lambda g, x, y: (g * y, g * x))


def div(a, b) -> Tensor:
    return _binary("div", a, b, np.divide, lambda g, x, y: (g / y, -g * x / (y * y)))


def neg(x) -> Tensor:
    return _unary("neg", x, np.negative, lambda g, x, y: -g, exact=True)


def pow(x, exponent: float) -> Tensor:
    """``x ** exponent`` for a constant exponent."""
    if isinstance(exponent, Tensor) or np.ndim(exponent) != 0:
        raise ValueError("pow takes a constant scalar exponent")
    k = real(exponent, "exponent")
    return _unary("pow", x, lambda v: v**k, lambda g, v, y: g * k * v ** (k - 1))


def relu(x) -> Tensor:
    return _unary("relu", x, lambda v: np.maximum(v, 0), lambda g, v, y: g * (v > 0),
                  exact=True)


def tanh(x) -> Tensor:
    return _unary("tanh", x, np.tanh, lambda g, v, y: g * (1 - y * y))


def _sigmoid(v: np.ndarray) -> np.ndarray:
    e = np.exp(-np.abs(v))
    return np.where(v >= 0, 1 / (1 + e), e / (1 + e))


def sigmoid(x) -> Tensor:
    return _unary("sigmoid", x, _sigmoid, lambda g, v, y: g * y * (1 - y))


def exp(x) -> Tensor:
    return _unary("exp", x, np.exp, lambda g, v, y: g * y)


def log(x) -> Tensor:
    return _unary("log", x, np.log, lambda g, v, y: g / v)


def dropout(x, p: float = 0.5, training: bool = True, rng: np.random.Generator | None = None):
    """Zero each element with probability ``p`` and scale the rest by 1/(1-p) (training)."""
    if not 0 <= p < 1:
        raise ValueError(f"dropout probability must be in [0, 1), got {p}")
    if not training or p == 0:
        return x
    from fpsim.nn.init import generator

    keep = (rng or generator()).random(np.shape(x.data if isinstance(x, Tensor) else x)) >= p
    scale = keep / (1 - p)
    return _unary("dropout", x, lambda v: v * scale, lambda g, v, y: g * scale)
