"""The bridge's overhead: ``fpsim.torch.round`` of an n x n float32 tensor beside
``fpsim.round`` of the same memory as a NumPy array (``fpsim bench torch``)."""

from __future__ import annotations

from functools import partial

import numpy as np
import torch

import fpsim
from fpsim.bench import inputs, seed, timed_pairs
from fpsim.torch.rounding import round as torch_round

CASES = (("bf16", "nearest_even"), ("fp16", "nearest_even"), ("fp8_e4m3", "nearest_even"),
         ("bf16", "stochastic"))
"""The formats and modes timed."""


def run(n: int = 4096, repeats: int = 7) -> list[tuple[str, str, float, float, float]]:
    """Rows of (format, mode, fpsim.round's median ms, fpsim.torch.round's median ms, the
    median of their time ratios, torch over NumPy), each pair timed back to back.

    The tensor and the array share their memory (``torch.from_numpy``): the bridge's
    overhead is everything but the rounding (the checks, DLPack both ways, the autograd
    function).
    """
    array = inputs(n * n).reshape(n, n)
    tensor = torch.from_numpy(array)
    rows = []
    for fmt, mode in CASES:
        numpy_call = partial(fpsim.round, array, fmt, mode, seed=seed(mode))
        torch_call = partial(torch_round, tensor, fmt, mode, seed=seed(mode))
        numpy_call()
        torch_call()  # compiled and warm
        pairs = timed_pairs(torch_call, numpy_call, repeats)
        rows.append((fmt, mode, 1e3 * float(np.median(pairs[:, 0])),
                     1e3 * float(np.median(pairs[:, 1])),
                     float(np.median(pairs[:, 1] / pairs[:, 0]))))
    return rows
