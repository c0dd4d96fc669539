"""The random generator behind initialisation and dropout."""

from __future__ import annotations

import numpy as np

from fpsim._checks import integer

_state = {"rng": np.random.default_rng(0)}


def manual_seed(seed: int) -> None:
    """Reset the generator used by layer initialisation and dropout.

    Parameters
    ----------
    seed : int
        The seed of a new ``numpy.random.default_rng``.

    Examples
    --------
    >>> import numpy as np
    >>> from fpsim import nn
    >>> nn.manual_seed(1)
    >>> a = nn.Linear(2, 2).weight.data
    >>> nn.manual_seed(1)
    >>> np.array_equal(a, nn.Linear(2, 2).weight.data)
    True
    """
    _state["rng"] = np.random.default_rng(integer(seed, "seed", 0))


def generator() -> np.random.Generator:
    """The generator that initialisation and dropout draw from (``manual_seed`` resets it).

    Returns
    -------
    numpy.random.Generator

    Examples
    --------
    >>> from fpsim.nn import init
    >>> init.manual_seed(0)
    >>> a = init.generator().random()
    >>> init.manual_seed(0)
    >>> init.generator().random() == a
    True
    """
    return _state["rng"]


def uniform(shape: tuple[int, ...], bound: float) -> np.ndarray:
    """U(-bound, bound), PyTorch's default for linear, convolutional and recurrent layers.

    Parameters
    ----------
    shape : tuple of int
        The shape of the draw.
    bound : float
        The half-width.

    Returns
    -------
    numpy.ndarray
        float64 draws from ``generator()``.

    Examples
    --------
    >>> import numpy as np
    >>> from fpsim.nn import init
    >>> w = init.uniform((64, 3), 0.5)
    >>> w.shape, bool(np.all(np.abs(w) <= 0.5))
    ((64, 3), True)
    """
    return generator().uniform(-bound, bound, size=shape)


def normal(shape: tuple[int, ...], std: float = 1.0) -> np.ndarray:
    """N(0, std**2), PyTorch's default for embeddings.

    Parameters
    ----------
    shape : tuple of int
        The shape of the draw.
    std : float, default 1.0
        The standard deviation.

    Returns
    -------
    numpy.ndarray
        float64 draws from ``generator()``.

    Examples
    --------
    >>> from fpsim.nn import init
    >>> init.normal((10, 3), std=0.02).shape
    (10, 3)
    """
    return generator().normal(0.0, std, size=shape)
