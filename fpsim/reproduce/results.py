"""The results document (``results.json``): its schema, checks, and the statistics over
seeds that the table and the verdicts use."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

# Every run record has these keys (and may have more: diverged_at, skipped_steps, ...).
RUN_KEYS = ("task", "policy", "seed", "metric", "value", "diverged", "steps", "curve")
CURVE_KEYS = ("step", "loss", "metric", "loss_scale", "skipped", "absorbed", "flushed")

# A difference "clearly beyond seed noise" exceeds this many seed-to-seed spreads.
NOISE_FACTOR = 3.0


def _number_or_none(value) -> bool:
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)
                             and math.isfinite(value))


def check_run(run: dict) -> None:
    """Raise ValueError naming the first thing wrong with a run record."""
    missing = [k for k in RUN_KEYS if k not in run]
    if missing:
        raise ValueError(f"run record lacks {', '.join(missing)}")
    where = f"run {run['task']}/{run['policy']}/seed {run['seed']}"
    if not isinstance(run["seed"], int) or not isinstance(run["steps"], int):
        raise ValueError(f"{where}: seed and steps must be integers")
    if not isinstance(run["diverged"], bool):
        raise ValueError(f"{where}: diverged must be true or false")
    if run["diverged"] != (run["value"] is None):
        raise ValueError(f"{where}: a diverged run has value null, any other a number")
    if not _number_or_none(run["value"]):
        raise ValueError(f"{where}: value must be a finite number or null")
    if not isinstance(run["curve"], list):
        raise ValueError(f"{where}: curve must be a list of points")
    for point in run["curve"]:
        absent = [k for k in CURVE_KEYS if k not in point]
        if absent:
            raise ValueError(f"{where}: curve point lacks {', '.join(absent)}")
        if not all(_number_or_none(point[k]) for k in CURVE_KEYS):
            raise ValueError(f"{where}: curve values must be finite numbers or null")


def check_results(document: dict) -> None:
    """Raise ValueError unless ``document`` is a valid results.json document."""
    if not isinstance(document, dict) or not {"runs", "studies"} <= set(document):
        raise ValueError("results must be an object with 'runs' and 'studies'")
    if not isinstance(document["runs"], list) or not isinstance(document["studies"], dict):
        raise ValueError("'runs' must be a list and 'studies' an object")
    for run in document["runs"]:
        check_run(run)
    json.dumps(document, allow_nan=False)  # strict JSON: no NaN or infinity anywhere


def write(path: Path | str, document: dict) -> Path:
    """Check and write ``document`` as strict JSON."""
    check_results(document)
    path = Path(path)
    path.write_text(json.dumps(document, allow_nan=False, indent=1))
    return path


def mean_curve(runs: list[dict], key: str) -> dict:
    """The mean, minimum and maximum over ``runs`` of the curve value ``key`` at each
    step where any run has one (a diverged run stops early)."""
    at: dict[int, list[float]] = {}
    for r in runs:
        for point in r["curve"]:
            if point[key] is not None:
                at.setdefault(point["step"], []).append(point[key])
    steps = sorted(at)
    return dict(step=steps, mean=[float(np.mean(at[s])) for s in steps],
                min=[min(at[s]) for s in steps], max=[max(at[s]) for s in steps])


def summary(runs: list[dict], task: str, policy: str) -> dict:
    """Mean and spread (sample standard deviation) of the final metric over seeds;
    diverged runs are counted apart."""
    chosen = [r for r in runs if r["task"] == task and r["policy"] == policy]
    values = [r["value"] for r in chosen if not r["diverged"]]
    return dict(
        task=task, policy=policy, seeds=len(chosen), diverged=len(chosen) - len(values),
        mean=float(np.mean(values)) if values else None,
        spread=float(np.std(values, ddof=1)) if len(values) > 1 else None,
        min=min(values) if values else None, max=max(values) if values else None,
    )


def compare(a: dict, b: dict, higher_is_better: bool) -> dict:
    """How much worse ``a`` is than ``b`` (two summaries), in units of seed spread.

    ``worse_by``: the difference of the means of the runs that did not diverge,
    positive when ``a`` is worse; ``spreads``: that over the larger of the two
    spreads. ``verdict``: "worse" (beyond NOISE_FACTOR spreads), "better", "within
    noise", "unknown" (fewer than two seeds each), or "worse (k of n diverged)" when
    runs of ``a`` diverged, none of ``b`` did, and every run of ``a`` that finished is
    worse than ``b``'s mean by more than NOISE_FACTOR of ``b``'s spreads (a diverged
    run counts as infinitely worse). Otherwise diverged runs are named beside the
    verdict on the finished ones: "within noise (1 of 3 diverged)".
    """
    worse_by = spreads = None
    if a["mean"] is not None and b["mean"] is not None:
        worse_by = (b["mean"] - a["mean"]) if higher_is_better else (a["mean"] - b["mean"])
    if a["diverged"] and not b["diverged"] and b["mean"] is not None:
        margin = NOISE_FACTOR * (b["spread"] or 0.0)
        finished = [v for v in (a["min"], a["max"]) if v is not None]
        if all((b["mean"] - v if higher_is_better else v - b["mean"]) > margin
               for v in finished):
            return dict(worse_by=worse_by, spreads=None,
                        verdict=f"worse ({a['diverged']} of {a['seeds']} diverged)")
    diverged = "; ".join(f"{who}{x['diverged']} of {x['seeds']} diverged"
                         for x, who in ((a, ""), (b, "reference: ")) if x["diverged"])
    note = f" ({diverged})" if diverged else ""
    if worse_by is None or a["spread"] is None or b["spread"] is None:
        return dict(worse_by=worse_by, spreads=None, verdict="unknown" + note)
    spread = max(a["spread"], b["spread"])
    spreads = abs(worse_by) / spread if spread > 0 else (0.0 if worse_by == 0 else math.inf)
    if spreads > NOISE_FACTOR:
        verdict = "worse" if worse_by > 0 else "better"
    else:
        verdict = "within noise"
    return dict(worse_by=worse_by, spreads=None if math.isinf(spreads) else spreads,
                verdict=verdict + note)


def summary_text(row: dict) -> str:
    """A summary (see ``summary``) as a table cell: mean ± spread, and diverged runs."""
    if row["mean"] is None:
        return "diverged" if row["diverged"] else "n/a"
    text = f"{row['mean']:.3f}"
    if row["spread"] is not None:
        text += f" ± {row['spread']:.3f}"
    if row["diverged"]:
        text += f" ({row['diverged']} of {row['seeds']} diverged; the rest)"
    return text


def comparison_cells(verdict: dict) -> list[str]:
    """A comparison (see ``compare``) as three table cells: worse by, in spreads, verdict
    (empty where there is none)."""
    worse, spreads = verdict.get("worse_by"), verdict.get("spreads")
    return ["" if worse is None else f"{worse:+.4f}",
            "" if spreads is None else f"{spreads:.1f}", verdict.get("verdict", "")]
