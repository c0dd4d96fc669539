"""``fpsim compare [--suite cpu|gpu|all] [--out DIR] [--size N] [--seed S]``."""

from __future__ import annotations

import argparse

from fpsim._checks import output_folder
from fpsim.compare.cases import Record
from fpsim.compare.report import verdicts
from fpsim.compare.run import DEFAULT_SEED, DEFAULT_SIZE, SUITES, run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="fpsim compare",
        description="Compare fpsim's emulation with what hardware computes, bit by bit: "
                    "NumPy's float16, ml_dtypes' casts, the CPU's binary16, BLAS (cpu); "
                    "CuPy's float16, CUDA conversions and cuBLAS (gpu).")
    parser.add_argument("--suite", default="cpu", choices=SUITES)
    parser.add_argument("--out", default="fpsim-compare",
                        help="folder for results.json, results.md and ulp_histograms.png "
                             "(default: fpsim-compare)")
    parser.add_argument("--size", type=int, default=DEFAULT_SIZE,
                        help=f"elements per elementwise case (default {DEFAULT_SIZE})")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="inputs' random seed")
    args = parser.parse_args(argv)
    if args.size < 64:
        parser.error(f"--size must be at least 64, got {args.size}")
    if args.seed < 0:
        parser.error(f"--seed must be non-negative, got {args.seed}")
    try:
        out = output_folder(args.out)
    except ValueError as exc:
        parser.error(f"--out: {exc}")

    def progress(record: Record) -> None:
        print(f"  {record.name}: {record.verdict}", flush=True)

    print(f"fpsim compare --suite {args.suite}, size {args.size}, seed {args.seed}")
    records = run(args.suite, size=args.size, seed=args.seed, out=out, progress=progress)
    print(f"\nwrote {out / 'results.json'}, {out / 'results.md'}, "
          f"{out / 'ulp_histograms.png'}\n")
    print(verdicts(records))
    return 0
