"""The FP8 and FP4 recipes against fp32 and the paper's fp16 recipe (``mixed``), and each
piece of a recipe removed in turn: scaling, delayed against current scaling, NVFP4's
stochastic rounding, its Hadamard transform, its 2-D weight blocks and its bf16 last
layer, and the fp8 tensor core's accumulator width and promotion interval. The same
verdict rule as the paper's ablations (``final_metrics``): differences in units of seed
spread, diverged runs counted apart."""

from __future__ import annotations

from pathlib import Path

from fpsim.reproduce.ablations import RECIPE_ABLATIONS
from fpsim.reproduce.figures import COLORS, save, subplots
from fpsim.reproduce.results import compare, comparison_cells, mean_curve, summary, summary_text
from fpsim.reproduce.session import Session
from fpsim.reproduce.tasks import task
from fpsim.sweep.statistics import MIN_SEEDS, NOISE_FACTOR

NAME = "fp8_recipes"
TITLE = "FP8 and FP4 recipes"

#: The recipes (``fpsim.precision.recipes.RECIPES``, padded), trained on every task.
RECIPES = ("fp8_hybrid_delayed", "fp8_hybrid_current", "mxfp8", "nvfp4", "fp8_blockwise")
#: The paper's baselines, when the session trains them.
BASELINES = ("fp32", "mixed")
#: The recipes with one piece removed (``fpsim.reproduce.ablations.RECIPE_ABLATIONS``).
PIECES = ("fp8_unscaled", "nvfp4_no_sr", "nvfp4_no_rht", "nvfp4_1d_weights", "nvfp4_all_fp4",
          "fp8_acc_h100", "fp8_acc_h100_p128", "fp8_acc_b200")
#: The tasks the pieces are removed on, by budget (None: every task of the session). At
#: the quick budget the language model trains the recipes only: its 21 runs took 944 s on
#: two cores (2026-11-28), where the pieces would add 24 more.
PIECE_TASKS: dict[str, tuple[str, ...] | None] = {
    "quick": ("digits_mlp", "digits_cnn"), "full": None, "gpu": None}

# (policy, reference, what the comparison tests)
COMPARISONS = (
    *((r, "fp32", "the recipe matches fp32") for r in RECIPES),
    *((r, "mixed", "the recipe matches the paper's fp16 recipe") for r in RECIPES),
    ("fp8_unscaled", "fp8_hybrid_current", "per-tensor scaling (removed: fp8 with a scale of 1)"),
    ("fp8_hybrid_delayed", "fp8_hybrid_current", "delayed against current scaling"),
    ("nvfp4_no_sr", "nvfp4", "stochastic rounding of NVFP4 gradients"),
    ("nvfp4_no_rht", "nvfp4", "the random Hadamard transform of the weight gradient"),
    ("nvfp4_1d_weights", "nvfp4", "2-D (16x16) against 1-D (1x16) weight blocks"),
    ("nvfp4_all_fp4", "nvfp4", "the last layer in bf16 against all-FP4"),
    ("fp8_acc_h100", "fp8_hybrid_current", "an fp32 accumulator against Hopper's fp8 one"),
    ("fp8_acc_h100_p128", "fp8_acc_h100", "promoting Hopper's fp8 sums every 128 products"),
    ("fp8_acc_b200", "fp8_acc_h100", "Blackwell's wider fp8 accumulator against Hopper's"),
)


def _piece_tasks(session: Session) -> list[str]:
    chosen = PIECE_TASKS.get(session.budget)
    return [t for t in session.tasks if chosen is None or t in chosen]


def _policies(session: Session, t: str) -> list[str]:
    """The policies trained on task ``t``, in the tables' order."""
    pieces = list(PIECES) if t in _piece_tasks(session) else []
    return [*(b for b in BASELINES if b in session.policies), *RECIPES, *pieces]


def needs(session: Session) -> list:
    return [(t, p, s) for t in session.tasks for p in _policies(session, t)
            for s in range(session.seeds)]


def run(session: Session) -> dict:
    runs = session.runs(needs(session))
    rows, verdicts, curves = [], [], {}
    for t in session.tasks:
        policies = _policies(session, t)
        mine = {p: summary(runs, t, p) for p in policies}
        rows += mine.values()
        for policy, reference, tests in COMPARISONS:
            if policy in mine and reference in mine:
                verdicts.append(dict(task=t, policy=policy, baseline=reference, tests=tests,
                                     **compare(mine[policy], mine[reference],
                                               task(t).higher_is_better)))
        for p in (*BASELINES, *RECIPES):
            chosen = [r for r in runs if r["task"] == t and r["policy"] == p]
            if chosen:
                curves[f"{t}/{p}"] = dict(task=t, policy=p, loss=mean_curve(chosen, "loss"))
    diverged = [dict(task=r["task"], policy=r["policy"], seed=r["seed"], value=r["value"],
                     why=r["divergence"]) for r in runs if r["diverged"]]
    return dict(metrics={t: task(t).metric for t in session.tasks}, rows=rows,
                verdicts=verdicts, curves=curves, diverged=diverged,
                policies={p: RECIPE_ABLATIONS[p].summary for p in (*RECIPES, *PIECES)},
                noise_factor=NOISE_FACTOR, min_seeds=MIN_SEEDS)


def figures(result: dict, out: Path) -> list[str]:
    tasks = list(result["metrics"])
    fig, axes = subplots(len(tasks), width=5.0, height=3.6)
    for ax, t in zip(axes, tasks, strict=True):
        rows = [r for r in result["rows"] if r["task"] == t]
        for i, r in enumerate(rows):
            color = COLORS.get(r["policy"], "#7f7f7f")
            if r["mean"] is not None:
                ax.errorbar(i, r["mean"], yerr=r["spread"] or 0, marker="o", capsize=3,
                            color=color)
            if r["diverged"]:
                ax.annotate(f"diverged {r['diverged']}/{r['seeds']}", (i, 0.02),
                            xycoords=("data", "axes fraction"), rotation=90, fontsize=7,
                            ha="center", va="bottom", color="#d62728")
        fp32 = next((r for r in rows if r["policy"] == "fp32" and r["mean"] is not None),
                    None)
        if fp32 is not None:
            ax.axhline(fp32["mean"], color=COLORS["fp32"], lw=0.8, ls="--")
        ax.set_xticks(range(len(rows)), [r["policy"] for r in rows], rotation=60, ha="right",
                      fontsize=7)
        ax.set(title=t, ylabel=result["metrics"][t])
    files = [save(fig, out, "fp8_final.png")]
    fig, axes = subplots(len(tasks), width=4.6)
    for ax, t in zip(axes, tasks, strict=True):
        for c in result["curves"].values():
            if c["task"] == t and c["loss"]["step"]:
                ax.plot(c["loss"]["step"], c["loss"]["mean"], label=c["policy"],
                        color=COLORS.get(c["policy"]))
        ax.set_yscale("log")
        ax.set(title=f"{t}: training loss", xlabel="step", ylabel="cross-entropy (nats)")
        ax.legend(fontsize=7)
    files.append(save(fig, out, "fp8_curves.png"))
    return files


def markdown(result: dict, files: list[str]) -> str:
    tasks = list(result["metrics"])
    cells = {(r["task"], r["policy"]): r for r in result["rows"]}
    policies = list(dict.fromkeys(r["policy"] for r in result["rows"]))
    seeds = max((r["seeds"] for r in result["rows"]), default=0)
    lines = ["Each recipe trains with bf16 compute, fp32 master weights and no loss scale; "
             "block scalings are padded (`pad=on`) where a product's K is not a multiple "
             "of the block. The policies:", "",
             "| policy | what it is |", "| --- | --- |"]
    lines += [f"| `{p}` | {text} |" for p, text in result["policies"].items()]
    lines += ["", f"Final metric, mean ± sample standard deviation over {seeds} seeds of the "
              "runs that did not diverge (\"n/a\": not trained on that task):", "",
              "| policy | " + " | ".join(f"{t}: {result['metrics'][t]}" for t in tasks) + " |",
              "| --- | " + " | ".join("---" for _ in tasks) + " |"]
    for p in policies:
        lines.append(f"| {p} | " + " | ".join(
            summary_text(cells[(t, p)]) if (t, p) in cells else "n/a" for t in tasks) + " |")
    lines += ["", *(f"![{f}]({f})" for f in files), "",
              "Verdicts, by `final_metrics`' rule: \"worse\" (or \"better\") when the mean is "
              f"worse by more than {result['noise_factor']:g} times the larger seed-to-seed "
              "standard deviation, \"within noise\" when not, \"undecided\" with fewer than "
              f"{result['min_seeds']} runs that did not diverge on either side:", "",
              "| task | policy | against | tests | worse by | in spreads | verdict |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    for v in result["verdicts"]:
        lines.append(f"| {v['task']} | {v['policy']} | {v['baseline']} | {v['tests']} | "
                     + " | ".join(comparison_cells(v)) + " |")
    if result["diverged"]:
        lines += ["", "Diverged runs (left out of every mean and spread above):", ""]
        lines += [f"- {d['task']}/{d['policy']}, seed {d['seed']}: {d['why']}"
                  for d in result["diverged"]]
    return "\n".join(lines)


if __name__ == "__main__":
    import sys

    from fpsim.reproduce.command import main

    raise SystemExit(main(["--only", NAME, *sys.argv[1:]]))
