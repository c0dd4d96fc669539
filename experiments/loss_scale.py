"""The dynamic loss scale's trajectory and the steps it skipped (PyTorch GradScaler's
rule: start at 2**16, halve and skip on inf/NaN, double after 2000 clean steps)."""

from __future__ import annotations

import math
from pathlib import Path

from fpsim.reproduce.figures import COLORS, save, subplots
from fpsim.reproduce.session import Session

NAME = "loss_scale"
TITLE = "Dynamic loss scale"
POLICIES = ("mixed", "no_master", "fp16_accum", "native_fp16")


def needs(session: Session) -> list:
    return session.specs(policies=POLICIES)


def run(session: Session) -> dict:
    runs = session.runs(needs(session))
    return dict(runs=[
        dict(task=r["task"], policy=r["policy"], seed=r["seed"], steps=r["steps"],
             changes=r["loss_scale_changes"], skipped_at=r["skipped_at"],
             final_scale=r["loss_scale_changes"][-1][1] if r["loss_scale_changes"] else None)
        for r in runs
    ])


def figures(result: dict, out: Path) -> list[str]:
    tasks = list(dict.fromkeys(r["task"] for r in result["runs"]))
    if not tasks:
        return []
    fig, axes = subplots(len(tasks))
    for ax, t in zip(axes, tasks, strict=True):
        labelled = set()
        for r in result["runs"]:
            if r["task"] != t or r["seed"] != 0 or not r["changes"]:
                continue
            steps = [s for s, _ in r["changes"]] + [r["steps"]]
            scales = [v for _, v in r["changes"]] + [r["changes"][-1][1]]
            color = COLORS.get(r["policy"])
            ax.step(steps, scales, where="post", color=color, label=r["policy"])
            scale_at = dict(r["changes"])
            skipped = r["skipped_at"]
            if skipped:
                ys = [_scale_at(scale_at, s) for s in skipped]
                ax.plot(skipped, ys, "x", color=color,
                        label=None if "skip" in labelled else "skipped step")
                labelled.add("skip")
        ax.set_yscale("log", base=2)
        ax.set(title=f"{t} (seed 0)", xlabel="step", ylabel="loss scale")
        ax.legend(fontsize=7)
    return [save(fig, out, "loss_scale.png")]


def _scale_at(changes: dict, step: int) -> float:
    return changes[max(s for s in changes if s <= step)]


def markdown(result: dict, files: list[str]) -> str:
    if not result["runs"]:
        return f"No run with a dynamic loss scale: none of {', '.join(POLICIES)} was trained."
    lines = ["| task | policy | seed | skipped steps | of steps | final scale |",
             "| --- | --- | --- | --- | --- | --- |"]
    for r in result["runs"]:
        final = "" if r["final_scale"] is None else _pow2(r["final_scale"])
        lines.append(f"| {r['task']} | {r['policy']} | {r['seed']} | {len(r['skipped_at'])} | "
                     f"{r['steps']} | {final} |")
    lines += ["", f"![loss scale]({files[0]})"]
    return "\n".join(lines)


def _pow2(x: float) -> str:
    k = math.log2(x) if x > 0 else 0.5
    return f"2^{k:.0f}" if k == round(k) else f"{x:g}"


if __name__ == "__main__":
    import sys

    from fpsim.reproduce.command import main

    raise SystemExit(main(["--only", NAME, *sys.argv[1:]]))
