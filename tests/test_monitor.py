"""Gradient instrumentation, checked against NumPy's float16 casts and math.frexp."""

import math

import numpy as np

import fpsim
from fpsim import nn
from fpsim.nn import functional as F
from fpsim.training import (
    FlushCounter,
    GradientCounts,
    exponent_histogram,
    flushed_fraction,
    gradients,
)


def test_gradient_counts_classify_in_the_format():
    fp16 = fpsim.format("fp16")
    v = np.array([0.0, -0.0, 2.0**-15, -2.0**-24, 2.0**-14, 1.0, np.inf, np.nan])
    counts = GradientCounts.of([v[:4], v[4:]], fp16)
    assert (counts.total, counts.zero, counts.subnormal, counts.overflow) == (8, 2, 2, 2)
    assert counts.fraction("zero") == 0.25
    assert GradientCounts().fraction("zero") == 0.0


def test_exponent_histogram_matches_frexp():
    rng = np.random.default_rng(0)
    values = rng.standard_normal(500) * np.exp2(rng.integers(-40, 10, 500))
    values[:7] = 0.0
    exps, counts, zeros = exponent_histogram([values[:250], values[250:]], lo=-30, hi=5)
    expected = np.zeros(35, dtype=np.int64)
    for v in values[7:]:
        e = math.frexp(abs(v))[1] - 1  # |v| = m * 2**e with 1 <= m < 2
        expected[min(max(e, -30), 4) + 30] += 1
    assert zeros == 7
    np.testing.assert_array_equal(exps, np.arange(-30, 5))
    np.testing.assert_array_equal(counts, expected)


def test_flushed_fraction_is_what_fp16_rounds_to_zero():
    rng = np.random.default_rng(1)
    values = rng.uniform(-1, 1, 2000) * np.exp2(rng.integers(-34, -10, 2000))
    for scale in (1.0, 8.0, 2.0**10):
        expected = np.mean((values * scale).astype(np.float16) == 0)
        assert flushed_fraction([values], "fp16", scale=scale) == expected
    assert flushed_fraction([values], "fp16") > flushed_fraction([values], "fp16", 8.0) > 0


def test_gradients_finds_activation_and_weight_gradients():
    nn.manual_seed(0)
    policy = fpsim.precision.parse("mixed")
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)).to(policy)
    with policy:
        loss = F.cross_entropy(model(np.ones((5, 3))), np.zeros(5, dtype=np.int64))
        loss.backward()
    acts, weights = gradients(loss, policy.compute)
    assert len(weights) == 4  # the fp16 copies of two weights and two biases
    assert sorted(w.size for w in weights) == [2, 4, 8, 12]
    assert all(a.dtype == np.float64 for a in acts) and len(acts) >= 4


def test_flush_counter_counts_gradients_that_round_to_zero():
    """Backward from 2**-13 through sum(x * w): dx = 2**-13 * w, in fp16 below the
    smallest subnormal 2**-24 for w = 2**-13 (flushed), above it for w = 2**-9; 0 stays 0."""
    policy = fpsim.precision.parse("mixed")
    w = np.array([2.0**-13, 2.0**-9, 0.0])

    def backward(seed):
        with policy:
            x = fpsim.tensor([1.0, 2.0, 3.0], requires_grad=True)
            loss = F.sum(x * w)
            with FlushCounter("fp16") as counter:
                loss.backward(seed)
        return x.grad, counter

    grad, counter = backward(2.0**-13)
    assert grad.tolist() == [0.0, 2.0**-22, 0.0]
    assert counter.flushed == 1
    assert counter.nonzero >= 2
    assert counter.fraction == 1 / counter.nonzero
    grad, scaled = backward(2.0**-13 * 2.0**10)  # a loss scale of 2**10
    assert grad.tolist() == [2.0**-16, 2.0**-12, 0.0]
    assert scaled.flushed == 0 and scaled.nonzero == counter.nonzero


def test_trainer_reports_flushes_that_a_loss_scale_prevents():
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((64, 20)), rng.integers(0, 10, 64)

    def flushed(scale):
        nn.manual_seed(0)
        model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 10))
        trainer = fpsim.training.Trainer(model, fpsim.optim.SGD(model.parameters(), lr=0.1),
                                         "mixed", loss_scale=scale)
        return trainer.step(lambda: F.cross_entropy(model(x) * 16.0, y)).flushed_fraction

    assert flushed(None) > 0.002
    assert flushed(2.0**12) < flushed(None) / 10


def test_flushed_fraction_rejects_a_bad_scale():
    import pytest

    for scale in (math.nan, math.inf, -math.inf, 0.0, -2.0, "8", None, True):
        with pytest.raises(ValueError, match="scale must be a finite positive number"):
            flushed_fraction([np.array([1e-8])], "fp16", scale=scale)
    assert flushed_fraction([np.array([1e-8])], "fp16", scale=np.float32(2.0**20)) == 0.0
