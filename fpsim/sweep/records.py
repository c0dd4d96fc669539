"""Run records, the ``runs`` of ``results.json``: their schema and its check, and the
record of a run that failed (raised) instead of finishing."""

from __future__ import annotations

import math
from typing import Any, TypeAlias

# Every run record has these keys (and may have more: diverged_at, divergence, skipped_steps,
# start_loss, chance, ...). A diverged run says why in ``divergence``; one that stopped
# early has value null, one labelled diverged after its last step keeps its final metric.
RUN_KEYS = ("task", "policy", "seed", "metric", "value", "diverged", "steps", "curve")
CURVE_KEYS = ("step", "loss", "metric", "loss_scale", "skipped", "absorbed", "flushed")
# A run record: JSON, as results.json holds it.
Record: TypeAlias = dict[str, Any]


def _number_or_none(value: object) -> bool:
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)
                             and math.isfinite(value))


def failed(task: str, policy: str, seed: int, metric: str, error: str) -> Record:
    """The record of a run that raised: no value, no curve, and the traceback.

    Parameters
    ----------
    task, policy : str
        The task's and the ablation's names.
    seed : int
        The run's seed.
    metric : str
        What the task measures.
    error : str
        The formatted traceback.

    Returns
    -------
    dict
        A record with ``failed`` true and ``error``; it passes ``check_run``.
    """
    return dict(task=task, policy=policy, seed=seed, metric=metric, value=None,
                diverged=False, diverged_at=None, divergence=None, steps=0, curve=[],
                failed=True, error=error)


def check_run(run: Record) -> None:
    """Check a run record against the schema.

    Parameters
    ----------
    run : dict
        A record as ``fpsim.sweep.train.train`` returns it, or a ``failed`` one.

    Raises
    ------
    ValueError
        Naming the first thing wrong with it.

    Examples
    --------
    >>> check_run({"task": "t"})
    Traceback (most recent call last):
    ValueError: run record lacks policy, seed, metric, value, diverged, steps, curve
    """
    missing = [k for k in RUN_KEYS if k not in run]
    if missing:
        raise ValueError(f"run record lacks {', '.join(missing)}")
    where = f"run {run['task']}/{run['policy']}/seed {run['seed']}"
    if not isinstance(run["seed"], int) or not isinstance(run["steps"], int):
        raise ValueError(f"{where}: seed and steps must be integers")
    if not isinstance(run["diverged"], bool):
        raise ValueError(f"{where}: diverged must be true or false")
    if run.get("failed"):
        if run["value"] is not None or run["diverged"] or not isinstance(run.get("error"), str):
            raise ValueError(f"{where}: a failed run has value null, is not diverged, and "
                             "has its error")
    elif not run["diverged"] and run["value"] is None:
        raise ValueError(f"{where}: a run that did not diverge has a number as its value")
    reason = run.get("divergence")
    said = isinstance(reason, str) and bool(reason.strip())
    if run["diverged"] != said or (reason is not None and not said):
        raise ValueError(f"{where}: a diverged run says why in divergence (a string), "
                         "any other has divergence null")
    if not all(_number_or_none(run.get(k)) for k in ("value", "start_loss", "chance")):
        raise ValueError(f"{where}: value, start_loss and chance must be finite numbers "
                         "or null")
    if not isinstance(run["curve"], list):
        raise ValueError(f"{where}: curve must be a list of points")
    for point in run["curve"]:
        absent = [k for k in CURVE_KEYS if k not in point]
        if absent:
            raise ValueError(f"{where}: curve point lacks {', '.join(absent)}")
        if not all(_number_or_none(point[k]) for k in CURVE_KEYS):
            raise ValueError(f"{where}: curve values must be finite numbers or null")
