"""fp16 accumulation in a model's own gradients: the error of the weight gradients under
each policy against binary64, on one trained model, as the batch (the inner dimension of
every weight-gradient product) grows."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np

from fpsim._device import transfer
from fpsim.precision.policy import Policy, parse
from fpsim.reproduce.ablations import ablation
from fpsim.reproduce.figures import COLORS, save, subplots
from fpsim.reproduce.runs import train
from fpsim.reproduce.session import Session
from fpsim.reproduce.tasks import Task, task

NAME = "gradient_error"
TITLE = "fp16 accumulation in a model's gradients as the batch grows"

# The task's batch times these; the language model's batch counts windows of seq_len.
# At the gpu budget the language model's batch is 2^14 tokens already; the gradients are
# computed on the cpu (binary64, the reference, is not emulated on a GPU).
MULTIPLES = {"quick": (1, 4), "full": (1, 4, 16), "gpu": (1,)}
# (label, ablation whose precision policy computes the gradients, loss scale)
POLICIES = (("mixed", "mixed", 2.0**16), ("fp16_accum", "fp16_accum", 2.0**16),
            ("no_loss_scaling", "no_loss_scaling", 1.0))
REFERENCE = "fp64,native=true"


def needs(session: Session) -> list:
    return []  # its own fp32 run, whose final weights it keeps


def _trained(session: Session, t: Task) -> list[np.ndarray]:
    """The weights after the run's last step whose weights are finite (the initial
    weights, should the first step already blow them up)."""
    kept = [np.array(p.data) for p in t.build(0)[0].parameters()]

    def keep(step, trainer, report, batch):
        weights = [np.array(transfer(p.data, "cpu")) for p in trainer.model.parameters()]
        if all(np.all(np.isfinite(w)) for w in weights):
            kept[:] = weights

    train(t, ablation("fp32"), 0, session.budget, on_step=keep, device=session.device)
    return kept


def _gradients(t: Task, weights: list[np.ndarray], policy: Policy, scale: float,
               batch) -> list[np.ndarray]:
    model, _ = t.build(0)
    for p, w in zip(model.parameters(), weights, strict=True):
        p.data[...] = w
    model = model.to(policy)
    with policy:
        loss = t.loss(model, batch)
        loss.backward(scale)
    return [np.asarray(p.grad, dtype=np.float64) / scale for p in model.parameters()]


def _relative_error(grads: list[np.ndarray], ref: list[np.ndarray]) -> float | None:
    """None when there is no finite answer (an overflowed gradient, or a zero reference)."""
    with np.errstate(all="ignore"):
        num = sum(float(np.sum((g - r) ** 2)) for g, r in zip(grads, ref, strict=True))
        den = sum(float(np.sum(r**2)) for r in ref)
        error = float(np.sqrt(num / den)) if den > 0 else math.nan
    return error if math.isfinite(error) else None


def _measure(session: Session, name: str) -> dict:
    t = task(name).at(session.budget)
    weights = _trained(session, t)
    names = [n for n, _ in t.build(0)[0].named_parameters()]
    base = t.hyperparameters["batch_size"]
    rows = []
    for m in MULTIPLES[session.budget]:
        sized = dataclasses.replace(t, hyperparameters=dict(t.hyperparameters,
                                                            batch_size=base * m))
        batch = next(sized.batches(0))
        ref = _gradients(sized, weights, parse(REFERENCE), 1.0, batch)
        for label, policy, scale in POLICIES:
            grads = _gradients(sized, weights, ablation(policy).precision(), scale, batch)
            each = [_relative_error([g], [r]) for g, r in zip(grads, ref, strict=True)]
            worst = int(np.argmax([math.inf if e is None else e for e in each]))
            rows.append(dict(policy=label, batch=base * m, outputs=_outputs(batch),
                             error=_relative_error(grads, ref), worst=names[worst],
                             worst_error=each[worst]))
    return dict(rows=rows)


def _outputs(batch) -> int:
    """Predictions in a batch (samples, or characters of the windows): the terms of
    the read-out layer's weight-gradient sums."""
    return int(np.asarray(batch[1]).size)


def run(session: Session) -> dict:
    tasks = {}
    for name in session.tasks:
        config = dict(task=task(name).config(session.budget),
                      multiples=list(MULTIPLES[session.budget]),
                      policies=[list(p) for p in POLICIES], reference=REFERENCE)
        tasks[name] = session.cached(NAME, config, lambda name=name: _measure(session, name))
    return dict(tasks=tasks)


def figures(result: dict, out: Path) -> list[str]:
    names = list(result["tasks"])
    if not names:
        return []
    fig, axes = subplots(len(names))
    for ax, name in zip(axes, names, strict=True):
        rows = result["tasks"][name]["rows"]
        for label, _, _ in POLICIES:
            mine = [r for r in rows if r["policy"] == label]
            ax.plot([r["outputs"] for r in mine], [_number(r["error"]) for r in mine], "o-",
                    color=COLORS.get(label), label=label)
        ax.set_xscale("log", base=2)
        if any(r["error"] for r in rows):  # a log axis needs a positive value to show
            ax.set_yscale("log")
        ax.set(title=name, xlabel="predictions per batch",
               ylabel="relative error of the gradient")
        ax.legend(fontsize=7)
    return [save(fig, out, "gradient_error.png")]


def _number(error: float | None) -> float:
    return math.nan if error is None else error


def _text(error: float | None) -> str:
    return "not finite" if error is None else f"{error:.2e}"


def markdown(result: dict, files: list[str]) -> str:
    lines = ["The weights of an fp32 run (seed 0) at its last step; the gradient of one "
             "batch of each size under each policy (at loss scale 2^16, or 1 without "
             "scaling, divided out in binary64), against the same gradient in binary64. "
             "*Error*: the norm of the difference over the norm of the reference, all "
             "weights together; *worst*: the weight whose gradient has the largest such "
             "error.", "",
             "| task | batch | predictions | policy | error | worst | its error |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for name, r in result["tasks"].items():
        for row in r["rows"]:
            lines.append(f"| {name} | {row['batch']} | {row['outputs']} | {row['policy']} | "
                         f"{_text(row['error'])} | {row['worst']} | "
                         f"{_text(row['worst_error'])} |")
    if files:
        lines += ["", f"![gradient error]({files[0]})"]
    return "\n".join(lines)


if __name__ == "__main__":
    import sys

    from fpsim.reproduce.command import main

    raise SystemExit(main(["--only", NAME, *sys.argv[1:]]))
