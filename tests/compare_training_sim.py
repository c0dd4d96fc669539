"""``fpsim compare --suite training`` under Numba's CUDA simulator with the CuPy stand-in
(``fake_cupy``): the whole suite, at tiny sizes, on device "cuda".

It must run in its own process (``NUMBA_ENABLE_CUDASIM=1`` is read when numba.cuda is
first imported)::

    NUMBA_ENABLE_CUDASIM=1 python tests/compare_training_sim.py OUT [STEPS]

It writes OUT/results.json, results.md and ulp_histograms.png and prints one line a model:
``RUN name verdict``. The stand-in's float16 matmul is NumPy's float32 product rounded to
float16, not a tensor core's, so the runs part there at the products. The simulator runs
each kernel thread as Python: keep STEPS small (default 2).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fake_cupy  # noqa: E402

sys.modules["cupy"] = fake_cupy  # what fpsim imports as CuPy

from fpsim.compare import training  # noqa: E402


def main() -> int:
    out = Path(sys.argv[1])
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    for run in training.run(steps, 0, out=out, hidden=4, batch=8):
        print(f"RUN {run.model} {run.verdict}", flush=True)
        for source in run.sources:
            print(f"  SOURCE {source}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
