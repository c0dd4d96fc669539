"""Exponents of weight and activation gradients in an fp32 run (the paper's figures 2b
and 3): how many would be zero in fp16, and how a loss scale S shifts them into range."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import fpsim
from fpsim._device import transfer
from fpsim.reproduce.ablations import ablation
from fpsim.reproduce.figures import save, subplots
from fpsim.reproduce.runs import train
from fpsim.reproduce.session import Session
from fpsim.reproduce.tasks import task
from fpsim.training import exponent_histogram, flushed_fraction, gradients

NAME = "gradient_histograms"
TITLE = "Gradient exponents in fp32 training"

SCALES = tuple(2.0**k for k in range(0, 17, 2))
SNAPSHOTS = 8  # gradients are collected at this many evenly spaced steps
LO, HI = -64, 8
FP16 = fpsim.format("fp16")


def needs(session: Session) -> list:
    return []  # its own runs, which keep their gradients


def _overflowed(values: list[np.ndarray], scale: float) -> float:
    finite = np.concatenate([v[np.isfinite(v) & (v != 0)] for v in values]) * scale
    return float(np.mean(np.isinf(fpsim.round(finite, FP16)))) if finite.size else 0.0


def _collect(session: Session, name: str) -> dict:
    t = task(name)
    steps = t.budget(session.budget).steps
    at = set(np.linspace(1, steps, SNAPSHOTS).round().astype(int).tolist())
    kept = {"activation": [], "weight": []}
    policy = ablation("fp32").precision()

    def look(step, trainer, report, batch):
        if step in at:
            trainer.model.zero_grad()  # the step's own gradients, else backward adds to them
            with policy:
                loss = t.loss(trainer.model, batch)
                loss.backward()
            acts, weights = gradients(loss, policy.compute)
            kept["activation"] += [np.asarray(transfer(a, "cpu"), np.float64).ravel()
                                   for a in acts]
            kept["weight"] += [np.asarray(transfer(w, "cpu"), np.float64).ravel()
                               for w in weights]

    train(t, ablation("fp32"), 0, session.budget, on_step=look, device=session.device)
    result = dict(steps=sorted(at))
    for kind, values in kept.items():
        exps, counts, zeros = exponent_histogram(values, LO, HI)
        total = int(sum(v.size for v in values))
        result[kind] = dict(
            exponents=exps.tolist(), counts=counts.tolist(), zeros=zeros, total=total,
            scales=list(SCALES),
            flushed=[flushed_fraction(values, FP16, s) for s in SCALES],
            overflowed=[_overflowed(values, s) for s in SCALES],
        )
    return result


def run(session: Session) -> dict:
    tasks = {}
    for name in session.tasks:
        tasks[name] = session.cached(NAME, dict(task=task(name).config(session.budget),
                                                snapshots=SNAPSHOTS, scales=list(SCALES)),
                                     lambda name=name: _collect(session, name))
    return dict(fp16=dict(smallest_subnormal_exponent=-24, smallest_normal_exponent=-14,
                          largest_exponent=15), tasks=tasks)


def figures(result: dict, out: Path) -> list[str]:
    files = []
    for name, r in result["tasks"].items():
        fig, axes = subplots(3)
        for ax, kind in zip(axes[:2], ("weight", "activation"), strict=True):
            h = r[kind]
            total = max(h["total"], 1)
            ax.bar(h["exponents"], np.asarray(h["counts"]) / total, width=1.0, color="#1f77b4")
            for x, style in ((-24, "r-"), (-14, "r--"), (15, "r:")):
                ax.axvline(x, color=style[0], linestyle=style[1:])
            ax.set(title=f"{name}: {kind} gradients ({100 * h['zeros'] / total:.0f}% zeros)",
                   xlabel="log2 |g| (red: fp16 subnormal min, normal min, max)",
                   ylabel="fraction of values")
        ax = axes[2]
        for kind, style in (("weight", "o-"), ("activation", "s-")):
            h = r[kind]
            ax.plot(h["scales"], h["flushed"], style, label=f"{kind}: zero in fp16")
            ax.plot(h["scales"], h["overflowed"], style, alpha=0.4,
                    label=f"{kind}: overflow in fp16")
        ax.set_xscale("log", base=2)
        ax.set(title="fraction lost at loss scale S", xlabel="S", ylabel="fraction of nonzero")
        ax.legend(fontsize=7)
        files.append(save(fig, out, f"gradient_histograms_{name}.png"))
    return files


def markdown(result: dict, files: list[str]) -> str:
    lines = ["Gradients of an fp32 run (seed 0), collected at "
             f"{SNAPSHOTS} evenly spaced steps. *Zero in fp16*: of the nonzero values, the "
             "fraction that rounds to zero in fp16 after multiplying by the loss scale S; "
             "*overflow*: the fraction that becomes infinite.", "",
             "| task | gradients | exact zeros | zero in fp16 (S=1) | best S | zero at best S | "
             "overflow at best S |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for name, r in result["tasks"].items():
        for kind in ("weight", "activation"):
            h = r[kind]
            lost = np.asarray(h["flushed"]) + np.asarray(h["overflowed"])
            best = int(np.argmin(lost))
            lines.append(
                f"| {name} | {kind} | {h['zeros'] / max(h['total'], 1):.1%} | "
                f"{h['flushed'][0]:.2%} | 2^{int(np.log2(h['scales'][best]))} | "
                f"{h['flushed'][best]:.2%} | {h['overflowed'][best]:.2%} |")
    lines.append("")
    lines += [f"![{f}]({f})" for f in files]
    return "\n".join(lines)


if __name__ == "__main__":
    import sys

    from fpsim.reproduce.command import main

    raise SystemExit(main(["--only", NAME, *sys.argv[1:]]))
