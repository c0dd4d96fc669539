"""The ``fpsim`` command line.

    fpsim                      table of the preset formats
    fpsim 0.1 1e-8 70000       also round these values to every preset, in every mode
    fpsim bench [...]          throughput benchmark (see ``fpsim.bench``)
    fpsim compare [...]        emulation against hardware (see ``fpsim.compare``)
    fpsim reproduce [...]      the paper's ablations (see ``fpsim.reproduce.command``)
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import fpsim
from fpsim.formats import PRESETS


def format_table() -> str:
    header = f"{'name':10} {'e':>2} {'m':>2} {'bits':>4} {'emin':>6} {'emax':>5} " \
             f"{'max':>12} {'smallest normal':>16} {'smallest subnorm':>17} {'eps':>10}"
    lines = [header]
    for f in PRESETS.values():
        lines.append(
            f"{f.name:10} {f.exp_bits:2d} {f.man_bits:2d} {f.bits:4d} {f.emin:6d} {f.emax:5d} "
            f"{f.max:12.5g} {f.smallest_normal:16.5g} {f.smallest_subnormal:17.5g} {f.eps:10.3g}"
        )
    return "\n".join(lines)


def rounding_table(values: list[float], formats: list[str]) -> str:
    lines = []
    for value in values:
        lines.append(f"\n{value!r}")
        lines.append(f"  {'format':10}" + "".join(f" {m:>14}" for m in fpsim.ROUNDING_MODES[:-1]))
        for name in formats:
            row = [fpsim.round(value, name, m) for m in fpsim.ROUNDING_MODES[:-1]]
            lines.append(f"  {name:10}" + "".join(f" {float(r):14.7g}" for r in row))
    return "\n".join(lines)


def values_after_options(argv: list[str]) -> list[str]:
    """``argv`` with the numbers moved after a ``--``, so that ``fpsim -1e-7`` rounds -1e-7
    instead of reading it as an option (argparse takes only plain negative numbers)."""
    options, values = [], []
    args = iter(argv)
    for arg in args:
        if arg in ("--formats", "--backend"):
            options += [arg, next(args, "")]
            continue
        try:
            float(arg)
        except ValueError:
            options.append(arg)
        else:
            values.append(arg)
    return options + (["--", *values] if values else [])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["bench"]:
        from fpsim.bench import main as bench_main

        return bench_main(argv[1:])
    if argv[:1] == ["compare"]:
        from fpsim.compare.command import main as compare_main

        return compare_main(argv[1:])
    if argv[:1] == ["reproduce"]:
        from fpsim.reproduce.command import main as reproduce_main

        return reproduce_main(argv[1:])
    parser = argparse.ArgumentParser(
        prog="fpsim", description="Bit-exact reduced-precision floating point.",
        epilog="Subcommands: 'fpsim reproduce' replays the paper's ablations; 'fpsim compare' "
               "compares the emulation with hardware; 'fpsim bench' runs the throughput "
               "benchmark.",
    )
    parser.add_argument("values", nargs="*", type=float, help="values to round to each format")
    parser.add_argument("--formats", default=",".join(PRESETS),
                        help="comma-separated formats for the rounding table")
    parser.add_argument("--backend", default="numpy", choices=["numpy", "numba"])
    args = parser.parse_args(values_after_options(argv))
    fpsim.set_backend(args.backend)
    print(f"fpsim {fpsim.__version__}: formats\n")
    print(format_table())
    if args.values:
        try:
            formats = [fpsim.format(name).name for name in args.formats.split(",")]
        except ValueError as exc:
            parser.error(str(exc))
        with np.errstate(all="ignore"):
            print(rounding_table(args.values, formats))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
