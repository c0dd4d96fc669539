"""What a reproduction shares between its studies: the budget, the seeds, the output
folder and its cache, and the training runs (a sweep of ``fpsim.sweep``: trained once,
in parallel, and cached)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fpsim._checks import output_folder
from fpsim._device import as_device, gpu_module
from fpsim.reproduce.ablations import ABLATIONS, ablation
from fpsim.reproduce.tasks import TASKS, task
from fpsim.sweep import Cache, Run, as_executor, train_missing
from fpsim.sweep.cache import digest
from fpsim.sweep.cluster import DaskExecutor
from fpsim.sweep.provenance import identity
from fpsim.sweep.task import gpu_identity

RunSpec = tuple[str, str, int]  # (task, policy, seed)

def study_code(name: str) -> str:
    """A digest of the source of study ``name`` (a module of ``fpsim.experiments``)."""
    module = importlib.import_module(f"fpsim.experiments.{name}")
    return digest(Path(module.__file__).read_bytes())  # type: ignore[arg-type]  # a file


def run_of(spec: RunSpec, budget: str, device: str = "cpu") -> Run:
    """The sweep run of a (task, policy, seed) spec at ``budget`` on ``device``."""
    task_name, policy, seed = spec
    return Run(task(task_name).for_sweep(budget, device), ablation(policy), seed)


@dataclass
class Session:
    """``budget``: "quick", "full" or "gpu"; ``seeds``: how many; ``tasks``/``policies``:
    which; ``executor``: None (``jobs`` local processes), a Dask scheduler address,
    ``local:N`` or an executor (see ``fpsim.sweep.as_executor``); ``device``: where the
    sweep's runs train ("cpu" or "cuda")."""

    out: Path
    budget: str = "quick"
    seeds: int = 2
    tasks: tuple[str, ...] = tuple(TASKS)
    policies: tuple[str, ...] = tuple(ABLATIONS)
    jobs: int = 1
    stream: Any = None
    executor: Any = None
    device: str = "cpu"
    cache: Cache = field(init=False)

    def __post_init__(self) -> None:
        # Every argument is checked (a missing Dask included) before the folder is made.
        self.device = as_device(self.device)
        if self.device == "cuda":
            gpu_module()  # no usable GPU: the error now
        for name in self.tasks:
            task(name).budget(self.budget)
        for name in self.policies:
            ablation(name)
        if self.seeds < 1:
            raise ValueError(f"seeds must be at least 1, got {self.seeds}")
        if self.jobs < 1:
            raise ValueError(f"jobs must be at least 1, got {self.jobs}")
        self.executor = as_executor(self.executor, self.jobs)
        if isinstance(self.executor, DaskExecutor) and isinstance(self.executor.scheduler, str):
            self.executor.client()  # unreachable: a ConnectionError, before the folder is made
        self.out = output_folder(self.out)
        self.cache = Cache(self.out / "cache")

    def specs(self, tasks: Iterable[str] | None = None, policies: Iterable[str] | None = None,
              seeds: int | None = None) -> list[RunSpec]:
        """The runs over the session's tasks and policies (or those of them named)."""
        tasks = [t for t in (tasks or self.tasks) if t in self.tasks]
        policies = [p for p in (policies or self.policies) if p in self.policies]
        return [(t, p, s) for t in tasks for p in policies for s in range(seeds or self.seeds)]

    def cached_run(self, spec: RunSpec) -> dict | None:
        """The cached record of ``spec``, or None."""
        run = run_of(spec, self.budget, self.device)
        return self.cache.load("runs", run.config(), run.label)

    def ensure(self, specs: Iterable[RunSpec]) -> None:
        """Train the runs of ``specs`` that are not cached yet, on the session's executor.

        Raises
        ------
        RuntimeError
            When a run raised (after the others finished), with its traceback.
        """
        runs = [run_of(spec, self.budget, self.device) for spec in dict.fromkeys(specs)]
        _, failures = train_missing(self.cache, runs, self.executor, self.stream)
        if failures:
            first = failures[0]
            raise RuntimeError(f"{len(failures)} run(s) failed; the first, "
                               f"{first['task']}-{first['policy']}-seed{first['seed']}:\n"
                               f"{first['error']}")

    def runs(self, specs: Iterable[RunSpec]) -> list[dict]:
        """The records of ``specs``, trained first where not cached."""
        specs = list(specs)
        records = [self.cached_run(s) for s in specs]
        if None in records:  # (all cached: no second "from the cache" line per study)
            self.ensure([s for s, r in zip(specs, records, strict=True) if r is None])
            records = [self.cached_run(s) for s in specs]
        return records  # type: ignore[return-value]  # ensure() cached them

    def cached(self, study: str, config: dict, compute: Callable[[], dict]) -> dict:
        """A study's own computation, cached under ``config`` plus the budget, NumPy's
        version, digests of fpsim's and the study's source (an edit recomputes) and,
        off the cpu, the device and GPU."""
        config = dict(config, **identity(), study=study, study_code=study_code(study),
                      budget=self.budget)
        if self.device != "cpu":  # its training ran there
            config.update(device=self.device, gpu=gpu_identity())
        result = self.cache.load("studies", config, study)
        if result is None:
            result = compute()
            self.cache.save("studies", config, result, study)
        return result
