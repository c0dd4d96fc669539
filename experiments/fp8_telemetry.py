"""What each FP8 and FP4 recipe's quantizations do over training: per layer and category
of tensor, the amax against the range its scale covers, and the shares of elements that
saturate at the format's largest value or flush to zero (``fpsim.training.RecipeMonitor``
on one seed of each recipe, the training steps' quantizations only)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from fpsim.experiments.fp8_recipes import RECIPES

from fpsim.reproduce.ablations import ablation
from fpsim.reproduce.figures import save, subplots
from fpsim.reproduce.runs import train
from fpsim.reproduce.session import Session
from fpsim.reproduce.tasks import task
from fpsim.training import RecipeMonitor

NAME = "fp8_telemetry"
TITLE = "FP8 and FP4 recipes: amax, scales, saturation and flushes"

#: The tasks instrumented, by budget (each recipe's seed-0 run, trained again in this
#: process with the monitor on).
TASKS = {"quick": ("digits_mlp",), "full": ("digits_mlp", "char_lstm"),
         "gpu": ("digits_mlp", "char_lstm")}
CATEGORIES = ("act", "weight", "grad")
#: Points kept per series: each the largest amax, saturated and flushed share and scale
#: underflow of its window of steps (a spike stays visible), and the window's last scale.
POINTS = 60
FIELDS = ("amax", "scale", "saturated", "flushed", "scale_underflow")


def needs(session: Session) -> list:
    return []  # its own runs, instrumented


def _element_max(policy: str, category: str) -> float:
    """The largest element of the category's format under ``policy``'s recipe."""
    recipe = ablation(policy).precision().recipe
    s = getattr(recipe, category)
    return float(s.format.max)


def _windows(steps: list[int], values: dict[str, list], total: int) -> dict:
    """A series cut to at most POINTS windows of consecutive steps."""
    width = max(1, math.ceil(total / POINTS))
    out: dict[str, list] = {k: [] for k in ("step", *FIELDS)}
    at = np.asarray(steps)
    for lo in range(0, total, width):
        inside = np.flatnonzero((at > lo) & (at <= lo + width))
        if not inside.size:
            continue
        out["step"].append(int(at[inside[-1]]))
        out["scale"].append(values["scale"][inside[-1]])
        for k in ("amax", "saturated", "flushed", "scale_underflow"):
            out[k].append(max(values[k][i] for i in inside))
    return out


def _collect(session: Session, name: str, policy: str) -> dict:
    t = task(name)
    monitor = RecipeMonitor(evaluation=False)
    kept: dict[str, dict[str, list]] = {}

    def look(step, trainer, report, batch):
        rename = {}
        if not monitor.names:  # step 1's layers were named by their ids
            monitor.names = {id(p): n for n, p in trainer.model.named_parameters()}
            rename = {f"tensor@{i:x}": n for i, n in monitor.names.items()}
        for record in monitor.steps:
            for (layer, category), s in record.items():
                if category not in CATEGORIES:
                    continue
                series = kept.setdefault(f"{rename.get(layer, layer)}/{category}",
                                         {k: [] for k in ("step", "stale", *FIELDS)})
                series["step"].append(step)
                series["stale"].append(bool(s.stale))
                for k in FIELDS:
                    series[k].append(float(getattr(s, k)))
        monitor.steps.clear()  # (a delayed history is 1024 values a step)

    with monitor:
        record = train(t, ablation(policy), 0, session.budget, on_step=look,
                       device=session.device)
    steps = record["steps"]
    tensors = {}
    for key, series in kept.items():
        tensors[key] = dict(
            _windows(series["step"], series, steps),
            element_max=_element_max(policy, key.rsplit("/", 1)[1]),
            mean_saturated=float(np.mean(series["saturated"])),
            max_saturated=float(np.max(series["saturated"])),
            mean_flushed=float(np.mean(series["flushed"])),
            mean_scale_underflow=float(np.mean(series["scale_underflow"])),
            stale_steps=int(sum(series["stale"])), steps=len(series["step"]))
    return dict(value=record["value"], diverged=record["diverged"], steps=steps,
                tensors=tensors)


def run(session: Session) -> dict:
    tasks: dict[str, dict] = {}
    for name in (t for t in TASKS.get(session.budget, ()) if t in session.tasks):
        tasks[name] = {
            p: session.cached(NAME, dict(task=task(name).config(session.budget), policy=p,
                                         precision=ablation(p).policy, points=POINTS),
                              lambda name=name, p=p: _collect(session, name, p))
            for p in RECIPES}
    return dict(tasks=tasks)


def figures(result: dict, out: Path) -> list[str]:
    files = []
    for name, recipes in result["tasks"].items():
        cols = list(recipes)
        fig, axes = subplots(len(cols), width=3.6, height=2.8, rows=len(CATEGORIES) + 2)
        for j, p in enumerate(cols):
            tensors = recipes[p]["tensors"]
            for i, category in enumerate(CATEGORIES):
                ax = axes[i * len(cols) + j]
                for key, s in tensors.items():
                    if not key.endswith("/" + category):
                        continue
                    layer = key.rsplit("/", 1)[0]
                    line, = ax.plot(s["step"], s["amax"], label=f"{layer} amax")
                    ax.plot(s["step"], [v * s["element_max"] for v in s["scale"]], ls="--",
                            color=line.get_color(), label=f"{layer} scale x max")
                ax.set_yscale("log")
                ax.set_title(f"{p}: {category}", fontsize=9)
                ax.legend(fontsize=6)
            for i, field in enumerate(("saturated", "flushed")):
                ax = axes[(len(CATEGORIES) + i) * len(cols) + j]
                for key, s in tensors.items():
                    ax.plot(s["step"], s[field], label=key)
                ax.set_title(f"{p}: share {field}", fontsize=9)
                ax.set_xlabel("step")
                ax.legend(fontsize=6)
        files.append(save(fig, out, f"fp8_telemetry_{name}.png"))
    return files


def markdown(result: dict, files: list[str]) -> str:
    if not result["tasks"]:
        return ("Not run: no task of this session is one it monitors at this budget "
                f"({'; '.join(f'{b}: ' + ', '.join(ts) for b, ts in TASKS.items())}).")
    lines = ["One seed of each recipe, trained again with `fpsim.training.RecipeMonitor` on "
             "(its training steps' quantizations; evaluation's are left out). Per layer and "
             "category: the shares of elements saturated (rounded to the format's largest "
             "value) and flushed (nonzero, rounded to zero), mean over steps and the worst "
             "step; the share of blocks whose scale sat at the bottom of its format; steps "
             "whose delayed scale was stale (its elements saturated). The figure plots each "
             f"tensor's amax (solid, the largest of each of {POINTS} windows) against its "
             "largest decode scale times the element format's largest value (dashed: the "
             "largest magnitude the scale represents), and the saturated and flushed shares "
             "(the largest of each window).", ""]
    for name, recipes in result["tasks"].items():
        lines += [f"**{name}**", "",
                  "| recipe | tensor | saturated (mean) | saturated (worst step) | "
                  "flushed (mean) | scale underflow | stale steps |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for p, r in recipes.items():
            for key, s in r["tensors"].items():
                lines.append(f"| {p} | {key} | {s['mean_saturated']:.2%} | "
                             f"{s['max_saturated']:.2%} | {s['mean_flushed']:.2%} | "
                             f"{s['mean_scale_underflow']:.2%} | {s['stale_steps']} |")
        lines.append("")
    lines += [f"![{f}]({f})" for f in files]
    return "\n".join(lines)


if __name__ == "__main__":
    import sys

    from fpsim.reproduce.command import main

    raise SystemExit(main(["--only", NAME, *sys.argv[1:]]))
