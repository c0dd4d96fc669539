"""Module and Parameter: layers own parameters stored in the policy's ``params`` format."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from fpsim import _device
from fpsim._inputs import as_float_array
from fpsim.autograd.tensor import Tensor
from fpsim.precision import numerics, scaling
from fpsim.precision.policy import Policy, _stack, as_policy, current

if TYPE_CHECKING:
    import numpy.typing as npt


class Parameter(Tensor):
    """A trainable leaf, its values rounded to the current policy's ``params`` format.

    Parameters
    ----------
    data : array_like
        The initial values (a CuPy array makes a parameter on "cuda").
    policy : Policy, optional
        The policy whose ``params`` format (and rounding) stores them;
        the current policy by default.

    Attributes
    ----------
    requires_grad : bool
        True: an optimizer trains it.

    Examples
    --------
    >>> import fpsim
    >>> from fpsim import nn
    >>> with fpsim.precision.parse("fp16"):
    ...     nn.Parameter([0.1])
    Tensor(array([0.09997559]), format=fp16, requires_grad=True)
    """

    def __init__(self, data: npt.ArrayLike, policy: Policy | None = None) -> None:
        policy = policy or current()
        values = as_float_array(data, "data", device=True)  # on the host or a GPU
        data = _device.binary64(_device.array_module(values).asarray(values))
        self._set(numerics.round(data, policy.params, policy), policy.params)
        self.requires_grad = True


class Module:
    """Base of every layer: parameters, buffers, sub-modules, train/eval.

    A subclass sets its parameters (``Parameter``) and sub-modules as attributes (lists
    of modules too) and defines ``forward``; calling the module calls ``forward``.

    A module remembers the policy ``to(policy)`` put it under (a ``Trainer`` does that):
    called with no policy active, it runs under that one, so that evaluating a trained
    model (``with fpsim.no_grad(): model(x)``) computes in the formats it was trained in.
    Inside ``with policy:`` the active policy applies, as for every operation.

    Attributes
    ----------
    training : bool
        Training mode (dropout and batch statistics on); ``train()`` and ``eval()`` set it.
    policy : Policy or None
        The policy of the last ``to(policy)``; None before one.

    Examples
    --------
    >>> import fpsim
    >>> from fpsim import nn
    >>> model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    >>> [name for name, _ in model.named_parameters()]
    ['layers.0.weight', 'layers.0.bias', 'layers.2.weight', 'layers.2.bias']
    >>> model.to("fp16")[0].weight.format.name
    'fp16'
    """

    training = True
    policy: Policy | None = None

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """The layer's computation (``module(x)`` calls it); subclasses define it.

        Raises
        ------
        NotImplementedError
            In ``Module`` itself.
        """
        raise NotImplementedError

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.policy is not None and not _stack.get():
            with self.policy:  # no policy active: the one this module was put under
                return self.forward(*args, **kwargs)
        return self.forward(*args, **kwargs)

    def named_parameters(self, prefix: str = "") -> Iterator[tuple[str, Parameter]]:
        """Every parameter of this module and its sub-modules, with its dotted name.

        Parameters
        ----------
        prefix : str, default ""
            Put before every name.

        Yields
        ------
        (str, Parameter)
        """
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
        """Every parameter, in ``named_parameters`` order (what an optimizer takes).

        Returns
        -------
        list of Parameter
        """
        return [p for _, p in self.named_parameters()]

    def modules(self) -> Iterator[Module]:
        """This module and every sub-module, depth first.

        Yields
        ------
        Module
        """
        yield self
        for value in vars(self).values():
            children = value if isinstance(value, (list, tuple)) else [value]
            for m in children:
                if isinstance(m, Module):
                    yield from m.modules()

    def named_modules(self, prefix: str = "") -> Iterator[tuple[str, Module]]:
        """Every module as (dotted name, module), in ``modules()`` order; this one is "".

        Yields
        ------
        tuple of (str, Module)
        """
        yield prefix.rstrip("."), self
        for name, value in vars(self).items():
            children = ([(f"{name}.{i}", m) for i, m in enumerate(value)]
                        if isinstance(value, (list, tuple)) else [(name, value)])
            for child, m in children:
                if isinstance(m, Module):
                    yield from m.named_modules(f"{prefix}{child}.")

    def product_weights(self) -> list[Parameter]:
        """The weights this module's own products (GEMMs) take: none for a module
        without products; Linear and Conv2d give ``weight``, LSTM every
        ``weight_ih_l*`` and ``weight_hh_l*``."""
        return []

    def train(self, mode: bool = True) -> Module:
        """Set training mode (``mode``) on this module and every sub-module.

        Parameters
        ----------
        mode : bool, default True
            Training (True) or evaluation (False).

        Returns
        -------
        Module
            This module.
        """
        for m in self.modules():
            m.training = mode
        return self

    def eval(self) -> Module:
        """Evaluation mode: ``train(False)``.

        Returns
        -------
        Module
            This module.
        """
        return self.train(False)

    def zero_grad(self) -> None:
        """Clear every parameter's gradient (set it to None)."""
        for p in self.parameters():
            p.grad = None

    def to(self, policy: Policy | str) -> Module:
        """Round parameters to ``policy.params`` and buffers to ``policy.reduce``, in place,
        and run under ``policy`` from now on when no other policy is active; or, given a
        device name, move them there (as ``torch.nn.Module.to`` takes a dtype or a device).

        Parameters
        ----------
        policy : Policy or str
            The policy (or a policy string, such as ``"fp16"``), or a device: ``"cpu"`` or
            ``"cuda"`` (parameters, their gradients and buffers are copied there, their
            values and formats unchanged).

        Returns
        -------
        Module
            This module; after a policy, the parameters' gradients are cleared, and this
            module and every sub-module remember ``policy`` (``module.policy``).

        Raises
        ------
        RuntimeError
            For ``"cuda"`` where no GPU is usable (the message says what is missing).

        Examples
        --------
        >>> import fpsim
        >>> from fpsim import nn
        >>> nn.manual_seed(0)
        >>> model = nn.Linear(2, 1).to("mixed")
        >>> with fpsim.no_grad():
        ...     model([[0.1, 0.2]]).format.name  # evaluated in mixed's fp16 compute
        'fp16'
        """
        if isinstance(policy, str) and policy in _device.DEVICES:
            return self._move(policy)
        policy = as_policy(policy)
        for p in self.parameters():
            p.data = numerics.round(p.data, policy.params, policy)
            p.format = policy.params
            p.grad = None
        for m in self.modules():
            for name in getattr(m, "_buffer_names", ()):
                setattr(m, name, numerics.round(getattr(m, name), policy.reduce, policy))
            m.policy = policy
        # the layers a recipe keeps in higher precision
        scaling.bind([(n, m.product_weights()) for n, m in self.named_modules()], policy)
        return self

    def _move(self, device: str) -> Module:
        """Parameters, gradients and buffers copied to ``device``, in place."""
        for p in self.parameters():
            p.data = _device.transfer(p.data, device)
            if p.grad is not None:
                p.grad = _device.transfer(p.grad, device)
        for m in self.modules():
            for name in getattr(m, "_buffer_names", ()):
                setattr(m, name, _device.transfer(getattr(m, name), device))
        return self

    def state_dict(self) -> dict[str, np.ndarray]:
        """Copies of the parameters' values, by ``named_parameters`` name.

        Returns
        -------
        dict of str to numpy.ndarray or cupy.ndarray
            On the parameters' device.
        """
        return {name: p.data.copy() for name, p in self.named_parameters()}

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        """Set the parameters' values from ``state``, each rounded to its parameter's format.

        Parameters
        ----------
        state : dict of str to array_like
            One array per parameter name, of the parameter's shape (from any device: the
            values are copied to the parameter's).

        Raises
        ------
        ValueError
            If the names or shapes differ from the module's.
        """
        params = dict(self.named_parameters())
        missing = set(params) ^ set(state)
        if missing:
            raise ValueError(f"state and model differ in parameters: {sorted(missing)}")
        for name, p in params.items():
            if np.shape(state[name]) != p.shape:
                raise ValueError(f"{name}: shape {np.shape(state[name])} differs from {p.shape}")
            value = state[name]
            value = value if _device.device_of(value) == "cuda" else np.asarray(value)
            value = numerics.round(_device.transfer(value, p.device), p.format, current())
            p.data = value.copy()
