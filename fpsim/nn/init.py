"""The random generator behind initialisation and dropout."""

from __future__ import annotations

import numpy as np

_state = {"rng": np.random.default_rng(0)}


def manual_seed(seed: int) -> None:
    """Reset the generator used by layer initialisation and dropout."""
    _state["rng"] = np.random.default_rng(seed)


def generator() -> np.random.Generator:
    return _state["rng"]


def uniform(shape: tuple[int, ...], bound: float) -> np.ndarray:
    """U(-bound, bound), PyTorch's default for linear, convolutional and recurrent layers."""
    return generator().uniform(-bound, bound, size=shape)


def normal(shape: tuple[int, ...], std: float = 1.0) -> np.ndarray:
    return generator().normal(0.0, std, size=shape)
