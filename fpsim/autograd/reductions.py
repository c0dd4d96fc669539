"""Reductions: sums and softmax, evaluated in the policy's ``reduce`` format.

Their inputs and results are compute-format tensors (the paper's layers "read
and write FP16 tensors from memory, performing the arithmetic in FP32");
each intermediate (shifted inputs, exponentials, sums) is rounded to
``reduce`` and every sum is accumulated there by ``precision.numerics.sum``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from fpsim import _device
from fpsim._checks import boolean
from fpsim.autograd.cast import compute, op_policy
from fpsim.autograd.tensor import Tensor, as_tensor
from fpsim.precision import numerics

if TYPE_CHECKING:
    from collections.abc import Sequence

    from fpsim.autograd.tensor import TensorLike
    from fpsim.precision.policy import Policy
from fpsim.precision.numerics import normalize_axes


def _count(shape: tuple[int, ...], axes: tuple[int, ...]) -> int:
    return int(np.prod([shape[a] for a in axes], dtype=np.int64))


def _expand(g: np.ndarray, shape: tuple[int, ...], axes: tuple[int, ...],
            keepdims: bool) -> np.ndarray:
    xp = _device.array_module(g)
    if not keepdims:
        g = xp.expand_dims(g, axes)
    expanded: np.ndarray = xp.broadcast_to(g, shape)
    return expanded


def sum(x: TensorLike, axis: int | Sequence[int] | None = None,
        keepdims: bool = False) -> Tensor:
    """The sum of ``x`` over ``axis``, accumulated in the ``reduce`` format.

    Every addition is rounded to ``reduce`` in the policy's order (``precision.numerics.sum``);
    the gradient is the incoming one, broadcast back.

    Parameters
    ----------
    x : Tensor, array_like or number
        The input, cast to the policy's compute format.
    axis : int, tuple of int or None, default None
        The axes to reduce (all of them for None).
    keepdims : bool, default False
        Keep the reduced axes, of length one.

    Returns
    -------
    Tensor
        The sum rounded to the compute format.

    Examples
    --------
    >>> import fpsim
    >>> from fpsim.nn import functional as F
    >>> half = fpsim.precision.parse("compute=fp16")
    >>> with half:  # fp32 holds 1 + 2**-10; fp16 would not have grown past 1
    ...     F.sum(fpsim.tensor([1.0, 2.0**-11, 2.0**-11]))
    Tensor(array(1.00097656), format=fp16)
    """
    p = op_policy("sum")
    x = compute(x, p)
    axes = normalize_axes(axis, x.ndim)
    y = numerics.round(numerics.sum(x.data, axes, p, keepdims), p.compute, p)
    return Tensor.node(y, p.compute, (x,),
                       lambda g: (_expand(g, x.shape, axes, keepdims),), p, "sum")


def mean(x: TensorLike, axis: int | Sequence[int] | None = None,
         keepdims: bool = False) -> Tensor:
    """The mean of ``x`` over ``axis``: the sum in ``reduce``, divided there, then rounded to
    ``compute``.

    Parameters
    ----------
    x : Tensor, array_like or number
        The input, cast to the policy's compute format.
    axis : int, tuple of int or None, default None
        The axes to reduce (all of them for None).
    keepdims : bool, default False
        Keep the reduced axes, of length one.

    Returns
    -------
    Tensor
        In the compute format.

    Examples
    --------
    >>> import fpsim
    >>> from fpsim.nn import functional as F
    >>> half = fpsim.precision.parse("compute=fp16")
    >>> with half:
    ...     F.mean(fpsim.tensor([1.0, 2.0, 4.0]))
    Tensor(array(2.33398438), format=fp16)
    """
    p = op_policy("mean")
    x = compute(x, p)
    axes = normalize_axes(axis, x.ndim)
    n = _count(x.shape, axes)
    total = numerics.sum(x.data, axes, p, keepdims)
    y = numerics.round(numerics.round(total / n, p.reduce, p), p.compute, p)
    return Tensor.node(y, p.compute, (x,),
                       lambda g: (_expand(g / n, x.shape, axes, keepdims),), p, "mean")


def log_softmax_values(v: np.ndarray, axis: int, p: Policy) -> tuple[np.ndarray, np.ndarray]:
    """log softmax of ``v`` along ``axis`` and softmax itself, both in ``reduce``.

    Parameters
    ----------
    v : numpy.ndarray
        The values (of the compute format).
    axis : int
        The axis of the classes.
    p : Policy
        The policy: every intermediate is rounded to its ``reduce`` format.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        ``(log_softmax, softmax)``, values of ``reduce``.

    Examples
    --------
    >>> import numpy as np
    >>> import fpsim
    >>> from fpsim.autograd.reductions import log_softmax_values
    >>> logp, prob = log_softmax_values(np.array([0.0, 0.0]), -1, fpsim.Policy())
    >>> logp, prob
    (array([-0.69314718, -0.69314718]), array([0.5, 0.5]))
    """
    r = p.reduce
    with np.errstate(all="ignore"):
        z = numerics.round(v - v.max(axis=axis, keepdims=True), r, p)
        e = numerics.round(numerics.elementary("exp", z, p), r, p)
        s = numerics.sum(e, axis, p, keepdims=True, source=r)
        logp = numerics.round(z - numerics.round(numerics.elementary("log", s, p), r, p), r, p)
        return logp, numerics.round(e / s, r, p)


def softmax(x: TensorLike, axis: int = -1) -> Tensor:
    """``exp(x) / sum(exp(x))`` along ``axis``, each intermediate rounded to ``reduce``.

    Parameters
    ----------
    x : Tensor, array_like or number
        The input, cast to the policy's compute format.
    axis : int, default -1
        The axis of the classes.

    Returns
    -------
    Tensor
        The probabilities, rounded to the compute format.

    Examples
    --------
    >>> import fpsim
    >>> from fpsim.nn import functional as F
    >>> half = fpsim.precision.parse("compute=fp16")
    >>> with half:
    ...     F.softmax(fpsim.tensor([0.0, 1.0]))
    Tensor(array([0.26904297, 0.73095703]), format=fp16)
    """
    p = op_policy("softmax")
    x = compute(x, p)
    _, prob = log_softmax_values(x.data, axis, p)
    y = numerics.round(prob, p.compute, p)

    def backward(g: np.ndarray) -> Any:
        inner = numerics.sum(numerics.round(g * y, p.reduce, p), axis, p, keepdims=True,
                             source=p.reduce)
        return (y * (g - inner),)

    return Tensor.node(y, p.compute, (x,), backward, p, "softmax")


def log_softmax(x: TensorLike, axis: int = -1) -> Tensor:
    """``x - log(sum(exp(x)))`` along ``axis``, each intermediate rounded to ``reduce``.

    Parameters
    ----------
    x : Tensor, array_like or number
        The input, cast to the policy's compute format.
    axis : int, default -1
        The axis of the classes.

    Returns
    -------
    Tensor
        The log probabilities, rounded to the compute format.

    Examples
    --------
    >>> import fpsim
    >>> from fpsim.nn import functional as F
    >>> half = fpsim.precision.parse("compute=fp16")
    >>> with half:
    ...     F.log_softmax(fpsim.tensor([0.0, 1.0]))
    Tensor(array([-1.31347656, -0.31323242]), format=fp16)
    """
    p = op_policy("log_softmax")
    x = compute(x, p)
    logp, prob = log_softmax_values(x.data, axis, p)
    y = numerics.round(logp, p.compute, p)

    def backward(g: np.ndarray) -> Any:
        return (g - prob * numerics.sum(g, axis, p, keepdims=True),)

    return Tensor.node(y, p.compute, (x,), backward, p, "log_softmax")


def argmax(x: TensorLike, axis: int | None = None, keepdims: bool = False) -> np.ndarray:
    """The indices of the largest values of ``x`` along ``axis``, as ``numpy.argmax``.

    Indices are not values of a format and have no gradient: the result is an integer
    array (the first occurrence wins; a NaN counts as the largest, as in NumPy and
    PyTorch).

    Parameters
    ----------
    x : Tensor or array_like
        The values.
    axis : int, optional
        The axis to search; None searches the flattened values.
    keepdims : bool, default False
        Keep the searched axis, of length one.

    Returns
    -------
    numpy.ndarray or cupy.ndarray
        Integer indices (``numpy.intp``), on ``x``'s device.

    Raises
    ------
    numpy.exceptions.AxisError
        If ``axis`` is out of range.
    TypeError
        If ``axis`` is not an integer or None.

    Examples
    --------
    >>> import fpsim
    >>> t = fpsim.tensor([[0.5, 2.0, 1.0], [3.0, -1.0, 3.0]])
    >>> t.argmax(axis=1), t.argmax()
    (array([1, 0]), array(3))
    """
    data = x.data if isinstance(x, Tensor) else as_tensor(x).data
    if (axis is not None and not isinstance(axis, (int, np.integer))) or isinstance(axis, bool):
        raise TypeError(f"argmax takes an integer axis or None, got {axis!r}")
    xp = _device.array_module(data)
    indices: np.ndarray = xp.asarray(
        xp.argmax(data, axis=axis, keepdims=boolean(keepdims, "keepdims")))
    return indices
