"""What each technique saves, measured over training: the fraction of weight updates
absorbed (lost to rounding) with and without an fp32 master copy, and the fraction of
gradient values flushed to zero in fp16 with and without loss scaling."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fpsim.reproduce.figures import COLORS, save, subplots
from fpsim.reproduce.results import mean_curve
from fpsim.reproduce.session import Session

NAME = "lost_updates"
TITLE = "Absorbed updates and flushed gradients over training"

PANELS = (
    ("absorbed", ("mixed", "no_master"), "updates absorbed"),
    ("flushed", ("mixed", "no_loss_scaling"), "gradients flushed to 0"),
)


def needs(session: Session) -> list:
    return session.specs(policies=("mixed", "no_master", "no_loss_scaling"))


def _over_training(runs: list[dict], key: str) -> dict:
    curve = mean_curve(runs, key)
    means = curve["mean"]
    return dict(step=curve["step"], mean=means,
                overall=float(np.mean(means)) if means else None,
                last=means[-1] if means else None)


def run(session: Session) -> dict:
    runs = session.runs(needs(session))
    out = {}
    for t in session.tasks:
        for key, policies, _ in PANELS:
            for p in policies:
                if p in session.policies:
                    chosen = [r for r in runs if r["task"] == t and r["policy"] == p]
                    out[f"{t}/{p}/{key}"] = dict(task=t, policy=p, quantity=key,
                                                 **_over_training(chosen, key))
    return dict(series=out)


def figures(result: dict, out: Path) -> list[str]:
    tasks = list(dict.fromkeys(s["task"] for s in result["series"].values()))
    if not tasks:
        return []
    fig, axes = subplots(len(tasks), rows=len(PANELS))
    for i, t in enumerate(tasks):
        for j, (key, policies, what) in enumerate(PANELS):
            ax = axes[j * len(tasks) + i]
            for p in policies:
                s = result["series"].get(f"{t}/{p}/{key}")
                if s and s["step"]:
                    ax.plot(s["step"], s["mean"], label=p, color=COLORS.get(p))
            ax.set(title=f"{t}: {what}", xlabel="step", ylabel="fraction")
            ax.set_ylim(bottom=0)
            ax.legend(fontsize=7)
    return [save(fig, out, "lost_updates.png")]


def markdown(result: dict, files: list[str]) -> str:
    lines = ["*Absorbed*: of the nonzero weight updates, the fraction that left the weight "
             "unchanged (the update rounds to zero, or w - u rounds back to w). *Flushed*: of "
             "the nonzero gradient values rounded to fp16 during backward (at the loss scale), "
             "the fraction that became zero; measured on every fifth step. Means over seeds.",
             "", "| task | quantity | policy | mean over training | at the end |",
             "| --- | --- | --- | --- | --- |"]
    for s in result["series"].values():
        if s["overall"] is None:
            continue
        lines.append(f"| {s['task']} | {s['quantity']} | {s['policy']} | "
                     f"{s['overall']:.2%} | {s['last']:.2%} |")
    if files:
        lines += ["", f"![lost updates]({files[0]})"]
    return "\n".join(lines)


if __name__ == "__main__":
    import sys

    from fpsim.reproduce.command import main

    raise SystemExit(main(["--only", NAME, *sys.argv[1:]]))
