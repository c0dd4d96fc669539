"""Batch and layer normalization: statistics in the ``reduce`` format (a reduction),
result in the compute format; the scale and shift are used in ``reduce``."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from fpsim import _device
from fpsim.autograd.cast import cast, compute, op_policy, same_device
from fpsim.autograd.shape import reshape
from fpsim.autograd.tensor import Tensor
from fpsim.precision import numerics

if TYPE_CHECKING:
    from collections.abc import Sequence

    from fpsim.autograd.tensor import TensorLike
    from fpsim.formats import Format


def _normalize(name: str, x: TensorLike, axes: tuple[int, ...], weight: TensorLike | None,
               bias: TensorLike | None, eps: float,
               stats: tuple[np.ndarray, np.ndarray] | None = None,
               param_shape: tuple[int, ...] | None = None) -> tuple[Tensor, np.ndarray, np.ndarray]:
    """(y, mean, biased variance): y = (x - mean) / sqrt(var + eps) * weight + bias.

    With ``stats`` given (inference) they are constants; otherwise they are the
    batch's and the gradient flows through them.
    """
    p = op_policy(name)
    r = p.reduce
    x = compute(x, p)
    n = int(np.prod([x.shape[a] for a in axes]))

    def mean(v: np.ndarray, source: Format | None = None) -> np.ndarray:
        return numerics.round(numerics.sum(v, axes, p, keepdims=True, source=source) / n, r, p)

    if stats is None:
        mu = mean(x.data)
        d = numerics.round(x.data - mu, r, p)
        var = mean(numerics.round(d * d, r, p), r)
    else:
        mu, var = (numerics.round(s, r, p) for s in stats)
        d = numerics.round(x.data - mu, r, p)
    inv = numerics.round(1 / np.sqrt(var + eps), r, p)
    xhat = numerics.round(d * inv, r, p)
    params = []
    for t in (weight, bias):
        if t is not None:
            t = cast(t, r, p)
            params.append(t if param_shape is None else reshape(t, param_shape))
    x, *params = same_device(name, x, *params)
    gamma = params[0].data if weight is not None else 1.0
    beta = params[-1].data if bias is not None else 0.0
    y = numerics.round(xhat * gamma + beta, p.compute, p)

    def backward(g: np.ndarray) -> Any:
        gh = numerics.round(g * gamma, r, p)
        if stats is None:
            gx = inv * (gh - mean(gh, r) - xhat * mean(numerics.round(gh * xhat, r, p), r))
        else:
            gx = gh * inv
        grads = [gx]
        if weight is not None:
            grads.append(numerics.round(g * xhat, r, p))
        if bias is not None:
            grads.append(g)
        return grads

    out = Tensor.node(y, p.compute, (x, *params), backward, p, name)
    return out, mu, var


def batch_norm(x: TensorLike, running_mean: np.ndarray | None = None,
               running_var: np.ndarray | None = None, weight: TensorLike | None = None,
               bias: TensorLike | None = None, training: bool = True, momentum: float = 0.1,
               eps: float = 1e-5) -> Tensor:
    """Normalize over every axis but the channels (axis 1) of (N, C) or (N, C, H, W).

    Parameters
    ----------
    x : Tensor or array_like
        (N, C), (N, C, L) or (N, C, H, W).
    running_mean, running_var : numpy.ndarray, optional
        (C,): in training updated in place (in ``reduce``) toward the batch
        statistics, the variance unbiased; outside training, used instead of them.
    weight, bias : Tensor or array_like, optional
        (C,): the affine transform after normalizing.
    training : bool, default True
        Normalize by the batch's statistics.
    momentum : float, default 0.1
        The weight of the batch in the running statistics.
    eps : float, default 1e-5
        Added to the variance.

    Returns
    -------
    Tensor
        Of ``x``'s shape, in the compute format; the statistics are computed in ``reduce``.

    Raises
    ------
    ValueError
        If the shape or the number of channels does not fit, only one of
        ``running_mean`` and ``running_var`` is given, or in training there is only one
        value per channel (as PyTorch).

    Examples
    --------
    >>> import fpsim
    >>> from fpsim.nn import functional as F
    >>> half = fpsim.precision.parse("compute=fp16")
    >>> with half:
    ...     F.batch_norm(fpsim.tensor([[1.0], [3.0]]))
    Tensor(array([[-1.],
                  [ 1.]]), format=fp16)
    """
    data = x.data if isinstance(x, Tensor) else _device.array_module(x).asarray(x)
    if data.ndim not in (2, 3, 4):
        raise ValueError(f"batch_norm needs (N, C), (N, C, L) or (N, C, H, W), got {data.shape}")
    if (running_mean is None) != (running_var is None):
        raise ValueError("batch_norm takes running_mean and running_var together, or neither")
    if running_mean is not None:
        _device.common("batch_norm", data, running_mean, running_var)
    channels = {np.size(v) for v in (running_mean, running_var, weight, bias) if v is not None}
    if channels and channels != {data.shape[1]}:
        raise ValueError(f"batch_norm got {data.shape[1]} channels (axis 1 of {data.shape}), "
                         f"its statistics and parameters have {sorted(channels)}")
    axes = (0,) + tuple(range(2, data.ndim))
    shape = (1, -1) + (1,) * (data.ndim - 2)
    if training and math.prod(data.shape[a] for a in axes) == 1:  # PyTorch's rule
        raise ValueError(f"Expected more than 1 value per channel when training, got input "
                         f"of shape {data.shape}: batch statistics of one value are undefined")
    stats = None
    if not training and running_mean is not None and running_var is not None:
        stats = (running_mean.reshape(shape), running_var.reshape(shape))
    y, mu, var = _normalize("batch_norm", x, axes, weight, bias, eps, stats, shape)
    if training and running_mean is not None and running_var is not None:
        p = op_policy("batch_norm")
        n = int(np.prod([data.shape[a] for a in axes]))
        unbiased = var.reshape(-1) * (n / max(n - 1, 1))
        running_mean[...] = numerics.round(
            (1 - momentum) * running_mean + momentum * mu.reshape(-1), p.reduce, p)
        running_var[...] = numerics.round(
            (1 - momentum) * running_var + momentum * unbiased, p.reduce, p)
    return y


def layer_norm(x: TensorLike, normalized_shape: int | Sequence[int],
               weight: TensorLike | None = None, bias: TensorLike | None = None,
               eps: float = 1e-5) -> Tensor:
    """Normalize over the trailing ``normalized_shape`` axes.

    Parameters
    ----------
    x : Tensor or array_like
        The input.
    normalized_shape : int or tuple of int
        The trailing dimensions to normalize over.
    weight, bias : Tensor or array_like, optional
        Of ``normalized_shape``: the affine transform.
    eps : float, default 1e-5
        Added to the variance.

    Returns
    -------
    Tensor
        Of ``x``'s shape, in the compute format; the statistics are computed in ``reduce``.

    Raises
    ------
    ValueError
        If ``x``'s trailing dimensions are not ``normalized_shape``.

    Examples
    --------
    >>> import fpsim
    >>> from fpsim.nn import functional as F
    >>> half = fpsim.precision.parse("compute=fp16")
    >>> with half:
    ...     F.layer_norm(fpsim.tensor([[1.0, 2.0, 3.0]]), 3)
    Tensor(array([[-1.22460938,  0.        ,  1.22460938]]), format=fp16)
    """
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    data = x.data if isinstance(x, Tensor) else _device.array_module(x).asarray(x)
    if data.shape[data.ndim - len(shape):] != shape:
        raise ValueError(f"layer_norm over {shape} needs trailing dimensions {shape}, "
                         f"got {data.shape}")
    axes = tuple(range(data.ndim - len(shape), data.ndim))
    return _normalize("layer_norm", x, axes, weight, bias, eps)[0]
