"""Block-scaled quantization of a tensor, differentiably: ``fpsim.quantize`` then
``fpsim.dequantize`` forward (the values the quantized tensor stands for); the gradient
straight through (as torchao's and microxcaling's MX emulation pass it), rounded to a
format, or quantized by a scheme of its own."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, cast

import torch

from fpsim.backends import backend
from fpsim.formats import Format
from fpsim.quantize.quantized import dequantize
from fpsim.quantize.quantized import quantize as fpsim_quantize
from fpsim.quantize.schemes import SCHEMES, Scheme
from fpsim.torch.exchange import float_tensor, to_array, to_tensor
from fpsim.torch.rounding import Rounding, backward_rounding


def _quantized(t: torch.Tensor, scheme: str | Scheme, options: dict[str, Any]) -> torch.Tensor:
    """The dequantized values of ``t`` quantized (on its device), in ``t``'s dtype."""
    cuda = t.device.type == "cuda"
    source = t.float() if cuda and t.dtype == torch.bfloat16 else t  # CuPy: no bfloat16
    with backend("cupy") if cuda else contextlib.nullcontext():
        values = dequantize(fpsim_quantize(to_array(source), scheme, **options))
    result = to_tensor(values)
    return result if result.dtype == t.dtype else result.to(t.dtype)


class QuantizeFunction(torch.autograd.Function):
    """The autograd function under ``quantize``: ``QuantizeFunction.apply(t, scheme,
    options, backward)``, ``options`` being ``fpsim.quantize``'s keyword arguments and
    ``backward`` None (straight through), a ``Rounding``, or a (scheme, options) pair.

    Examples
    --------
    >>> import torch
    >>> t = torch.tensor([[1.0, 0.3, 5.0, 100.0]])
    >>> QuantizeFunction.apply(t, "per_tensor", {}, None).tolist()
    [[1.0044642686843872, 0.3069196343421936, 4.910714149475098, 100.0]]
    """

    @staticmethod
    def forward(ctx: Any, t: torch.Tensor, scheme: str | Scheme, options: dict[str, Any],
                backward: Rounding | tuple[str | Scheme, dict[str, Any]] | None) -> torch.Tensor:
        """The forward: the dequantized values of ``t`` quantized, in ``t``'s dtype."""
        ctx.backward_choice = backward
        return _quantized(t, scheme, options)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:
        """The backward: the gradient straight through, rounded by a ``Rounding``, or
        quantized and dequantized by a scheme."""
        choice = ctx.backward_choice
        if choice is None:
            return grad, None, None, None
        if isinstance(choice, Rounding):
            return choice.apply(grad)[0], None, None, None
        return _quantized(grad, *choice), None, None, None


# torch.autograd.Function.apply is unannotated: its type here is QuantizeFunction's.
_apply = cast(Callable[[torch.Tensor, "str | Scheme", dict[str, Any], Any], torch.Tensor],
              QuantizeFunction.apply)


def quantize(t: torch.Tensor, scheme: str | Scheme, axis: int = -1, *,
             scale_rule: str | None = None, rounding: str = "nearest_even",
             subnormals: bool = True, seed: int | None = None,
             random_bits: int | None = None, pad: bool = False,
             backward: str | Scheme | Format | Rounding | None = None) -> torch.Tensor:
    """A tensor quantized to a block-scaled format and dequantized, differentiably.

    The forward is ``fpsim.dequantize(fpsim.quantize(t, scheme, ...))`` (MX, NVFP4,
    blockwise FP8, current scaling: ``docs/block-scaled.md``), in ``t``'s dtype; the
    backward passes the gradient straight through, or as ``backward`` says.

    Parameters
    ----------
    t : torch.Tensor
        A float16, bfloat16, float32 or float64 tensor on the CPU or a CUDA device (CUDA:
        quantized by fpsim's ``cupy`` backend, the result on the tensor's device).
    scheme, axis, scale_rule, rounding, subnormals, seed, random_bits, pad
        As ``fpsim.quantize``'s.
    backward : None, scheme, format or Rounding, default None
        None: the gradient straight through. A scheme (its name or ``Scheme``): the
        gradient quantized by it and dequantized, along ``axis`` with ``pad``, nearest
        even and the scheme's scale rule (MX training quantizes gradients so, e.g.
        ``"mxfp8_e5m2"``). A format (its name or ``Format``) or a ``Rounding``: the
        gradient rounded elementwise, as ``fpsim.torch.round``'s ``backward``.

    Returns
    -------
    torch.Tensor
        The values the quantized tensor stands for, of ``t``'s shape and dtype. fpsim
        dequantizes exactly in float64; torch converts that to ``t``'s dtype (nearest even:
        exact for the MX schemes, whose values are elements times powers of two, wherever
        the dtype reaches; NVFP4's and blockwise FP8's products can round once in float32).

    Raises
    ------
    TypeError
        ``t`` is not a floating-point tensor; ``backward`` of another type.
    ValueError
        ``t`` on a device other than the CPU and CUDA; fpsim.quantize's own errors (an
        unknown scheme, scale rule or mode, an axis length that is not a multiple of the block
        without ``pad``, ...).

    Examples
    --------
    >>> import torch
    >>> import fpsim.torch
    >>> t = torch.tensor([[0.1, 1.0, 3.0, 300.0] * 8], requires_grad=True)
    >>> y = fpsim.torch.quantize(t, "mxfp8_e4m3")
    >>> y[0, :4].tolist()
    [0.1015625, 1.0, 3.0, 288.0]
    >>> y.sum().backward()
    >>> bool((t.grad == 1.0).all())
    True
    """
    t = float_tensor(t)
    options = {"axis": axis, "scale_rule": scale_rule, "rounding": rounding,
               "subnormals": subnormals, "seed": seed, "random_bits": random_bits, "pad": pad}
    choice: Rounding | tuple[str | Scheme, dict[str, Any]] | None
    if isinstance(backward, Scheme) or (isinstance(backward, str)
                                         and backward.strip().lower() in SCHEMES):
        choice = (backward, {"axis": axis, "pad": pad})
    else:
        choice = backward_rounding(backward)
    return _apply(t, scheme, options, choice)
