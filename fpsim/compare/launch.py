"""On a GPU: the cupy backend's two launch paths, bit for bit and timed.

Runs every kernel variant of the backend (each elementwise operation in float32
and float64, with flags, the operand check and stochastic rounding; the operand
scan; the three accumulation loops with their counters) through numba-cuda's
dispatcher and through ``cuda_launch`` on the same device inputs, and compares
results, flags and counts bit for bit. Then times ``fpsim.round(x, "fp16")`` on a
float32 device array at n = 1, 10**6 and 10**7 through both paths (median of
``--repeat`` calls, each synchronised) beside a device-to-device copy.

    python3 -m fpsim.compare.launch --out DIR [--repeat 30] [--profile]

Each kernel is first compiled in ``--jobs`` processes into numba-cuda's on-disk
cache (both paths run numba-cuda's compilation of it). Writes
``DIR/launch_check.txt`` (the same as printed). Exit status 0 when every variant
agrees, 1 when one differs or fails, 3 without a GPU.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

SIZES = (1, 10**6, 10**7)
# Outputs start out as this, not as whatever the memory pool hands back (it could be the
# other path's results): a launch that writes nothing differs.
SENTINEL = -1234.5
# Elements of each elementwise variant's operands.
ELEMENTS = 4099


def _inputs(rng: np.random.Generator, n: int, dtype: str) -> np.ndarray:
    """Values near fp16's: ties, subnormals, overflow, infinities and NaN among them."""
    with np.errstate(over="ignore"):
        x = (rng.standard_normal(n) * np.exp2(rng.integers(-26, 18, n))).astype(dtype)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 65504.0, 65520.0, 2.0**-24,
                        2.0**-25, 3 * 2.0**-25, 1.0 + 2.0**-11, 6e-8], dtype=dtype)
    x[:special.size] = special
    return x


def _bits(a: np.ndarray) -> Any:
    return np.ascontiguousarray(a).view(f"u{a.dtype.itemsize}")


Run = Callable[[], list[np.ndarray]]


def variants(backend: Any, cupy: Any,
             rng: np.random.Generator) -> list[tuple[str, str, Run]]:
    """(name, kernel, run) for each kernel variant: ``run()`` gives host arrays and counts;
    variants of one ``kernel`` share a dispatcher (and its cache index)."""
    import fpsim
    from fpsim.backends.protocol import KERNELS
    from fpsim.kernels.spec import make_spec

    fp16 = fpsim.format("fp16")
    nearest = make_spec(fp16, "nearest_even", True, False, None)
    stochastic = make_spec(fp16, "stochastic", True, False, None)
    n = ELEMENTS
    out: list[tuple[str, str, Run]] = []
    for dtype in ("float32", "float64"):
        ops = [cupy.asarray(_inputs(rng, n, dtype)) for _ in range(3)]
        for kernel in KERNELS:
            for spec, key, label in ((nearest, None, "nearest_even"),
                                     (stochastic, 2**63 + 12345, "stochastic")):
                def run(kernel: str = kernel, spec: Any = spec, key: Any = key,
                        ops: Any = ops, dtype: str = dtype) -> list[np.ndarray]:
                    from fpsim.backends.protocol import ARITY

                    res = cupy.full(n, SENTINEL, dtype)
                    flags = cupy.full(n, 0xAA, np.uint8)
                    bad = backend.apply(kernel, ops[:ARITY[kernel]], res, flags, spec, key,
                                        check=True)
                    return [res.get(), flags.get(), np.array([bad])]
                out.append((f"elementwise {kernel} {dtype} {label}", kernel, run))

        def scan(x: Any = ops[0]) -> list[np.ndarray]:
            return [np.array([backend.first_unrepresentable(x, nearest)])]
        out.append((f"first_unrepresentable {dtype}", "first_unrepresentable", scan))
    rows, k, cols = 12, 37, 9
    a = cupy.asarray(_inputs(rng, rows * k, "float16").astype(np.float64).reshape(rows, k))
    b = cupy.asarray(_inputs(rng, 2 * k * cols, "float16").astype(np.float64)
                     .reshape(2, k, cols))
    c = cupy.asarray(_inputs(rng, rows * cols, "float32").astype(np.float64)
                     .reshape(rows, cols))
    for order, rounded, key in (("sequential", False, None), ("sequential", True, 99),
                                ("pairwise", True, None), ("pairwise", True, 7)):
        def acc(order: str = order, rounded: bool = rounded,
                key: int | None = key) -> list[np.ndarray]:
            res = cupy.full((rows, cols), SENTINEL, np.float64)
            counts = backend.accumulate(a, b, c, res, stochastic if key else nearest, key=key,
                                        order=order, rounded=rounded, has_c=True,
                                        want_stats=True)
            return [res.get(), np.asarray(counts)]
        out.append((f"accumulate {order} rounded={rounded} key={key}", order, acc))

    def blocks() -> list[np.ndarray]:
        res = cupy.full((rows, cols), SENTINEL, np.float64)
        out_spec = make_spec(fpsim.format("fp32"), "toward_zero", True, False, None)
        counts = backend.accumulate_blocks(a, b, c, res, fpsim.hw.H100.params(), out_spec, 16,
                                           True)
        return [res.get(), np.asarray(counts)]
    out.append(("accumulate_blocks H100", "blocks", blocks))
    return out


def compare(backend: Any, cupy: Any) -> tuple[list[str], int]:
    """Lines of the bit-for-bit comparison, and how many variants differ or fail."""
    lines, failed = [], 0
    for name, _, run in variants(backend, cupy, np.random.default_rng(2026)):
        try:
            backend.set_launch("numba")
            expected = run()
            backend.set_launch("raw")
            got = run()
            same = all(np.array_equal(_bits(e), _bits(g))
                       for e, g in zip(expected, got, strict=True))
            verdict = "identical" if same else "DIFFERENT"
        except Exception as exc:  # a failed variant is reported, the others still run
            same, verdict = False, f"FAILED: {type(exc).__name__}: {exc}"
        failed += not same
        lines.append(f"{name}: {verdict}")
    return lines, failed


def warm(indices: list[int]) -> None:
    """In a worker process: run the variants ``indices`` through numba-cuda's dispatcher,
    which compiles them into its on-disk cache for the main process to load."""
    import cupy

    import fpsim
    from fpsim.backends import get_backend

    with fpsim.backend("cupy"):
        backend: Any = get_backend()
        backend.set_launch("numba")
        found = variants(backend, cupy, np.random.default_rng(2026))
        for i in indices:
            found[i][2]()


def compile_ahead(backend: Any, cupy: Any, jobs: int) -> str:
    """Compile every variant in ``jobs`` processes, one kernel's variants in one process."""
    import importlib
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # This module under its package name, also when it runs as __main__: the spawned
    # workers import ``warm`` from there.
    launch = importlib.import_module("fpsim.compare.launch")
    groups: dict[str, list[int]] = {}
    for i, (_, kernel, _) in enumerate(variants(backend, cupy, np.random.default_rng(0))):
        groups.setdefault(kernel, []).append(i)
    start = time.perf_counter()
    try:
        with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            list(pool.map(launch.warm, groups.values()))
    except Exception as exc:  # the comparison then compiles what is missing itself
        return f"compiling ahead failed ({type(exc).__name__}: {exc})"
    return (f"compiled ahead in {jobs} processes: {len(groups)} kernels "
            f"({time.perf_counter() - start:.0f} s)")


def _median_us(call: Callable[[], object], sync: Callable[[], object],
               repeat: int) -> float:
    for _ in range(3):
        call()
    sync()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def timings(backend: Any, cupy: Any, repeat: int) -> list[str]:
    import fpsim

    sync = cupy.cuda.runtime.deviceSynchronize
    lines = ["| n | round, numba-cuda's dispatcher (us) | round, raw launch (us) "
             "| device copy (us) |", "| ---: | ---: | ---: | ---: |"]
    for n in SIZES:
        x = cupy.asarray(np.random.default_rng(n).standard_normal(n, dtype=np.float32))
        copy = cupy.empty_like(x)
        row: list[float] = []
        def rounding(x: Any = x) -> object:
            return fpsim.round(x, "fp16")

        def copying(x: Any = x, copy: Any = copy) -> object:
            copy[...] = x
            return None

        for mode in ("numba", "raw"):
            backend.set_launch(mode)
            row.append(_median_us(rounding, sync, repeat))
        row.append(_median_us(copying, sync, repeat))
        lines.append(f"| {n} | {row[0]:.0f} | {row[1]:.0f} | {row[2]:.0f} |")
    return lines


def profile(backend: Any, cupy: Any, calls: int = 3000, top: int = 25) -> list[str]:
    """Where a raw-launched ``fpsim.round`` of one float32 element spends its time: the
    ``top`` functions by own time over ``calls`` calls (cProfile; no synchronisation)."""
    import cProfile
    import io
    import pstats

    import fpsim

    backend.set_launch("raw")
    x = cupy.asarray(np.ones(1, dtype=np.float32))
    for _ in range(10):
        fpsim.round(x, "fp16")
    cupy.cuda.runtime.deviceSynchronize()
    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.enable()
    for _ in range(calls):
        fpsim.round(x, "fp16")
    profiler.disable()
    cupy.cuda.runtime.deviceSynchronize()
    seconds = time.perf_counter() - start
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(top)
    return [f"profile: {calls} raw-launched fpsim.round(x, 'fp16') of one element, "
            f"{seconds / calls * 1e6:.1f} us a call under cProfile", text.getvalue()]


def header(cupy: Any) -> list[str]:
    from importlib.metadata import version

    props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.runtime.getDevice())
    name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    return [f"GPU: {name} (compute capability {props['major']}.{props['minor']}), "
            f"CUDA runtime {cupy.cuda.runtime.runtimeGetVersion()}, "
            f"driver {cupy.cuda.runtime.driverGetVersion()}",
            f"Python {sys.version.split()[0]}, NumPy {np.__version__}, CuPy {cupy.__version__}, "
            f"numba-cuda {version('numba-cuda')}"]


def main(argv: list[str] | None = None) -> int:
    """Run the comparison and the timings; see the module's description."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path, help="directory for the record")
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--profile", action="store_true",
                        help="also profile one-element calls on the raw path")
    parser.add_argument("--jobs", type=int, default=min(8, os.cpu_count() or 1),
                        help="processes compiling ahead (1: none)")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    import fpsim
    from fpsim.backends import get_backend, gpu_missing
    from fpsim.backends.cuda_launch import launch_mode

    args.out.mkdir(parents=True, exist_ok=True)
    record = args.out / "launch_check.txt"
    missing = gpu_missing()
    if missing:
        print(f"no GPU to check on: {missing}")
        record.write_text(f"no GPU to check on: {missing}\n")
        return 3
    import cupy

    lines: list[str] = []

    def emit(new: list[str]) -> None:
        lines.extend(new)
        print("\n".join(new), flush=True)
        record.write_text("\n".join(lines) + "\n")

    emit(header(cupy))
    start = time.perf_counter()
    with fpsim.backend("cupy"):
        backend: Any = get_backend()
        if args.jobs > 1:
            emit([compile_ahead(backend, cupy, args.jobs)])
        found, failed = compare(backend, cupy)
        emit(found + [f"{len(found)} variants, {failed} differ or fail "
                      f"({time.perf_counter() - start:.0f} s, compilation included)"])
        emit(timings(backend, cupy, args.repeat))
        if args.profile:
            emit(profile(backend, cupy))
        backend.set_launch(launch_mode())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
