"""Dot-product operations: compute-format inputs, products accumulated in ``accum``.

Forward and backward products alike go through ``precision.numerics.matmul``,
so an fp16 accumulator shows in the gradients as well as in the activations. Under a
policy with a scaling recipe, ``linear`` and ``conv2d`` quantize their products' operands
(``fpsim.autograd.scaled``).
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from fpsim.accumulation.conv import check, correlate, input_gradient, weight_gradient
from fpsim.autograd.cast import compute, op_policy, same_device
from fpsim.autograd.shape import transpose
from fpsim.autograd.tensor import Tensor
from fpsim.precision import numerics

if TYPE_CHECKING:
    from fpsim.autograd.tensor import TensorLike

    Pair = tuple[int, int]
    """A stride or a padding: (along H, along W)."""


def _swap(v: np.ndarray) -> np.ndarray:
    swapped: np.ndarray = v.swapaxes(-1, -2)
    return swapped


def matmul(a: TensorLike, b: TensorLike) -> Tensor:
    """``a @ b`` for arrays of at least two dimensions (batch dimensions broadcast).

    Parameters
    ----------
    a, b : Tensor or array_like
        (..., M, K) and (..., K, N), cast to the compute format.

    Returns
    -------
    Tensor
        (..., M, N): the products accumulated in the ``accum`` format (in the policy's
        order), the result rounded to the compute format.

    Raises
    ------
    ValueError
        If the shapes do not multiply.

    Examples
    --------
    >>> import fpsim
    >>> from fpsim.nn import functional as F
    >>> half = fpsim.precision.parse("compute=fp16")
    >>> with half:
    ...     F.matmul(fpsim.tensor([[1.0, 2.0]]), fpsim.tensor([[0.1], [0.2]]))
    Tensor(array([[0.5]]), format=fp16)
    """
    p = op_policy("matmul")
    a, b = same_device("matmul", compute(a, p), compute(b, p))
    if a.ndim < 2 or b.ndim < 2 or a.shape[-1] != b.shape[-2]:
        raise ValueError(f"matmul needs (..., M, K) @ (..., K, N), got {a.shape} and {b.shape}")
    y = numerics.matmul(a.data, b.data, p)

    def backward(g: np.ndarray) -> Any:
        # Products come out in the compute format; broadcast batches are summed later.
        ga = gb = None
        if a.requires_grad:
            ga = (numerics.matmul(g, _swap(b.data), p), p.compute)
        if b.requires_grad and b.ndim == 2 and a.ndim > 2:
            # One matrix shared by the batch: one product over the whole batch.
            k = a.shape[-1]
            gb = (numerics.matmul(a.data.reshape(-1, k).T, g.reshape(-1, g.shape[-1]), p),
                  p.compute)
        elif b.requires_grad:
            gb = (numerics.matmul(_swap(a.data), g, p), p.compute)
        return ga, gb

    return Tensor.node(y, p.compute, (a, b), backward, p, "matmul")


def linear(x: TensorLike, weight: TensorLike, bias: TensorLike | None = None) -> Tensor:
    """``x @ weight.T + bias`` with ``weight`` of shape (out_features, in_features).

    Parameters
    ----------
    x : Tensor or array_like
        (..., in_features).
    weight : Tensor or array_like
        (out_features, in_features), cast to the compute format.
    bias : Tensor or array_like, optional
        (out_features,), added by ``add``.

    Returns
    -------
    Tensor
        (..., out_features), in the compute format.

    Examples
    --------
    >>> import fpsim
    >>> from fpsim.nn import functional as F
    >>> half = fpsim.precision.parse("compute=fp16")
    >>> with half:
    ...     F.linear(fpsim.tensor([[1.0, 2.0]]), fpsim.tensor([[0.5, 0.25]]), fpsim.tensor([0.1]))
    Tensor(array([[1.09960938]]), format=fp16)
    """
    from fpsim.autograd import scaled
    from fpsim.autograd.pointwise import add

    p = op_policy("matmul")
    recipe = scaled.active(p, weight)
    if recipe is not None:  # the products quantize their operands (FP8/FP4 recipes)
        y = scaled.linear(x, weight, p, recipe)
    else:
        y = matmul(x, transpose(compute(weight, p)))
    return y if bias is None else add(y, bias)


def conv2d(x: TensorLike, weight: TensorLike, bias: TensorLike | None = None,
           stride: int | Pair = 1, padding: int | Pair = 0) -> Tensor:
    """2-D cross-correlation, NCHW: ``x`` (N, C, H, W), ``weight`` (O, C, KH, KW).

    Parameters
    ----------
    x : Tensor or array_like
        (N, C, H, W), cast to the compute format.
    weight : Tensor or array_like
        (O, C, KH, KW), cast to the compute format.
    bias : Tensor or array_like, optional
        (O,).
    stride : int or (int, int), default 1
        The step of the window.
    padding : int or (int, int), default 0
        Zeros added on each side of H and W.

    Returns
    -------
    Tensor
        (N, O, OH, OW): inner products accumulated in ``accum`` (as ``fpsim.conv2d``),
        rounded to the compute format.

    Examples
    --------
    >>> import fpsim
    >>> from fpsim.nn import functional as F
    >>> half = fpsim.precision.parse("compute=fp16")
    >>> import numpy as np
    >>> x = fpsim.tensor(np.arange(16.0).reshape(1, 1, 4, 4))
    >>> with half:
    ...     F.conv2d(x, fpsim.tensor(np.ones((1, 1, 2, 2))), stride=2)
    Tensor(array([[[[10., 18.],
                     [42., 50.]]]]), format=fp16)
    """
    from fpsim.autograd import scaled
    from fpsim.autograd.pointwise import add
    from fpsim.autograd.shape import reshape

    p = op_policy("conv2d")
    recipe = scaled.active(p, weight)
    if recipe is not None:  # the products quantize their operands (FP8/FP4 recipes)
        out = scaled.conv2d(x, weight, stride, padding, p, recipe)
        return out if bias is None else add(out, reshape(bias, (1, -1, 1, 1)))
    x, w = same_device("conv2d", compute(x, p), compute(weight, p))
    stride, padding = check(x.data, w.data, stride, padding)
    y, cols = correlate(x.data, w.data, stride, padding, partial(numerics.matmul, policy=p))

    def backward(g: np.ndarray) -> Any:
        gx: Any = None
        gw: Any = None
        product = partial(numerics.matmul, policy=p)
        if w.requires_grad:
            gw = (weight_gradient(g, cols, w.shape, product), p.compute)
        if x.requires_grad:
            gx = (input_gradient(g, w.data, x.shape, stride, padding, product), p.compute)
        return gx, gw

    out = Tensor.node(y, p.compute, (x, w), backward, p, "conv2d")
    return out if bias is None else add(out, reshape(bias, (1, -1, 1, 1)))
