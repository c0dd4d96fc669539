"""One training run of a built-in task at a budget (``fpsim.sweep.train`` does the work)."""

from __future__ import annotations

from collections.abc import Callable

from fpsim.reproduce.tasks import Task
from fpsim.sweep.ablation import Ablation
from fpsim.sweep.train import train as train_task


def train(task: Task, ablation: Ablation, seed: int, budget: str = "quick", *,
          on_step: Callable | None = None, progress: Callable[[int], None] | None = None,
          device: str = "cpu") -> dict:
    """Train ``task`` at ``budget`` under ``ablation`` from ``seed``: its run record.

    Parameters
    ----------
    task : fpsim.reproduce.tasks.Task
        A built-in task.
    ablation : Ablation
        The training policy.
    seed : int
        The run's seed.
    budget : str
        ``"quick"``, ``"full"`` or ``"gpu"``.
    on_step, progress : callable, optional
        As ``fpsim.sweep.train`` calls them.
    device : {"cpu", "cuda"}
        Where it trains.

    Returns
    -------
    dict
        The run record (see ``fpsim.sweep.train``).
    """
    return train_task(task.for_sweep(budget, device), ablation, seed, on_step=on_step,
                      progress=progress)
