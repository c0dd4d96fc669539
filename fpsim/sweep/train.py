"""One training run: a task under an ablation from a seed, with its curve and what
happened to the numbers; a run whose values blow up is recorded as diverged (stopped
early, or labelled so after its last step by ``fpsim.sweep.divergence``)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from fpsim import _device
from fpsim.precision.policy import parse
from fpsim.sweep.ablation import Ablation
from fpsim.sweep.divergence import divergence
from fpsim.sweep.records import Record
from fpsim.sweep.task import Setup, Task
from fpsim.training import StepReport, Trainer

# A run has diverged when its loss stays non-finite this many steps in a row (a
# dynamic loss scale skips a few overflowing steps and recovers; this long, it has not).
NONFINITE_PATIENCE = 25
# Gradients are inspected (flushes counted) on every this many steps: it costs time.
MONITOR_EVERY = 5


def on_device(batch: Any, device: str) -> Any:
    """A batch's arrays (alone or in a tuple or list) copied to ``device``."""
    if isinstance(batch, (tuple, list)):
        return type(batch)(on_device(part, device) for part in batch)
    if isinstance(batch, np.ndarray) or _device.device_of(batch) != "cpu":
        return _device.transfer(batch, device)
    return batch


def all_finite(arrays: list[Any]) -> bool:
    """Whether every value of ``arrays`` is finite: one read of the device they are on."""
    if not arrays:
        return True
    xp = _device.array_module(arrays[0])
    return bool(xp.stack([xp.isfinite(a).all() for a in arrays]).all())


def _mean(values: list[float]) -> float | None:
    finite = [v for v in values if math.isfinite(v)]
    return float(np.mean(finite)) if finite else None


def _finite_or_none(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def train(task: Task, ablation: Ablation, seed: int, *,
          on_step: Callable[[int, Trainer, StepReport, Any], None] | None = None,
          progress: Callable[[int], None] | None = None) -> Record:
    """Train one run of ``task`` under ``ablation`` from ``seed``.

    Parameters
    ----------
    task : Task
        What to train (``task.build(seed)``) and for how long.
    ablation : Ablation
        The precision policy and the loss scale.
    seed : int
        Passed to ``task.build``.
    on_step : callable, optional
        ``on_step(step, trainer, report, batch)`` after every step (studies use it to
        look at gradients).
    progress : callable, optional
        ``progress(step)`` after every step.

    Returns
    -------
    dict
        The run record (see ``fpsim.sweep.records.RUN_KEYS``), with
        ``loss_scale_changes`` ([step, new scale] pairs), ``skipped_at`` (steps),
        ``seconds``, ``start_loss`` (step 1's loss, None if not finite) and ``chance``
        (the task's). A run whose values blow up is recorded as diverged: ``diverged``
        true, ``diverged_at`` the step, ``divergence`` why. One that stopped early has
        ``value`` None; one labelled after its last step (``fpsim.sweep.divergence``)
        keeps its final metric as ``value``.

    Examples
    --------
    >>> from dataclasses import replace
    >>> from fpsim.reproduce.tasks import task
    >>> from fpsim.sweep import ablation
    >>> toy = replace(task("digits_mlp").for_sweep("quick"), steps=3, eval_every=3)
    >>> record = train(toy, ablation("mixed"), seed=0)
    >>> record["steps"], record["diverged"], record["policy"]
    (3, False, 'mixed')
    """
    policy = ablation.precision()
    setup = task.build(seed)
    if not isinstance(setup, Setup):
        raise TypeError(f"task {task.name!r}: build({seed}) must return a Setup, "
                        f"got {type(setup).__name__}")
    model = setup.model
    batches: Iterable[Any] = setup.batches
    if task.device != "cpu":
        model.to(task.device)  # before the first step: the optimizer's state follows
        batches = (on_device(batch, task.device) for batch in batches)
    trainer = Trainer(model, setup.optimizer, policy, loss_scale=ablation.loss_scale,
                      clip_norm=task.clip_norm)
    if ablation.update is not None:  # a fresh policy: its stochastic stream starts anew
        setup.optimizer.policy = parse(ablation.update)
    curve: list[dict[str, Any]] = []
    scales: list[list[float]] = []  # [step, scale] where the loss scale changed
    skipped_at: list[int] = []
    window: list[StepReport] = []
    nonfinite = 0
    diverged_at = None
    reason = None
    start_loss = None
    start = time.perf_counter()
    step = 0
    with np.errstate(all="ignore"):
        for step, batch in zip(range(1, task.steps + 1), batches, strict=False):
            trainer.monitor = step % MONITOR_EVERY == 0
            report = trainer.step(lambda batch=batch: setup.loss(model, batch))  # type: ignore[misc]
            window.append(report)
            if not scales or scales[-1][1] != report.loss_scale:
                scales.append([step, float(report.loss_scale)])
            if report.skipped:
                skipped_at.append(step)
            if on_step is not None:
                on_step(step, trainer, report, batch)
            if step == 1:
                start_loss = _finite_or_none(report.loss)
            nonfinite = 0 if math.isfinite(report.loss) else nonfinite + 1
            if not all_finite([p.data for p in model.parameters()]):
                diverged_at, reason = step, "the weights are not finite"
            elif nonfinite >= NONFINITE_PATIENCE:
                diverged_at = step
                reason = f"the loss was not finite for {NONFINITE_PATIENCE} steps in a row"
            last = step == task.steps or diverged_at is not None
            if step % task.eval_every == 0 or last:
                metric = None if diverged_at else _finite_or_none(setup.evaluate(model, policy))
                if last and metric is None and diverged_at is None:
                    diverged_at, reason = step, "the final metric is not finite"
                curve.append(_point(step, window, metric))
                window = []
            if progress is not None:
                progress(step)
            if diverged_at is not None:
                break
    value = curve[-1]["metric"] if curve and diverged_at is None else None
    if diverged_at is None and curve:
        reason = divergence(curve[-1]["loss"], start_loss, value, task.chance,
                            task.higher_is_better)
        diverged_at = step if reason is not None else None
    return dict(
        task=task.name, policy=ablation.name, seed=seed, metric=task.metric, value=value,
        diverged=diverged_at is not None, diverged_at=diverged_at, divergence=reason,
        steps=step, skipped_steps=trainer.skipped,
        seconds=round(time.perf_counter() - start, 2), curve=curve,
        loss_scale_changes=scales, skipped_at=skipped_at, start_loss=start_loss,
        chance=task.chance,
    )


def _point(step: int, window: list[StepReport], metric: float | None) -> dict[str, Any]:
    """A curve point summarising the steps since the last one."""
    applied = [r for r in window if not r.skipped]
    return dict(
        step=step,
        loss=_mean([r.loss for r in window]),
        metric=metric,
        loss_scale=float(window[-1].loss_scale),
        skipped=sum(r.skipped for r in window),
        absorbed=_mean([r.absorbed_fraction for r in applied]),
        flushed=_mean([r.flushed_fraction for r in window]),  # NaN: not monitored
    )
