"""Format attributes, presets and name lookup, checked against values worked out by hand."""

import numpy as np
import pytest

import fpsim


@pytest.mark.parametrize(
    "name, e, m, bias, emin, emax, maxv, min_normal, min_sub, bits",
    [
        ("fp16", 5, 10, 15, -14, 15, 65504.0, 2.0**-14, 2.0**-24, 16),
        ("bf16", 8, 7, 127, -126, 127, (2 - 2**-7) * 2.0**127, 2.0**-126, 2.0**-133, 16),
        ("tf32", 8, 10, 127, -126, 127, (2 - 2**-10) * 2.0**127, 2.0**-126, 2.0**-136, 19),
        ("fp32", 8, 23, 127, -126, 127, float(np.finfo(np.float32).max), 2.0**-126, 2.0**-149, 32),
        ("fp8_e5m2", 5, 2, 15, -14, 15, 57344.0, 2.0**-14, 2.0**-16, 8),
        ("fp8_e4m3", 4, 3, 7, -6, 8, 448.0, 2.0**-6, 2.0**-9, 8),
    ],
)
def test_presets(name, e, m, bias, emin, emax, maxv, min_normal, min_sub, bits):
    f = fpsim.format(name)
    assert (f.exp_bits, f.man_bits, f.bias, f.emin, f.emax) == (e, m, bias, emin, emax)
    assert f.max == maxv
    assert f.smallest_normal == min_normal
    assert f.smallest_subnormal == min_sub
    assert f.eps == 2.0**-m
    assert f.bits == bits
    assert f.name == name


def test_e4m3_is_finite_style():
    f = fpsim.format("fp8_e4m3")
    assert not f.infinities
    assert fpsim.format("fp8_e5m2").infinities


def test_custom_format_defaults():
    f = fpsim.Format(6, 9)
    assert f.bias == 31 and f.emin == -30 and f.emax == 31
    assert f.max == (2 - 2**-9) * 2.0**31
    assert f.name == "e6m9"
    assert fpsim.Format(6, 9, name="mine").name == "mine"
    assert fpsim.Format(6, 9) == fpsim.Format(6, 9, name="other")


@pytest.mark.parametrize("e, m", [(1, 5), (12, 5), (5, 0), (5, 53), (5.0, 3), (True, 3)])
def test_format_out_of_range(e, m):
    with pytest.raises(ValueError, match="exp_bits|man_bits"):
        fpsim.Format(e, m)


def test_finite_style_needs_narrower_exponent():
    with pytest.raises(ValueError, match="exp_bits=11"):
        fpsim.Format(11, 4, infinities=False)


def test_unknown_name():
    with pytest.raises(ValueError, match="'fp12'"):
        fpsim.format("fp12")
    with pytest.raises(ValueError, match="unknown format"):
        fpsim.round(1.0, "float8")


def test_aliases():
    assert fpsim.format("bfloat16") == fpsim.format("bf16")
    assert fpsim.format("binary16") == fpsim.format("FP16")


def test_storage_dtype():
    assert fpsim.format("fp16").dtype == np.float16
    assert fpsim.format("fp8_e4m3").dtype == np.float16
    assert fpsim.format("bf16").dtype == np.float32
    assert fpsim.Format(8, 30).dtype == np.float64
    assert fpsim.Format(9, 5).dtype == np.float64
