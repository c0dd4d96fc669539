"""``fpsim compare``: run a suite of cases and write what it found."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from fpsim._machine import machine, versions
from fpsim.compare import report
from fpsim.compare.cases import Case, Record, evaluate

SUITES = ("cpu", "gpu", "all")
"""The suites ``run`` takes: the CPU's cases, the GPU's, or both."""
DEFAULT_SIZE = 1 << 20
"""Elements per elementwise case, by default."""
DEFAULT_SEED = 0
"""The inputs' random seed, by default."""


def run(suite: str = "cpu", *, size: int = DEFAULT_SIZE, seed: int = DEFAULT_SEED,
        out: str | Path | None = None,
        progress: Callable[[Record], object] | None = None) -> list[Record]:
    """Run the ``suite`` ("cpu", "gpu" or "all") and return a record per case.

    ``size``: elements per elementwise case (the others scale with it); ``seed``: the
    inputs' random seed; ``out``: a folder for results.json, results.md and
    ulp_histograms.png (nothing written when None); ``progress``: called with each
    record as it is made.

    Parameters
    ----------
    suite : {"cpu", "gpu", "all"}, default "cpu"
        The cases: the CPU's (NumPy, ml_dtypes, the CPU's binary16, BLAS), the GPU's
        (CuPy, CUDA, cuBLAS; skipped without a GPU), or both.
    size : int, default 2**20
        Elements per elementwise case, at least 64.
    seed : int, default 0
        The inputs' random seed.
    out : str or Path, optional
        Where to write results.json, results.md and ulp_histograms.png.
    progress : callable, optional
        Called with each ``Record`` as it is made.

    Returns
    -------
    list of Record

    Raises
    ------
    ValueError
        For an unknown suite, or a size or seed out of range.

    Examples
    --------
    >>> from fpsim.compare import run
    >>> records = run("cpu", size=64)
    >>> [(r.name, r.verdict) for r in records[:2]]
    [('numpy fp16 add', 'identical'), ('numpy fp16 sub', 'identical')]
    """
    if suite not in SUITES:
        raise ValueError(f"unknown suite {suite!r}; known suites: {', '.join(SUITES)}")
    for label, value, low in (("size", size, 64), ("seed", seed, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{label} must be an integer >= {low}, got {value!r}")
    families = []
    if suite in ("cpu", "all"):
        from fpsim.compare import cpu

        families.append(cpu.cases(size, seed))
    if suite in ("gpu", "all"):
        from fpsim.compare import gpu

        families.append(gpu.cases(size, seed))
    records = []
    for family in families:
        for item in family:
            record = evaluate(item) if isinstance(item, Case) else item
            records.append(record)
            if progress is not None:
                progress(record)
    if out is not None:
        gpu_ran = any(r.name.startswith("gpu") and not r.skipped for r in records)
        header = dict(suite=suite, size=size, seed=seed,
                      date=time.strftime("%Y-%m-%d"),
                      machine=machine() + (f"; {machine(gpu=True)}" if gpu_ran else ""),
                      versions=versions(gpu=gpu_ran))
        report.write(records, header, Path(out))
    return records
