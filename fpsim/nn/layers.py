"""Layers with PyTorch's names, shapes and default initialisation."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from fpsim._checks import boolean, integer, integer_pair, real
from fpsim.autograd import dot, losses, normalization, pointwise, shape
from fpsim.nn import init
from fpsim.nn.module import Module, Parameter
from fpsim.precision import numerics
from fpsim.precision.policy import current

if TYPE_CHECKING:
    from collections.abc import Sequence

    import numpy.typing as npt

    from fpsim.autograd.tensor import Tensor, TensorLike


def _bound(fan_in: int) -> float:
    """PyTorch's default init bound 1/sqrt(fan_in); 0 for a layer with no inputs."""
    return 1 / math.sqrt(fan_in) if fan_in > 0 else 0.0


class Linear(Module):
    """``x @ weight.T + bias``; ``weight`` (out_features, in_features).

    Both are drawn from U(-1/sqrt(in_features), 1/sqrt(in_features)) and stored in the
    current policy's ``params`` format.

    Attributes
    ----------
    weight : Parameter
        (out_features, in_features).
    bias : Parameter or None
        (out_features,).

    Parameters
    ----------
    in_features, out_features : int
        The sizes of each input and output row.
    bias : bool, default True
        Whether the layer adds a bias.

    Examples
    --------
    >>> import numpy as np
    >>> import fpsim
    >>> from fpsim import nn
    >>> layer = nn.Linear(3, 2)
    >>> with fpsim.precision.parse("mixed"):  # fp32 parameters, fp16 arithmetic
    ...     y = layer(np.ones((4, 3)))
    >>> y.shape, y.format.name, layer.weight.format.name
    ((4, 2), 'fp16', 'fp32')
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True) -> None:
        in_features = integer(in_features, "in_features", 0)
        out_features = integer(out_features, "out_features", 0)
        bound = _bound(in_features)
        self.weight = Parameter(init.uniform((out_features, in_features), bound))
        self.bias = Parameter(init.uniform((out_features,), bound)) if boolean(
            bias, "bias") else None

    def product_weights(self) -> list[Parameter]:
        """``[weight]``: the product's weight."""
        return [self.weight]

    def forward(self, x: TensorLike) -> Tensor:
        """``fpsim.nn.functional.linear(x, weight, bias)``.

        Parameters
        ----------
        x : Tensor or array_like
            (..., in_features).

        Returns
        -------
        Tensor
            (..., out_features), in the compute format.
        """
        return dot.linear(x, self.weight, self.bias)


class Conv2d(Module):
    """2-D convolution (cross-correlation), NCHW.

    Attributes
    ----------
    weight : Parameter
        (O, C, KH, KW), drawn from U(-b, b) with b = 1/sqrt(C * KH * KW).
    bias : Parameter or None
        (O,).
    stride, padding : (int, int)
        As given.

    Parameters
    ----------
    in_channels, out_channels : int
        C and O.
    kernel_size : int or (int, int)
        KH and KW.
    stride : int or (int, int), default 1
        The step of the window.
    padding : int or (int, int), default 0
        Zeros added on each side of H and W.
    bias : bool, default True
        Whether the layer adds a bias.

    Examples
    --------
    >>> import numpy as np
    >>> import fpsim
    >>> from fpsim import nn
    >>> conv = nn.Conv2d(3, 8, 3, padding=1)
    >>> conv(np.zeros((2, 3, 8, 8))).shape
    (2, 8, 8, 8)
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int | tuple[int, int],
                 stride: int | tuple[int, int] = 1, padding: int | tuple[int, int] = 0,
                 bias: bool = True) -> None:
        in_channels = integer(in_channels, "in_channels", 0)
        out_channels = integer(out_channels, "out_channels", 0)
        kh, kw = integer_pair(kernel_size, "kernel_size", 1)
        bound = _bound(in_channels * kh * kw)
        self.weight = Parameter(init.uniform((out_channels, in_channels, kh, kw), bound))
        self.bias = Parameter(init.uniform((out_channels,), bound)) if boolean(
            bias, "bias") else None
        self.stride = integer_pair(stride, "stride", 1)
        self.padding = integer_pair(padding, "padding", 0)

    def product_weights(self) -> list[Parameter]:
        """``[weight]``: the product's weight."""
        return [self.weight]

    def forward(self, x: TensorLike) -> Tensor:
        """``fpsim.nn.functional.conv2d(x, weight, bias, stride, padding)``.

        Parameters
        ----------
        x : Tensor or array_like
            (N, C, H, W).

        Returns
        -------
        Tensor
            (N, O, OH, OW), in the compute format.
        """
        return dot.conv2d(x, self.weight, self.bias, self.stride, self.padding)


class Embedding(Module):
    """Rows of ``weight`` (num_embeddings, embedding_dim) looked up by integer ids.

    Attributes
    ----------
    weight : Parameter
        The table, drawn from N(0, 1).

    Parameters
    ----------
    num_embeddings, embedding_dim : int
        The table's shape.

    Examples
    --------
    >>> import numpy as np
    >>> import fpsim
    >>> from fpsim import nn
    >>> nn.Embedding(10, 3)(np.array([[1, 2]])).shape
    (1, 2, 3)
    """

    def __init__(self, num_embeddings: int, embedding_dim: int) -> None:
        num_embeddings = integer(num_embeddings, "num_embeddings", 0)
        embedding_dim = integer(embedding_dim, "embedding_dim", 0)
        self.weight = Parameter(init.normal((num_embeddings, embedding_dim)))

    def forward(self, ids: npt.ArrayLike) -> Tensor:
        """``fpsim.nn.functional.embedding(ids, weight)``.

        Parameters
        ----------
        ids : array_like of int
            Row numbers, of any shape.

        Returns
        -------
        Tensor
            ``ids.shape + (embedding_dim,)``, in the compute format.
        """
        return shape.embedding(ids, self.weight)


class _BatchNorm(Module):
    _buffer_names = ("running_mean", "running_var")

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1) -> None:
        num_features = integer(num_features, "num_features", 0)
        eps = real(eps, "eps", 0.0)
        momentum = real(momentum, "momentum", 0.0, 1.0)
        self.weight = Parameter(np.ones(num_features))
        self.bias = Parameter(np.zeros(num_features))
        policy = current()
        self.running_mean = numerics.round(np.zeros(num_features), policy.reduce, policy)
        self.running_var = numerics.round(np.ones(num_features), policy.reduce, policy)
        self.eps, self.momentum = eps, momentum

    def forward(self, x: TensorLike) -> Tensor:
        """``fpsim.nn.functional.batch_norm`` with the layer's statistics and parameters."""
        return normalization.batch_norm(x, self.running_mean, self.running_var, self.weight,
                                        self.bias, self.training, self.momentum, self.eps)


class BatchNorm1d(_BatchNorm):
    """Batch normalization of (N, C) or (N, C, L).

    Parameters
    ----------
    num_features : int
        C.
    eps : float, default 1e-5
        Added to the variance.
    momentum : float, default 0.1
        The weight of each batch in the running statistics.

    Attributes
    ----------
    weight, bias : Parameter
        (C,): ones and zeros.
    running_mean, running_var : numpy.ndarray
        (C,): zeros and ones, in the policy's ``reduce`` format, updated in training.

    Examples
    --------
    >>> import numpy as np
    >>> import fpsim
    >>> from fpsim import nn
    >>> bn = nn.BatchNorm1d(4)
    >>> bn(np.arange(8.0).reshape(2, 4)).shape
    (2, 4)
    >>> bn.running_mean
    array([0.2       , 0.30000001, 0.40000001, 0.5       ])
    """


class BatchNorm2d(_BatchNorm):
    """Batch normalization of (N, C, H, W) over N, H and W.

    Parameters
    ----------
    num_features : int
        C.
    eps : float, default 1e-5
        Added to the variance.
    momentum : float, default 0.1
        The weight of each batch in the running statistics.

    Attributes
    ----------
    weight, bias : Parameter
        (C,): ones and zeros.
    running_mean, running_var : numpy.ndarray
        (C,): zeros and ones, in the policy's ``reduce`` format, updated in training.

    Examples
    --------
    >>> import numpy as np
    >>> import fpsim
    >>> from fpsim import nn
    >>> nn.BatchNorm2d(3)(np.ones((2, 3, 4, 4))).shape
    (2, 3, 4, 4)
    """


class LayerNorm(Module):
    """Layer normalization over the trailing ``normalized_shape`` dimensions.

    Attributes
    ----------
    normalized_shape : tuple of int
        As given.
    weight, bias : Parameter
        Of ``normalized_shape``: ones and zeros.
    eps : float
        As given.

    Parameters
    ----------
    normalized_shape : int or tuple of int
        The trailing dimensions.
    eps : float, default 1e-5
        Added to the variance.

    Examples
    --------
    >>> import numpy as np
    >>> import fpsim
    >>> from fpsim import nn
    >>> nn.LayerNorm(4)(fpsim.tensor([[1.0, 2.0, 3.0, 4.0]]))
    Tensor(array([[-1.34163547, -0.4472118 ,  0.4472118 ,  1.34163547]]), format=fp32,
           requires_grad=True)
    """

    def __init__(self, normalized_shape: int | Sequence[int], eps: float = 1e-5) -> None:
        dims = (normalized_shape if isinstance(normalized_shape, (tuple, list))
                else (normalized_shape,))
        self.normalized_shape = tuple(integer(d, "normalized_shape", 0) for d in dims)
        eps = real(eps, "eps", 0.0)
        self.weight = Parameter(np.ones(self.normalized_shape))
        self.bias = Parameter(np.zeros(self.normalized_shape))
        self.eps = eps

    def forward(self, x: TensorLike) -> Tensor:
        """``fpsim.nn.functional.layer_norm`` with the layer's parameters."""
        return normalization.layer_norm(x, self.normalized_shape, self.weight, self.bias,
                                        self.eps)


class Dropout(Module):
    """Zero each element with probability ``p`` in training, scaling the rest by 1/(1-p).

    Attributes
    ----------
    p : float
        As given.

    Parameters
    ----------
    p : float, default 0.5
        In [0, 1).

    Examples
    --------
    >>> import numpy as np
    >>> import fpsim
    >>> from fpsim import nn
    >>> nn.Dropout(0.5).eval()(fpsim.tensor([1.0, 2.0]))
    Tensor(array([1., 2.]), format=fp64)
    """

    def __init__(self, p: float = 0.5) -> None:
        self.p = real(p, "dropout probability p", 0.0, 1.0, high_open=True)

    def forward(self, x: TensorLike) -> TensorLike:
        """``fpsim.nn.functional.dropout(x, p, training)``."""
        return pointwise.dropout(x, self.p, self.training)


class ReLU(Module):
    """``max(x, 0)`` (``fpsim.nn.functional.relu``).

    Examples
    --------
    >>> import fpsim
    >>> from fpsim import nn
    >>> nn.ReLU()(fpsim.tensor([-1.0, 1.0]))
    Tensor(array([0., 1.]), format=fp32)
    """

    def forward(self, x: TensorLike) -> Tensor:
        """``fpsim.nn.functional.relu(x)``."""
        return pointwise.relu(x)


class Tanh(Module):
    """``tanh(x)`` (``fpsim.nn.functional.tanh``).

    Examples
    --------
    >>> import fpsim
    >>> from fpsim import nn
    >>> nn.Tanh()(fpsim.tensor([0.5]))
    Tensor(array([0.46211717]), format=fp32)
    """

    def forward(self, x: TensorLike) -> Tensor:
        """``fpsim.nn.functional.tanh(x)``."""
        return pointwise.tanh(x)


class Sigmoid(Module):
    """``1 / (1 + exp(-x))`` (``fpsim.nn.functional.sigmoid``).

    Examples
    --------
    >>> import fpsim
    >>> from fpsim import nn
    >>> nn.Sigmoid()(fpsim.tensor([0.0]))
    Tensor(array([0.5]), format=fp32)
    """

    def forward(self, x: TensorLike) -> Tensor:
        """``fpsim.nn.functional.sigmoid(x)``."""
        return pointwise.sigmoid(x)


class Flatten(Module):
    """(N, ...) to (N, -1).

    Examples
    --------
    >>> import numpy as np
    >>> from fpsim import nn
    >>> nn.Flatten()(np.zeros((2, 3, 4))).shape
    (2, 12)
    """

    def forward(self, x: Tensor | np.ndarray) -> Tensor:
        """``x`` reshaped to (N, -1) (exact: its format is kept)."""
        return shape.reshape(x, (x.shape[0], -1))


class Sequential(Module):
    """The layers applied in turn; ``model[i]`` is the i-th.

    Parameters
    ----------
    *layers : Module
        The layers, in order.

    Attributes
    ----------
    layers : list of Module
        As given.

    Examples
    --------
    >>> import fpsim
    >>> from fpsim import nn
    >>> model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    >>> model(fpsim.tensor([[1.0, 2.0, 3.0]])).shape
    (1, 2)
    """

    def __init__(self, *layers: Module) -> None:
        self.layers = list(layers)

    def forward(self, x: Any) -> Any:
        """Each layer applied to the output of the one before."""
        for layer in self.layers:
            x = layer(x)
        return x

    def __getitem__(self, i: int) -> Module:
        return self.layers[i]


class CrossEntropyLoss(Module):
    """Softmax cross-entropy, mean over the batch (``fpsim.nn.functional.cross_entropy``).

    Examples
    --------
    >>> import fpsim
    >>> from fpsim import nn
    >>> nn.CrossEntropyLoss()(fpsim.tensor([[0.0, 0.0]]), [1])
    Tensor(array(0.69314718), format=fp32)
    """

    def forward(self, logits: TensorLike, target: npt.ArrayLike) -> Tensor:
        """``fpsim.nn.functional.cross_entropy(logits, target)``."""
        return losses.cross_entropy(logits, target)
