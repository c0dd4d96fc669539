"""The results document (``results.json``): its checks, and the curves over seeds of the
studies (its run records and statistics are ``fpsim.sweep``'s, named here for them)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from fpsim.sweep.records import CURVE_KEYS, RUN_KEYS, check_run
from fpsim.sweep.statistics import (
    NOISE_FACTOR,
    compare,
    comparison_cells,
    summary,
    summary_text,
)

__all__ = ["CURVE_KEYS", "NOISE_FACTOR", "RUN_KEYS", "check_results", "check_run", "compare",
           "comparison_cells", "mean_curve", "summary", "summary_text", "write"]


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
