"""Casting between formats, and the policy an operation runs under."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fpsim import _device
from fpsim.autograd.tensor import Tensor, as_tensor
from fpsim.formats import Format, as_format
from fpsim.precision import numerics
from fpsim.precision.policy import OPERATIONS, Policy, current

if TYPE_CHECKING:
    from fpsim.autograd.tensor import TensorLike


def op_policy(op: str) -> Policy:
    """The policy operation ``op`` runs under now (the current one, or its override)."""
    assert op in OPERATIONS, f"{op!r} is missing from fpsim.precision.policy.OPERATIONS"
    return current().for_op(op)


def cast(x: TensorLike, fmt: Format, policy: Policy) -> Tensor:
    """``x`` rounded to ``fmt`` (itself when already there), differentiably.

    Gradients flow back unchanged and are rounded to ``x``'s format, e.g. fp16 weight
    gradients into fp32 master weights.

    Parameters
    ----------
    x : Tensor or array_like
        The values to cast.
    fmt : Format
        The format to round them to.
    policy : Policy
        The policy whose rounding mode (and native or emulated arithmetic) applies.

    Returns
    -------
    Tensor
        Values of ``fmt``; ``x`` itself when it already is.

    Examples
    --------
    >>> import fpsim
    >>> from fpsim.autograd import cast
    >>> x = fpsim.tensor([0.1], requires_grad=True)
    >>> h = cast(x, fpsim.format("fp16"), fpsim.precision.current())
    >>> h
    Tensor(array([0.09997559]), format=fp16, requires_grad=True)
    >>> (h * 3).sum().backward()
    >>> x.grad
    array([3.])
    """
    x = as_tensor(x)
    if x.format == fmt and x.data.dtype == numerics.dtype(fmt, policy):
        return x
    data = numerics.round(x.data, fmt, policy)
    return Tensor.node(data, fmt, (x,), lambda g: (g,), policy, "cast")


def compute(x: TensorLike, policy: Policy) -> Tensor:
    """``x`` in the policy's compute format (the inputs of pointwise and dot operations)."""
    return cast(x, policy.compute, policy)


def to(x: TensorLike, target: Format | str) -> Tensor:
    """``x`` rounded to a format by the current policy, or moved to a device (``Tensor.to``).

    As ``torch.Tensor.to`` takes a dtype or a device: a format (``"bf16"``, a ``Format``)
    makes a differentiable cast, its gradients flowing back unchanged and rounded to
    ``x``'s format; a device name (``"cpu"``, ``"cuda"``) copies the values there
    (``x`` itself if they are there), its gradients copied back to ``x``'s device.

    Parameters
    ----------
    x : Tensor or array_like
        The values to cast or move.
    target : Format or str
        A format, or a device name.

    Returns
    -------
    Tensor

    Raises
    ------
    ValueError
        For an unknown format name.
    RuntimeError
        For ``"cuda"`` where no GPU is usable (the message says what is missing).

    Examples
    --------
    >>> import fpsim
    >>> fpsim.tensor([0.1]).to("bf16")
    Tensor(array([0.10009766]), format=bf16)
    >>> fpsim.tensor([0.1]).to("cpu").device
    'cpu'
    """
    if isinstance(target, str) and target in _device.DEVICES:
        return move(x, target)
    return cast(x, as_format(target), current())


def move(x: TensorLike, device: str) -> Tensor:
    """``x`` on ``device`` (itself if it is there), differentiably: the gradient is copied
    back to ``x``'s device, as it is (values of ``x``'s format already)."""
    x = as_tensor(x)
    device = _device.as_device(device)
    if x.device == device:
        return x
    source = x.device
    return Tensor.node(_device.transfer(x.data, device), x.format, (x,),
                       lambda g: ((_device.transfer(g, source), x.format),), current(), "to")


def same_device(op: str, *xs: Tensor) -> tuple[Tensor, ...]:
    """``xs`` on one device; a ValueError naming both when two of more than one element
    are on different devices (a one-element host constant is moved, as in PyTorch)."""
    device = _device.common(op, *(x.data for x in xs))
    return xs if device == "cpu" else tuple(move(x, device) for x in xs)
