"""Throughput benchmark of the arithmetic core: ``python -m fpsim.bench``.

Prints million elements per second of ``round`` in every mode and of add,
mul and fma, beside the same run's ``np.copyto`` and float16 round-trip cast,
as ratios. Medians over repeats; the machine is shared and noisy.
"""

from __future__ import annotations

import argparse
import time
from functools import partial

import numpy as np

import fpsim

ROUND_FORMATS = ("fp16", "bf16", "fp8_e4m3")
ARITH_FORMATS = ("fp16", "bf16")


def inputs(n: int, seed: int = 0) -> np.ndarray:
    """float32 values over a wide exponent range: subnormal, normal and overflowing for fp16."""
    rng = np.random.default_rng(seed)
    mantissa = rng.uniform(1.0, 2.0, n) * rng.choice([-1.0, 1.0], n)
    return (mantissa * np.exp2(rng.integers(-30, 20, n))).astype(np.float32)


def measure(func, copy, repeats: int) -> tuple[float, float]:
    """Median seconds of ``func`` and the median ratio of its throughput to ``copy``'s.

    Each repeat times ``copy`` right before ``func``, so that drift in the
    machine's speed (shared, noisy hosts) cancels out of the ratio.
    """
    seconds, ratios = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        copy()
        middle = time.perf_counter()
        func()
        end = time.perf_counter()
        seconds.append(end - middle)
        ratios.append((middle - start) / (end - middle))
    return float(np.median(seconds)), float(np.median(ratios))


def run(n: int = 10_000_000, repeats: int = 7, backend: str = "numba") -> list[tuple]:
    """Rows of (what, format, M elements/s, throughput ratio to np.copyto)."""
    x = inputs(n)
    out = np.empty_like(x)
    rows = []

    def copy():
        np.copyto(out, x)

    def row(what, fmt, func):
        func()  # compile, allocate
        seconds, ratio = measure(func, copy, repeats)
        rows.append((what, fmt, n / seconds / 1e6, ratio))

    row("np.copyto", "", copy)
    with np.errstate(over="ignore"):
        row("astype f16->f32", "fp16", lambda: x.astype(np.float16).astype(np.float32))
    with fpsim.backend(backend):
        for fmt in ROUND_FORMATS:
            for mode in fpsim.ROUNDING_MODES:
                row(f"round {mode}", fmt, partial(fpsim.round, x, fmt, mode, seed=1))
        for fmt in ARITH_FORMATS:
            a = fpsim.round(x, fmt, saturate=True)
            b = fpsim.round(inputs(n, seed=1), fmt, saturate=True)
            c = fpsim.round(inputs(n, seed=2), fmt, saturate=True)
            row("add", fmt, partial(fpsim.add, a, b, fmt))
            row("mul", fmt, partial(fpsim.mul, a, b, fmt))
            row("fma", fmt, partial(fpsim.fma, a, b, c, fmt))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fpsim bench", description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=10_000_000, help="elements (default 10M)")
    parser.add_argument("--repeats", type=int, default=7, help="timed repeats (median)")
    parser.add_argument("--backend", default="numba", choices=["numpy", "numba"])
    args = parser.parse_args(argv)
    print(f"fpsim {fpsim.__version__}, backend {args.backend}, n={args.n:,} float32, "
          f"median of {args.repeats}; ratio: throughput / np.copyto's, timed in pairs")
    print(f"{'operation':24} {'format':9} {'M elem/s':>10} {'x copy':>8}")
    for what, fmt, rate, ratio in run(args.n, args.repeats, args.backend):
        print(f"{what:24} {fmt:9} {rate:10.1f} {ratio:8.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
