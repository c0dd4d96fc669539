"""Counter-based random stream: SplitMix64 keyed by (seed, element index)."""

import numpy as np

from fpsim.kernels.prims import i64, u64

GOLDEN = np.uint64(0x9E3779B97F4A7C15)
MIX1 = np.uint64(0xBF58476D1CE4E5B9)
MIX2 = np.uint64(0x94D049BB133111EB)
S11 = np.uint64(11)
S27 = np.uint64(27)
S30 = np.uint64(30)
S31 = np.uint64(31)
ONE = np.uint64(1)


def mix64(z):
    """The SplitMix64 output function (Steele, Lea, Flood 2014), uint64 in and out."""
    z = (z ^ (z >> S30)) * MIX1
    z = (z ^ (z >> S27)) * MIX2
    return z ^ (z >> S31)


def random53(key, index):
    """53 random bits for element ``index`` of the stream ``key``: the index-th SplitMix64 draw."""
    return i64(mix64(key + (u64(index) + ONE) * GOLDEN) >> S11)
