"""``fpsim reproduce``: run the studies of ``experiments/`` and write ``results.json``,
PNG figures and ``results.md`` into the output folder.

Training runs are cached in ``OUT/cache`` by configuration: run the same command again
after an interruption and it continues where it stopped.
"""

from __future__ import annotations

import argparse
import importlib
import platform
import sys
import time
from pathlib import Path

from fpsim._optional import MissingDependency
from fpsim.reproduce import results
from fpsim.reproduce.ablations import ABLATIONS, NATIVE_ABLATIONS
from fpsim.reproduce.session import Session
from fpsim.reproduce.tasks import TASKS
from fpsim.sweep.local import default_jobs
from fpsim.sweep.provenance import version
from fpsim.sweep.run import one_thread
from fpsim.sweep.task import gpu_identity

# The studies, in the order results.md presents them (modules of fpsim.experiments,
# which is the repository's experiments/ folder).
STUDIES = ("final_metrics", "training_curves", "gradient_histograms", "lost_updates",
           "loss_scale", "gradient_scale", "accumulation_error", "gradient_error")
#: Studies run only when ``--only`` names them or their group: the FP8 and FP4 recipes
#: (an hour and more of training on two cores, beyond ``--quick``'s ten minutes).
OPTIONAL = ("fp8_recipes", "fp8_telemetry")
#: ``--only`` names for several studies.
GROUPS = {"fp8": OPTIONAL}
SEEDS = {"quick": 2, "full": 3}


def study(name: str):
    """The module of study ``name``."""
    if name not in (*STUDIES, *OPTIONAL):
        raise ValueError(f"unknown study {name!r}; known studies: "
                         f"{', '.join((*STUDIES, *OPTIONAL))}")
    return importlib.import_module(f"fpsim.experiments.{name}")


def expand(names: list[str]) -> list[str]:
    """Study names with each group (``GROUPS``) replaced by its studies, each once."""
    return list(dict.fromkeys(s for n in names for s in GROUPS.get(n, (n,))))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="fpsim reproduce",
        description="Replay the ablations of 'Mixed Precision Training' (Micikevicius et "
                    "al., 2018): figures, a results table and results.json.")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", dest="budget", action="store_const", const="quick",
                      help="fewer steps and seeds (the default; minutes)")
    size.add_argument("--full", dest="budget", action="store_const", const="full",
                      help="the budget behind docs/results.md")
    size.add_argument("--gpu-budget", dest="budget", action="store_const", const="gpu",
                      help="the full budget, with the language model at batches of 2^14 "
                           "tokens (for --device gpu)")
    p.set_defaults(budget="quick")
    p.add_argument("--device", choices=("cpu", "gpu"), default="cpu",
                   help="where the runs train (default: cpu); gpu: CuPy on a GPU, each "
                        "ablation emulated and native side by side")
    p.add_argument("--out", default="fpsim-results", help="output folder (default: %(default)s)")
    p.add_argument("--seeds", type=int, default=None,
                   help=f"seeds per configuration (default: {SEEDS['quick']} quick, "
                        f"{SEEDS['full']} full)")
    p.add_argument("--only", nargs="+", metavar="NAME", choices=[*STUDIES, *OPTIONAL, *GROUPS],
                   help=f"run only these studies: {', '.join(STUDIES)}; or fp8 (the FP8 "
                        f"and FP4 recipes: {', '.join(OPTIONAL)}), which runs only when "
                        "named")
    p.add_argument("--tasks", nargs="+", choices=list(TASKS), default=list(TASKS),
                   metavar="TASK", help=f"tasks to train (default: all of {', '.join(TASKS)})")
    p.add_argument("--policies", nargs="+", choices=[*ABLATIONS, *NATIVE_ABLATIONS],
                   default=None, metavar="POLICY",
                   help=f"policies to train (default: all of {', '.join(ABLATIONS)}; with "
                        f"--device gpu also {', '.join(NATIVE_ABLATIONS)})")
    p.add_argument("--jobs", type=int, default=default_jobs(),
                   help="training runs in parallel processes (default: %(default)s)")
    p.add_argument("--scheduler", metavar="ADDRESS", default=None,
                   help="train on a Dask cluster instead: a scheduler's address "
                        "(tcp://host:8786), or local:N for a LocalCluster of N worker "
                        "processes; needs pip install 'fpsim[cluster]' (see docs/sweeps.md)")
    return p


def reproduce(session: Session, names: list[str]) -> dict:
    """Run the studies ``names`` and write everything into ``session.out``."""
    modules = [study(n) for n in names]
    session.out.mkdir(parents=True, exist_ok=True)
    session.ensure([spec for m in modules for spec in m.needs(session)])
    studies, sections, used = {}, [], {}
    for m in modules:
        started = time.perf_counter()
        result = m.run(session)
        files = m.figures(result, session.out)
        studies[m.NAME] = dict(result, figures=files)
        sections.append(f"## {m.TITLE}\n\n{m.markdown(result, files)}\n")
        for spec in m.needs(session):
            used[spec] = session.cached_run(spec)
        print(f"{m.NAME}: done in {time.perf_counter() - started:.0f}s", file=session.stream)
    document = dict(
        fpsim=version(), budget=session.budget, seeds=session.seeds, device=where(session),
        tasks=list(session.tasks), policies=list(session.policies),
        python=platform.python_version(), runs=list(used.values()), studies=studies,
    )
    results.write(session.out / "results.json", document)
    header = (f"# fpsim reproduction of \"Mixed Precision Training\"\n\n"
              f"fpsim {version()}, budget `{session.budget}`, on {where(session)}, "
              f"{session.seeds} seeds, tasks "
              f"{', '.join(session.tasks)}; policies {', '.join(session.policies)}.\n"
              f"Generated by `fpsim reproduce`; the numbers are in results.json.\n\n")
    (session.out / "results.md").write_text(header + "\n".join(sections))
    return document


def where(session: Session) -> str:
    """The device the session's runs train on, with the GPU's identity."""
    return "cpu" if session.device == "cpu" else f"cuda ({gpu_identity()})"


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(sys.argv[1:] if argv is None else argv)
    device = "cuda" if args.device == "gpu" else "cpu"
    policies = args.policies or [*ABLATIONS, *(NATIVE_ABLATIONS if device == "cuda" else ())]
    try:
        seeds = SEEDS.get(args.budget, SEEDS["full"]) if args.seeds is None else args.seeds
        session = Session(out=Path(args.out), budget=args.budget, seeds=seeds,
                          tasks=tuple(args.tasks), policies=tuple(policies),
                          jobs=args.jobs, stream=sys.stderr, executor=args.scheduler,
                          device=device)
    except (ValueError, MissingDependency, ConnectionError, RuntimeError) as exc:
        parser().error(str(exc))
    started = time.perf_counter()
    try:
        with one_thread():
            reproduce(session, expand(args.only or list(STUDIES)))
    except KeyboardInterrupt:
        print(f"\ninterrupted; finished runs are kept in {session.cache.root}: run the same "
              "command again to continue", file=sys.stderr)
        return 130
    finally:
        session.executor.close()
    # What was written goes to stdout, progress to stderr (as fpsim compare does).
    print(f"wrote {session.out / 'results.md'}, results.json and figures in "
          f"{time.perf_counter() - started:.0f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
