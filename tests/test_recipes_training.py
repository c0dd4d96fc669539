"""Optimizer precision (master copies, scaled FP8 states, stochastic and Kahan-compensated
updates) and the recipes' telemetry, against exact references (``reference.py``:
``ref_round``, ``ref_add``, ``ref_mul``, ``ref_div``, each exact then rounded once).

Kahan's compensated summation is the update ``y = -u - c; t = w + y; c = (t - w) - y``
(Kahan, 1965; used for bf16 weight updates by Zamirai et al., "Revisiting BFloat16
Training", 2020). Stochastic rounding with a budget of r random bits rounds away from zero
when R < floor(f * 2**r), f the discarded fraction (docs/semantics.md).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from reference import ref_add, ref_div, ref_mul, ref_round

import fpsim
from fpsim import nn, optim, training
from fpsim.nn import functional as F
from fpsim.precision import parse


def bf16_params(values, policy="bf16,params=bf16"):
    with parse(policy):
        return nn.Parameter(values)


def test_an_optimizers_fp32_master_copy_of_bf16_weights():
    w = bf16_params([1.0, 0.5, -2.0])
    opt = optim.SGD([w], lr=0.1, master="fp32", policy="bf16,params=bf16")
    master = [1.0, 0.5, -2.0]
    for g in ([1e-3, 3e-3, -7e-3], [2e-4, -1e-4, 5e-5]):
        w.grad = np.array(g)
        opt.step()
        for i, gi in enumerate(g):
            u = ref_round(Fraction(ref_mul(0.1, gi, "fp64")[0]), "fp32")[0]
            master[i] = ref_add(master[i], -u, "fp32")[0]
        np.testing.assert_array_equal(opt.state[id(w)]["master"], master)
        np.testing.assert_array_equal(w.data, [ref_round(m, "bf16")[0] for m in master])
    # The bf16 weights alone lose these updates (absorbed in bf16).
    w2 = bf16_params([1.0, 0.5, -2.0])
    plain = optim.SGD([w2], lr=0.1, policy="bf16,params=bf16")
    w2.grad = np.array([2e-4, -1e-4, 5e-5])
    plain.step()
    assert plain.absorbed == 3 and np.array_equal(w2.data, [1.0, 0.5, -2.0])


def test_a_master_in_the_optimizer_trains_as_a_master_in_the_parameters():
    # Without a bias (a bf16 parameter's gradient is stored in bf16), from bf16 values.
    def run(policy, **options):
        nn.manual_seed(0)
        model = nn.Linear(6, 3, bias=False)
        model.weight.data = np.asarray(fpsim.round(model.weight.data, "bf16"))
        opt = optim.SGD(model.parameters(), lr=0.05, momentum=0.9, **options)
        trainer = training.Trainer(model, opt, policy)
        x = np.random.default_rng(0).normal(size=(8, 6))
        for _ in range(3):
            trainer.step(lambda: F.mse_loss(model(x), np.ones((8, 3))))
        return [p.data for p in model.parameters()], opt

    fp32, _ = run("bf16,order=sequential")
    bf16, opt = run("bf16,params=bf16,order=sequential", master="fp32", state_format="fp32")
    for a, b in zip(fp32, bf16, strict=True):
        np.testing.assert_array_equal(b, np.asarray(fpsim.round(a, "bf16")))
    np.testing.assert_array_equal(opt.state[id(opt.params[0])]["master"], fp32[0])


def test_stochastic_updates_and_their_random_bit_budget():
    n = 4096
    # 1 - 2**-10 lies a quarter of the way from 1 down to 1 - 2**-8, bf16's neighbour: the
    # discarded fraction is f = 3/4, and 1.0 (away from zero) is drawn with probability
    # floor(f * 2**r) / 2**r: 3/4 with every bit or r = 2, 1/2 with r = 1.
    for bits, low, high in ((None, 0.22, 0.28), (2, 0.22, 0.28), (1, 0.47, 0.53)):
        w = bf16_params(np.ones(n))
        opt = optim.SGD([w], lr=1.0, update_rounding="stochastic", random_bits=bits,
                        policy="bf16,params=bf16,seed=7")
        w.grad = np.full(n, 2.0**-10)
        opt.step()
        assert set(np.unique(w.data)) <= {1.0, 1 - 2.0**-8}
        share = np.mean(w.data != 1.0)
        assert low <= share <= high, (bits, share)
    # The same seed draws the same bits; another seed others.
    runs = []
    for seed in (7, 7, 8):
        w = bf16_params(np.ones(64))
        opt = optim.SGD([w], lr=1.0, update_rounding="stochastic",
                        policy=f"bf16,params=bf16,seed={seed}")
        w.grad = np.full(64, 2.0**-10)
        opt.step()
        runs.append(w.data.copy())
    assert np.array_equal(runs[0], runs[1]) and not np.array_equal(runs[0], runs[2])


def test_kahan_compensated_updates_against_the_reference():
    w = bf16_params([1.0, 3.0])
    opt = optim.SGD([w], lr=1.0, kahan=True, policy="bf16,params=bf16")
    ref_w, ref_c = [1.0, 3.0], [0.0, 0.0]
    for step in range(12):
        g = [2.0**-10, 3 * 2.0**-11]
        w.grad = np.array(g)
        opt.step()
        for i in range(2):
            u = ref_round(g[i], "bf16")[0]
            y = ref_add(-u, -ref_c[i], "bf16")[0]
            t = ref_add(ref_w[i], y, "bf16")[0]
            ref_c[i] = ref_add(ref_add(t, -ref_w[i], "bf16")[0], -y, "bf16")[0]
            ref_w[i] = t
        np.testing.assert_array_equal(w.data, ref_w, err_msg=f"step {step}")
        np.testing.assert_array_equal(opt.state[id(w)]["compensation"], ref_c)
    # Twelve updates of 2**-10 each, not lost: the weight moved as the exact sum would.
    assert abs(w.data[0] - (1 - 12 * 2.0**-10)) <= 2.0**-8


def test_scaled_fp8_optimizer_states_against_the_reference():
    w = nn.Parameter([1.0, -2.0, 0.5, 3.0])
    opt = optim.SGD([w], lr=0.1, momentum=0.9, state_format="fp8_e4m3",
                    state_scaling="tensor")
    g = [1e-3, -2.5e-4, 7e-6, 3e-3]
    w.grad = np.array(g)
    opt.step()
    scale = ref_div(448.0, max(abs(v) for v in g), "fp32")[0]  # TransformerEngine's rule
    decode = ref_div(1.0, scale, "fp32")[0]
    want = [ref_round(Fraction(ref_mul(v, scale, "fp32")[0]), "fp8_e4m3", "nearest_even", True,
                      True)[0] * decode for v in g]
    np.testing.assert_array_equal(opt.state[id(w)]["momentum_buffer"], want)
    # Unscaled, e4m3 would flush the 7e-6 and keep the others coarsely.
    plain = optim.SGD([nn.Parameter([0.0])], lr=0.1, momentum=0.9, state_format="fp8_e4m3")
    plain.params[0].grad = np.array([7e-6])
    plain.step()
    assert plain.state[id(plain.params[0])]["momentum_buffer"][0] == 0.0


@pytest.mark.parametrize("options, match", [
    (dict(master="fp17"), "unknown format"),
    (dict(state_scaling="block"), "state_scaling takes None or 'tensor'"),
    (dict(update_rounding="nearest"), "unknown rounding mode"),
    (dict(random_bits=8), "random_bits is the budget of stochastic updates"),
    (dict(update_rounding="stochastic", random_bits=0), "random_bits must be an integer"),
    (dict(kahan="yes"), "kahan must be True or False"),
])
def test_bad_optimizer_precision_is_refused(options, match):
    with pytest.raises(ValueError, match=match):
        optim.SGD(nn.Linear(2, 2).parameters(), lr=0.1, **options)


# -- telemetry -----------------------------------------------------------------------

def spiked_run(policy: str):
    nn.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
    trainer = training.Trainer(model, optim.SGD(model.parameters(), lr=0.01), policy)
    x = np.random.default_rng(0).normal(size=(4, 8))
    with training.RecipeMonitor(model) as monitor:
        for scale in (1.0, 1.0, 1.0, 50.0, 1.0):  # a spike at the fourth step
            xs = x * scale
            trainer.step(lambda xs=xs: F.mse_loss(model(xs), np.zeros((4, 2))))
    return monitor


def test_a_stale_delayed_scale_after_a_spike_shows_in_the_monitor():
    monitor = spiked_run("fp8_hybrid_delayed,act=fp8_e4m3:delayed:history=2")
    act = ("layers.0.weight", "act")
    assert len(monitor.steps) == 5
    assert monitor.series(*act, "stale") == [False, False, False, True, False]
    saturated = monitor.series(*act, "saturated")
    assert saturated[3] > 0.5 and saturated[4] == 0.0 and max(saturated[:3]) == 0.0
    # The history holds each step's amax at its start, then rolls (length 2).
    amax = monitor.series(*act, "amax")
    assert [h[0] for h in monitor.series(*act, "history")] == [np.float32(a) for a in amax]
    # After the spike the history's max keeps the scale small for one more step.
    assert monitor.series(*act, "scale")[4] == monitor.series(*act, "scale")[4]
    current = spiked_run("fp8_hybrid_current")  # the tensor's own amax: nothing saturates
    assert max(current.series(*act, "saturated")) == 0.0
    assert not any(current.series(*act, "stale"))


def test_block_scale_underflow_and_flushes_are_counted():
    events = []
    from fpsim.precision.scaling import observers

    observers.append(events.append)
    try:
        x = np.zeros((2, 32))
        x[0] = 1.0
        x[1, :16] = 2.0**-140  # one block far below the tensor's amax (fp32 compute)
        with parse("mxfp8,compute=fp32,act=mxfp8_e4m3:pad=on,weight=mxfp8_e4m3:pad=on"):
            F.linear(fpsim.tensor(x), nn.Parameter(np.ones((3, 32))))
    finally:
        observers.remove(events.append)
    act = next(e for e in events if e.category == "act")
    # 2**-140 needs an E8M0 exponent below -127: the block's scale underflows, its
    # elements flush.
    assert act.scale_underflow == 1 and act.blocks == 2 and act.flushed == 16


@pytest.mark.parametrize("act", ["per_row", "fp8_block1x128:pow2=on:pad=on"])
def test_scale_underflow_of_binary32_scales_per_row_and_per_block(act):
    # Row 1's amax 2**-140: 448 / amax overflows binary32, the scale is its largest value
    # (2**127 with pow2) and the decode scale is below binary32's normals; its elements,
    # 2**-12 or 2**-13, are below e4m3's least subnormal and flush.
    events = []
    from fpsim.precision.scaling import observers

    observers.append(events.append)
    try:
        x = np.zeros((3, 32))
        x[0], x[1, :16], x[2, 0] = 1.0, 2.0**-140, -3.0
        with parse(f"bf16,compute=fp32,act={act},weight={act}"):
            F.linear(fpsim.tensor(x), nn.Parameter(np.ones((2, 32))))
    finally:
        observers.remove(events.append)
    e = next(e for e in events if e.category == "act")
    assert (e.blocks, e.scale_underflow, e.flushed, e.amax) == (3, 1, 16, 3.0)


def test_nvfp4_telemetry_scale_includes_the_tensor_scale_and_evaluation_can_be_left_out():
    rng = np.random.default_rng(1)
    x = np.asarray(fpsim.round(rng.normal(size=(4, 32)) * 3.0, "bf16"))
    w = nn.Parameter(rng.normal(size=(16, 32)))
    policy = parse("nvfp4,keep=none")
    for evaluation in (True, False):
        with training.RecipeMonitor(evaluation=evaluation) as monitor:
            with policy, fpsim.no_grad():  # an evaluation's forward pass
                F.linear(fpsim.tensor(x), w)
        assert len(monitor.steps) == evaluation
    events = []
    from fpsim.precision.scaling import observers

    observers.append(events.append)
    try:
        with policy:
            F.linear(fpsim.tensor(x), w)
    finally:
        observers.remove(events.append)
    act = next(e for e in events if e.category == "act")
    q = fpsim.quantize(x, "nvfp4")
    assert act.scale == float(np.max(q.scales)) * q.tensor_scale  # element * block * tensor
    # The tensor's largest block maps its amax near 6 (its UE4M3 scale is rounded).
    assert abs(act.scale * 6.0 / act.amax - 1) < 2.0**-3


def test_stochastic_rounding_of_nvfp4_gradients_follows_the_policys_seed():
    rng = np.random.default_rng(0)
    x, g = rng.normal(size=(16, 32)), rng.normal(size=(16, 16)) * 1e-3
    w0 = rng.normal(size=(16, 32)) * 0.1

    def grads(seed):
        w = nn.Parameter(w0)
        xt = fpsim.tensor(x, requires_grad=True, format="bf16")
        with parse(f"nvfp4,seed={seed}"):
            F.linear(xt, w).backward(g)
        return xt.grad, w.grad

    a, b, c = grads(3), grads(3), grads(4)
    assert all(np.array_equal(u, v) for u, v in zip(a, b, strict=True))
    assert not np.array_equal(a[0], c[0]) and not np.array_equal(a[1], c[1])


def test_delayed_scaling_follows_transformer_engines_update_kernel():
    """``amax_and_scale_update`` (transformer_engine/common/recipe/delayed_scaling.cu): the
    history rotates by one toward its start, the step's amax (position 0) going to its end
    and position 0 set to zero; ``max`` takes the window's largest, ``most_recent`` the
    step's; ``scale = fp32(fp8_max * 2**-margin) / amax`` in binary32, kept where amax is
    zero or not finite, FLT_MAX where it overflows; ``scale_inv = 1 / scale``."""
    from fpsim.precision.recipes import scaling
    from fpsim.precision.scaling import DelayedState

    def run(text, amaxes):
        state = DelayedState(scaling(text))
        out = []
        for a in amaxes:
            state.record(a)
            state.update()
            out.append((state.history.tolist(), float(state.scale), float(state.scale_inv)))
        return out

    def scale(top, margin, amax):
        s = ref_div(ref_mul(top, 2.0**-margin, "fp32")[0], amax, "fp32")[0]
        return s, ref_div(1.0, s, "fp32")[0]

    steps = run("fp8_e4m3:delayed:history=3:margin=2", [3.0, 0.5, 0.25, 0.125])
    assert [h for h, _, _ in steps] == [[0.0, 0.0, 3.0], [0.0, 3.0, 0.5], [0.0, 0.5, 0.25],
                                        [0.0, 0.25, 0.125]]
    # The window's largest: 3, 3, 3 (the 3.0 is still in the window), then 0.5.
    for (_, s, inv), amax in zip(steps, [3.0, 3.0, 3.0, 0.5], strict=True):
        assert (s, inv) == scale(448.0, 2, amax)
    recent = run("fp8_e5m2:delayed:algo=most_recent", [3.0, 0.5])
    assert [(s, inv) for _, s, inv in recent] == [scale(57344.0, 0, 3.0),
                                                  scale(57344.0, 0, 0.5)]
    # Zero, infinite and NaN amaxes keep the scale; a tiny one overflows it to FLT_MAX.
    kept = run("fp8_e4m3:delayed:history=1", [2.0, 0.0, float("inf"), float("nan"), 1e-45])
    assert [s for _, s, _ in kept[:4]] == [scale(448.0, 0, 2.0)[0]] * 4
    assert kept[4][1] == float(np.finfo(np.float32).max)
    # interval=2: the history rolls at every update, the scale changes every second one.
    every = run("fp8_e4m3:delayed:history=1:interval=2", [2.0, 4.0, 8.0])
    assert [s for _, s, _ in every] == [224.0, 224.0, 56.0]
    # pow2: the scale's fraction bits cleared.
    assert run("fp8_e4m3:delayed:pow2=on", [3.0])[0][1] == 128.0
