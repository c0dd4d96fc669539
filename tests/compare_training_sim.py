"""``fpsim compare --suite training`` under Numba's CUDA simulator with the CuPy stand-in
(``fake_cupy``): the whole suite, at tiny sizes, on device "cuda".

It must run in its own process (``NUMBA_ENABLE_CUDASIM=1`` is read when numba.cuda is
first imported)::

    NUMBA_ENABLE_CUDASIM=1 python tests/compare_training_sim.py OUT [STEPS]

It runs ``fpsim compare --suite training --out OUT --steps STEPS`` (the command's own
``main``) with the models' hidden width 4 and batches of 8, which writes OUT/results.json,
results.md and ulp_histograms.png, its progress to stderr and a verdict a model to
stdout. The stand-in's float16 matmul is NumPy's float32 product rounded to float16, not
a tensor core's, and its sums are NumPy's. The simulator runs each kernel thread as
Python: keep STEPS small (default 2).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fake_cupy  # noqa: E402

sys.modules["cupy"] = fake_cupy  # what fpsim imports as CuPy

from fpsim.compare import command, training  # noqa: E402

_models = training.models


def tiny(hidden: int | None = None, batch: int | None = None) -> list:
    """The suite's models at the simulator's sizes."""
    return _models(hidden or 4, batch or 8)


def main() -> int:
    out = sys.argv[1]
    steps = sys.argv[2] if len(sys.argv) > 2 else "2"
    training.models = tiny
    return command.main(["--suite", "training", "--out", out, "--steps", steps])


if __name__ == "__main__":
    sys.exit(main())
