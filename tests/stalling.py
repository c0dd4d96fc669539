"""A built-in digits task whose later seeds stall mid-run: what the interrupt tests train.

Each run writes marker files into the folder ``markers``: ``finished-<seed>`` when its
last evaluation is done (the run is then complete but for its record), and, for the
seeds from ``stall_from`` on, ``stalled-<seed>`` after its first batch. A stalled run
then waits for a file ``go`` in that folder (the test writes it as it sends SIGINT),
and goes on ``RESUME_SECONDS`` later: a worker that was not stopped at once finishes
it. Importable by the worker processes (the tests put this folder on ``PYTHONPATH``).
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from fpsim.reproduce import tasks
from fpsim.reproduce.tasks import Budget, DigitsTask
from fpsim.sweep import Setup

# A stalled run goes on this long after the signal: a stopped worker never gets there.
RESUME_SECONDS = 3.0
# The longest a stalled run waits for the signal.
STALL_SECONDS = 120.0


@dataclasses.dataclass(frozen=True)
class StallingDigits(DigitsTask):
    """``digits_mlp`` with marker files, whose runs from ``stall_from`` on stall."""

    stall_from: int = 2
    markers: str = ""

    def batches(self, seed: int) -> Iterator:
        stream = super().batches(seed)
        yield next(stream)
        if seed >= self.stall_from:
            folder = Path(self.markers)
            (folder / f"stalled-{seed}").write_text(str(os.getpid()))
            deadline = time.monotonic() + STALL_SECONDS
            while not (folder / "go").exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(RESUME_SECONDS)
        yield from stream

    def setup(self, seed: int) -> Setup:
        setup = super().setup(seed)
        budget = self.budgets["quick"]
        calls = itertools.count(1)
        last = -(-budget.steps // budget.eval_every)

        def evaluate(model, policy):
            value = setup.evaluate(model, policy)
            if next(calls) == last:
                Path(self.markers, f"finished-{seed}").write_text(str(os.getpid()))
            return value

        return dataclasses.replace(setup, evaluate=evaluate)


def stalling(markers: str, stall_from: int = 2) -> StallingDigits:
    """``digits_mlp`` cut to 4 steps, stalling from seed ``stall_from``."""
    t = tasks.TASKS["digits_mlp"]
    return StallingDigits(name=t.name, metric=t.metric, higher_is_better=t.higher_is_better,
                          budgets={"quick": Budget(4, 2)},
                          hyperparameters=dict(t.hyperparameters, hidden=8),
                          stall_from=stall_from, markers=markers)


def reproduce(markers: str, *argv: str) -> int:
    """``fpsim reproduce argv`` with ``digits_mlp`` replaced by the stalling task."""
    from fpsim.reproduce import command

    tasks.TASKS["digits_mlp"] = stalling(markers)
    return command.main(list(argv))


def sweep(markers: str, cache: str, executor: str, seeds: int) -> None:
    """``fpsim.sweep`` of the stalling task under fp32 on ``executor``."""
    from fpsim.sweep import sweep as run_sweep

    run_sweep(stalling(markers).for_sweep("quick"), ["fp32"], seeds, cache=cache,
              executor=executor)


if __name__ == "__main__":
    what, *rest = sys.argv[1:]
    if what == "reproduce":
        raise SystemExit(reproduce(*rest))
    sweep(rest[0], rest[1], rest[2], int(rest[3]))
