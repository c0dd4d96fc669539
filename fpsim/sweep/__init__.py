"""Ablation sweeps: your tasks × ablations × seeds, trained in parallel, cached and
resumable, on this machine or on a Dask distributed cluster (see ``docs/sweeps.md``).

A ``Task`` is your own code: ``build(seed)`` returns a ``Setup`` (model, optimizer,
batches, loss, evaluation). An ``Ablation`` is a named training policy; the paper's
seven are in ``ABLATIONS``. ``sweep`` gives back the run records (``results.json``'s
run schema), a table of mean ± spread over seeds, and verdicts against a reference.
Dask is imported only by the Dask executor.
"""

from fpsim.sweep.ablation import ABLATIONS, Ablation, ablation, shrunk
from fpsim.sweep.cache import Cache
from fpsim.sweep.cluster import DaskExecutor
from fpsim.sweep.engine import SweepResult, sweep, train_missing
from fpsim.sweep.executor import Executor, as_executor
from fpsim.sweep.local import LocalExecutor
from fpsim.sweep.provenance import ProvenanceMismatch, identity
from fpsim.sweep.records import check_run
from fpsim.sweep.run import Run
from fpsim.sweep.statistics import NOISE_FACTOR, compare, summary
from fpsim.sweep.task import Setup, Task
from fpsim.sweep.train import train

__all__ = [
    "ABLATIONS", "NOISE_FACTOR", "Ablation", "Cache", "DaskExecutor", "Executor", "LocalExecutor",
    "ProvenanceMismatch", "Run", "Setup", "SweepResult", "Task", "ablation", "as_executor",
    "check_run", "compare", "identity", "shrunk", "summary", "sweep", "train",
    "train_missing",
]
