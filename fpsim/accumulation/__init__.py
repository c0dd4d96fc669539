"""Emulated accumulation: dot, matmul, sum and conv2d with a chosen accumulator."""

from fpsim.accumulation.conv import conv2d
from fpsim.accumulation.matmul import dot, matmul
from fpsim.accumulation.reduce import sum
from fpsim.accumulation.stats import AccumulationStats

__all__ = ["AccumulationStats", "conv2d", "dot", "matmul", "sum"]
