"""``fpsim compare``: run a suite of cases and write what it found."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from fpsim._machine import machine, versions
from fpsim.compare import report
from fpsim.compare.cases import Case, Record, evaluate, skipped
from fpsim.compare.training import DEFAULT_STEPS

SUITES = ("cpu", "gpu", "all", "training")
"""The suites ``run`` takes: the CPU's cases, the GPU's, both, or training on the GPU
(native against emulated, ``fpsim.compare.training``)."""
DEFAULT_SIZE = 1 << 20
"""Elements per elementwise case, by default."""
DEFAULT_SEED = 0
"""The inputs' random seed, by default."""


def run(suite: str = "cpu", *, size: int = DEFAULT_SIZE, seed: int = DEFAULT_SEED,
        out: str | Path | None = None,
        progress: Callable[[Record], object] | None = None,
        steps: int = DEFAULT_STEPS) -> list[Record]:
    """Run the ``suite`` ("cpu", "gpu", "all" or "training") and return a record per case.

    ``size``: elements per elementwise case (the others scale with it); ``seed``: the
    inputs' random seed; ``out``: a folder for results.json, results.md and
    ulp_histograms.png (nothing written when None); ``progress``: called with each
    record as it is made.

    Parameters
    ----------
    suite : {"cpu", "gpu", "all", "training"}, default "cpu"
        The cases: the CPU's (NumPy, ml_dtypes, the CPU's binary16, BLAS), the GPU's
        (CuPy, CUDA, cuBLAS), or both (without a GPU: the CPU's, and a skipped record
        saying why the GPU's did not run, also in results.md and results.json's
        ``not_run``); or "training": each model of ``fpsim.compare.training.models()``
        trained ``steps`` steps natively and emulated on the GPU (a record per model:
        its final weights; the steps and the sources of difference in results.md and
        results.json's ``training``).
    size : int, default 2**20
        Elements per elementwise case, at least 64.
    seed : int, default 0
        The inputs' random seed.
    out : str or Path, optional
        Where to write results.json, results.md and ulp_histograms.png.
    progress : callable, optional
        Called with each ``Record`` as it is made.
    steps : int, default 20
        Training steps per model (the "training" suite only).

    Returns
    -------
    list of Record

    Raises
    ------
    ValueError
        For an unknown suite, or a size or seed out of range.
    fpsim.compare.gpu.NoGPU
        For the "gpu" and "training" suites where there is no usable GPU (the message
        says what is missing); nothing is written.
    ImportError
        For the "gpu" suite where CuPy is not installed: one line naming the extra,
        ``pip install 'fpsim[gpu]'``.

    Examples
    --------
    >>> from fpsim.compare import run
    >>> records = run("cpu", size=64)
    >>> [(r.name, r.verdict) for r in records[:2]]
    [('numpy fp16 add', 'identical'), ('numpy fp16 sub', 'identical')]
    """
    if suite not in SUITES:
        raise ValueError(f"unknown suite {suite!r}; known suites: {', '.join(SUITES)}")
    for label, value, low in (("size", size, 64), ("seed", seed, 0), ("steps", steps, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{label} must be an integer >= {low}, got {value!r}")
    if suite == "training":
        return _training(seed, steps, out, progress)
    families: list[Iterable[Case | Record]] = []
    not_run = ""
    if suite in ("gpu", "all"):
        from fpsim.compare import gpu

        # The "gpu" suite without a GPU is an error, before anything runs or is written.
        device, not_run = (gpu.find_device(), "") if suite == "gpu" else \
            gpu.device_or_reason()
    if suite in ("cpu", "all"):
        from fpsim.compare import cpu

        families.append(cpu.cases(size, seed))
    if suite in ("gpu", "all"):
        families.append(gpu.cases(size, seed, device) if device is not None else
                        [skipped("gpu suite", "CuPy on a GPU", not_run)])
        if isinstance(device, gpu.CupyDevice):  # one instruction per warp: CuPy only
            from fpsim.compare import mma

            families.append(mma.cases(device))
    records = []
    for family in families:
        for item in family:
            record = evaluate(item) if isinstance(item, Case) else item
            records.append(record)
            if progress is not None:
                progress(record)
    if out is not None:
        gpu_ran = any(r.name.startswith("gpu") and not r.skipped for r in records)
        header: dict[str, Any] = dict(
            suite=suite, size=size, seed=seed, date=time.strftime("%Y-%m-%d"),
            machine=machine() + (f"; {machine(gpu=True)}" if gpu_ran else ""),
            versions=versions(gpu=gpu_ran))
        if not_run:
            header["not_run"] = f"the GPU suite did not run: {not_run}"
        report.write(records, header, Path(out))
    return records


def _training(seed: int, steps: int, out: str | Path | None,
              progress: Callable[[Record], object] | None) -> list[Record]:
    """The training suite (``fpsim.compare.training.run``): a record per model."""
    from fpsim.compare import training

    def report_run(result: training.TrainingRun) -> None:
        if progress is not None:
            progress(result.record())

    return [r.record() for r in training.run(steps, seed, out=out, progress=report_run)]
