"""Minibatches of one epoch: over paired arrays, and over a stream of character ids."""

from __future__ import annotations

import operator
from collections.abc import Iterator
from typing import Any

import numpy as np

from fpsim import _device


def _positive_int(name: str, value: Any) -> int:
    """``value`` as an int, or a ValueError naming ``name`` unless it is a positive integer."""
    if isinstance(value, bool):
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    try:
        number = operator.index(value)
    except TypeError:
        raise ValueError(f"{name} must be a positive integer, got {value!r}") from None
    if number <= 0:
        raise ValueError(f"{name} must be a positive integer, got {number}")
    return number


def _fraction(name: str, value: object) -> float:
    """``value`` as a float, or a ValueError naming ``name`` unless it lies strictly in (0, 1)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name} must be a number in (0, 1), got {value!r}")
    if not 0.0 < float(value) < 1.0:
        raise ValueError(f"{name} must lie strictly between 0 and 1, got {value!r}")
    return float(value)


def _seed(value: Any) -> int | None:
    """``value`` as an int seed or None, or a ValueError."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(f"seed must be an integer or None, got {value!r}")
    try:
        seed = operator.index(value)
    except TypeError:
        raise ValueError(f"seed must be an integer or None, got {value!r}") from None
    if seed < 0:
        raise ValueError(f"seed must be a non-negative integer or None, got {seed}")
    return seed


def batches(
    x: np.ndarray,
    y: np.ndarray,
    *,
    batch_size: int,
    seed: int | None = None,
    drop_last: bool = False,
    device: str | None = None,
) -> Iterator[tuple[Any, Any]]:
    """One epoch of ``(x_batch, y_batch)`` minibatches over arrays sharing their first dimension.

    With ``seed`` the samples come in a deterministic shuffled order, without it in order.
    Every sample appears exactly once per epoch, except the short last batch when
    ``drop_last`` is true.  With ``device`` (``"cpu"`` or ``"cuda"``) each batch is copied
    there (CuPy arrays on ``"cuda"``); by default the batches are NumPy arrays.  Arguments
    are checked at the call, not at the first batch; ``device="cuda"`` where no GPU is
    usable raises a RuntimeError saying what is missing.

    Examples
    --------
    >>> import numpy as np
    >>> from fpsim.data import batches
    >>> [yb.tolist() for _, yb in batches(np.zeros((5, 2)), np.arange(5), batch_size=2)]
    [[0, 1], [2, 3], [4]]
    """
    batch_size = _positive_int("batch_size", batch_size)
    seed = _seed(seed)
    if device is not None:
        device = _device.as_device(device)
        if device == "cuda":
            _device.gpu_module()  # the error now, not at the first batch
    x = np.asarray(x)
    y = np.asarray(y)
    if x.ndim == 0 or y.ndim == 0:
        raise ValueError(f"x and y must be arrays with a sample dimension, got shapes "
                         f"{x.shape} and {y.shape}")
    if len(x) != len(y):
        raise ValueError(f"x and y have different lengths: {len(x)} and {len(y)}")
    n = len(x)
    if n == 0:
        raise ValueError("x and y are empty: no samples to batch")
    if drop_last and n < batch_size:
        raise ValueError(f"batch_size={batch_size} exceeds the {n} samples, so drop_last=True "
                         f"would give no batch")
    order = np.arange(n) if seed is None else np.random.default_rng(seed).permutation(n)
    stop = n - n % batch_size if drop_last else n
    return _slices(x, y, order, batch_size, stop, device or "cpu")


def _slices(
    x: np.ndarray, y: np.ndarray, order: np.ndarray, batch_size: int, stop: int, device: str
) -> Iterator[tuple[Any, Any]]:
    for start in range(0, stop, batch_size):
        index = order[start:start + batch_size]
        yield _device.transfer(x[index], device), _device.transfer(y[index], device)


def char_batches(
    ids: np.ndarray,
    *,
    batch_size: int,
    seq_len: int,
    seed: int | None = None,
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """One epoch of ``(inputs, targets)`` over non-overlapping windows of a 1-D id sequence.

    Both are int64 of shape ``(seq_len, batch_size)`` (time-major), and ``targets`` is
    ``inputs`` shifted one character on.  The text is cut into ``batch_size`` equal streams,
    one per column; without ``seed`` the batches come in order, so column ``b`` of each batch
    continues column ``b`` of the one before (an LSTM's state may be carried over).  With
    ``seed`` the same windows come in a deterministic shuffled order.  Windows that do not
    fit are dropped.  Arguments are checked at the call, not at the first batch.
    """
    batch_size = _positive_int("batch_size", batch_size)
    seq_len = _positive_int("seq_len", seq_len)
    seed = _seed(seed)
    ids = np.asarray(ids)
    if ids.ndim != 1:
        raise ValueError(f"ids must be a 1-D array of character ids, got shape {ids.shape}")
    if ids.size and not np.issubdtype(ids.dtype, np.integer):
        raise ValueError(f"ids must be integers, got dtype {ids.dtype}")
    ids = ids.astype(np.int64, copy=False)
    n = len(ids)
    if n < seq_len + 1:
        raise ValueError(f"seq_len={seq_len} is longer than the data: a window needs "
                         f"seq_len + 1 = {seq_len + 1} ids, got {n}")
    stream = (n - 1) // batch_size
    steps = stream // seq_len
    if steps == 0:
        raise ValueError(f"data too short: {n} ids cut into batch_size={batch_size} streams "
                         f"give {stream} ids each, fewer than seq_len={seq_len}")
    starts = np.arange(batch_size) * stream + (np.arange(steps) * seq_len)[:, None]
    if seed is not None:
        starts = np.random.default_rng(seed).permutation(starts.ravel()).reshape(starts.shape)
    return _windows(ids, starts, seq_len)


def _windows(
    ids: np.ndarray, starts: np.ndarray, seq_len: int
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    offsets = np.arange(seq_len)[:, None]
    for row in starts:
        index = row[None, :] + offsets
        yield ids[index], ids[index + 1]
