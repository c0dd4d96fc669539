"""Final metric of every task under every policy over seeds (the paper's tables 1-3), and
whether each technique's ablation is worse than mixed precision beyond seed noise."""

from __future__ import annotations

from pathlib import Path

from fpsim.reproduce.figures import COLORS, save, subplots
from fpsim.reproduce.results import NOISE_FACTOR, compare, comparison_cells, summary, summary_text
from fpsim.reproduce.session import Session
from fpsim.reproduce.tasks import task

NAME = "final_metrics"
TITLE = "Final metric per task and policy"

# (ablation, baseline, what it tests)
COMPARISONS = (
    ("mixed", "fp32", "mixed precision matches fp32"),
    ("no_master", "mixed", "the fp32 master copy of the weights"),
    ("no_loss_scaling", "mixed", "loss scaling"),
    ("fp16_accum", "mixed", "fp32 accumulation of fp16 products"),
    ("bf16", "fp32", "bf16 without loss scaling matches fp32"),
    ("native_fp16", "mixed", "emulation matches hardware half precision"),
)


def needs(session: Session) -> list:
    return session.specs()


def run(session: Session) -> dict:
    runs = session.runs(needs(session))
    rows = [summary(runs, t, p) for t in session.tasks for p in session.policies]
    verdicts = []
    for t in session.tasks:
        better_high = task(t).higher_is_better
        by_policy = {r["policy"]: r for r in rows if r["task"] == t}
        for policy, baseline, tests in COMPARISONS:
            if policy in by_policy and baseline in by_policy:
                verdicts.append(dict(task=t, policy=policy, baseline=baseline, tests=tests,
                                     **compare(by_policy[policy], by_policy[baseline],
                                               better_high)))
    return dict(metrics={t: task(t).metric for t in session.tasks}, rows=rows,
                verdicts=verdicts, noise_factor=NOISE_FACTOR)


def figures(result: dict, out: Path) -> list[str]:
    tasks = list(result["metrics"])
    fig, axes = subplots(len(tasks))
    for ax, t in zip(axes, tasks, strict=True):
        rows = [r for r in result["rows"] if r["task"] == t]
        for i, r in enumerate(rows):
            if r["mean"] is None:
                ax.text(i, 0, "diverged", rotation=90, ha="center", va="bottom")
                continue
            ax.bar(i, r["mean"], yerr=r["spread"] or 0, color=COLORS.get(r["policy"]),
                   capsize=3)
        ax.set_xticks(range(len(rows)), [r["policy"] for r in rows], rotation=45, ha="right")
        values = [r["mean"] for r in rows if r["mean"] is not None]
        if values:
            lo, hi = min(values), max(values)
            pad = (hi - lo) * 0.5 + 1e-3 * abs(hi)
            ax.set_ylim(lo - pad, hi + pad)
        ax.set_title(t)
        ax.set_ylabel(result["metrics"][t])
    return [save(fig, out, "final_metrics.png")]


def markdown(result: dict, files: list[str]) -> str:
    tasks = list(result["metrics"])
    policies = list(dict.fromkeys(r["policy"] for r in result["rows"]))
    cells = {(r["task"], r["policy"]): r for r in result["rows"]}
    seeds = max((r["seeds"] for r in result["rows"]), default=0)
    lines = [
        f"Mean ± sample standard deviation over {seeds} seeds.", "",
        "| policy | " + " | ".join(f"{t}: {result['metrics'][t]}" for t in tasks) + " |",
        "| --- | " + " | ".join("---" for _ in tasks) + " |",
    ]
    for p in policies:
        lines.append(f"| {p} | " + " | ".join(summary_text(cells[(t, p)]) for t in tasks) + " |")
    lines += ["", f"![final metrics]({files[0]})", "",
              f"Verdicts (\"worse\": the mean is worse by more than {result['noise_factor']:g} "
              "times the larger seed-to-seed standard deviation):", "",
              "| task | policy | against | tests | worse by | in spreads | verdict |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    for v in result["verdicts"]:
        lines.append(f"| {v['task']} | {v['policy']} | {v['baseline']} | {v['tests']} | "
                     + " | ".join(comparison_cells(v)) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    import sys

    from fpsim.reproduce.command import main

    raise SystemExit(main(["--only", NAME, *sys.argv[1:]]))
