"""fpsim's emulated policies beside ``torch.autocast`` on the CPU: the same torch models,
weights and batches, trained in plain float32, under ``torch.autocast(bfloat16/float16)``
and under ``fpsim.torch.emulate`` with ``"bf16"`` and ``"mixed"``.

``python -m fpsim.torch.autocast [--steps N] [--out record.json]`` prints a table and
writes the record docs/torch.md quotes (docs/torch/autocast.json).

What is compared, per model (the digits MLP and a small CNN on the 8x8 digits):

- the first forward pass on the initial weights: of the logits, how many have the same
  bits as autocast's (both widened to float32), and the largest difference in units of
  the compute format's last place;
- after training: the loss, the test accuracy, and the largest difference of the weights
  from the float32 run's, relative to the largest weight.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812 - torch's own name for it

import fpsim
from fpsim.data import load_digits
from fpsim.torch.emulation import emulate
from fpsim.torch.products import conv2d, linear
from fpsim.torch.rounding import round as fpsim_round
from fpsim.torch.training import LossScaler

RUNS = ("float32", "autocast bfloat16", "emulate bf16", "autocast float16",
        "emulate mixed")
"""The runs, in the order of the table: each autocast beside the policy it resembles."""


def models() -> dict[str, Callable[[], torch.nn.Sequential]]:
    """The models by name: the digits MLP and a CNN on the digits as 1x8x8 images."""
    return {
        "mlp": lambda: torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                                           torch.nn.Linear(128, 10)),
        "cnn": lambda: torch.nn.Sequential(
            torch.nn.Unflatten(1, (1, 8, 8)), torch.nn.Conv2d(1, 8, 3, padding=1),
            torch.nn.ReLU(), torch.nn.Conv2d(8, 16, 3, stride=2, padding=1), torch.nn.ReLU(),
            torch.nn.Flatten(), torch.nn.Linear(16 * 4 * 4, 10)),
    }


def _ulps(a: np.ndarray, b: np.ndarray, fmt: str) -> np.ndarray:
    """|a - b| in units of the last place of ``fmt`` at ``max(|a|, |b|)``."""
    f = fpsim.format(fmt)
    big = np.maximum(np.abs(a), np.abs(b))
    exponent = np.maximum(np.floor(np.log2(np.where(big > 0, big, 1.0))), f.emin)
    diff: np.ndarray = np.abs(a - b) / np.exp2(exponent - f.man_bits)
    return diff


def _context(run: str) -> Any:
    if run.startswith("autocast"):
        dtype = torch.bfloat16 if run.endswith("bfloat16") else torch.float16
        return torch.autocast("cpu", dtype=dtype)
    return torch.autocast("cpu", enabled=False)


def train(name: str, run: str, steps: int, seed: int = 0) -> dict[str, Any]:
    """One run: its first logits and, after ``steps`` SGD steps, loss, accuracy, weights."""
    data = load_digits(standardize=True)
    x = torch.from_numpy(data.x_train.astype(np.float32))
    y = torch.from_numpy(data.y_train.astype(np.int64))
    torch.manual_seed(seed)
    model = models()[name]()
    emulation = (emulate(model, run.split()[-1]) if run.startswith("emulate")
                 else None)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    # fp16 needs loss scaling (torch.amp's GradScaler rule); bf16 and float32 do not.
    scaler = LossScaler("dynamic" if run in ("autocast float16", "emulate mixed") else None)
    seen: list[torch.Tensor] = []
    hook = model[_FIRST[name]].register_forward_hook(lambda m, a, out: seen.append(out))
    with torch.no_grad(), _context(run), emulation or contextlib.nullcontext():
        first = model(x[:256]).float().numpy().copy()
    hook.remove()
    layer = seen[0].float().numpy().copy()
    initial = [p.detach().clone() for p in model[_FIRST[name]].parameters()]
    order = np.random.default_rng(seed).permutation(len(x))
    batch = 32
    loss = torch.tensor(float("nan"))
    for step in range(steps):
        rows = order[(step * batch) % len(x):][:batch]
        opt.zero_grad()
        with _context(run), emulation or contextlib.nullcontext():
            loss = F.cross_entropy(model(x[rows]).float(), y[rows])
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    xt = torch.from_numpy(data.x_test.astype(np.float32))
    with torch.no_grad(), _context(run), emulation or contextlib.nullcontext():
        accuracy = float((model(xt).argmax(1).numpy() == data.y_test).mean())
    weights = np.concatenate([p.detach().numpy().ravel() for p in model.parameters()])
    return {"first": first, "layer": layer, "initial": initial, "x": x[:256],
            "loss": float(loss.detach()), "accuracy": accuracy, "weights": weights,
            "scale": scaler.get_scale()}


_FIRST = {"mlp": 0, "cnn": 1}  # the first product's layer


def one_rounding(name: str, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                 fmt: str) -> np.ndarray:
    """The first layer as one rounding: operands and bias rounded to ``fmt`` (autocast
    casts all three), the products and the bias summed in binary32 (the bias the
    accumulator's initial value, in BLAS's order), the sum rounded once to ``fmt``."""
    xs, ws, bias = (fpsim_round(t, fmt) for t in (x, weight, bias))
    if name == "cnn":
        xs = xs.reshape(-1, 1, 8, 8)
        product = conv2d(xs, ws, bias, 1, 1, order="any")
    else:
        product = linear(xs, ws, bias, order="any")
    values: np.ndarray = fpsim_round(product, fmt).numpy()
    return values


def compare(steps: int = 120, seed: int = 0) -> dict[str, Any]:
    """Every model under every run; returns the record (JSON-ready)."""
    record: dict[str, Any] = {
        "steps": steps, "batch": 32, "optimizer": "SGD lr=0.05 momentum=0.9", "seed": seed,
        "torch": torch.__version__, "fpsim": fpsim.__version__, "numpy": np.__version__,
        "python": platform.python_version(), "machine": platform.machine(), "models": {}}
    for name in models():
        results = {run: train(name, run, steps, seed) for run in RUNS}
        rows = {}
        base = results["float32"]
        scale = float(np.max(np.abs(base["weights"])))
        for run, r in results.items():
            row = {"loss": r["loss"], "accuracy": r["accuracy"], "loss_scale": r["scale"],
                   "weights_vs_float32": float(np.max(np.abs(r["weights"] - base["weights"])))
                   / scale}
            twin = {"emulate bf16": ("autocast bfloat16", "bf16"),
                    "emulate mixed": ("autocast float16", "fp16")}.get(run)
            if twin is not None:
                theirs = results[twin[0]]
                row["twin"] = twin[0]
                row["first_logits_same_bits"] = float(np.mean(r["first"] == theirs["first"]))
                row["first_logits_within_one_ulp"] = float(np.mean(
                    _ulps(r["first"], theirs["first"], twin[1]) <= 1))
                row["first_layer_same_bits"] = float(np.mean(r["layer"] == theirs["layer"]))
                weight, bias = r["initial"]
                single = one_rounding(name, r["x"], weight, bias, twin[1])
                row["first_layer_one_rounding_same_bits"] = float(
                    np.mean(single == theirs["layer"]))
            rows[run] = row
        record["models"][name] = rows
    return record


def table(record: dict[str, Any]) -> str:
    """The record as a Markdown table."""
    lines = ["| model | run | loss | test accuracy | weights vs float32 "
             "| logits: same bits as autocast | within 1 ulp | first layer: same bits "
             "| one rounding: same bits |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]

    def pct(row: dict[str, Any], key: str) -> str:
        return f"{row[key]:.1%}" if key in row else ""

    for name, rows in record["models"].items():
        for run, row in rows.items():
            lines.append(
                f"| {name} | {run} | {row['loss']:.4f} | {row['accuracy']:.4f} | "
                f"{row['weights_vs_float32']:.2e} | {pct(row, 'first_logits_same_bits')} | "
                f"{pct(row, 'first_logits_within_one_ulp')} | "
                f"{pct(row, 'first_layer_same_bits')} | "
                f"{pct(row, 'first_layer_one_rounding_same_bits')} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the comparison, print its table, and write the record."""
    parser = argparse.ArgumentParser(prog="python -m fpsim.torch.autocast",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=120, help="SGD steps (default 120)")
    parser.add_argument("--out", help="write the record (JSON) here")
    args = parser.parse_args(argv)
    if args.steps < 0:
        parser.error(f"--steps must be at least 0, got {args.steps}")
    record = compare(args.steps)
    print(table(record))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(record, f, indent=1, sort_keys=True)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
