"""The ``fpsim`` command line.

    fpsim                      table of the preset formats
    fpsim 0.1 1e-8 70000       also round these values to every preset, in every mode
    fpsim bench [...]          throughput benchmark (see ``fpsim.bench``)
    fpsim compare [...]        emulation against hardware (see ``fpsim.compare``)
    fpsim reproduce [...]      the paper's ablations (see ``fpsim.reproduce.command``)
"""

from __future__ import annotations

import argparse
import difflib
import importlib
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


SUBCOMMANDS = {
    "bench": ("fpsim.bench", "the throughput benchmark"),
    "compare": ("fpsim.compare.command", "the emulation against hardware, bit by bit"),
    "reproduce": ("fpsim.reproduce.command", "the paper's ablations"),
}
"""Each subcommand: the module whose ``main`` runs it, and what it does."""

USAGE = ("%(prog)s [-h] [--formats F,F,...] [--backend {numpy,numba}] [values ...]\n"
         f"       %(prog)s {{{','.join(SUBCOMMANDS)}}} [-h] ...")


def subcommand(argv: list[str]) -> int:
    """Run the subcommand ``argv[0]`` with the rest of ``argv``; a missing optional
    dependency is one line on stderr (exit status 2), not a traceback."""
    from fpsim._optional import MissingDependency

    try:
        module = importlib.import_module(SUBCOMMANDS[argv[0]][0])
        status: int = module.main(argv[1:])
    except MissingDependency as exc:
        print(f"fpsim {argv[0]}: error: {exc}", file=sys.stderr)
        return 2
    return status


def not_a_subcommand(word: str) -> str:
    """The error for a first argument that is neither a subcommand nor a number."""
    message = f"{word!r} is neither a subcommand ({', '.join(SUBCOMMANDS)}) nor a number"
    close = difflib.get_close_matches(word, list(SUBCOMMANDS), n=1)
    return message + (f"; did you mean {close[0]!r}?" if close else "")


def main(argv: list[str] | None = None) -> int:
    """Run the ``fpsim`` command line on ``argv`` (``sys.argv[1:]`` by default).

    Parameters
    ----------
    argv : list of str, optional
        The arguments: a subcommand and its own, or values to round.

    Returns
    -------
    int
        The exit status: 0, or 2 for an error (argparse's, or a missing optional
        dependency).

    Examples
    --------
    >>> main(["--formats", "fp8_e4m3", "0.1"])  # doctest: +ELLIPSIS
    fpsim ...: formats
    ...
    0.1
      format       nearest_even   nearest_away ...
      fp8_e4m3        0.1015625      0.1015625 ...
    0
    """
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] and argv[0] in SUBCOMMANDS:
        return subcommand(argv)
    parser = argparse.ArgumentParser(
        prog="fpsim", usage=USAGE, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Bit-exact reduced-precision floating point: the preset formats, and "
                    "the given values rounded to each.",
        epilog="subcommands (fpsim SUBCOMMAND -h for each one's options):\n" + "\n".join(
            f"  {name:11} {what}" for name, (_, what) in SUBCOMMANDS.items()),
    )
    parser.add_argument("values", nargs="*", type=float, help="values to round to each format")
    parser.add_argument("--formats", default=",".join(PRESETS), metavar="F,F,...",
                        help="comma-separated formats for the rounding table")
    parser.add_argument("--backend", default="numpy", choices=["numpy", "numba"])
    if argv[:1] and not argv[0].startswith("-"):
        try:
            float(argv[0])
        except ValueError:
            parser.error(not_a_subcommand(argv[0]))
    args = parser.parse_args(values_after_options(argv))
    try:  # before anything is printed
        formats = [fpsim.format(name).name for name in args.formats.split(",")]
    except ValueError as exc:
        parser.error(f"--formats: {exc}")
    fpsim.set_backend(args.backend)
    print(f"fpsim {fpsim.__version__}: formats\n")
    print(format_table())
    if args.values:
        with np.errstate(all="ignore"):
            print(rounding_table(args.values, formats))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
