"""Emulated results against hardware results, bit by bit (the metrics of ``fpsim compare``)."""

from fpsim.compare.metrics import HISTOGRAM_EDGES, Comparison, compare_bits, ulp_distance

__all__ = ["HISTOGRAM_EDGES", "Comparison", "compare_bits", "ulp_distance"]
