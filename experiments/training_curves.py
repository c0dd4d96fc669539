"""Training curves per task and policy (the paper's figures 2a, 4 and 5): the training
loss and the held-out metric against steps, averaged over seeds."""

from __future__ import annotations

from pathlib import Path

from fpsim.reproduce.figures import COLORS, save, subplots
from fpsim.reproduce.results import mean_curve
from fpsim.reproduce.session import Session
from fpsim.reproduce.tasks import task

NAME = "training_curves"
TITLE = "Training curves"


def needs(session: Session) -> list:
    return session.specs()


def run(session: Session) -> dict:
    runs = session.runs(needs(session))
    curves = {}
    for t in session.tasks:
        for p in session.policies:
            chosen = [r for r in runs if r["task"] == t and r["policy"] == p]
            curves[f"{t}/{p}"] = dict(
                task=t, policy=p, loss=mean_curve(chosen, "loss"),
                metric=mean_curve(chosen, "metric"),
                diverged_at=[r["diverged_at"] for r in chosen if r["diverged"]],
            )
    return dict(metrics={t: task(t).metric for t in session.tasks}, curves=curves)


def figures(result: dict, out: Path) -> list[str]:
    files = []
    for t, metric in result["metrics"].items():
        fig, (loss_ax, metric_ax) = subplots(2, width=5)
        for c in result["curves"].values():
            if c["task"] != t:
                continue
            color = COLORS.get(c["policy"])
            for ax, key in ((loss_ax, "loss"), (metric_ax, "metric")):
                curve = c[key]
                ax.plot(curve["step"], curve["mean"], label=c["policy"], color=color)
                ax.fill_between(curve["step"], curve["min"], curve["max"], color=color,
                                alpha=0.15)
        loss_ax.set_yscale("log")
        values = [v for c in result["curves"].values() if c["task"] == t
                  for v in c["metric"]["mean"]]
        if values and min(values) > 0 and max(values) / min(values) > 20:
            metric_ax.set_yscale("log")  # a blown-up run would flatten the others
        loss_ax.set(title=f"{t}: training loss", xlabel="step", ylabel="cross-entropy (nats)")
        metric_ax.set(title=f"{t}: {metric}", xlabel="step")
        metric_ax.legend(fontsize=7)
        files.append(save(fig, out, f"curves_{t}.png"))
    return files


def markdown(result: dict, files: list[str]) -> str:
    lines = ["Training loss (mean over the steps between points) and the held-out metric; "
             "lines are the mean over seeds, bands the range.", ""]
    lines += [f"![{f}]({f})" for f in files]
    diverged = [f"{c['task']}/{c['policy']} at steps {c['diverged_at']}"
                for c in result["curves"].values() if c["diverged_at"]]
    if diverged:
        lines += ["", "Diverged runs: " + "; ".join(diverged) + "."]
    return "\n".join(lines)


if __name__ == "__main__":
    import sys

    from fpsim.reproduce.command import main

    raise SystemExit(main(["--only", NAME, *sys.argv[1:]]))
