"""Final metric of every task under every policy over seeds (the paper's tables 1-3), and
whether each technique's ablation is worse than mixed precision beyond seed noise."""

from __future__ import annotations

from pathlib import Path

from fpsim.reproduce.figures import COLORS, save, subplots
from fpsim.reproduce.results import compare, comparison_cells, summary, summary_text
from fpsim.reproduce.session import Session
from fpsim.reproduce.tasks import task
from fpsim.sweep.divergence import CHANCE_FACTOR, LOSS_GROWTH
from fpsim.sweep.statistics import MIN_SEEDS, NOISE_FACTOR

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
    diverged = [dict(task=r["task"], policy=r["policy"], seed=r["seed"], value=r["value"],
                     why=r["divergence"]) for r in runs if r["diverged"]]
    return dict(metrics={t: task(t).metric for t in session.tasks}, rows=rows,
                verdicts=verdicts, diverged=diverged, noise_factor=NOISE_FACTOR,
                min_seeds=MIN_SEEDS, loss_growth=LOSS_GROWTH, chance_factor=CHANCE_FACTOR)


DIVERGED_COLOR = "#d62728"
LOG_RATIO = 20
"""A panel whose bars and error bars span more than this ratio gets a log axis."""


def _limits(rows: list[dict]) -> tuple[float, float, bool]:
    """The y-axis of a panel: every bar's mean ± spread inside it (the runs that did not
    diverge), padded; logarithmic when they span more than LOG_RATIO."""
    shown = [r for r in rows if r["mean"] is not None]
    if not shown:
        return 0.0, 1.0, False
    lo = min(r["mean"] - (r["spread"] or 0) for r in shown)
    hi = max(r["mean"] + (r["spread"] or 0) for r in shown)
    if lo > 0 and hi / lo > LOG_RATIO:
        return lo / 2, hi * 2, True
    pad = 0.25 * (hi - lo) or 1e-3 * abs(hi) or 1.0
    return lo - pad, hi + pad, False


def figures(result: dict, out: Path) -> list[str]:
    tasks = list(result["metrics"])
    fig, axes = subplots(len(tasks))
    for ax, t in zip(axes, tasks, strict=True):
        rows = [r for r in result["rows"] if r["task"] == t]
        lo, hi, log = _limits(rows)
        if log:
            ax.set_yscale("log")
        middle = (lo * hi) ** 0.5 if log else (lo + hi) / 2
        for i, r in enumerate(rows):
            split = r["diverged"] and r["mean"] is not None
            if r["mean"] is not None:  # the runs that did not diverge: bar from the axis
                ax.bar(i - 0.2 * split, r["mean"] - lo, bottom=lo, width=0.8 - 0.4 * split,
                       yerr=r["spread"] or 0, color=COLORS.get(r["policy"]), capsize=3)
            if r["diverged"]:  # hatched over the whole height, apart from any mean
                x, width = (i + 0.2, 0.4) if split else (i, 0.8)
                ax.bar(x, hi - lo, bottom=lo, width=width, color="none", hatch="///",
                       edgecolor=DIVERGED_COLOR)
                ax.text(x, middle, f"diverged {r['diverged']}/{r['seeds']}", rotation=90,
                        ha="center", va="center", color=DIVERGED_COLOR, fontsize=8,
                        backgroundcolor="white")
        ax.set_ylim(lo, hi)
        ax.set_xticks(range(len(rows)), [r["policy"] for r in rows], rotation=45, ha="right")
        ax.set_title(t + (" (log scale)" if log else ""))
        ax.set_ylabel(result["metrics"][t])
    return [save(fig, out, "final_metrics.png")]


def markdown(result: dict, files: list[str]) -> str:
    tasks = list(result["metrics"])
    policies = list(dict.fromkeys(r["policy"] for r in result["rows"]))
    cells = {(r["task"], r["policy"]): r for r in result["rows"]}
    seeds = max((r["seeds"] for r in result["rows"]), default=0)
    lines = [
        f"Mean ± sample standard deviation over {seeds} seeds, of the runs that did not "
        "diverge; diverged runs are counted apart.", "",
        "| policy | " + " | ".join(f"{t}: {result['metrics'][t]}" for t in tasks) + " |",
        "| --- | " + " | ".join("---" for _ in tasks) + " |",
    ]
    for p in policies:
        lines.append(f"| {p} | " + " | ".join(summary_text(cells[(t, p)]) for t in tasks) + " |")
    lines += ["", f"![final metrics]({files[0]})", "",
              "Verdicts. A run diverged when its loss, weights or final metric stopped being "
              f"finite, its final training loss is more than {result['loss_growth']:g} times "
              "its first, or its final metric is worse than chance by more than a factor of "
              f"{result['chance_factor']:g}. \"diverged in k of n\": k of the policy's n "
              "runs diverged. Otherwise, over the runs that did not diverge: \"worse\" "
              f"(or \"better\") when the mean is worse by more than "
              f"{result['noise_factor']:g} times the larger seed-to-seed standard deviation, "
              f"\"within noise\" when not, \"undecided\" with fewer than "
              f"{result['min_seeds']} such runs on either side:", "",
              "| task | policy | against | tests | worse by | in spreads | verdict |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    for v in result["verdicts"]:
        lines.append(f"| {v['task']} | {v['policy']} | {v['baseline']} | {v['tests']} | "
                     + " | ".join(comparison_cells(v)) + " |")
    if result["diverged"]:
        lines += ["", "Diverged runs (left out of every mean and spread above):", ""]
        lines += [f"- {d['task']}/{d['policy']}, seed {d['seed']}: {d['why']}"
                  + ("" if d["value"] is None else f"; final metric {d['value']:.6g}")
                  for d in result["diverged"]]
    return "\n".join(lines)


if __name__ == "__main__":
    import sys

    from fpsim.reproduce.command import main

    raise SystemExit(main(["--only", NAME, *sys.argv[1:]]))
