"""Adam (Kingma and Ba, 2015) with PyTorch's update rule and L2 weight decay."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from fpsim import _device
from fpsim._checks import real
from fpsim.optim.optimizer import Optimizer

if TYPE_CHECKING:
    from collections.abc import Iterable

    from fpsim.nn.module import Parameter
    from fpsim.precision.policy import Policy


class Adam(Optimizer):
    """Adam, with PyTorch's update rule and L2 weight decay.

    Both moments are kept in the state format (``store``).

    Parameters
    ----------
    params : iterable of Parameter
        The parameters to train.
    lr : float, default 1e-3
        The learning rate (positive).
    betas : (float, float), default (0.9, 0.999)
        The decay of the first and second moments, each in [0, 1).
    eps : float, default 1e-8
        Added to the square root of the second moment.
    weight_decay : float, default 0.0
        L2 penalty added to the gradient.
    **options
        ``state_format`` and ``policy``, as ``Optimizer`` takes them.

    Raises
    ------
    ValueError
        For a value out of range.

    Examples
    --------
    >>> import numpy as np
    >>> from fpsim import nn, optim
    >>> w = nn.Parameter([1.0])
    >>> w.grad = np.array([0.5])
    >>> opt = optim.Adam([w], lr=0.1)
    >>> opt.step()
    >>> w
    Tensor(array([0.89999998]), format=fp32, requires_grad=True)
    """

    def __init__(self, params: Iterable[Parameter], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, **options: Any) -> None:
        lr = real(lr, "lr", 0.0, low_open=True)
        if isinstance(betas, (str, bytes)) or not hasattr(betas, "__len__") or len(betas) != 2:
            raise ValueError(f"betas must be a pair of numbers in [0, 1), got {betas!r}")
        betas = (real(betas[0], "betas[0]", 0.0, 1.0, high_open=True),
                 real(betas[1], "betas[1]", 0.0, 1.0, high_open=True))
        eps = real(eps, "eps", 0.0)
        weight_decay = real(weight_decay, "weight_decay", 0.0)
        super().__init__(params, **options)
        self.lr, self.betas, self.eps, self.weight_decay = lr, betas, eps, weight_decay

    def update(self, p: Parameter, grad: np.ndarray, state: dict[str, Any],
               policy: Policy) -> np.ndarray:
        """``lr * m_hat / (sqrt(v_hat) + eps)`` (see ``Optimizer.update``)."""
        b1, b2 = self.betas
        if self.weight_decay:
            grad = grad + self.weight_decay * p.data
        t = state["step"] = state.get("step", 0) + 1
        m = self.store(p, b1 * state.get("exp_avg", 0.0) + (1 - b1) * grad, policy)
        v = self.store(p, b2 * state.get("exp_avg_sq", 0.0) + (1 - b2) * grad * grad, policy)
        state["exp_avg"], state["exp_avg_sq"] = m, v
        xp = _device.array_module(m)
        m_hat = xp.asarray(m, np.float64) / (1 - b1**t)
        v_hat = xp.asarray(v, np.float64) / (1 - b2**t)
        step: np.ndarray = self.lr * m_hat / (xp.sqrt(v_hat) + self.eps)
        return step
