"""Recipes in Conv2d and LSTM, weights quantized once per step, the layers kept in higher
precision, and the errors a layer raises.

Conv2d's data gradient is checked against an exact reference (Fractions, each addition
rounded to binary32 in the order of the flipped kernel's (o, kh, kw)); its forward and
weight gradient are the products of its im2col matrices, checked against the Linear
products that ``test_recipes_gemm`` holds to the rational reference.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from reference import ref_add, ref_div, ref_mul, ref_round

import fpsim
from fpsim import nn
from fpsim.accumulation.conv import im2col
from fpsim.nn import functional as F
from fpsim.precision import parse
from fpsim.precision.scaling import QuantizationEvent, advance, kept, observers, states


def current_q(values, fmt: str, top: float):
    """Current scaling, TransformerEngine's rule: elements and the decode scale."""
    amax = float(np.abs(values).max())
    scale = ref_div(top, amax, "fp32")[0]
    e = np.vectorize(lambda v: ref_round(Fraction(ref_mul(v, scale, "fp32")[0]), fmt,
                                         "nearest_even", True, True)[0])(values)
    return e, ref_div(1.0, scale, "fp32")[0]


def test_conv2d_data_gradient_against_the_reference():
    policy = parse("fp8_hybrid_current,order=sequential")
    rng = np.random.default_rng(0)
    x = fpsim.tensor(fpsim.round(rng.normal(size=(1, 2, 4, 4)), "bf16"), requires_grad=True,
                     format="bf16")
    w = nn.Parameter(fpsim.round(rng.normal(size=(3, 2, 2, 2)) * 0.5, "fp32"))
    g = np.asarray(fpsim.round(rng.normal(size=(1, 3, 3, 3)) * 1e-2, "bf16"))
    with policy:
        y = F.conv2d(x, w)
        y.backward(g)
    ge, gs = current_q(g, "fp8_e5m2", 57344.0)
    we, ws = current_q(w.data, "fp8_e4m3", 448.0)
    alpha = ref_mul(gs, ws, "fp32")[0]
    want = np.zeros(x.shape)
    for c in range(2):
        for h in range(4):
            for wd in range(4):
                acc = 0.0
                for o in range(3):
                    for i in range(2):  # the flipped kernel's rows and columns
                        for j in range(2):
                            oh, ow = h + i - 1, wd + j - 1
                            t = ge[0, o, oh, ow] if 0 <= oh < 3 and 0 <= ow < 3 else 0.0
                            acc = ref_add(acc, t * we[o, c, 1 - i, 1 - j], "fp32")[0]
                exact = Fraction(acc) * Fraction(alpha)
                want[0, c, h, wd] = ref_round(ref_round(exact, "fp32")[0], "bf16")[0]
    np.testing.assert_array_equal(x.grad, want)
    assert not np.any(np.signbit(x.grad) != np.signbit(want))


def test_conv2d_forward_and_weight_gradient_are_the_linear_products_of_im2col():
    policy = parse("fp8_hybrid_current,order=sequential")
    rng = np.random.default_rng(1)
    xv = np.asarray(fpsim.round(rng.normal(size=(2, 2, 5, 5)), "bf16"))
    wv = np.asarray(fpsim.round(rng.normal(size=(4, 2, 3, 3)) * 0.3, "fp32"))
    g = np.asarray(fpsim.round(rng.normal(size=(2, 4, 2, 2)) * 1e-2, "bf16"))
    x = fpsim.tensor(xv, format="bf16")
    w = nn.Parameter(wv)
    with policy:
        y = F.conv2d(x, w, stride=2)
        y.backward(g)
    cols = im2col(xv, 3, 3, (2, 2), (0, 0)).reshape(-1, 18)
    w2 = nn.Parameter(wv.reshape(4, -1))
    with policy:
        y2 = F.linear(fpsim.tensor(cols, format="bf16"), w2)
        y2.backward(np.ascontiguousarray(g.transpose(0, 2, 3, 1)).reshape(-1, 4))
    np.testing.assert_array_equal(y.data, y2.data.reshape(2, 2, 2, 4).transpose(0, 3, 1, 2))
    np.testing.assert_array_equal(w.grad, w2.grad.reshape(w.shape))


def test_an_lstm_keeps_one_history_per_weight_and_quantizes_each_weight_once_a_step():
    nn.manual_seed(0)
    lstm = nn.LSTM(4, 8)
    events: list[QuantizationEvent] = []
    observers.append(events.append)
    try:
        with parse("fp8_hybrid_delayed"):
            out, _ = lstm(np.random.default_rng(0).normal(size=(5, 2, 4)))
    finally:
        observers.remove(events.append)
    w_hh = lstm.weight_hh_l0
    weights = [e for e in events if e.category == "weight" and e.owner is w_hh]
    assert len(weights) == 1  # five time steps, one quantization
    acts = [e for e in events if e.category == "act" and e.owner is w_hh]
    assert len(acts) == 5
    # The history's current slot holds the step's largest amax: of h_0 (zeros) .. h_4.
    hist = states(w_hh)["act"].history
    assert hist[0] == np.float32(np.abs(out.data[:-1]).max())
    advance(lstm.parameters())
    assert states(w_hh)["act"].history[-1] == hist[0] and states(w_hh)["act"].history[0] == 0


def test_delayed_scales_advance_with_the_optimizer_step():
    nn.manual_seed(0)
    model = nn.Linear(8, 4)
    opt = fpsim.optim.SGD(model.parameters(), lr=0.1)
    trainer = fpsim.training.Trainer(model, opt, "fp8_hybrid_delayed")
    x = np.random.default_rng(0).normal(size=(6, 8)) * 3
    for _ in range(2):
        trainer.step(lambda: F.mse_loss(model(x), np.zeros((6, 4))))
    act = states(model.weight)["act"]
    assert act.updates == 2
    assert act.scale == np.float32(np.float32(448.0) / np.float32(np.abs(
        np.asarray(fpsim.round(x, "bf16"))).max()))


def test_a_block_that_does_not_divide_an_unpadded_axis_is_refused_by_name():
    nn.manual_seed(0)
    layer = nn.Linear(40, 4)  # K = 40: not a multiple of MX's 32
    with parse("mxfp8"), pytest.raises(ValueError, match=r"mxfp8_e4m3.*40 elements along "
                                                         r"axis 1.*add ':pad=on'"):
        layer(np.ones((2, 40)))
    mx = "mxfp8_e4m3:pad=on"
    with parse(f"mxfp8,act={mx},weight={mx}"):
        assert layer(np.ones((2, 40))).shape == (2, 4)


def test_delayed_scaling_needs_a_weight_kept_from_step_to_step():
    with parse("fp8_hybrid_delayed"), pytest.raises(ValueError, match="amax history per layer"):
        F.linear(np.ones((2, 3)), np.ones((4, 3)))
    with parse("fp8_hybrid_current"):  # stateless: a plain array will do
        assert F.linear(np.ones((2, 3)), np.ones((4, 3))).shape == (2, 4)


def test_kept_layers_compute_as_without_the_recipe():
    nn.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU(),
                          nn.Linear(8, 2))
    with pytest.raises(ValueError, match="keep=decoder: no module of that name"):
        model.to("fp8_hybrid_current,keep=decoder")
    with pytest.raises(ValueError, match="keep=last4: the model has 3 layers"):
        model.to("fp8_hybrid_current,keep=last4")
    policy = parse("fp8_hybrid_current,keep=first+layers.2")
    model.to(policy)
    assert [kept(policy.recipe, model[i].weight) for i in (0, 2, 4)] == [True, True, False]
    x = np.random.default_rng(0).normal(size=(3, 4))
    with policy:
        kept_out = model[0](x)
        quantized = model[4](np.ones((3, 8)))
    with parse("bf16"):
        assert np.array_equal(kept_out.data, model[0](x).data)
        assert not np.array_equal(quantized.data, model[4](np.ones((3, 8))).data)


def test_a_kept_lstm_keeps_every_weight_and_modules_are_named_as_in_torch():
    nn.manual_seed(0)

    class Model(nn.Module):
        def __init__(self):
            self.rnn = nn.LSTM(3, 4, num_layers=2)
            self.heads = [nn.ReLU(), nn.Linear(4, 2)]

    model = Model()
    assert [n for n, _ in model.named_modules()] == ["", "rnn", "heads.0", "heads.1"]
    assert [m for _, m in model.named_modules()] == list(model.modules())
    policy = parse("fp8_hybrid_current,keep=first")
    model.to(policy)
    weights = [getattr(model.rnn, f"weight_{k}_l{i}") for i in (0, 1) for k in ("ih", "hh")]
    assert all(kept(policy.recipe, w) for w in weights)
    assert not kept(policy.recipe, model.heads[1].weight)
    assert not any(kept(policy.recipe, b) for b in (model.rnn.bias_ih_l0, model.heads[1].bias))
    policy = parse("fp8_hybrid_current,keep=heads.1")
    model.to(policy)
    assert kept(policy.recipe, model.heads[1].weight)
    assert not kept(policy.recipe, model.rnn.weight_ih_l0)
