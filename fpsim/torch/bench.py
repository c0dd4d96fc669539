"""The bridge's overhead: ``fpsim.torch.round`` of an n x n float32 tensor beside
``fpsim.round`` of the same memory as a NumPy array: ``python -m fpsim.torch.bench
[-n N] [--repeats R]``."""

from __future__ import annotations

import argparse
from functools import partial

import numpy as np
import torch

import fpsim
from fpsim._machine import machine
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


def main(argv: list[str] | None = None) -> int:
    """Print :func:`run`'s rows with the machine they ran on."""
    parser = argparse.ArgumentParser(prog="python -m fpsim.torch.bench",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=4096, help="rows and columns (default 4096)")
    parser.add_argument("--repeats", type=int, default=7, help="timed pairs (median)")
    args = parser.parse_args(argv)
    if args.n < 1:
        parser.error(f"-n must be at least 1, got {args.n}")
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1, got {args.repeats}")
    print(f"fpsim {fpsim.__version__}, fpsim.torch.round of a {args.n}x{args.n} float32 "
          f"tensor beside fpsim.round of the same memory, median of {args.repeats} pairs")
    print(machine(False))
    print(f"{'format':9} {'mode':13} {'numpy ms':>9} {'torch ms':>9} {'x numpy':>8}")
    for fmt, mode, numpy_ms, torch_ms, ratio in run(args.n, args.repeats):
        print(f"{fmt:9} {mode:13} {numpy_ms:9.2f} {torch_ms:9.2f} {ratio:8.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
