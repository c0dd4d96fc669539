"""What a reproduction shares between its studies: the budget, the seeds, the output
folder and its cache, and the training runs (trained once, in parallel, and cached)."""

from __future__ import annotations

import concurrent.futures as futures
import functools
import importlib
import multiprocessing
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from fpsim._checks import output_folder
from fpsim.reproduce.ablations import ABLATIONS, ablation
from fpsim.reproduce.cache import Cache, digest
from fpsim.reproduce.progress import Progress
from fpsim.reproduce.tasks import TASKS, task

RunSpec = tuple[str, str, int]  # (task, policy, seed)

# Every worker process computes on one thread: parallelism comes from the processes,
# and BLAS threads spinning beside them would slow every one down.
_ONE_THREAD = {name: "1" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                      "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")}


def version() -> str:
    from fpsim import __version__

    return __version__


@functools.lru_cache(maxsize=1)
def package_code() -> str:
    """A digest of fpsim's own source: results cached by another fpsim are not reused."""
    import fpsim

    root = Path(fpsim.__file__).parent
    return digest(*(part for path in sorted(root.rglob("*.py"))
                    for part in (path.relative_to(root).as_posix().encode(),
                                 path.read_bytes())))


def study_code(name: str) -> str:
    """A digest of the source of study ``name`` (a module of ``fpsim.experiments``)."""
    module = importlib.import_module(f"fpsim.experiments.{name}")
    return digest(Path(module.__file__).read_bytes())


def provenance() -> dict:
    """What every cached result also depends on: fpsim's version and source, NumPy."""
    return dict(version=version(), code=package_code(), numpy=np.__version__)


def run_config(spec: RunSpec, budget: str) -> dict:
    """Everything that determines a run's result: its cache key."""
    task_name, policy, seed = spec
    return dict(provenance(), seed=seed, **task(task_name).config(budget),
                **ablation(policy).config())


def _label(spec: RunSpec) -> str:
    return f"{spec[0]}-{spec[1]}-seed{spec[2]}"


def train_and_cache(root: str, spec: RunSpec, budget: str, progress=None) -> dict:
    """Train one run and store it in the cache under ``root`` (a worker's job)."""
    from fpsim.reproduce.runs import train

    record = train(task(spec[0]), ablation(spec[1]), spec[2], budget, progress=progress)
    Cache(root).save("runs", run_config(spec, budget), record, _label(spec))
    return record


@contextmanager
def one_thread() -> Iterator[None]:
    """Within: this process's BLAS and Numba compute on one thread (restored after)."""
    import numba
    from threadpoolctl import threadpool_limits

    # Numba reads NUMBA_NUM_THREADS once; writing it into a running process's
    # environment makes its next compilation fail, so use the runtime setting.
    before = numba.get_num_threads()
    with threadpool_limits(1):
        numba.set_num_threads(1)
        try:
            yield
        finally:
            numba.set_num_threads(before)


@dataclass
class Session:
    """``budget``: "quick" or "full"; ``seeds``: how many; ``tasks``/``policies``: which."""

    out: Path
    budget: str = "quick"
    seeds: int = 2
    tasks: tuple[str, ...] = tuple(TASKS)
    policies: tuple[str, ...] = tuple(ABLATIONS)
    jobs: int = 1
    stream: object = None
    cache: Cache = field(init=False)

    def __post_init__(self) -> None:
        self.out = output_folder(self.out)
        for name in self.tasks:
            task(name).budget(self.budget)
        for name in self.policies:
            ablation(name)
        if self.seeds < 1:
            raise ValueError(f"seeds must be at least 1, got {self.seeds}")
        if self.jobs < 1:
            raise ValueError(f"jobs must be at least 1, got {self.jobs}")
        self.cache = Cache(self.out / "cache")

    def specs(self, tasks: Iterable[str] | None = None, policies: Iterable[str] | None = None,
              seeds: int | None = None) -> list[RunSpec]:
        """The runs over the session's tasks and policies (or those of them named)."""
        tasks = [t for t in (tasks or self.tasks) if t in self.tasks]
        policies = [p for p in (policies or self.policies) if p in self.policies]
        return [(t, p, s) for t in tasks for p in policies for s in range(seeds or self.seeds)]

    def cached_run(self, spec: RunSpec) -> dict | None:
        return self.cache.load("runs", run_config(spec, self.budget), _label(spec))

    def ensure(self, specs: Iterable[RunSpec]) -> None:
        """Train the runs of ``specs`` that are not cached yet (``jobs`` at a time)."""
        missing = list(dict.fromkeys(s for s in specs if self.cached_run(s) is None))
        if not missing:
            return
        bar = Progress(len(missing), "training runs", self.stream)
        bar.update(0, "(cached runs are reused)")
        root = str(self.cache.root)
        if self.jobs == 1:
            for spec in missing:
                note = f"{_label(spec)} step {{}}/{task(spec[0]).budget(self.budget).steps}"
                train_and_cache(root, spec, self.budget,
                                progress=lambda step, note=note: bar.update(bar.done,
                                                                            note.format(step)))
                bar.advance(_label(spec))
            return
        context = multiprocessing.get_context("spawn")
        saved = {k: os.environ.get(k) for k in _ONE_THREAD}
        os.environ.update(_ONE_THREAD)  # read by the workers' Numba and BLAS as they start
        try:
            with futures.ProcessPoolExecutor(self.jobs, mp_context=context) as pool:
                pending = {pool.submit(train_and_cache, root, s, self.budget): s
                           for s in missing}
                try:
                    for done in futures.as_completed(pending):
                        done.result()
                        bar.advance(_label(pending[done]))
                except BaseException:
                    # Ctrl-C or a failed run: start no queued run (finished ones stay cached).
                    pool.shutdown(wait=False, cancel_futures=True)
                    raise
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    def runs(self, specs: Iterable[RunSpec]) -> list[dict]:
        """The records of ``specs``, trained first where not cached."""
        specs = list(specs)
        self.ensure(specs)
        return [self.cached_run(s) for s in specs]

    def cached(self, study: str, config: dict, compute: Callable[[], dict]) -> dict:
        """A study's own computation, cached under ``config`` plus the budget, NumPy's
        version and digests of fpsim's and the study's source (an edit recomputes)."""
        config = dict(config, **provenance(), study=study, study_code=study_code(study),
                      budget=self.budget)
        result = self.cache.load("studies", config, study)
        if result is None:
            result = compute()
            self.cache.save("studies", config, result, study)
        return result
