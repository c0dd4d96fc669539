"""Emulated products as differentiable operations: ``matmul`` and ``linear``.

The forward is ``fpsim.matmul`` (every addition rounded to ``accum`` in ``order``, or a
tensor core's block FMA with ``model``) on the tensors' memory; the backward's two
products, ``grad @ B^T`` and ``A^T @ grad``, are ``fpsim.matmul`` too, with the forward's
settings or their own. A bias (``c``, the accumulator's initial value) gets the sum of the
gradient's rows, as the product of a row of ones and the gradient, emulated the same way.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, cast

import torch

from fpsim.accumulation.matmul import matmul as fpsim_matmul
from fpsim.backends import backend
from fpsim.torch.exchange import float_tensor, to_array, to_tensor

if TYPE_CHECKING:
    from fpsim._typing import FormatLike
    from fpsim.accumulation.blocks import BlockFMA

OPTIONS = ("accum", "rounding", "order", "products", "out", "model", "subnormals", "saturate",
           "seed", "random_bits")
"""The settings of ``fpsim.matmul`` that ``matmul`` and ``linear`` take (and ``backward``)."""


def _product(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor | None,
             options: Mapping[str, Any]) -> torch.Tensor:
    """``fpsim.matmul(a, b, c=c, **options)`` on the tensors' memory, in ``a``'s dtype."""
    cuda = a.device.type == "cuda"
    if cuda:  # CuPy has no bfloat16
        a, b = (x.float() if x.dtype == torch.bfloat16 else x for x in (a, b))
        c = c.float() if c is not None and c.dtype == torch.bfloat16 else c
    with backend("cupy") if cuda else contextlib.nullcontext():
        values = fpsim_matmul(to_array(a), to_array(b),
                              c=None if c is None else to_array(c), **options)
    result = to_tensor(values)
    return result if result.dtype == a.dtype else result.to(a.dtype)


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
        ctx.c_shape = None if c is None else c.shape
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
            if tuple(ctx.c_shape) == tuple(grad.shape):
                grad_c = grad  # each element of c starts one sum: its gradient as it came
            else:  # a bias (N,): the sum of the gradient's rows
                rows = grad.reshape(-1, grad.shape[-1])
                ones = torch.ones((1, rows.shape[0]), dtype=rows.dtype, device=rows.device)
                grad_c = _product(ones, rows, None, options).reshape(ctx.c_shape)
        return grad_a, grad_b, grad_c, None, None


# torch.autograd.Function.apply is unannotated: its type here is MatmulFunction's.
_apply = cast(Callable[[torch.Tensor, torch.Tensor, "torch.Tensor | None", Mapping[str, Any],
                        Mapping[str, Any]], torch.Tensor], MatmulFunction.apply)


def _options(given: Mapping[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in given.items() if value is not None}


def _backward_options(backward: Mapping[str, Any] | None,
                      forward: dict[str, Any]) -> dict[str, Any]:
    if backward is None:
        return forward
    if not isinstance(backward, Mapping):
        raise TypeError("backward must be None (the forward's settings) or a dict of "
                        f"fpsim.matmul's settings, got {type(backward).__name__}")
    unknown = sorted(set(backward) - set(OPTIONS))
    if unknown:
        raise ValueError(f"backward: unknown settings {unknown}; known: {', '.join(OPTIONS)}")
    return _options(backward)


def matmul(a: torch.Tensor, b: torch.Tensor, *, c: torch.Tensor | None = None,
           accum: FormatLike | None = None, rounding: str | None = None,
           order: str | None = None, products: str | None = None,
           out: FormatLike | None = None, model: BlockFMA | None = None,
           subnormals: bool | None = None, saturate: bool | None = None,
           seed: int | None = None, random_bits: int | None = None,
           backward: Mapping[str, Any] | None = None) -> torch.Tensor:
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
        Operands that are not floating-point tensors; ``backward`` not a dict.
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
    a, b = float_tensor(a, "a"), float_tensor(b, "b")
    if c is not None:
        c = float_tensor(c, "c")
    for name, x in (("b", b), ("c", c)):
        if x is not None and (x.dtype != a.dtype or x.device != a.device):
            raise ValueError(f"{name} is {x.dtype} on {x.device}; a is {a.dtype} on {a.device}: "
                             "give operands of one dtype and device")
    if a.dim() >= 2 and b.dim() >= 2 and a.shape[:-2] != b.shape[:-2]:
        raise ValueError(f"a's batch dimensions {tuple(a.shape[:-2])} differ from b's "
                         f"{tuple(b.shape[:-2])}: broadcast them first (expand)")
    if c is not None and a.dim() >= 2 and b.dim() >= 2:
        shape = (*a.shape[:-1], b.shape[-1])
        if tuple(c.shape) not in (shape, (b.shape[-1],)):
            raise ValueError(f"c has shape {tuple(c.shape)}: give the result's {shape} or a "
                             f"bias of ({b.shape[-1]},)")
    options = _options({"accum": accum, "rounding": rounding, "order": order,
                        "products": products, "out": out, "model": model,
                        "subnormals": subnormals, "saturate": saturate, "seed": seed,
                        "random_bits": random_bits})
    return _apply(a, b, c, options, _backward_options(backward, options))


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, *,
           accum: FormatLike | None = None, rounding: str | None = None,
           order: str | None = None, products: str | None = None,
           out: FormatLike | None = None, model: BlockFMA | None = None,
           subnormals: bool | None = None, saturate: bool | None = None,
           seed: int | None = None, random_bits: int | None = None,
           backward: Mapping[str, Any] | None = None) -> torch.Tensor:
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
    y = matmul(rows, weight.t(), c=bias, accum=accum, rounding=rounding, order=order,
               products=products, out=out, model=model, subnormals=subnormals,
               saturate=saturate, seed=seed, random_bits=random_bits, backward=backward)
    return y.reshape(*x.shape[:-1], weight.shape[0])
