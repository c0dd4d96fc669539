"""Statistics over seeds: mean ± spread of the final metric over the runs that did not
diverge, and whether one ablation is worse than another beyond seed noise (the verdicts
of a sweep and of the studies)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from fpsim.sweep.records import Record

NOISE_FACTOR = 3.0
"""A difference "clearly beyond seed noise" exceeds this many seed-to-seed spreads."""

MIN_SEEDS = 3
"""The spread rule decides only with at least this many runs that did not diverge on each
side. The sample standard deviation of two runs has one degree of freedom: it comes out
below a quarter of the true spread one time in five (|z| < 0.25), which would turn seed
noise into "worse"; of three runs, one time in sixteen."""


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
        ``task``, ``policy``, ``seeds`` (runs that did not fail), ``diverged`` (how
        many of them diverged), and ``mean``, ``spread`` (sample standard deviation),
        ``min``, ``max`` over the runs that did not diverge (None where there is none).

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


def _spread_verdict(a: dict[str, Any], b: dict[str, Any], worse_by: float | None,
                    spreads: float | None) -> str:
    """The spread rule on the runs that did not diverge: worse, better, within noise, or
    undecided with fewer than MIN_SEEDS of them on either side."""
    counted = min(a["seeds"] - a["diverged"], b["seeds"] - b["diverged"])
    if counted < MIN_SEEDS or worse_by is None:
        what = "seed" if counted == 1 else "seeds"
        if a["diverged"] or b["diverged"]:
            what += " that did not diverge"
        return f"undecided: {counted} {what}, the spread rule needs {MIN_SEEDS}"
    if spreads is not None and spreads <= NOISE_FACTOR:
        return "within noise"
    return "worse" if worse_by > 0 else "better"


def compare(a: dict[str, Any], b: dict[str, Any], higher_is_better: bool) -> dict[str, Any]:
    """How much worse ``a`` is than ``b`` (two summaries), in units of seed spread.

    The rule: diverged runs (``fpsim.sweep.divergence``) are counted apart and never
    enter a mean or a spread. When runs of ``a`` diverged, the verdict is "diverged in k
    of n", followed by the spread rule's verdict on the others when it can decide
    ("diverged in 1 of 4; the other 3: within noise"). Otherwise it is the spread rule's:
    "worse" or "better" when the means of the runs that did not diverge differ by more
    than NOISE_FACTOR times the larger of the two spreads (sample standard deviations),
    "within noise" when not, and "undecided: 2 seeds, the spread rule needs 3" when
    either side has fewer than MIN_SEEDS runs that did not diverge. Diverged runs of the
    reference are named after the verdict: "(reference: diverged in 1 of 3)".

    Parameters
    ----------
    a, b : dict
        Summaries (``summary``): the ablation judged, and its reference.
    higher_is_better : bool
        Whether a larger metric is better (accuracy) or worse (a loss).

    Returns
    -------
    dict
        ``worse_by`` (the difference of the means of the runs that did not diverge,
        positive when ``a`` is worse), ``spreads`` (that over the larger spread; both
        None where unknown) and ``verdict``.

    Examples
    --------
    >>> base = dict(seeds=3, diverged=0, mean=91.0, spread=1.0, min=90.0, max=92.0)
    >>> compare(dict(base, mean=80.0), base, higher_is_better=True)["verdict"]
    'worse'
    >>> compare(dict(base, mean=90.5), base, higher_is_better=True)["verdict"]
    'within noise'
    >>> compare(dict(base, seeds=2, diverged=1, spread=None), base, True)["verdict"]
    'diverged in 1 of 2'
    >>> compare(dict(base, seeds=2), dict(base, seeds=2), True)["verdict"]
    'undecided: 2 seeds, the spread rule needs 3'
    """
    worse_by = spreads = None
    if a["mean"] is not None and b["mean"] is not None:
        worse_by = (b["mean"] - a["mean"]) if higher_is_better else (a["mean"] - b["mean"])
    if worse_by is not None and a["spread"] is not None and b["spread"] is not None:
        spread = max(a["spread"], b["spread"])
        spreads = (abs(worse_by) / spread if spread > 0
                   else (0.0 if worse_by == 0 else math.inf))
    verdict = _spread_verdict(a, b, worse_by, spreads)
    if a["diverged"]:
        rest = a["seeds"] - a["diverged"]
        judged = "" if verdict.startswith("undecided") else f"; the other {rest}: {verdict}"
        verdict = f"diverged in {a['diverged']} of {a['seeds']}{judged}"
    if b["diverged"]:
        verdict += f" (reference: diverged in {b['diverged']} of {b['seeds']})"
    return dict(worse_by=worse_by,
                spreads=None if spreads is None or math.isinf(spreads) else spreads,
                verdict=verdict)


def summary_text(row: dict[str, Any]) -> str:
    """A summary (see ``summary``) as a table cell: mean ± spread of the runs that did not
    diverge, and how many did.

    Parameters
    ----------
    row : dict
        A summary.

    Returns
    -------
    str

    Examples
    --------
    >>> summary_text(dict(seeds=3, diverged=0, mean=97.1, spread=0.2))
    '97.100 ± 0.200'
    >>> summary_text(dict(seeds=3, diverged=1, mean=40.3, spread=0.1))
    '1 of 3 diverged; the other 2: 40.300 ± 0.100'
    >>> summary_text(dict(seeds=2, diverged=2, mean=None, spread=None))
    '2 of 2 diverged'
    """
    if row["mean"] is None:
        return f"{row['diverged']} of {row['seeds']} diverged" if row["diverged"] else "n/a"
    text = f"{row['mean']:.3f}"
    if row["spread"] is not None:
        text += f" ± {row['spread']:.3f}"
    if row["diverged"]:
        rest = row["seeds"] - row["diverged"]
        other = "the other" if rest == 1 else f"the other {rest}"
        text = f"{row['diverged']} of {row['seeds']} diverged; {other}: {text}"
    return text


def comparison_cells(verdict: dict[str, Any]) -> list[str]:
    """A comparison (see ``compare``) as three table cells: worse by, in spreads, verdict
    (empty where there is none)."""
    worse, spreads = verdict.get("worse_by"), verdict.get("spreads")
    return ["" if worse is None else f"{worse:+.4f}",
            "" if spreads is None else f"{spreads:.1f}", verdict.get("verdict", "")]
