"""Pointwise operations: inputs and result in the compute format.

Each operation evaluates its forward and backward formulas in the storage
arithmetic (binary64 under emulation) and rounds the result once: the forward
value to the compute format here, each gradient to its tensor's format.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, overload

import numpy as np

from fpsim import _device
from fpsim._checks import real
from fpsim.autograd.cast import compute, op_policy, same_device
from fpsim.autograd.tensor import Tensor
from fpsim.precision import numerics

if TYPE_CHECKING:
    import numpy.typing as npt

    from fpsim.autograd.tensor import TensorLike


def _unary(name: str, x: TensorLike, forward: Callable[..., Any] | str,
           backward: Callable[..., Any], exact: bool = False) -> Tensor:
    """``forward``: a function of the data, or the name of an elementary
    function (``numerics.elementary``: the same bits on every device). ``exact``: the
    result is always a value of the input's format (nothing to round)."""
    p = op_policy(name)
    x = compute(x, p)
    with np.errstate(all="ignore"):
        value = (numerics.elementary(forward, x.data, p) if isinstance(forward, str)
                 else forward(x.data))
        y = numerics.round(value, p.compute, p, p.compute if exact else None)

    def grads(g: np.ndarray) -> tuple[Any, ...]:
        with np.errstate(all="ignore"):
            return (backward(g, x.data, y),)

    return Tensor.node(y, p.compute, (x,), grads, p, name)


def _binary(name: str, a: TensorLike, b: TensorLike, forward: Callable[..., Any],
            backward: Callable[..., Any]) -> Tensor:
    p = op_policy(name)
    a, b = same_device(name, compute(a, p), compute(b, p))
    with np.errstate(all="ignore"):
        y = numerics.round(forward(a.data, b.data), p.compute, p)

    def grads(g: np.ndarray) -> tuple[Any, ...]:
        with np.errstate(all="ignore"):
            result: tuple[Any, ...] = backward(g, a.data, b.data)
            return result

    return Tensor.node(y, p.compute, (a, b), grads, p, name)


def add(a: TensorLike, b: TensorLike) -> Tensor:
    """``a + b``, rounded to the current policy's compute format.

    Parameters
    ----------
    a, b : Tensor, array_like or number
        The operands (broadcast as NumPy does), cast to the policy's compute format.

    Returns
    -------
    Tensor
        In the compute format, rounded once; its gradients are rounded to each input's format.

    Examples
    --------
    >>> import fpsim
    >>> from fpsim.nn import functional as F
    >>> half = fpsim.precision.parse("compute=fp16")
    >>> with half:  # 1 + 2**-11 is a tie: it rounds to even, 1
    ...     F.add(fpsim.tensor([1.0, 1.0]), [2.0**-11, 2.0**-10])
    Tensor(array([1.        , 1.00097656]), format=fp16)
    """
    return _binary("add", a, b, np.add, lambda g, x, y: (g, g))


def sub(a: TensorLike, b: TensorLike) -> Tensor:
    """``a - b``, rounded to the current policy's compute format.

    Parameters
    ----------
    a, b : Tensor, array_like or number
        The operands (broadcast as NumPy does), cast to the policy's compute format.

    Returns
    -------
    Tensor
        In the compute format, rounded once; its gradients are rounded to each input's format.

    Examples
    --------
    >>> import fpsim
    >>> from fpsim.nn import functional as F
    >>> half = fpsim.precision.parse("compute=fp16")
    >>> with half:
    ...     F.sub(fpsim.tensor([1.0]), 2.0**-12)
    Tensor(array([1.]), format=fp16)
    """
    return _binary("sub", a, b, np.subtract, lambda g, x, y: (g, -g))


def mul(a: TensorLike, b: TensorLike) -> Tensor:
    """``a * b``, rounded to the current policy's compute format.

    Parameters
    ----------
    a, b : Tensor, array_like or number
        The operands (broadcast as NumPy does), cast to the policy's compute format.

    Returns
    -------
    Tensor
        In the compute format, rounded once; its gradients are rounded to each input's format.

    Examples
    --------
    >>> import fpsim
    >>> from fpsim.nn import functional as F
    >>> half = fpsim.precision.parse("compute=fp16")
    >>> with half:
    ...     F.mul(fpsim.tensor([0.1]), 3)
    Tensor(array([0.29980469]), format=fp16)
    """
    return _binary("mul", a, b, np.multiply, lambda g, x, y: (g * y, g * x))


def div(a: TensorLike, b: TensorLike) -> Tensor:
    """``a / b``, rounded to the current policy's compute format.

    Parameters
    ----------
    a, b : Tensor, array_like or number
        The operands (broadcast as NumPy does), cast to the policy's compute format.

    Returns
    -------
    Tensor
        In the compute format, rounded once; its gradients are rounded to each input's format.

    Examples
    --------
    >>> import fpsim
    >>> from fpsim.nn import functional as F
    >>> half = fpsim.precision.parse("compute=fp16")
    >>> with half:
    ...     F.div(fpsim.tensor([1.0]), 3)
    Tensor(array([0.33325195]), format=fp16)
    """
    return _binary("div", a, b, np.divide, lambda g, x, y: (g / y, -g * x / (y * y)))


def neg(x: TensorLike) -> Tensor:
    """``-x`` in the compute format (exact once ``x`` is there).

    Parameters
    ----------
    x : Tensor, array_like or number
        The input, cast to the policy's compute format.

    Returns
    -------
    Tensor
        In the compute format, rounded once; its gradients are rounded to each input's format.

    Examples
    --------
    >>> import fpsim
    >>> from fpsim.nn import functional as F
    >>> half = fpsim.precision.parse("compute=fp16")
    >>> with half:
    ...     F.neg(fpsim.tensor([0.1]))
    Tensor(array([-0.09997559]), format=fp16)
    """
    return _unary("neg", x, np.negative, lambda g, x, y: -g, exact=True)


def pow(x: TensorLike, exponent: float) -> Tensor:
    """``x ** exponent`` for a constant exponent, rounded once to the compute format.

    Parameters
    ----------
    x : Tensor, array_like or number
        The input, cast to the policy's compute format.
    exponent : float
        A constant (not a Tensor).

    Returns
    -------
    Tensor
        In the compute format, rounded once; its gradients are rounded to each input's format.

    Raises
    ------
    ValueError
        If ``exponent`` is a Tensor or not a scalar.

    Examples
    --------
    >>> import fpsim
    >>> from fpsim.nn import functional as F
    >>> half = fpsim.precision.parse("compute=fp16")
    >>> with half:
    ...     F.pow(fpsim.tensor([3.0, 300.0]), 2)
    Tensor(array([ 9., inf]), format=fp16)
    """
    if isinstance(exponent, Tensor) or np.ndim(exponent) != 0:
        raise ValueError("pow takes a constant scalar exponent")
    k = real(exponent, "exponent")
    return _unary("pow", x, lambda v: v**k, lambda g, v, y: g * k * v ** (k - 1))


def relu(x: TensorLike) -> Tensor:
    """``max(x, 0)`` in the compute format (exact once ``x`` is there).

    Parameters
    ----------
    x : Tensor, array_like or number
        The input, cast to the policy's compute format.

    Returns
    -------
    Tensor
        In the compute format, rounded once; its gradients are rounded to each input's format.

    Examples
    --------
    >>> import fpsim
    >>> from fpsim.nn import functional as F
    >>> half = fpsim.precision.parse("compute=fp16")
    >>> with half:
    ...     F.relu(fpsim.tensor([-1.0, 0.5]))
    Tensor(array([0. , 0.5]), format=fp16)
    """
    # The gradient is selected, not multiplied: an infinite or NaN gradient at x <= 0 gives
    # 0, as torch's threshold_backward does (inf * 0 would be NaN).
    return _unary("relu", x, lambda v: np.maximum(v, 0),
                  lambda g, v, y: np.where(v > 0, g, 0.0), exact=True)


def tanh(x: TensorLike) -> Tensor:
    """``tanh(x)``, rounded once to the compute format.

    Parameters
    ----------
    x : Tensor, array_like or number
        The input, cast to the policy's compute format.

    Returns
    -------
    Tensor
        In the compute format, rounded once; its gradients are rounded to each input's format.

    Examples
    --------
    >>> import fpsim
    >>> from fpsim.nn import functional as F
    >>> half = fpsim.precision.parse("compute=fp16")
    >>> with half:
    ...     F.tanh(fpsim.tensor([0.5]))
    Tensor(array([0.4621582]), format=fp16)
    """
    return _unary("tanh", x, "tanh", lambda g, v, y: g * (1 - y * y))


def _sigmoid(v: np.ndarray, p: Any) -> np.ndarray:
    e = numerics.elementary("exp", -abs(v), p)
    out: np.ndarray = _device.array_module(v).where(v >= 0, 1 / (1 + e), e / (1 + e))
    return out


def sigmoid(x: TensorLike) -> Tensor:
    """``1 / (1 + exp(-x))``, rounded once to the compute format.

    Parameters
    ----------
    x : Tensor, array_like or number
        The input, cast to the policy's compute format.

    Returns
    -------
    Tensor
        In the compute format, rounded once; its gradients are rounded to each input's format.

    Examples
    --------
    >>> import fpsim
    >>> from fpsim.nn import functional as F
    >>> half = fpsim.precision.parse("compute=fp16")
    >>> with half:
    ...     F.sigmoid(fpsim.tensor([0.0, 2.0]))
    Tensor(array([0.5       , 0.88085938]), format=fp16)
    """
    return _unary("sigmoid", x, lambda v: _sigmoid(v, op_policy("sigmoid")),
                  lambda g, v, y: g * y * (1 - y))


def exp(x: TensorLike) -> Tensor:
    """``exp(x)``, rounded once to the compute format (overflowing to inf).

    Parameters
    ----------
    x : Tensor, array_like or number
        The input, cast to the policy's compute format.

    Returns
    -------
    Tensor
        In the compute format, rounded once; its gradients are rounded to each input's format.

    Examples
    --------
    >>> import fpsim
    >>> from fpsim.nn import functional as F
    >>> half = fpsim.precision.parse("compute=fp16")
    >>> with half:
    ...     F.exp(fpsim.tensor([1.0, 12.0]))
    Tensor(array([2.71875,     inf]), format=fp16)
    """
    return _unary("exp", x, "exp", lambda g, v, y: g * y)


def log(x: TensorLike) -> Tensor:
    """``log(x)``, rounded once to the compute format.

    Parameters
    ----------
    x : Tensor, array_like or number
        The input, cast to the policy's compute format.

    Returns
    -------
    Tensor
        In the compute format, rounded once; its gradients are rounded to each input's format.

    Examples
    --------
    >>> import fpsim
    >>> from fpsim.nn import functional as F
    >>> half = fpsim.precision.parse("compute=fp16")
    >>> with half:
    ...     F.log(fpsim.tensor([2.0]))
    Tensor(array([0.69335938]), format=fp16)
    """
    return _unary("log", x, "log", lambda g, v, y: g / v)


@overload
def dropout(x: Tensor, p: float = ..., training: bool = ...,
            rng: np.random.Generator | None = ...) -> Tensor: ...
@overload
def dropout(x: npt.ArrayLike, p: float = ..., training: bool = ...,
            rng: np.random.Generator | None = ...) -> Tensor | npt.ArrayLike: ...
def dropout(x: TensorLike, p: float = 0.5, training: bool = True,
            rng: np.random.Generator | None = None) -> TensorLike:
    """Zero each element with probability ``p`` and scale the rest by 1/(1-p) (training).

    Parameters
    ----------
    x : Tensor, array_like or number
        The input, cast to the policy's compute format.
    p : float, default 0.5
        The probability of zeroing, in [0, 1).
    training : bool, default True
        Without training (or with ``p == 0``), ``x`` is returned as it is.
    rng : numpy.random.Generator, optional
        The generator of the mask; by default the one ``fpsim.nn.manual_seed`` seeds.

    Returns
    -------
    Tensor
        In the compute format (``x`` itself when not training).

    Raises
    ------
    ValueError
        If ``p`` is not in [0, 1).

    Examples
    --------
    >>> import fpsim
    >>> from fpsim.nn import functional as F
    >>> half = fpsim.precision.parse("compute=fp16")
    >>> fpsim.nn.manual_seed(0)
    >>> with half:
    ...     F.dropout(fpsim.tensor([1.0, 1.0, 1.0, 1.0]), 0.5)
    Tensor(array([2., 0., 0., 0.]), format=fp16)
    """
    if not 0 <= p < 1:
        raise ValueError(f"dropout probability must be in [0, 1), got {p}")
    if not training or p == 0:
        return x
    from fpsim.nn.init import generator

    data = x.data if isinstance(x, Tensor) else x
    keep = (rng or generator()).random(np.shape(data)) >= p
    # The mask is drawn on the host (the CPU's stream), then copied to x's device.
    scale = _device.transfer(keep / (1 - p), _device.device_of(data))
    return _unary("dropout", x, lambda v: v * scale, lambda g, v, y: g * scale)
