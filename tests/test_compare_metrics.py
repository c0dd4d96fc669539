"""The comparison metrics of fpsim.compare, against ranks in the sorted list of every
value of the format (exhaustive for the 8-bit formats, sampled pairs for fp16)."""

import numpy as np
import pytest

import fpsim
from fpsim.compare import HISTOGRAM_EDGES, compare_bits, ulp_distance


def ranks(fmt):
    """Every encoding of fmt and its rank among the format's values (-0 and +0 one value;
    NaN: -1)."""
    f = fpsim.formats.as_format(fmt)
    codes = np.arange(2**f.bits)
    values = np.asarray(fpsim.from_bits(codes, fmt), dtype=np.float64)
    ordered = np.unique(values[~np.isnan(values)])  # -0 == +0: one value
    rank = np.searchsorted(ordered, values)
    rank[np.isnan(values)] = -1
    return codes, rank


@pytest.mark.parametrize("fmt", ["fp8_e4m3", "fp8_e5m2"])
def test_every_pair_of_8_bit_encodings(fmt):
    codes, rank = ranks(fmt)
    x, y = np.meshgrid(codes, codes)
    got = ulp_distance(x, y, fmt)
    rx, ry = rank[x], rank[y]
    exp = np.abs(rx - ry).astype(float)
    exp[(rx < 0) & (ry < 0)] = 0
    exp[(rx < 0) != (ry < 0)] = np.inf
    assert np.array_equal(got, exp)


def test_fp16_pairs():
    codes, rank = ranks("fp16")
    rng = np.random.default_rng(0)
    x = rng.integers(0, 2**16, 200_000)
    y = np.where(rng.random(x.size) < 0.5, x + rng.integers(-40, 41, x.size), rng.integers(
        0, 2**16, x.size)).clip(0, 2**16 - 1)
    got = ulp_distance(x, y, "fp16")
    ok = (rank[x] >= 0) & (rank[y] >= 0)
    assert np.array_equal(got[ok], np.abs(rank[x] - rank[y])[ok])


def test_known_distances():
    one, next_up, max16, inf = 0x3C00, 0x3C01, 0x7BFF, 0x7C00
    d = ulp_distance([one, 0x0000, 0x0001, max16, 0x7E00, 0x7E00],
                     [next_up, 0x8000, 0x8001, inf, 0x7E01, one], "fp16")
    assert d.tolist() == [1, 0, 2, 1, 0, np.inf]


def test_comparison_summary():
    emulated = np.array([0x3C00, 0x3C00, 0x3C00, 0x3C00, 0x7E00], dtype=np.uint16)
    hardware = np.array([0x3C00, 0x3C01, 0x3C03, 0x3C20, 0x3C00], dtype=np.uint16)
    c = compare_bits(emulated, hardware, "fp16")
    assert (c.size, c.identical, c.max_ulp, c.median_ulp) == (5, 0.2, np.inf, 3.0)
    assert len(c.histogram) == len(HISTOGRAM_EDGES) + 1
    # bins: 0 | 1 | 2 | 3-4 | 5-8 | 9-16 | 17-32 | ... ; the last counts NaN against a number
    assert c.histogram[:7] == (1, 1, 0, 1, 0, 0, 1) and c.histogram[-1] == 1
    assert sum(c.histogram) == 5
    assert c.as_dict()["histogram"] == list(c.histogram)
    # +0 against -0: zero ulps apart, yet not the same bits
    z = compare_bits(np.array([0x0000]), np.array([0x8000]), "fp16")
    assert (z.identical, z.max_ulp) == (0.0, 0.0)


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="integer array"):
        ulp_distance(np.array([1.0]), np.array([1]), "fp16")
    with pytest.raises(ValueError, match="0..2\\*\\*8-1"):
        ulp_distance(np.array([256]), np.array([1]), "fp8_e4m3")
    with pytest.raises(ValueError, match="shapes differ"):
        ulp_distance(np.array([1, 2]), np.array([1]), "fp16")
    with pytest.raises(ValueError, match="unknown format"):
        ulp_distance(np.array([1]), np.array([1]), "fp12")
    with pytest.raises(ValueError, match="empty"):
        compare_bits(np.array([], dtype=np.uint16), np.array([], dtype=np.uint16), "fp16")
