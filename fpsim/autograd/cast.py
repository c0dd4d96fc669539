"""Casting between formats, and the policy an operation runs under."""

from __future__ import annotations

from fpsim.autograd.tensor import Tensor, as_tensor
from fpsim.formats import Format, as_format
from fpsim.precision import numerics
from fpsim.precision.policy import OPERATIONS, Policy, current


def op_policy(op: str) -> Policy:
    """The policy operation ``op`` runs under now (the current one, or its override)."""
    assert op in OPERATIONS, f"{op!r} is missing from fpsim.precision.policy.OPERATIONS"
    return current().for_op(op)


def cast(x, fmt: Format, policy: Policy) -> Tensor:
    """``x`` rounded to ``fmt`` (itself when already there); gradients flow back unchanged
    and are rounded to ``x``'s format, e.g. fp16 weight gradients into fp32 master weights."""
    x = as_tensor(x)
    if x.format == fmt and x.data.dtype == numerics.dtype(fmt, policy):
        return x
    data = numerics.round(x.data, fmt, policy)
    return Tensor.node(data, fmt, (x,), lambda g: (g,), policy, "cast")


def compute(x, policy: Policy) -> Tensor:
    """``x`` in the policy's compute format (the inputs of pointwise and dot operations)."""
    return cast(x, policy.compute, policy)


def to(x, fmt: Format | str) -> Tensor:
    """``x`` rounded to ``fmt`` by the current policy (``Tensor.to``): a differentiable
    cast, its gradients flowing back unchanged and rounded to ``x``'s format."""
    return cast(x, as_format(fmt), current())
