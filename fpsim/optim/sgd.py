"""Stochastic gradient descent with momentum, dampening, Nesterov and weight decay
(PyTorch's update rule)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from fpsim._checks import boolean, real
from fpsim.optim.optimizer import Optimizer

if TYPE_CHECKING:
    from collections.abc import Iterable

    from fpsim.nn.module import Parameter
    from fpsim.precision.policy import Policy


class SGD(Optimizer):
    """Stochastic gradient descent, with PyTorch's update rule.

    The momentum buffer is kept in the state format (``store``).

    Parameters
    ----------
    params : iterable of Parameter
        The parameters to train.
    lr : float
        The learning rate (positive).
    momentum : float, default 0.0
        The momentum factor.
    dampening : float, default 0.0
        Dampening of the momentum, in [0, 1].
    weight_decay : float, default 0.0
        L2 penalty added to the gradient.
    nesterov : bool, default False
        Nesterov momentum (needs momentum and no dampening).
    **options
        ``state_format`` and ``policy``, as ``Optimizer`` takes them.

    Raises
    ------
    ValueError
        For a value out of range, or Nesterov without momentum or with dampening.

    Examples
    --------
    >>> import numpy as np
    >>> from fpsim import nn, optim
    >>> w = nn.Parameter([1.0])
    >>> w.grad = np.array([0.5])
    >>> opt = optim.SGD([w], lr=0.01, momentum=0.9)
    >>> opt.step()
    >>> w
    Tensor(array([0.995]), format=fp32, requires_grad=True)
    """

    def __init__(self, params: Iterable[Parameter], lr: float, momentum: float = 0.0,
                 dampening: float = 0.0, weight_decay: float = 0.0, nesterov: bool = False,
                 **options: Any) -> None:
        lr = real(lr, "lr", 0.0, low_open=True)
        momentum = real(momentum, "momentum", 0.0)
        dampening = real(dampening, "dampening", 0.0, 1.0)
        weight_decay = real(weight_decay, "weight_decay", 0.0)
        nesterov = boolean(nesterov, "nesterov")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum needs momentum > 0 and no dampening")
        super().__init__(params, **options)
        self.lr, self.momentum, self.dampening = lr, momentum, dampening
        self.weight_decay, self.nesterov = weight_decay, nesterov

    def update(self, p: Parameter, grad: np.ndarray, state: dict[str, Any],
               policy: Policy) -> np.ndarray:
        """``lr * grad``, after weight decay and momentum (see ``Optimizer.update``)."""
        if self.weight_decay:
            grad = grad + self.weight_decay * p.data
        if self.momentum:
            if "momentum_buffer" in state:
                buf = self.momentum * state["momentum_buffer"] + (1 - self.dampening) * grad
            else:
                buf = grad
            state["momentum_buffer"] = buf = self.store(p, buf, policy)
            grad = grad + self.momentum * buf if self.nesterov else buf
        return self.lr * grad
