"""Emulated results against what hardware computes, bit by bit (``fpsim compare``).

``run(suite, size=..., seed=..., out=...)`` runs the CPU or GPU suite and returns a
``Record`` per case; ``compare_bits`` and ``ulp_distance`` are its metrics.
"""

from fpsim.compare.cases import Case, Record, evaluate
from fpsim.compare.metrics import HISTOGRAM_EDGES, Comparison, compare_bits, ulp_distance
from fpsim.compare.run import SUITES, run

__all__ = ["HISTOGRAM_EDGES", "SUITES", "Case", "Comparison", "Record", "compare_bits",
           "evaluate", "run", "ulp_distance"]
