"""Module and Parameter: layers own parameters stored in the policy's ``params`` format."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from fpsim._inputs import as_float_array
from fpsim.autograd.tensor import Tensor
from fpsim.precision import numerics
from fpsim.precision.policy import Policy, as_policy, current


class Parameter(Tensor):
    """A trainable leaf, its values rounded to the current policy's ``params`` format."""

    def __init__(self, data, policy: Policy | None = None):
        policy = policy or current()
        data = np.asarray(as_float_array(data, "data"), dtype=np.float64)
        self._set(numerics.round(data, policy.params, policy), policy.params)
        self.requires_grad = True


class Module:
    """Base of every layer: parameters, buffers, sub-modules, train/eval."""

    training = True

    def forward(self, *args, **kwargs):
        raise NotImplementedError

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def named_parameters(self, prefix: str = "") -> Iterator[tuple[str, Parameter]]:
        for name, value in vars(self).items():
            if isinstance(value, Parameter):
                yield prefix + name, value
            elif isinstance(value, Module):
                yield from value.named_parameters(f"{prefix}{name}.")
            elif isinstance(value, (list, tuple)):
                for i, m in enumerate(value):
                    if isinstance(m, Module):
                        yield from m.named_parameters(f"{prefix}{name}.{i}.")

    def parameters(self) -> list[Parameter]:
        return [p for _, p in self.named_parameters()]

    def modules(self) -> Iterator[Module]:
        yield self
        for value in vars(self).values():
            children = value if isinstance(value, (list, tuple)) else [value]
            for m in children:
                if isinstance(m, Module):
                    yield from m.modules()

    def train(self, mode: bool = True) -> Module:
        for m in self.modules():
            m.training = mode
        return self

    def eval(self) -> Module:
        return self.train(False)

    def zero_grad(self) -> None:
        for p in self.parameters():
            p.grad = None

    def to(self, policy: Policy | str) -> Module:
        """Round parameters to ``policy.params`` and buffers to ``policy.reduce``, in place."""
        policy = as_policy(policy)
        for p in self.parameters():
            p.data = numerics.round(p.data, policy.params, policy)
            p.format = policy.params
            p.grad = None
        for m in self.modules():
            for name in getattr(m, "_buffer_names", ()):
                setattr(m, name, numerics.round(getattr(m, name), policy.reduce, policy))
        return self

    def state_dict(self) -> dict[str, np.ndarray]:
        return {name: p.data.copy() for name, p in self.named_parameters()}

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        params = dict(self.named_parameters())
        missing = set(params) ^ set(state)
        if missing:
            raise ValueError(f"state and model differ in parameters: {sorted(missing)}")
        for name, p in params.items():
            if np.shape(state[name]) != p.shape:
                raise ValueError(f"{name}: shape {np.shape(state[name])} differs from {p.shape}")
            p.data = numerics.round(state[name], p.format, current()).copy()
