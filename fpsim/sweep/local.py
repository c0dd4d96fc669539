"""The local executor: runs in this process, or in worker processes on this machine."""

from __future__ import annotations

import concurrent.futures as futures
import multiprocessing
import os
import signal
from collections.abc import Callable, Generator, Sequence

from fpsim._checks import integer
from fpsim.sweep.run import Outcome, Run, execute

# Every worker process computes on one thread: parallelism comes from the processes.
# The workers' Numba and BLAS read these as they start.
ONE_THREAD = {name: "1" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                     "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")}


def _ignore_interrupts() -> None:
    """A worker process's start: SIGINT (Ctrl-C to the terminal's process group) is
    ignored, so that the process that started it decides what happens to the runs."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _stop(pool: futures.ProcessPoolExecutor) -> None:
    """Kill ``pool``'s worker processes at once and wait for its books to close: the
    futures that had finished keep their results, the others are cancelled or failed."""
    for process in list((pool._processes or {}).values()):  # no public way before 3.14
        process.kill()
    pool.shutdown(wait=True, cancel_futures=True)


def default_jobs() -> int:
    """The default number of worker processes: the CPUs, at most 4."""
    return min(os.cpu_count() or 1, 4)


class LocalExecutor:
    """Runs ``jobs`` at a time in spawned worker processes (``jobs=1``: in this process,
    with a progress note on every step).

    Parameters
    ----------
    jobs : int, optional
        Worker processes; the CPUs, at most 4, by default.

    Raises
    ------
    ValueError
        When ``jobs`` is not an integer of at least 1.

    Examples
    --------
    >>> LocalExecutor(2).jobs
    2
    """

    def __init__(self, jobs: int | None = None):
        self.jobs = default_jobs() if jobs is None else integer(jobs, "jobs", 1)

    def __repr__(self) -> str:
        return f"LocalExecutor(jobs={self.jobs})"

    def results(self, runs: Sequence[Run],
                on_step: Callable[[Run, int], None] | None = None,
                ) -> Generator[tuple[Run, Outcome], None, None]:
        """Compute ``runs``, yielding ``(run, outcome)`` (see ``execute``) as each finishes.

        Worker processes ignore SIGINT: Ctrl-C reaches this process alone. An exception
        raised here or thrown in at a ``yield`` (Ctrl-C) kills the workers, so that no
        run goes on, then yields the runs that had finished and raises it again; closing
        the iterator kills them too.
        """
        if self.jobs == 1:
            for run in runs:
                step = None if on_step is None else (lambda s, run=run: on_step(run, s))
                yield run, execute(run, step)
            return
        context = multiprocessing.get_context("spawn")
        saved = {k: os.environ.get(k) for k in ONE_THREAD}
        os.environ.update(ONE_THREAD)
        pool = futures.ProcessPoolExecutor(self.jobs, mp_context=context,
                                           initializer=_ignore_interrupts)
        try:
            pending = {pool.submit(execute, run): run for run in runs}
            try:
                for done in futures.as_completed(pending):
                    yield pending.pop(done), done.result()
            except BaseException as exc:  # Ctrl-C, a closed iterator, a broken pool
                _stop(pool)
                if not isinstance(exc, GeneratorExit):
                    for done, run in pending.items():
                        if done.done() and not done.cancelled() and done.exception() is None:
                            yield run, done.result()
                raise
        finally:
            pool.shutdown()
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    def close(self) -> None:
        """Nothing to release: the worker processes live as long as one sweep."""
