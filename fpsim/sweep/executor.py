"""What an executor is (anything that computes runs and yields their outcomes as they
finish), and the executor that an argument names."""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from typing import Protocol, runtime_checkable

from fpsim.sweep.cluster import DaskExecutor
from fpsim.sweep.local import LocalExecutor
from fpsim.sweep.run import Outcome, Run


@runtime_checkable
class Executor(Protocol):
    """Computes runs: ``LocalExecutor``, ``DaskExecutor``, or one of your own."""

    def results(self, runs: Sequence[Run], on_step: Callable[[Run, int], None] | None = None,
                ) -> Generator[tuple[Run, Outcome], None, None]:
        """Compute ``runs`` (see ``fpsim.sweep.run.execute``), yielding ``(run, outcome)``
        as each finishes.

        A ``KeyboardInterrupt`` raised in it or thrown in at a ``yield`` (Ctrl-C) stops
        the runs not finished, yields those that had finished (the sweep caches them)
        and is raised again; closing the iterator stops the runs not finished.
        """
        ...

    def close(self) -> None:
        """Release what the executor started."""
        ...


def as_executor(executor: Executor | str | None = None, jobs: int | None = None) -> Executor:
    """The executor an argument names.

    Parameters
    ----------
    executor : None, str or Executor
        None: local worker processes (``jobs`` of them); a string: a Dask scheduler
        address or ``local:N`` (see ``fpsim.sweep.cluster.parse_scheduler``); an
        executor object as it is.
    jobs : int, optional
        The local executor's processes.

    Returns
    -------
    Executor

    Raises
    ------
    ValueError
        For anything else, or a malformed address.

    Examples
    --------
    >>> as_executor(None, 2)
    LocalExecutor(jobs=2)
    >>> as_executor("local:2")
    DaskExecutor('local:2')
    """
    if executor is None:
        return LocalExecutor(jobs)
    if isinstance(executor, str):
        return DaskExecutor(executor)
    if isinstance(executor, Executor):
        return executor
    raise ValueError(f"executor must be None, a scheduler address, 'local:N', or an "
                     f"executor object, got {executor!r}")
