"""Dispatch overhead of the executors: the same runs on the local executor (1 and 2
worker processes) and on a 2-worker Dask ``LocalCluster``; prints the median wall
times and the overhead per run.

    python3 -m fpsim.sweep.bench [--steps 200] [--seeds 4] [--repeats 3]

Every repetition trains into a fresh cache. The overhead per run of an executor with
W workers is (W × wall time − the runs' own training seconds) / runs: worker time
not spent training (start-up, sending the run and its record, scheduling, writing
the cache, the idle tail). The local executor starts its processes for each sweep;
the cluster is started once ("warm", its start-up printed apart) and also timed
start-up included ("cold").
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import platform
import statistics
import sys
import tempfile
import time
from typing import Any

POLICIES = ("fp32", "mixed", "no_loss_scaling", "bf16")


def _task(steps: int) -> Any:
    from fpsim.reproduce.tasks import Budget, task

    t = task("digits_mlp")
    return dataclasses.replace(t, budgets={"quick": Budget(steps, steps)}).for_sweep("quick")


def _timed(task: Any, seeds: int, executor: Any) -> tuple[float, float]:
    """Wall time of a sweep into a fresh cache, and its runs' own training seconds."""
    from fpsim.sweep import sweep

    with tempfile.TemporaryDirectory() as cache:
        start = time.perf_counter()
        result = sweep(task, POLICIES, seeds, cache=cache, executor=executor,
                       stream=io.StringIO())
        wall = time.perf_counter() - start
    if result.failures or len(result.trained) != len(POLICIES) * seeds:
        raise RuntimeError("a benchmark sweep did not train every run")
    return wall, sum(r["seconds"] for r in result.records)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its table.

    Parameters
    ----------
    argv : list of str, optional
        ``--steps`` (per run), ``--seeds``, ``--repeats``.

    Returns
    -------
    int
        0.
    """
    p = argparse.ArgumentParser(prog="python3 -m fpsim.sweep.bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=200, help="steps per run (default: 200)")
    p.add_argument("--seeds", type=int, default=4, help="seeds per policy (default: 4)")
    p.add_argument("--repeats", type=int, default=3, help="timed repetitions (default: 3)")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    for name in ("steps", "seeds", "repeats"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be at least 1")
    from fpsim.sweep import DaskExecutor, LocalExecutor
    from fpsim.sweep.run import one_thread

    task = _task(args.steps)
    runs = len(POLICIES) * args.seeds
    timings: dict[str, tuple[int, list[tuple[float, float]]]] = {}
    with one_thread():
        _timed(task, 1, LocalExecutor(1))  # load this process's kernels
        timings["local, 1 process"] = (1, [_timed(task, args.seeds, LocalExecutor(1))
                                           for _ in range(args.repeats)])
        timings["local, 2 processes"] = (2, [_timed(task, args.seeds, LocalExecutor(2))
                                             for _ in range(args.repeats)])
        start = time.perf_counter()
        with DaskExecutor("local:2") as cluster:
            cluster.check_workers()
            started = time.perf_counter() - start
            _timed(task, 1, cluster)  # the workers import fpsim and load their kernels
            timings["Dask LocalCluster, 2 workers (warm)"] = (2, [
                _timed(task, args.seeds, cluster) for _ in range(args.repeats)])
        timings["Dask LocalCluster, 2 workers (cold)"] = (2, [
            _timed(task, args.seeds, "local:2") for _ in range(args.repeats)])
    print(f"{runs} runs (digits_mlp, {args.steps} steps each, policies "
          f"{', '.join(POLICIES)}, {args.seeds} seeds); medians of {args.repeats}; "
          f"Python {platform.python_version()}")
    print("| executor | wall time (s) | training (s) | overhead per run (s) |")
    print("| --- | --- | --- | --- |")
    overhead = {}
    for name, (workers, results) in timings.items():
        wall = statistics.median(w for w, _ in results)
        trained = statistics.median(t for _, t in results)
        overhead[name] = statistics.median((workers * w - t) / runs for w, t in results)
        print(f"| {name} | {wall:.2f} | {trained:.2f} | {overhead[name]:.3f} |")
    print(f"LocalCluster start-up (in 'cold', not in 'warm'): {started:.1f} s")
    warm = overhead["Dask LocalCluster, 2 workers (warm)"]
    print(f"dispatch overhead per run over the LocalCluster: {warm:.3f} s "
          f"({warm - overhead['local, 2 processes']:+.3f} s against local, 2 processes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
