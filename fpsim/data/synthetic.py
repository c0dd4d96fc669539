"""Small synthetic data sets: Gaussian blobs for classification, a noisy linear model."""

from __future__ import annotations

import math

import numpy as np

from fpsim.data.batches import _positive_int, _seed


def _non_negative(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name} must be a non-negative number, got {value!r}")
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{name} must be finite and non-negative, got {value!r}")
    return float(value)


def _integer_seed(seed: object) -> int:
    seed = _seed(seed)
    if seed is None:
        raise ValueError("seed must be an integer, got None")
    return seed


def make_classification(
    n: int,
    *,
    features: int = 2,
    classes: int = 2,
    seed: int = 0,
    separation: float = 2.0,
) -> tuple[np.ndarray, np.ndarray]:
    """``n`` samples of ``classes`` unit-variance Gaussian blobs, as float64 ``x`` and int64 ``y``.

    The class centres lie ``separation`` from the origin, evenly spaced on a circle in a random
    plane (on a line for one feature); the classes are balanced and the samples shuffled.
    """
    n = _positive_int("n", n)
    features = _positive_int("features", features)
    classes = _positive_int("classes", classes)
    if classes < 2:
        raise ValueError(f"classes must be at least 2, got {classes}")
    if n < classes:
        raise ValueError(f"n={n} is fewer than classes={classes}: some class would be empty")
    seed = _integer_seed(seed)
    separation = _non_negative("separation", separation)
    rng = np.random.default_rng(seed)
    if features == 1:
        centres = np.linspace(-separation, separation, classes)[:, None]
    else:
        plane, _ = np.linalg.qr(rng.standard_normal((features, 2)))
        angles = 2.0 * np.pi * np.arange(classes) / classes
        circle = np.stack([np.cos(angles), np.sin(angles)], axis=1)
        centres = separation * circle @ plane.T
    y = rng.permutation(np.arange(n) % classes).astype(np.int64)
    x = centres[y] + rng.standard_normal((n, features))
    return x, y


def make_regression(
    n: int,
    *,
    features: int = 4,
    noise: float = 0.1,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(x, y, w)``: standard normal ``x`` of shape ``(n, features)``, ``y = x @ w + noise * e``.

    ``w`` (the true weights) and ``e`` are standard normal; everything is float64.
    """
    n = _positive_int("n", n)
    features = _positive_int("features", features)
    noise = _non_negative("noise", noise)
    seed = _integer_seed(seed)
    rng = np.random.default_rng(seed)
    w = rng.standard_normal(features)
    x = rng.standard_normal((n, features))
    y = x @ w + noise * rng.standard_normal(n)
    return x, y, w
