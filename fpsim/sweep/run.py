"""One run of a sweep: a task under an ablation from a seed; its cache key, and the job
that computes it in whatever process an executor chose."""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypedDict

from fpsim.sweep import provenance
from fpsim.sweep.ablation import Ablation
from fpsim.sweep.records import Record, failed
from fpsim.sweep.task import Task

# Seeds are at most 32 bits (NumPy's and fpsim's generators take them).
SEED_LIMIT = 2**32 - 1


class Outcome(TypedDict):
    """What an executor's job returns: the record, and who computed it."""

    record: Record
    identity: dict[str, str] | None


@dataclass(frozen=True)
class Run:
    """A task, an ablation and a seed: what determines one run record.

    Parameters
    ----------
    task : Task
        The task.
    ablation : Ablation
        The training policy.
    seed : int
        The seed ``task.build`` gets.
    """

    task: Task
    ablation: Ablation
    seed: int

    @property
    def label(self) -> str:
        """``task-ablation-seedN``: the run's name in progress lines and cache files."""
        return f"{self.task.name}-{self.ablation.name}-seed{self.seed}"

    def config(self) -> dict[str, Any]:
        """Everything that determines the run's record: its cache key.

        Returns
        -------
        dict
            fpsim's and NumPy's ``provenance.identity()``, the seed, ``Task.key()`` and
            ``Ablation.config()``.
        """
        return dict(provenance.identity(), seed=self.seed, **self.task.key(),
                    **self.ablation.config())


@contextmanager
def one_thread() -> Iterator[None]:
    """Within: this process's BLAS and Numba compute on one thread (restored after).

    Parallel runs come from processes; BLAS threads spinning beside them would slow
    every one down.
    """
    from threadpoolctl import threadpool_limits

    from fpsim.backends.numba_backend import numba_threads

    with threadpool_limits(1), numba_threads(1):
        yield


def execute(run: Run, progress: Callable[[int], None] | None = None) -> Outcome:
    """Train ``run`` on one thread: an executor's job, in a worker or in this process.

    Parameters
    ----------
    run : Run
        What to train.
    progress : callable, optional
        ``progress(step)`` after every step.

    Returns
    -------
    dict
        ``record``: the run record, or a ``failed`` record holding the traceback when
        the run raised; ``identity``: ``provenance.identity()`` of the process that
        computed it, which the client checks before caching the record.
    """
    from fpsim.sweep.train import train

    try:
        with one_thread():
            record = train(run.task, run.ablation, run.seed, progress=progress)
    except Exception:
        record = failed(run.task.name, run.ablation.name, run.seed, run.task.metric,
                        traceback.format_exc())
    return Outcome(record=record, identity=provenance.identity())
