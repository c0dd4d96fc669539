"""Plans of earlier calls (``fpsim._elementwise``): a call like one before skips the
validation that made its plan. Every variant a cached plan must not serve (another type
of an option, a read-only or overlapping ``out``, another layout or byte order, another
backend) gets what a first call gets: the exact reference's bits or the same error.
"""

import numpy as np
import pytest
from reference import ref_round

import fpsim
from fpsim import _elementwise
from fpsim.backends import backend, numba_backend, numpy_backend


def values(n: int = 64) -> np.ndarray:
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n) * np.exp2(rng.integers(-30, 20, n))
    x[:4] = [np.nan, -0.0, 65520.0, 2.0**-25]
    return x.astype(np.float32)


def reference(x: np.ndarray, fmt: str, mode: str = "nearest_even") -> np.ndarray:
    return np.array([ref_round(float(v), fmt, mode)[0] for v in x.reshape(-1)],
                    dtype=np.float64).reshape(x.shape)


def same(got, want) -> bool:
    got = np.asarray(got, dtype=np.float64)
    number = ~np.isnan(want)
    return got.shape == want.shape and bool(np.array_equal(got, want, equal_nan=True)) and bool(
        np.array_equal(np.signbit(got[number]), np.signbit(want[number])))


@pytest.mark.parametrize("option, value", [
    ("subnormals", 1), ("subnormals", "yes"), ("saturate", 0), ("saturate", None),
    ("flags", 1), ("random_bits", 53.0), ("random_bits", True), ("random_bits", 0),
])
def test_options_equal_to_valid_ones_are_still_refused(backend_name, option, value):
    x = values()
    valid = {"random_bits": 53}.get(option, False if option != "subnormals" else True)
    fpsim.round(x, "bf16", "stochastic", seed=1, **{option: valid})
    fpsim.round(x, "bf16", "stochastic", seed=1, **{option: valid})
    with pytest.raises(ValueError, match=option):
        fpsim.round(x, "bf16", "stochastic", seed=1, **{option: value})


@pytest.mark.parametrize("fmt, rounding", [(["fp16"], "nearest_even"), ({}, "nearest_even"),
                                           ("fp16", ["up"]), ("fp16", "near")])
def test_unhashable_or_unknown_options_get_the_first_call_error(fmt, rounding):
    x = values()
    fpsim.round(x, "fp16")
    with pytest.raises(ValueError):
        fpsim.round(x, fmt, rounding)


def test_a_read_only_out_is_refused_after_a_writeable_one(backend_name):
    x = values()
    out = np.empty_like(x)
    fpsim.round(x, "fp16", out=out)
    frozen = np.empty_like(x)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        fpsim.round(x, "fp16", out=frozen)


def test_an_overlapping_out_after_a_separate_one(backend_name):
    n = numba_backend.CONVERT_FROM  # long enough for the loops to store float16 results
    x = values(n)
    want = reference(x, "fp16")
    fpsim.round(x, "fp16", out=np.empty(n, np.float16))
    # float16 results over the upper half of x's bytes: written in place, they would
    # overwrite elements of x not yet read.
    out = x.view(np.float16)[n:]
    fpsim.round(x, "fp16", out=out)
    assert same(out, want)


@pytest.mark.parametrize("variant", ["transposed", "strided", "byteswapped", "float16"])
def test_operands_of_another_layout_or_byte_order(backend_name, variant):
    x = values(64).reshape(8, 8)
    fpsim.round(x, "fp16")
    other = {
        "transposed": x.T,
        "strided": np.repeat(x, 2, axis=1)[:, ::2],
        "byteswapped": x.astype(x.dtype.newbyteorder()),
        "float16": np.asarray(fpsim.round(x, "fp16"), np.float16),
    }[variant]
    assert other.shape == x.shape
    got = fpsim.round(other, "fp16", "up")
    again = fpsim.round(other, "fp16", "up")
    want = reference(np.asarray(other, np.float32), "fp16", "up")
    assert same(got, want) and same(again, want)


def test_unrepresentable_operands_after_representable_ones(backend_name):
    a = np.asarray(fpsim.round(values(), "fp16"))
    fpsim.add(a, a, "fp16")
    b = a.copy()
    b[7] = np.float32(1 + 2.0**-20)
    with pytest.raises(ValueError, match=r"operand a=.*index \(7,\).*not representable in fp16"):
        fpsim.add(b, a, "fp16")


def test_each_call_runs_on_the_backend_in_force(monkeypatch):
    calls = []
    real = numpy_backend.Backend.apply

    def spy(self, *args, **kwargs):
        calls.append(1)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(numpy_backend.Backend, "apply", spy)
    x = values()
    with backend("numba"):
        first = fpsim.round(x, "bf16")
    with backend("numpy"):
        second = fpsim.round(x, "bf16")
    assert calls == [1]
    assert np.array_equal(first.view(np.uint32), second.view(np.uint32))


def test_the_plans_kept_are_bounded(monkeypatch):
    monkeypatch.setattr(_elementwise, "_PLANS", {})
    monkeypatch.setattr(_elementwise, "MAX_PLANS", 3)
    for n in range(4, 13):
        x = values(n)
        assert same(fpsim.round(x, "fp8_e4m3"), reference(x, "fp8_e4m3"))
        assert len(_elementwise._PLANS) <= 3
    assert len(_elementwise._PLANS) >= 1
