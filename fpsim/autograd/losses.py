"""Losses: evaluated in the ``reduce`` format, the loss stored in the ``output`` format.

The gradient they send back is rounded to the compute format of their input:
this is where small gradients underflow without loss scaling.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from fpsim import _device
from fpsim.autograd.cast import compute, op_policy
from fpsim.autograd.reductions import log_softmax_values
from fpsim.autograd.tensor import Tensor
from fpsim.precision import numerics

if TYPE_CHECKING:
    import numpy.typing as npt

    from fpsim.autograd.tensor import TensorLike
    from fpsim.precision.policy import Policy

REDUCTIONS = ("mean", "sum")
"""The ``reduction`` arguments the losses take."""


def _check_reduction(reduction: str) -> None:
    if reduction not in REDUCTIONS:
        raise ValueError(f"unknown reduction {reduction!r}; known: {', '.join(REDUCTIONS)}")


def _loss(terms: np.ndarray, n: int, p: Policy) -> np.ndarray:
    """The sum of ``terms`` (values of ``reduce``) divided by ``n``, in ``output``."""
    total = numerics.sum(terms, None, p, source=p.reduce)
    loss: np.ndarray = _device.array_module(terms).asarray(
        numerics.round(numerics.round(total / n, p.reduce, p), p.output, p, p.reduce))
    return loss


def cross_entropy(logits: TensorLike, target: npt.ArrayLike,
                  reduction: str = "mean") -> Tensor:
    """Softmax cross-entropy of ``logits`` (N, C) against integer classes ``target`` (N,).

    Parameters
    ----------
    logits : Tensor or array_like
        (N, C), cast to the compute format.
    target : array_like of int
        (N,), classes in 0..C-1.
    reduction : {'mean', 'sum'}, default 'mean'
        How the per-example terms are combined (in ``reduce``).

    Returns
    -------
    Tensor
        A scalar in the ``output`` format; the gradient sent back to ``logits`` is
        rounded to the compute format (where small gradients underflow).

    Raises
    ------
    ValueError
        For an unknown ``reduction``, or targets that are not classes.

    Examples
    --------
    >>> import fpsim
    >>> from fpsim.nn import functional as F
    >>> half = fpsim.precision.parse("compute=fp16")
    >>> with half:
    ...     F.cross_entropy(fpsim.tensor([[2.0, 0.0]]), [0])
    Tensor(array(0.12692805), format=fp32)
    """
    _check_reduction(reduction)
    p = op_policy("cross_entropy")
    x = compute(logits, p)
    _device.common("cross_entropy", x.data, target)
    xp = _device.array_module(x.data)
    labels: np.ndarray = xp.asarray(target)
    if x.ndim != 2:
        raise ValueError(f"cross_entropy needs logits of shape (N, C), got {x.shape}")
    if labels.shape != x.shape[:1] or labels.dtype.kind not in "iu":
        raise ValueError(f"target must be {x.shape[0]} integer classes, got {labels.dtype} "
                         f"{labels.shape}")
    if labels.size:
        # On a GPU, checked without a read inside a training step (the step reads it with
        # its finiteness check); out-of-range classes index class 0 until then.
        inside = (labels >= 0) & (labels < x.shape[1])
        _device.require(inside.all(), f"target classes must lie in 0..{x.shape[1] - 1}")
        if xp is not np:
            labels = xp.where(inside, labels, 0)
    logp, prob = log_softmax_values(x.data, 1, p)
    rows = xp.arange(x.shape[0])
    n = x.shape[0] if reduction == "mean" else 1
    loss = _loss(-logp[rows, labels], n, p)

    def backward(g: np.ndarray) -> Any:
        grad = prob.copy()
        grad[rows, labels] -= 1
        return (grad * (g / n),)

    return Tensor.node(loss, p.output, (x,), backward, p, "cross_entropy")


def mse_loss(prediction: TensorLike, target: TensorLike, reduction: str = "mean") -> Tensor:
    """Mean (or sum) of squared differences, ``target`` a constant array.

    Parameters
    ----------
    prediction : Tensor or array_like
        Cast to the compute format.
    target : array_like
        Of the same shape; no gradient flows to it.
    reduction : {'mean', 'sum'}, default 'mean'
        How the per-example terms are combined (in ``reduce``).

    Returns
    -------
    Tensor
        A scalar in the ``output`` format.

    Raises
    ------
    ValueError
        For an unknown ``reduction``.

    Examples
    --------
    >>> import fpsim
    >>> from fpsim.nn import functional as F
    >>> half = fpsim.precision.parse("compute=fp16")
    >>> with half:
    ...     F.mse_loss(fpsim.tensor([1.0, 2.0]), [0.0, 0.0])
    Tensor(array(2.5), format=fp32)
    """
    _check_reduction(reduction)
    p = op_policy("mse_loss")
    x = compute(prediction, p)
    t = target.data if isinstance(target, Tensor) else target
    _device.common("mse_loss", x.data, t)
    t = _device.binary64(_device.array_module(x.data).asarray(t))
    if t.shape != x.shape:
        raise ValueError(f"target shape {t.shape} differs from prediction shape {x.shape}")
    d = numerics.round(x.data - t, p.reduce, p)
    n = x.size if reduction == "mean" else 1
    loss = _loss(numerics.round(d * d, p.reduce, p), n, p)
    return Tensor.node(loss, p.output, (x,), lambda g: (d * (2 * g / n),), p,
                       "mse_loss")
