"""Emulated products as differentiable operations: ``matmul``, ``bmm``, ``linear`` and
``conv2d``.

The forward is ``fpsim.matmul`` (every addition rounded to ``accum`` in ``order``, or a
tensor core's block FMA with ``model``) on the tensors' memory, or ``fpsim.conv2d``, its
products over im2col patches; the backward's products are ``fpsim.matmul`` too, with the
forward's settings or their own: ``grad @ B^T`` and ``A^T @ grad`` for a matrix product;
for a convolution, the kernels' gradient over the forward's patches and the input's as
the full correlation of the stride-dilated gradient with the flipped kernels
(``fpsim.accumulation.conv``, as ``fpsim.nn``'s ``conv2d`` computes them). A bias (``c``,
the accumulator's initial value) gets the sum of the gradient's rows, as the product of a
row of ones and the gradient, emulated the same way.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any, TypedDict, cast

import numpy as np
import torch

from fpsim.accumulation.conv import check, im2col, input_gradient, weight_gradient
from fpsim.accumulation.conv import conv2d as fpsim_conv2d
from fpsim.accumulation.matmul import matmul as fpsim_matmul
from fpsim.backends import backend
from fpsim.torch.exchange import float_tensor, to_array, to_tensor

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from fpsim._typing import FormatLike
    from fpsim.accumulation.blocks import BlockFMA

OPTIONS = ("accum", "rounding", "order", "products", "out", "model", "subnormals", "saturate",
           "seed", "random_bits")
"""The settings of ``fpsim.matmul`` that the products take (and ``backward``)."""


class Settings(TypedDict, total=False):
    """The products' keyword arguments: ``fpsim.matmul``'s settings, and ``backward``
    (the backward products' own settings; the forward's by default). None: fpsim's
    default."""

    accum: FormatLike | None
    rounding: str | None
    order: str | None
    products: str | None
    out: FormatLike | None
    model: BlockFMA | None
    subnormals: bool | None
    saturate: bool | None
    seed: int | None
    random_bits: int | None
    backward: Mapping[str, Any] | None


def _compute(fn: Callable[..., Any], like: torch.Tensor,
             *tensors: torch.Tensor | None) -> torch.Tensor:
    """``fn`` of the tensors' arrays (None stays None), on their memory (CUDA: the ``cupy``
    backend, bfloat16 widened to float32: CuPy has none), as a tensor of ``like``'s dtype."""
    cuda = like.device.type == "cuda"
    arrays = [None if t is None
              else to_array(t.float() if cuda and t.dtype == torch.bfloat16 else t)
              for t in tensors]
    with backend("cupy") if cuda else contextlib.nullcontext():
        values = fn(*arrays)
    result = to_tensor(values)
    return result if result.dtype == like.dtype else result.to(like.dtype)


def _product(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor | None,
             options: Mapping[str, Any]) -> torch.Tensor:
    """``fpsim.matmul(a, b, c=c, **options)`` on the tensors' memory, in ``a``'s dtype."""
    return _compute(lambda x, y, z: fpsim_matmul(x, y, c=z, **options), a, a, b, c)


def _summed(rows: torch.Tensor, shape: tuple[int, ...],
            options: Mapping[str, Any]) -> torch.Tensor:
    """The sum of the rows (M, N) of a gradient, added in order as the emulated product of
    a row of ones and the rows: a bias's gradient, of ``shape``."""
    ones = torch.ones((1, rows.shape[0]), dtype=rows.dtype, device=rows.device)
    return _product(ones, rows, None, options).reshape(shape)


class MatmulFunction(torch.autograd.Function):
    """The autograd function under ``matmul``: ``MatmulFunction.apply(a, b, c, options,
    backward_options)``, the options being ``fpsim.matmul``'s keyword arguments.

    Examples
    --------
    >>> import torch
    >>> a = torch.tensor([[1.0, 2.0**-11, 2.0**-11]])
    >>> MatmulFunction.apply(a, torch.ones(3, 1), None, {"accum": "fp16"}, {}).tolist()
    [[1.0]]
    """

    @staticmethod
    def forward(ctx: Any, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor | None,
                options: Mapping[str, Any], backward_options: Mapping[str, Any]
                ) -> torch.Tensor:
        """The forward: ``fpsim.matmul(a, b, c=c, **options)``."""
        ctx.save_for_backward(a, b)
        ctx.c_shape = None if c is None else tuple(c.shape)
        ctx.backward_options = backward_options
        return _product(a, b, c, options)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        """The backward: ``grad @ b^T`` and ``a^T @ grad`` (and the bias's row sum),
        each ``fpsim.matmul`` with the backward's options."""
        a, b = ctx.saved_tensors
        options = ctx.backward_options
        grad_a = grad_b = grad_c = None
        if ctx.needs_input_grad[0]:
            grad_a = _product(grad, b.transpose(-1, -2), None, options)
        if ctx.needs_input_grad[1]:
            grad_b = _product(a.transpose(-1, -2), grad, None, options)
        if ctx.needs_input_grad[2]:
            if ctx.c_shape == tuple(grad.shape):
                grad_c = grad  # each element of c starts one sum: its gradient as it came
            else:  # a bias (N,): the sum of the gradient's rows
                grad_c = _summed(grad.reshape(-1, grad.shape[-1]), ctx.c_shape, options)
        return grad_a, grad_b, grad_c, None, None


class Conv2dFunction(torch.autograd.Function):
    """The autograd function under ``conv2d``: ``Conv2dFunction.apply(x, w, c, stride,
    padding, options, backward_options)``, ``stride`` and ``padding`` pairs, the options
    ``fpsim.matmul``'s keyword arguments.

    Examples
    --------
    >>> import torch
    >>> x = torch.ones(1, 1, 3, 3)
    >>> w = torch.full((1, 1, 2, 2), 2.0**-12)
    >>> Conv2dFunction.apply(x, w, torch.ones(1), (1, 1), (0, 0), {"accum": "fp16"},
    ...                      {}).flatten().tolist()
    [1.0, 1.0, 1.0, 1.0]
    """

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor, c: torch.Tensor | None,
                stride: tuple[int, int], padding: tuple[int, int],
                options: Mapping[str, Any], backward_options: Mapping[str, Any]
                ) -> torch.Tensor:
        """The forward: ``fpsim.conv2d(x, w, stride=, padding=, c=c, **options)``."""
        ctx.save_for_backward(x, w)
        ctx.geometry = stride, padding
        ctx.c_shape = None if c is None else tuple(c.shape)
        ctx.backward_options = backward_options
        return _compute(lambda xs, ws, cs: fpsim_conv2d(xs, ws, stride=stride, padding=padding,
                                                        c=cs, **options), x, x, w, c)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        """The backward: the input's and the kernels' gradients (and the bias's sum over
        the batch and positions), each product ``fpsim.matmul`` with the backward's
        options."""
        x, w = ctx.saved_tensors
        stride, padding = ctx.geometry
        product = partial(fpsim_matmul, **ctx.backward_options)
        grad_x = grad_w = grad_c = None
        if ctx.needs_input_grad[0]:
            grad_x = _compute(lambda gs, ws: input_gradient(gs, ws, tuple(x.shape), stride,
                                                            padding, product), x, grad, w)
        if ctx.needs_input_grad[1]:
            kh, kw = w.shape[2:]
            grad_w = _compute(lambda gs, xs: weight_gradient(
                gs, im2col(xs, kh, kw, stride, padding), tuple(w.shape), product), w, grad, x)
        if ctx.needs_input_grad[2]:
            rows = grad.permute(0, 2, 3, 1).reshape(-1, grad.shape[1])
            grad_c = _summed(rows, ctx.c_shape, ctx.backward_options)
        return grad_x, grad_w, grad_c, None, None, None, None


# torch.autograd.Function.apply is unannotated: its types here are the functions'.
_matmul = cast(Callable[[torch.Tensor, torch.Tensor, "torch.Tensor | None", Mapping[str, Any],
                         Mapping[str, Any]], torch.Tensor], MatmulFunction.apply)
_conv2d = cast(Callable[[torch.Tensor, torch.Tensor, "torch.Tensor | None", tuple[int, int],
                         tuple[int, int], Mapping[str, Any], Mapping[str, Any]], torch.Tensor],
               Conv2dFunction.apply)


def split_settings(settings: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The forward's and the backward's ``fpsim.matmul`` options of a product's keyword
    arguments (``Settings``; None values left to fpsim's defaults).

    Raises
    ------
    TypeError
        An unknown keyword argument; ``backward`` not a dict.
    ValueError
        An unknown setting in ``backward``.

    Examples
    --------
    >>> split_settings({"accum": "fp16", "order": None, "backward": {"accum": "bf16"}})
    ({'accum': 'fp16'}, {'accum': 'bf16'})
    """
    unknown = sorted(set(settings) - {*OPTIONS, "backward"})
    if unknown:
        raise TypeError(f"unexpected keyword arguments {unknown}; the products take "
                        f"{', '.join(OPTIONS)} and backward")
    forward = {name: value for name, value in settings.items()
               if name != "backward" and value is not None}
    backward = settings.get("backward")
    if backward is None:
        return forward, forward
    if not isinstance(backward, Mapping):
        raise TypeError("backward must be None (the forward's settings) or a dict of "
                        f"fpsim.matmul's settings, got {type(backward).__name__}")
    unknown = sorted(set(backward) - set(OPTIONS))
    if unknown:
        raise ValueError(f"backward: unknown settings {unknown}; known: {', '.join(OPTIONS)}")
    return forward, {name: value for name, value in backward.items() if value is not None}


def _shaped(t: torch.Tensor) -> np.ndarray:
    """An array of ``t``'s shape, without memory (for fpsim's shape checks)."""
    return np.broadcast_to(np.empty((), dtype=bool), tuple(t.shape))


def _same(a: torch.Tensor, **others: torch.Tensor | None) -> None:
    for name, x in others.items():
        if x is not None and (x.dtype != a.dtype or x.device != a.device):
            raise ValueError(f"{name} is {x.dtype} on {x.device}; the first operand is "
                             f"{a.dtype} on {a.device}: give operands of one dtype and device")


def matmul(a: torch.Tensor, b: torch.Tensor, *, c: torch.Tensor | None = None,
           **settings: Unpack[Settings]) -> torch.Tensor:
    """Matrix product with an emulated accumulator, differentiably: ``fpsim.matmul``.

    Parameters
    ----------
    a, b : torch.Tensor
        (..., M, K) and (..., K, N) floating-point tensors on one device (CUDA: the
        ``cupy`` backend), of equal batch dimensions (not broadcast: a broadcast
        operand's gradient would need a sum over the batch). Their values, and their
        gradients', must be float32 values (fpsim.matmul's products are exact): a float64
        tensor of other values is refused (``ValueError``).
    c : torch.Tensor, optional
        The accumulator's initial value: of the result's shape, or (N,) (a bias); values
        of ``accum``.
    accum, rounding, order, products, out, model, subnormals, saturate, seed, random_bits
        As ``fpsim.matmul``'s (``model=fpsim.hw.H100``: a tensor core's block FMA).
    backward : dict, optional
        ``fpsim.matmul``'s settings for the backward's products (default: the forward's).

    Returns
    -------
    torch.Tensor
        The (..., M, N) product, in ``a``'s dtype (fpsim's float32 or float64 result,
        converted by torch where ``a`` is float16 or bfloat16: nearest even).

    Raises
    ------
    TypeError
        Operands that are not floating-point tensors; an unknown keyword argument;
        ``backward`` not a dict.
    ValueError
        Operands of other dtypes, devices or batch dimensions; fpsim.matmul's own errors.

    Examples
    --------
    >>> import torch
    >>> import fpsim
    >>> import fpsim.torch
    >>> a = torch.tensor([[1.0, 2.0**-24, 2.0**-24, 2.0**-24]], requires_grad=True)
    >>> b = torch.ones(4, 1)
    >>> fpsim.torch.matmul(a, b).tolist(), fpsim.torch.matmul(a, b, model=fpsim.hw.H100).tolist()
    ([[1.0]], [[1.0000001192092896]])
    >>> fpsim.torch.matmul(a, b, accum="fp16").sum().backward()
    >>> a.grad.tolist()
    [[1.0, 1.0, 1.0, 1.0]]
    """
    forward, backward = split_settings(settings)
    a, b = float_tensor(a, "a"), float_tensor(b, "b")
    if c is not None:
        c = float_tensor(c, "c")
    _same(a, b=b, c=c)
    if a.dim() >= 2 and b.dim() >= 2 and a.shape[:-2] != b.shape[:-2]:
        raise ValueError(f"a's batch dimensions {tuple(a.shape[:-2])} differ from b's "
                         f"{tuple(b.shape[:-2])}: broadcast them first (expand)")
    if c is not None and a.dim() >= 2 and b.dim() >= 2:
        shape = (*a.shape[:-1], b.shape[-1])
        if tuple(c.shape) not in (shape, (b.shape[-1],)):
            raise ValueError(f"c has shape {tuple(c.shape)}: give the result's {shape} or a "
                             f"bias of ({b.shape[-1]},)")
    return _matmul(a, b, c, forward, backward)


def bmm(a: torch.Tensor, b: torch.Tensor, **settings: Unpack[Settings]) -> torch.Tensor:
    """Batched matrix product with an emulated accumulator, as ``torch.bmm``: ``matmul``
    of (B, M, K) and (B, K, N) tensors.

    Parameters
    ----------
    a, b : torch.Tensor
        Three-dimensional, of one batch size B.
    accum, rounding, order, products, out, model, subnormals, saturate, seed, random_bits,
    backward
        As ``matmul``'s.

    Returns
    -------
    torch.Tensor
        (B, M, N), in ``a``'s dtype.

    Raises
    ------
    ValueError
        Operands that are not three-dimensional or of other batch sizes; ``matmul``'s
        errors.

    Examples
    --------
    >>> import torch
    >>> import fpsim.torch
    >>> a = torch.tensor([[[1.0, 2.0**-11]], [[1.0, 2.0**-10]]])
    >>> fpsim.torch.bmm(a, torch.ones(2, 2, 1), accum="fp16").flatten().tolist()
    [1.0, 1.0009765625]
    """
    a, b = float_tensor(a, "a"), float_tensor(b, "b")
    if a.dim() != 3 or b.dim() != 3 or a.shape[0] != b.shape[0]:
        raise ValueError(f"bmm takes (B, M, K) and (B, K, N) of one batch size, got "
                         f"{tuple(a.shape)} and {tuple(b.shape)}")
    return matmul(a, b, **settings)


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
           **settings: Unpack[Settings]) -> torch.Tensor:
    """``torch.nn.functional.linear`` with an emulated accumulator: ``x @ weight^T``, the
    bias the accumulator's initial value (as a GEMM's ``C``), by ``matmul``.

    Parameters
    ----------
    x : torch.Tensor
        (..., in_features): its leading dimensions are flattened into the product's rows.
    weight : torch.Tensor
        (out_features, in_features).
    bias : torch.Tensor, optional
        (out_features,).
    accum, rounding, order, products, out, model, subnormals, saturate, seed, random_bits,
    backward
        As ``matmul``'s.

    Returns
    -------
    torch.Tensor
        (..., out_features), in ``x``'s dtype.

    Examples
    --------
    >>> import torch
    >>> import fpsim.torch
    >>> x = torch.tensor([[1.0, 2.0**-11]])
    >>> w = torch.tensor([[1.0, 1.0]], requires_grad=True)
    >>> y = fpsim.torch.linear(x, w, torch.tensor([2.0**-11]), accum="fp16")
    >>> y.tolist()
    [[1.0]]
    """
    x = float_tensor(x, "x")
    weight = float_tensor(weight, "weight")
    if weight.dim() != 2 or x.dim() < 1 or x.shape[-1] != weight.shape[1]:
        raise ValueError(f"x {tuple(x.shape)} and weight {tuple(weight.shape)} do not fit: "
                         "weight is (out_features, in_features), x (..., in_features)")
    rows = x.reshape(-1, x.shape[-1])
    y = matmul(rows, weight.t(), c=bias, **settings)
    return y.reshape(*x.shape[:-1], weight.shape[0])


def conv2d(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
           stride: int | tuple[int, int] = 1, padding: int | tuple[int, int] = 0,
           **settings: Unpack[Settings]) -> torch.Tensor:
    """``torch.nn.functional.conv2d`` (a cross-correlation, NCHW) with an emulated
    accumulator, differentiably: ``fpsim.conv2d``, the bias the accumulator's initial value.

    Each output is the inner product of a patch of ``x`` with a kernel, over (c, kh, kw) in
    C order, by ``fpsim.matmul`` with the settings. The backward's products use the same
    settings, or ``backward``'s: the kernels' gradient sums over (n, oh, ow) in C order; the
    input's is the full correlation of the stride-dilated gradient with the flipped kernels
    (over (o, kh, kw) of the flipped kernels in C order); the bias's sums the gradient over
    (n, oh, ow) in C order.

    Parameters
    ----------
    x : torch.Tensor
        (N, C, H, W).
    weight : torch.Tensor
        (O, C, KH, KW), of ``x``'s dtype and device.
    bias : torch.Tensor, optional
        (O,): values of ``accum``.
    stride : int or (int, int), default 1
        The step between patches, vertically and horizontally.
    padding : int or (int, int), default 0
        Zeros added above and below, left and right. (Dilation, groups and the string
        paddings are not taken.)
    accum, rounding, order, products, out, model, subnormals, saturate, seed, random_bits,
    backward
        As ``matmul``'s.

    Returns
    -------
    torch.Tensor
        (N, O, OH, OW), in ``x``'s dtype.

    Raises
    ------
    TypeError
        Operands that are not floating-point tensors; an unknown keyword argument.
    ValueError
        Operands of other dtypes or devices, shapes that do not convolve, a bad stride or
        padding, a bias not (O,); fpsim.matmul's own errors.

    Examples
    --------
    >>> import torch
    >>> import fpsim.torch
    >>> x = torch.ones(1, 1, 3, 3, requires_grad=True)
    >>> w = torch.full((1, 1, 2, 2), 2.0**-12)
    >>> y = fpsim.torch.conv2d(x, w, torch.ones(1), accum="fp16")  # each 2**-12 absorbed
    >>> y.flatten().tolist()
    [1.0, 1.0, 1.0, 1.0]
    >>> y.sum().backward()
    >>> (x.grad[0, 0] * 2**12).tolist()  # how many kernel elements each input meets
    [[1.0, 2.0, 1.0], [2.0, 4.0, 2.0], [1.0, 2.0, 1.0]]
    """
    forward, backward = split_settings(settings)
    x, weight = float_tensor(x, "x"), float_tensor(weight, "weight")
    if bias is not None:
        bias = float_tensor(bias, "bias")
    _same(x, weight=weight, bias=bias)
    strides, pads = check(_shaped(x), _shaped(weight), stride, padding)
    if bias is not None and tuple(bias.shape) != (weight.shape[0],):
        raise ValueError(f"bias has shape {tuple(bias.shape)}: give ({weight.shape[0]},), one "
                         "value per output channel")
    return _conv2d(x, weight, bias, strides, pads, forward, backward)
