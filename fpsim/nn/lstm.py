"""LSTM with PyTorch's parameter names, gate order (i, f, g, o) and (T, B, features) layout."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from fpsim import _device
from fpsim._checks import integer
from fpsim.autograd import dot, pointwise, shape
from fpsim.autograd.tensor import as_tensor
from fpsim.nn import init
from fpsim.nn.module import Module, Parameter

if TYPE_CHECKING:
    from fpsim.autograd.tensor import Tensor, TensorLike


class LSTM(Module):
    """A stacked LSTM with PyTorch's parameter names, gate order (i, f, g, o) and layout.

    The parameters of layer k are ``weight_ih_lk`` (4 * hidden, inputs), ``weight_hh_lk``
    (4 * hidden, hidden), ``bias_ih_lk`` and ``bias_hh_lk`` (4 * hidden,), drawn from
    U(-1/sqrt(hidden), 1/sqrt(hidden)).

    Attributes
    ----------
    input_size, hidden_size, num_layers : int
        As given.

    Parameters
    ----------
    input_size, hidden_size : int
        The features of each input and hidden state.
    num_layers : int, default 1
        Layers stacked, each reading the outputs of the one before.

    Examples
    --------
    >>> import numpy as np
    >>> import fpsim
    >>> from fpsim import nn
    >>> lstm = nn.LSTM(5, 7, num_layers=2)
    >>> out, (h, c) = lstm(np.zeros((4, 2, 5)))
    >>> out.shape, h.shape, c.shape
    ((4, 2, 7), (2, 2, 7), (2, 2, 7))
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1) -> None:
        input_size = integer(input_size, "input_size", 1)
        hidden_size = integer(hidden_size, "hidden_size", 1)
        num_layers = integer(num_layers, "num_layers", 1)
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        bound = 1 / math.sqrt(hidden_size)
        for layer in range(num_layers):
            inputs = input_size if layer == 0 else hidden_size
            for name, shape_ in (("weight_ih", (4 * hidden_size, inputs)),
                                 ("weight_hh", (4 * hidden_size, hidden_size)),
                                 ("bias_ih", (4 * hidden_size,)), ("bias_hh", (4 * hidden_size,))):
                setattr(self, f"{name}_l{layer}", Parameter(init.uniform(shape_, bound)))

    def product_weights(self) -> list[Parameter]:
        """Every ``weight_ih_lk`` and ``weight_hh_lk``, by layer."""
        return [getattr(self, f"weight_{k}_l{i}") for i in range(self.num_layers)
                for k in ("ih", "hh")]

    def forward(self, x: TensorLike, state: tuple[TensorLike, TensorLike] | None = None
                ) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        """Run the sequence ``x`` through every layer.

        Parameters
        ----------
        x : Tensor or array_like
            (T, B, input_size).
        state : (array_like, array_like), optional
            ``(h_0, c_0)``, each (num_layers, B, hidden_size); zeros by default.

        Returns
        -------
        (Tensor, (Tensor, Tensor))
            ``(output, (h_n, c_n))``: the last layer's hidden states (T, B, hidden_size),
            and every layer's final states (num_layers, B, hidden_size).

        Raises
        ------
        ValueError
            If ``x`` is not (T, B, input_size).
        """
        x = as_tensor(x)
        if x.ndim != 3 or x.shape[2] != self.input_size:
            raise ValueError(f"LSTM input must be (T, B, {self.input_size}), got {x.shape}")
        steps, batch = x.shape[:2]
        hidden = self.hidden_size
        if state is None:
            zeros = _device.array_module(x.data).zeros((self.num_layers, batch, hidden))
            state = (zeros, zeros)
        h0, c0 = (as_tensor(s) for s in state)
        finals_h, finals_c = [], []
        for layer in range(self.num_layers):
            w_ih, w_hh, b_ih, b_hh = (getattr(self, f"{n}_l{layer}")
                                      for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"))
            # All time steps' input projections in one product.
            projected = dot.linear(shape.reshape(x, (steps * batch, -1)), w_ih, b_ih)
            projected = shape.reshape(projected, (steps, batch, 4 * hidden))
            h, c = h0[layer], c0[layer]
            outputs = []
            for t in range(steps):
                gates = pointwise.add(projected[t], dot.linear(h, w_hh, b_hh))
                i = pointwise.sigmoid(gates[:, :hidden])
                f = pointwise.sigmoid(gates[:, hidden: 2 * hidden])
                g = pointwise.tanh(gates[:, 2 * hidden: 3 * hidden])
                o = pointwise.sigmoid(gates[:, 3 * hidden:])
                c = pointwise.add(pointwise.mul(f, c), pointwise.mul(i, g))
                h = pointwise.mul(o, pointwise.tanh(c))
                outputs.append(h)
            x = shape.stack(outputs, axis=0)
            finals_h.append(h)
            finals_c.append(c)
        return x, (shape.stack(finals_h, axis=0), shape.stack(finals_c, axis=0))
