"""The 8x8 handwritten digits bundled with scikit-learn, split for training and testing."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from fpsim.data.batches import _fraction, _seed


@dataclass(frozen=True, eq=False)
class Split:
    """A labelled data set cut into a training and a test part."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    classes: int = 10


@functools.lru_cache(maxsize=1)
def _raw_digits() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits as sklearn_load_digits

    bunch = sklearn_load_digits()
    x = np.asarray(bunch.data, dtype=np.float64) / 16.0
    y = np.asarray(bunch.target, dtype=np.int64)
    x.flags.writeable = False
    y.flags.writeable = False
    return x, y


def load_digits(*, seed: int = 0, test_fraction: float = 0.25, images: bool = False,
                standardize: bool = False) -> Split:
    """The 1797 scikit-learn digits, pixels scaled to [0, 1], in a stratified split.

    ``standardize``: each pixel shifted and scaled by the training part's mean and
    standard deviation (plus 0.01, for the constant border pixels) instead.

    Features are float64 of shape ``(n, 64)``, or ``(n, 1, 8, 8)`` with ``images``; labels
    are int64 in 0..9.  The split is fixed by ``seed``: each class puts ``test_fraction`` of
    its samples (rounded) in the test part, and both parts come in shuffled order.
    No download: the data ship with scikit-learn.
    """
    checked = _seed(seed)
    if checked is None:
        raise ValueError("seed must be an integer, got None")
    seed = checked
    test_fraction = _fraction("test_fraction", test_fraction)
    x, y = _raw_digits()
    rng = np.random.default_rng(seed)
    train_parts, test_parts = [], []
    for label in range(10):
        members = rng.permutation(np.flatnonzero(y == label))
        n_test = int(np.floor(len(members) * test_fraction + 0.5))
        test_parts.append(members[:n_test])
        train_parts.append(members[n_test:])
    train = rng.permutation(np.concatenate(train_parts))
    test = rng.permutation(np.concatenate(test_parts))
    if len(train) == 0 or len(test) == 0:
        raise ValueError(f"test_fraction={test_fraction} leaves the training or test part empty")
    shape = (-1, 1, 8, 8) if images else (-1, 64)
    x_train, x_test = x[train], x[test]
    if standardize:
        mean, std = x_train.mean(axis=0), x_train.std(axis=0) + 0.01
        x_train, x_test = (x_train - mean) / std, (x_test - mean) / std
    return Split(
        x_train=x_train.reshape(shape),
        y_train=y[train],
        x_test=x_test.reshape(shape),
        y_test=y[test],
        classes=10,
    )
