"""Statistics over seeds: mean ± spread of the final metric, and whether one ablation is
worse than another beyond seed noise (the verdicts of a sweep and of the studies)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from fpsim.sweep.records import Record

# A difference "clearly beyond seed noise" exceeds this many seed-to-seed spreads.
NOISE_FACTOR = 3.0
"""A difference "clearly beyond seed noise" exceeds this many seed-to-seed spreads."""


def summary(runs: list[Record], task: str, policy: str) -> dict[str, Any]:
    """Mean and spread (sample standard deviation) of the final metric over seeds.

    Parameters
    ----------
    runs : list of dict
        Run records; those of other tasks and policies are left out, and so are failed
        runs (they have no outcome).
    task, policy : str
        Which runs to summarise.

    Returns
    -------
    dict
        ``task``, ``policy``, ``seeds``, ``diverged`` (counted apart from the rest),
        ``mean``, ``spread``, ``min``, ``max`` (None where there is no value).

    Examples
    --------
    >>> runs = [dict(task="t", policy="p", seed=s, value=v, diverged=False)
    ...         for s, v in ((0, 90.0), (1, 92.0))]
    >>> row = summary(runs, "t", "p")
    >>> row["seeds"], row["mean"], round(row["spread"], 4)
    (2, 91.0, 1.4142)
    """
    chosen = [r for r in runs if r["task"] == task and r["policy"] == policy
              and not r.get("failed")]
    values = [r["value"] for r in chosen if not r["diverged"]]
    return dict(
        task=task, policy=policy, seeds=len(chosen), diverged=len(chosen) - len(values),
        mean=float(np.mean(values)) if values else None,
        spread=float(np.std(values, ddof=1)) if len(values) > 1 else None,
        min=min(values) if values else None, max=max(values) if values else None,
    )


def compare(a: dict[str, Any], b: dict[str, Any], higher_is_better: bool) -> dict[str, Any]:
    """How much worse ``a`` is than ``b`` (two summaries), in units of seed spread.

    ``worse_by``: the difference of the means of the runs that did not diverge,
    positive when ``a`` is worse; ``spreads``: that over the larger of the two
    spreads. ``verdict``: "worse" (beyond NOISE_FACTOR spreads), "better", "within
    noise", "unknown" (fewer than two seeds each), or "worse (k of n diverged)" when
    runs of ``a`` diverged, none of ``b`` did, and every run of ``a`` that finished is
    worse than ``b``'s mean by more than NOISE_FACTOR of ``b``'s spreads (a diverged
    run counts as infinitely worse). Otherwise diverged runs are named beside the
    verdict on the finished ones: "within noise (1 of 3 diverged)".

    Parameters
    ----------
    a, b : dict
        Summaries (``summary``): the ablation judged, and its reference.
    higher_is_better : bool
        Whether a larger metric is better (accuracy) or worse (a loss).

    Returns
    -------
    dict
        ``worse_by``, ``spreads`` (None where unknown) and ``verdict``.

    Examples
    --------
    >>> base = dict(seeds=3, diverged=0, mean=91.0, spread=1.0, min=90.0, max=92.0)
    >>> compare(dict(base, mean=80.0), base, higher_is_better=True)["verdict"]
    'worse'
    >>> compare(dict(base, mean=90.5), base, higher_is_better=True)["verdict"]
    'within noise'
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


def summary_text(row: dict[str, Any]) -> str:
    """A summary (see ``summary``) as a table cell: mean ± spread, and diverged runs."""
    if row["mean"] is None:
        return "diverged" if row["diverged"] else "n/a"
    text = f"{row['mean']:.3f}"
    if row["spread"] is not None:
        text += f" ± {row['spread']:.3f}"
    if row["diverged"]:
        text += f" ({row['diverged']} of {row['seeds']} diverged; the rest)"
    return text


def comparison_cells(verdict: dict[str, Any]) -> list[str]:
    """A comparison (see ``compare``) as three table cells: worse by, in spreads, verdict
    (empty where there is none)."""
    worse, spreads = verdict.get("worse_by"), verdict.get("spreads")
    return ["" if worse is None else f"{worse:+.4f}",
            "" if spreads is None else f"{spreads:.1f}", verdict.get("verdict", "")]
