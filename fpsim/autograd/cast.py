"""Casting between formats, and the policy an operation runs under."""

from __future__ import annotations

from typing import TYPE_CHECKING

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


def to(x: TensorLike, fmt: Format | str) -> Tensor:
    """``x`` rounded to ``fmt`` by the current policy (``Tensor.to``).

    A differentiable cast, its gradients flowing back unchanged and rounded to ``x``'s
    format.

    Parameters
    ----------
    x : Tensor or array_like
        The values to cast.
    fmt : Format or str
        The format to round them to.

    Returns
    -------
    Tensor

    Examples
    --------
    >>> import fpsim
    >>> fpsim.tensor([0.1]).to("bf16")
    Tensor(array([0.10009766]), format=bf16)
    """
    return cast(x, as_format(fmt), current())
