"""``fpsim compare [--suite cpu|gpu|all|training] [--out DIR] [--size N] [--seed S]
[--steps N]``.

Progress goes to stderr; the paths written and the verdicts to stdout.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from fpsim._checks import output_folder
from fpsim.compare.cases import Record
from fpsim.compare.report import verdicts
from fpsim.compare.run import DEFAULT_SEED, DEFAULT_SIZE, SUITES, run
from fpsim.compare.training import DEFAULT_STEPS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="fpsim compare",
        description="Compare fpsim's emulation with what hardware computes, bit by bit: "
                    "NumPy's float16, ml_dtypes' casts, the CPU's binary16, BLAS (cpu); "
                    "CuPy's float16, CUDA conversions and cuBLAS (gpu); a model trained "
                    "natively on the GPU against its emulation with the GPU's models "
                    "(training).")
    parser.add_argument("--suite", default="cpu", choices=SUITES)
    parser.add_argument("--out", default="fpsim-compare",
                        help="folder for results.json, results.md and ulp_histograms.png "
                             "(default: fpsim-compare)")
    parser.add_argument("--size", type=int, default=DEFAULT_SIZE,
                        help=f"elements per elementwise case (default {DEFAULT_SIZE})")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="inputs' random seed")
    parser.add_argument("--steps", type=int, default=DEFAULT_STEPS,
                        help=f"training steps per model, --suite training (default "
                             f"{DEFAULT_STEPS})")
    args = parser.parse_args(argv)
    if args.size < 64:
        parser.error(f"--size must be at least 64, got {args.size}")
    if args.seed < 0:
        parser.error(f"--seed must be non-negative, got {args.seed}")
    if args.steps < 1:
        parser.error(f"--steps must be at least 1, got {args.steps}")
    if args.suite == "training":  # no GPU: an error before anything is made or written
        from fpsim.compare import training

        missing = training.missing()
        if missing is not None:
            print(f"{parser.prog}: error: no usable GPU for the training suite: {missing}",
                  file=sys.stderr)
            return 2
    if args.suite == "gpu":  # no GPU: an error before anything is made or written
        from fpsim.compare import gpu

        try:
            gpu.find_device()
        except gpu.NoGPU as exc:
            print(f"{parser.prog}: error: {exc}", file=sys.stderr)
            return 2
    try:
        out = output_folder(args.out)
    except ValueError as exc:
        parser.error(f"--out: {exc}")

    def progress(record: Record) -> None:
        print(f"  {record.name}: {record.verdict}", file=sys.stderr, flush=True)

    sized = f"{args.steps} steps" if args.suite == "training" else f"size {args.size}"
    print(f"{parser.prog} --suite {args.suite}, {sized}, seed {args.seed}",
          file=sys.stderr, flush=True)
    if args.suite == "training":
        return _training(args.steps, args.seed, out)
    records = run(args.suite, size=args.size, seed=args.seed, out=out, progress=progress)
    print(f"wrote {out / 'results.json'}, {out / 'results.md'}, "
          f"{out / 'ulp_histograms.png'}\n")
    print(verdicts(records), flush=True)
    for record in records:
        if record.name == "gpu suite" and record.skipped:
            print(f"{parser.prog}: the GPU suite did not run: {record.skipped}",
                  file=sys.stderr)
    return 0


def _training(steps: int, seed: int, out: Path) -> int:
    """The training suite: each model's verdict and sources on stderr as it ends, the
    files written and a verdict a model on stdout."""
    from fpsim.compare import training

    def progress(r: training.TrainingRun) -> None:
        print(f"  {r.model}: {r.verdict}", file=sys.stderr, flush=True)
        for source in r.sources:
            print(f"    step {source.step}: {source}", file=sys.stderr, flush=True)

    runs = training.run(steps, seed, out=out, progress=progress)
    print(f"wrote {out / 'results.json'}, {out / 'results.md'}, "
          f"{out / 'ulp_histograms.png'}\n")
    width = max(len(r.model) for r in runs)
    print("\n".join(f"{r.model:{width}}  {r.verdict}" for r in runs), flush=True)
    return 0
