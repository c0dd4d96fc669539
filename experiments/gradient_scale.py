"""Loss scaling as gradients shrink: each task trained without loss scaling while its
gradients are held in fp16 2**k times smaller than they are (as a mean loss over 2**k
times as many samples or tokens would make them; the optimizer still receives the true
gradient), beside mixed precision with its dynamic loss scale."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from fpsim.reproduce.ablations import shrunk
from fpsim.reproduce.figures import COLORS, save, subplots
from fpsim.reproduce.results import compare, comparison_cells, mean_curve, summary, summary_text
from fpsim.reproduce.session import Session
from fpsim.reproduce.tasks import task

NAME = "gradient_scale"
TITLE = "Loss scaling as gradients shrink"
# Gradients held 2**k times smaller, k < 0 (k = 0 is no_loss_scaling itself).
EXPONENTS = {"quick": (-4, -8), "full": (-2, -4, -6, -8), "gpu": (-2, -4, -6, -8)}


def _policies(session: Session) -> list[tuple[int, str]]:
    return [(0, "no_loss_scaling")] + [(k, shrunk(k).name) for k in EXPONENTS[session.budget]]


def needs(session: Session) -> list:
    if "no_loss_scaling" not in session.policies:
        return []
    names = ["mixed"] * ("mixed" in session.policies) + [p for _, p in _policies(session)]
    return [(t, p, s) for t in session.tasks for p in names for s in range(session.seeds)]


def _flushed(runs: list[dict]) -> float | None:
    means = mean_curve(runs, "flushed")["mean"]
    return float(np.mean(means)) if means else None


def run(session: Session) -> dict:
    runs = session.runs(needs(session))
    rows, reference = [], {}
    for t in session.tasks:
        mine = [r for r in runs if r["task"] == t]
        base = summary(mine, t, "mixed") if "mixed" in session.policies else None
        if base is not None:
            reference[t] = dict(base, flushed=_flushed([r for r in mine
                                                         if r["policy"] == "mixed"]))
        for k, p in _policies(session):
            if not any(r["policy"] == p for r in mine):
                continue
            row = dict(summary(mine, t, p), exponent=k,
                       flushed=_flushed([r for r in mine if r["policy"] == p]))
            if base is not None:
                row.update(compare(row, base, task(t).higher_is_better))
            rows.append(row)
    return dict(metrics={t: task(t).metric for t in session.tasks}, rows=rows,
                mixed=reference)


def figures(result: dict, out: Path) -> list[str]:
    tasks = [t for t in result["metrics"] if any(r["task"] == t for r in result["rows"])]
    if not tasks:
        return []
    fig, axes = subplots(len(tasks), rows=2)
    for i, t in enumerate(tasks):
        rows = [r for r in result["rows"] if r["task"] == t]
        top, bottom = axes[i], axes[len(tasks) + i]
        done = [r for r in rows if r["mean"] is not None]
        top.errorbar([r["exponent"] for r in done], [r["mean"] for r in done],
                     yerr=[r["spread"] or 0 for r in done], marker="o", capsize=3,
                     color=COLORS["no_loss_scaling"], label="no loss scaling")
        mixed = result["mixed"].get(t)
        if mixed and mixed["mean"] is not None:
            band = 3 * (mixed["spread"] or 0)
            top.axhline(mixed["mean"], color=COLORS["mixed"], label="mixed (dynamic scale)")
            top.axhspan(mixed["mean"] - band, mixed["mean"] + band, color=COLORS["mixed"],
                        alpha=0.15, label="mixed ± 3 spreads")
        for r in rows:
            if r["diverged"]:
                top.annotate(f"{r['diverged']} diverged", (r["exponent"], top.get_ylim()[1]),
                             ha="center", va="top", fontsize=7)
        top.set(title=t, xlabel="log2 of the gradients' scale", ylabel=result["metrics"][t])
        top.legend(fontsize=7)
        bottom.plot([r["exponent"] for r in rows], [r["flushed"] or 0 for r in rows],
                    marker="o", color=COLORS["no_loss_scaling"])
        bottom.set(title=f"{t}: gradients flushed to 0", xlabel="log2 of the gradients' scale",
                   ylabel="fraction (mean over training)")
        bottom.set_ylim(bottom=0)
    return [save(fig, out, "gradient_scale.png")]


def _percent(x: float | None) -> str:
    return "" if x is None or not math.isfinite(x) else f"{x:.2%}"


def markdown(result: dict, files: list[str]) -> str:
    lines = ["Each task without loss scaling, its gradients held in fp16 2^k times smaller "
             "than they are: the gradients a mean loss over 2^-k times as many samples or "
             "tokens would give. The weights receive the true gradient, so only what fp16 "
             "loses differs. *Flushed*: of the nonzero gradient values rounded to fp16 "
             "during backward, the fraction that became zero (mean over training). "
             "Verdicts against `mixed` (dynamic loss scale), as in the final-metric table.",
             "", "| task | gradients scaled by | metric | flushed | worse than mixed by | "
             "in spreads | verdict |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for t in result["metrics"]:
        m = result["mixed"].get(t)
        if m is not None:
            lines.append(f"| {t} | mixed (dynamic scale) | {summary_text(m)} | "
                         f"{_percent(m['flushed'])} | | | |")
        for r in (r for r in result["rows"] if r["task"] == t):
            lines.append(f"| {t} | 2^{r['exponent']} | {summary_text(r)} | "
                         f"{_percent(r['flushed'])} | " + " | ".join(comparison_cells(r)) + " |")
    if files:
        lines += ["", f"![gradient scale]({files[0]})"]
    return "\n".join(lines)


if __name__ == "__main__":
    import sys

    from fpsim.reproduce.command import main

    raise SystemExit(main(["--only", NAME, *sys.argv[1:]]))
