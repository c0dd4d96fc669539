"""The Dask executor: runs on a Dask distributed cluster, or on a ``LocalCluster`` of
single-threaded worker processes (``local:N``).

Workers compute and return records; the client writes the cache, so no shared file
system is needed. Dask reschedules the runs of a worker that dies. Dask is imported
only here, and only when a sweep uses it (``pip install "fpsim[cluster]"``).
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Callable, Generator, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

from fpsim._optional import require
from fpsim.sweep.provenance import check_worker, identity
from fpsim.sweep.records import failed
from fpsim.sweep.run import Outcome, Run, execute

if TYPE_CHECKING:
    from distributed import Client, LocalCluster

# After a Ctrl-C, the worker processes of ``local:N`` get this long to stop (an idle
# one does), and are then killed with the run they compute.
STOP_SECONDS = 0.5
_LOCAL = re.compile(r"local:(.*)")
_ADDRESS = re.compile(r"(?:(?:tcp|tls|ucx|ws|wss)://)?[A-Za-z0-9_.\-]+:[0-9]{1,5}"
                      r"|(?:tcp|tls|ucx|ws|wss)://\[[0-9A-Fa-f:.]+\]:[0-9]{1,5}"
                      r"|inproc://\S+")


def _distributed() -> ModuleType:
    """Dask's ``distributed``, or ``MissingDependency`` naming ``fpsim[cluster]``."""
    return require("distributed", "training on a Dask cluster")


def parse_scheduler(address: str) -> str | int:
    """The number of workers of ``local:N``, or a scheduler address as it is.

    Parameters
    ----------
    address : str
        ``local:N`` (N single-threaded worker processes on this machine), or a Dask
        scheduler's address: ``tcp://host:8786``, ``host:8786``, ``tls://...``.

    Returns
    -------
    int or str

    Raises
    ------
    ValueError
        For anything else (``local:x``, ``local:0``, ``nowhere``).

    Examples
    --------
    >>> parse_scheduler("local:2"), parse_scheduler("tcp://10.0.0.5:8786")
    (2, 'tcp://10.0.0.5:8786')
    """
    if not isinstance(address, str):
        raise ValueError(f"a scheduler address must be a string, got {address!r}")
    local = _LOCAL.fullmatch(address)
    if local:
        if not re.fullmatch(r"[0-9]+", local.group(1)) or int(local.group(1)) < 1:
            raise ValueError(f"scheduler {address!r}: local:N needs N, the number of worker "
                             "processes, a positive integer")
        return int(local.group(1))
    if not _ADDRESS.fullmatch(address):
        raise ValueError(f"scheduler {address!r} is neither local:N nor a Dask scheduler "
                         "address such as tcp://host:8786")
    return address


class DaskExecutor:
    """Runs on a Dask distributed cluster.

    Parameters
    ----------
    scheduler : str or distributed.Client
        ``local:N`` (a ``LocalCluster`` of N single-threaded worker processes, started
        on first use and closed by ``close()``), a scheduler address, or a connected
        ``Client`` (left open by ``close()``).

    Raises
    ------
    ValueError
        For a malformed address (see ``parse_scheduler``).
    MissingDependency
        When Dask is not installed: ``pip install 'fpsim[cluster]'``.

    Examples
    --------
    >>> with DaskExecutor("local:2") as executor:          # doctest: +SKIP
    ...     result = fpsim.sweep.sweep(tasks, ["mixed"], 3, executor=executor)
    """

    def __init__(self, scheduler: str | Client) -> None:
        self._client: Client | None = None
        self._cluster: LocalCluster | None = None
        self._owned = True
        self._abandoned = False  # runs were left computing (Ctrl-C)
        self.scheduler: str | int
        if isinstance(scheduler, str):
            self.scheduler = parse_scheduler(scheduler)
            _distributed()  # missing: say so now, before anything is made
            return
        if not isinstance(scheduler, _distributed().Client):
            raise ValueError(f"a Dask executor takes a scheduler address or a Client, "
                             f"got {scheduler!r}")
        self.scheduler = scheduler.scheduler.address
        self._client = scheduler
        self._owned = False

    def __repr__(self) -> str:
        where = f"local:{self.scheduler}" if isinstance(self.scheduler, int) else self.scheduler
        return f"DaskExecutor({where!r})"

    def __enter__(self) -> DaskExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def client(self) -> Client:
        """The connected ``distributed.Client`` (started or connected on first use).

        Raises
        ------
        ConnectionError
            When the scheduler cannot be reached.
        """
        if self._client is not None:
            return self._client
        distributed = _distributed()
        if isinstance(self.scheduler, int):
            self._cluster = distributed.LocalCluster(
                n_workers=self.scheduler, threads_per_worker=1, processes=True,
                dashboard_address=":0")
            self._client = distributed.Client(self._cluster)
            self._client.wait_for_workers(self.scheduler)
        else:
            try:
                self._client = distributed.Client(self.scheduler, timeout="20s")
            except (OSError, TimeoutError) as exc:
                raise ConnectionError(f"cannot reach the Dask scheduler at {self.scheduler}: "
                                      f"{exc}") from None
        return self._client

    def check_workers(self) -> list[str]:
        """Refuse the cluster unless every worker's ``identity()`` is this process's.

        Returns
        -------
        list of str
            The workers' addresses.

        Raises
        ------
        ProvenanceMismatch
            Naming the first worker that differs and how.
        RuntimeError
            When the cluster has no worker.
        """
        reports = self.client().run(identity)
        if not reports:
            raise RuntimeError(f"the Dask scheduler at {self.scheduler} has no workers")
        for worker, theirs in sorted(reports.items()):
            check_worker(worker, theirs)
        return sorted(reports)

    def results(self, runs: Sequence[Run],
                on_step: Callable[[Run, int], None] | None = None,
                ) -> Generator[tuple[Run, Outcome], None, None]:
        """Compute ``runs`` on the cluster, yielding ``(run, outcome)`` as each finishes.

        The workers are checked first (``check_workers``). A run whose workers died
        too often (Dask's ``allowed-failures``) comes back as a failed record. A
        ``KeyboardInterrupt`` raised here or thrown in at a ``yield`` (Ctrl-C) cancels
        the runs not finished, yields those that had finished and is raised again;
        closing the iterator cancels them too. Dask cannot stop a run a worker has
        begun: ``close()`` stops the workers of ``local:N``. ``on_step`` is not called:
        workers report whole runs.
        """
        distributed = _distributed()
        if not runs:
            return
        client = self.client()
        self.check_workers()
        batch = uuid.uuid4().hex[:8]
        pending: dict[Any, tuple[Any, Run]] = {}
        for run in runs:
            future = client.submit(execute, run, key=f"fpsim-{run.label}-{batch}")
            pending[future.key] = (future, run)
        try:
            for future in distributed.as_completed([f for f, _ in pending.values()]):
                run = pending.pop(future.key)[1]
                yield run, _outcome(future, run)
        except BaseException as exc:  # Ctrl-C, or a closed iterator
            self._abandoned = True
            finished = [] if isinstance(exc, GeneratorExit) else [
                (run, _outcome(f, run)) for f, run in pending.values()
                if f.status == "finished"]
            client.cancel([f for f, _ in pending.values()])
            yield from finished
            raise

    def close(self) -> None:
        """Close the client and the ``LocalCluster`` this executor started; after a
        Ctrl-C, that cluster's worker processes are killed at once."""
        if self._client is not None and self._owned:
            self._client.close()
            self._client = None
        if self._cluster is not None:
            if self._abandoned:  # runs may be computing still: Dask would wait 4 s
                self._cluster.sync(_kill_workers, list(self._cluster.workers.values()))
            self._cluster.close()
            self._cluster = None


def _outcome(future: Any, run: Run) -> Outcome:
    """The outcome of ``run`` computed by ``future``; a failed record when Dask gave up
    on it (its workers died too often)."""
    try:
        outcome: Outcome = future.result()
    except Exception as exc:
        return Outcome(record=failed(run.task.name, run.ablation.name, run.seed,
                                     run.task.metric, f"{type(exc).__name__}: {exc}"),
                       identity=None)
    return outcome


async def _kill_workers(nannies: list[Any]) -> None:
    """Close the nannies of a ``LocalCluster``, each killing its worker process when it
    has not stopped within ``STOP_SECONDS`` (a worker whose thread computes a run does
    not stop)."""
    await asyncio.gather(*(nanny.close(timeout=STOP_SECONDS) for nanny in nannies),
                         return_exceptions=True)
