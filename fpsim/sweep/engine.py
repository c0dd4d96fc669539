"""Sweeps: tasks × ablations × seeds, each run trained once by an executor and cached
under its configuration; the records, their table over seeds and the verdicts."""

from __future__ import annotations

import inspect
import signal
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from fpsim._checks import integer, output_folder
from fpsim.sweep.ablation import Ablation, ablation
from fpsim.sweep.cache import Cache
from fpsim.sweep.executor import Executor, as_executor
from fpsim.sweep.progress import Progress
from fpsim.sweep.provenance import check_worker, package_code
from fpsim.sweep.records import Record
from fpsim.sweep.run import SEED_LIMIT, Outcome, Run
from fpsim.sweep.statistics import compare, comparison_cells, summary, summary_text
from fpsim.sweep.task import Task


def train_missing(cache: Cache, runs: Iterable[Run], executor: Executor,
                  stream: TextIO | None = None) -> tuple[list[str], list[Record]]:
    """Train the runs not in ``cache`` and store their records there.

    Parameters
    ----------
    cache : Cache
        Records are kept under ``cache.root / "runs"``.
    runs : iterable of Run
        Runs with the same label are trained once.
    executor : Executor
        Computes the runs; this process writes the cache.
    stream : file, optional
        Where progress goes (standard error by default), after a line saying how many
        runs came from the cache and how many are to train.

    Returns
    -------
    (list of str, list of dict)
        The labels of the runs trained, and the records of those that failed (raised:
        not cached, so a later sweep tries them again).

    Raises
    ------
    ProvenanceMismatch
        When a worker runs another fpsim or NumPy (nothing of it is cached).
    KeyboardInterrupt
        Ctrl-C: every run that had finished is cached, the executor stops the others
        (see ``Executor.results``).

    Examples
    --------
    >>> import io, tempfile
    >>> from dataclasses import replace
    >>> from fpsim.reproduce.tasks import task
    >>> from fpsim.sweep import Cache, LocalExecutor, Run, ablation
    >>> toy = replace(task("digits_mlp").for_sweep("quick"), steps=3, eval_every=3)
    >>> cache = Cache(tempfile.mkdtemp())
    >>> run = Run(toy, ablation("mixed"), 0)
    >>> train_missing(cache, [run, run], LocalExecutor(1), stream=io.StringIO())
    (['digits_mlp-mixed-seed0'], [])
    >>> train_missing(cache, [run], LocalExecutor(1), stream=io.StringIO())  # cached
    ([], [])
    """
    # The fpsim on disk now, which worker processes will import: not the one read when
    # this process first asked (a long-lived process may have seen the source change).
    package_code.cache_clear()
    unique = {run.label: run for run in runs}
    missing = [run for run in unique.values()
               if cache.load("runs", run.config(), run.label) is None]
    trained: list[str] = []
    failures: list[Record] = []
    bar = Progress(len(missing), "training runs", stream)
    cached = len(unique) - len(missing)
    bar.message(f"{cached} run{'' if cached == 1 else 's'} from the cache, "
                f"{len(missing)} to train")
    if not missing:
        return trained, failures
    bar.update(0)

    def on_step(run: Run, step: int) -> None:
        bar.update(bar.done, f"{run.label} step {step}/{run.task.steps}")

    def keep(run: Run, outcome: Outcome) -> None:
        record = outcome["record"]
        if record.get("failed"):
            failures.append(record)
            bar.message(f"{run.label} failed: {record['error'].strip().splitlines()[-1]}")
            bar.advance(f"{run.label} failed")
            return
        check_worker(f"computing {run.label}", outcome["identity"])
        cache.save("runs", run.config(), record, run.label)
        trained.append(run.label)
        bar.advance(run.label)

    outcomes = executor.results(missing, on_step)
    interrupted = thrown = False
    item: tuple[Run, Outcome] | None = None  # yielded, not kept yet
    try:
        while True:
            try:
                if item is None and interrupted and not thrown:
                    # The executor stops the runs, yields those that had finished and
                    # raises the interrupt again.
                    thrown = True
                    item = outcomes.throw(KeyboardInterrupt())
                elif item is None:
                    item = next(outcomes)
                with _held_interrupts() as held:
                    keep(*item)
                    item = None
                interrupted = interrupted or bool(held)
            except StopIteration:
                break
            except KeyboardInterrupt:
                # Raised here, between two runs, not in the executor (still suspended,
                # so it has not stopped the runs): keep the run in hand, then throw.
                if thrown or inspect.getgeneratorstate(outcomes) != inspect.GEN_SUSPENDED:
                    raise
                interrupted = True
    finally:
        outcomes.close()
    if interrupted:
        raise KeyboardInterrupt
    return trained, failures


@contextmanager
def _held_interrupts() -> Iterator[list[int]]:
    """Within: SIGINT is noted in the list given, not raised, so that a run being cached
    is cached whole (only in the main thread, and only under Python's own handler)."""
    held: list[int] = []
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        yield held
        return
    previous = signal.signal(signal.SIGINT, lambda number, frame: held.append(number))
    try:
        yield held
    finally:
        signal.signal(signal.SIGINT, previous)


@dataclass(frozen=True)
class SweepResult:
    """What a sweep gives back.

    Attributes
    ----------
    records : list of dict
        One run record per task × ablation × seed, in that order (``results.json``'s
        run schema); a run that raised has ``failed`` true and its ``error``.
    table : list of dict
        Per task and ablation: ``summary`` over the seeds (mean, spread, diverged,
        ...) and ``failed``, the runs that raised.
    verdicts : list of dict
        Per task and ablation other than the reference: ``compare`` against the
        reference: "diverged in k of n" when runs diverged, else worse or better
        beyond 3 spreads, within noise, or undecided with fewer than 3 seeds that did
        not diverge (``fpsim.sweep.statistics.compare``).
    reference : str
        The ablation the verdicts compare with.
    trained : list of str
        The runs this sweep trained; the others came from the cache.
    """

    records: list[Record]
    table: list[dict[str, Any]]
    verdicts: list[dict[str, Any]]
    reference: str
    trained: list[str] = field(default_factory=list)

    @property
    def failures(self) -> list[Record]:
        """The records of the runs that raised."""
        return [r for r in self.records if r.get("failed")]

    def markdown(self) -> str:
        """The table and the verdicts as a Markdown table."""
        verdicts = {(v["task"], v["policy"]): v for v in self.verdicts}
        lines = [f"| task | ablation | mean ± spread | against {self.reference}: worse by "
                 "| in spreads | verdict |", "| --- | --- | --- | --- | --- | --- |"]
        for row in self.table:
            cell = summary_text(row) + (f" ({row['failed']} failed)" if row["failed"] else "")
            v = verdicts.get((row["task"], row["policy"]), {})
            lines.append(f"| {row['task']} | {row['policy']} | {cell} | "
                         + " | ".join(comparison_cells(v)) + " |")
        return "\n".join(lines)


def _unique(names: Sequence[str], what: str) -> None:
    seen = set()
    for name in names:
        if name in seen:
            raise ValueError(f"two {what} are called {name!r}")
        seen.add(name)


def _seeds(seeds: int | Iterable[int]) -> list[int]:
    if isinstance(seeds, (int,)) and not isinstance(seeds, bool):
        return list(range(integer(seeds, "seeds", 1, SEED_LIMIT)))
    if isinstance(seeds, (str, bytes)) or not isinstance(seeds, Iterable):
        raise ValueError(f"seeds must be a count or a list of seeds, got {seeds!r}")
    chosen = [integer(s, "a seed", 0, SEED_LIMIT) for s in seeds]
    if not chosen:
        raise ValueError("seeds is empty")
    if len(set(chosen)) < len(chosen):
        raise ValueError(f"seeds repeat: {chosen}")
    return chosen


def sweep(tasks: Task | Sequence[Task], ablations: str | Ablation | Sequence[str | Ablation],
          seeds: int | Iterable[int], *, cache: Path | str = "fpsim-sweep",
          executor: Executor | str | None = None, jobs: int | None = None,
          reference: str | None = None, stream: TextIO | None = None) -> SweepResult:
    """Train every task under every ablation from every seed, reusing cached runs.

    Parameters
    ----------
    tasks : Task or list of Task
        The models to train (see ``Task``); names must differ.
    ablations : list of str or Ablation
        Preset names (``"mixed"``, ``"no_loss_scaling"``, ... see ``ABLATIONS``) or
        ``Ablation`` objects; names must differ.
    seeds : int or list of int
        How many seeds (0, 1, ...) or which (each in 0..2**32 - 1).
    cache : path
        The folder whose ``runs/`` holds one JSON file per run, keyed by a digest of
        everything that determines it: run the same sweep again after an
        interruption and it trains only the missing runs.
    executor : None, str or executor
        None: local worker processes; ``"local:N"`` or a Dask scheduler address: a
        Dask cluster (see ``fpsim.sweep.cluster``); or a ``LocalExecutor`` or
        ``DaskExecutor``, which the caller closes.
    jobs : int, optional
        Worker processes of the default local executor.
    reference : str, optional
        The ablation the verdicts compare with (the first one by default).
    stream : file, optional
        Where the progress bar goes (standard error by default).

    Returns
    -------
    SweepResult
        The records, the table of mean ± spread and the verdicts.

    Raises
    ------
    ValueError
        For a task that is not a ``Task``, an unknown ablation, duplicate names, bad
        seeds, an unknown reference or a malformed scheduler address.
    MissingDependency
        For a Dask executor without Dask installed (``pip install 'fpsim[cluster]'``);
        the cache folder is not made.
    ProvenanceMismatch
        When a Dask worker runs another fpsim or NumPy.
    KeyboardInterrupt
        Ctrl-C: every run that had finished is cached (run the same sweep again to
        go on), the workers are stopped.

    Examples
    --------
    A built-in task cut to 3 steps, under two ablations, 3 seeds each (a full
    example, with a model of your own, is in ``docs/sweeps.md``):

    >>> import io, tempfile
    >>> from dataclasses import replace
    >>> from fpsim.reproduce.tasks import task
    >>> toy = replace(task("digits_mlp").for_sweep("quick"), steps=3, eval_every=3)
    >>> result = sweep(toy, ["mixed", "no_loss_scaling"], seeds=3, cache=tempfile.mkdtemp(),
    ...                jobs=1, reference="mixed", stream=io.StringIO())
    >>> [(r["policy"], r["seed"]) for r in result.records][:4]
    [('mixed', 0), ('mixed', 1), ('mixed', 2), ('no_loss_scaling', 0)]
    >>> [(v["policy"], v["verdict"]) for v in result.verdicts]
    [('no_loss_scaling', 'within noise')]
    """
    if isinstance(tasks, Task):
        tasks = [tasks]
    if isinstance(tasks, str) or not isinstance(tasks, Iterable):
        raise ValueError(f"tasks must be fpsim.sweep.Task objects, got {tasks!r}")
    tasks = list(tasks)
    if not tasks:
        raise ValueError("a sweep needs at least one task")
    for t in tasks:
        if not isinstance(t, Task):
            raise ValueError(f"tasks must be fpsim.sweep.Task objects, got {t!r}")
    _unique([t.name for t in tasks], "tasks")
    if isinstance(ablations, (str, Ablation)):
        ablations = [ablations]
    chosen = [ablation(a) for a in ablations]
    if not chosen:
        raise ValueError("a sweep needs at least one ablation")
    _unique([a.name for a in chosen], "ablations")
    seed_list = _seeds(seeds)
    names = [a.name for a in chosen]
    reference = names[0] if reference is None else reference
    if reference not in names:
        raise ValueError(f"the reference {reference!r} is not one of the ablations "
                         f"{', '.join(names)}")
    owned = executor is None or isinstance(executor, str)
    executor = as_executor(executor, jobs)
    runs = [Run(t, a, s) for t in tasks for a in chosen for s in seed_list]
    try:
        store = Cache(output_folder(cache, "the cache folder"))
        trained, failures = train_missing(store, runs, executor, stream)
    finally:
        if owned:
            executor.close()
    failed = {(r["task"], r["policy"], r["seed"]): r for r in failures}
    records: list[Record] = []
    for r in runs:
        record = failed.get((r.task.name, r.ablation.name, r.seed)) or store.load(
            "runs", r.config(), r.label)
        if record is None:  # train_missing cached every run that did not fail
            raise RuntimeError(f"run {r.label} vanished from the cache {store.root}")
        records.append(record)
    table: list[dict[str, Any]] = []
    verdicts: list[dict[str, Any]] = []
    for t in tasks:
        rows = {}
        for a in names:
            rows[a] = dict(summary(records, t.name, a), failed=sum(
                1 for r in records if r["task"] == t.name and r["policy"] == a
                and r.get("failed")))
            table.append(rows[a])
        for a in names:
            if a != reference:
                verdicts.append(dict(task=t.name, policy=a, reference=reference,
                                     **compare(rows[a], rows[reference], t.higher_is_better)))
    return SweepResult(records, table, verdicts, reference, trained)

