"""Precision-policy semantics: what each format setting does to values and gradients.

Representability is checked with NumPy's own float16/float32 conversions
(correctly rounded casts), independent of fpsim's rounding code.
"""

import numpy as np
import pytest

import fpsim
from fpsim import nn
from fpsim.nn import functional as F
from fpsim.precision import Policy, parse


def in_fp16(v) -> bool:
    v = np.asarray(v, dtype=np.float64)
    with np.errstate(over="ignore"):
        return bool(np.all((v.astype(np.float16).astype(np.float64) == v) | np.isnan(v)))


def in_fp32(v) -> bool:
    v = np.asarray(v, dtype=np.float64)
    with np.errstate(over="ignore"):
        return bool(np.all((v.astype(np.float32).astype(np.float64) == v) | np.isnan(v)))


def models():
    nn.manual_seed(3)
    rng = np.random.default_rng(3)
    mlp = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 4))
    cnn = nn.Sequential(nn.Conv2d(1, 3, 3, padding=1), nn.BatchNorm2d(3), nn.ReLU(),
                        nn.Conv2d(3, 4, 3, stride=2), nn.Flatten(), nn.Linear(36, 4))

    class LM(nn.Module):
        def __init__(self):
            self.embed = nn.Embedding(5, 4)
            self.lstm = nn.LSTM(4, 6)
            self.head = nn.Linear(6, 5)

        def forward(self, ids):
            out, _ = self.lstm(self.embed(ids))
            return self.head(F.reshape(out, (-1, 6)))

    return [
        (mlp, lambda m: F.cross_entropy(m(rng.normal(size=(5, 6))), np.arange(5) % 4)),
        (cnn, lambda m: F.cross_entropy(m(rng.random((3, 1, 8, 8))), np.array([0, 1, 3]))),
        (LM(), lambda m: F.cross_entropy(m(rng.integers(0, 5, (4, 2))),
                                         rng.integers(0, 5, 8))),
    ]


@pytest.mark.parametrize("case", range(3), ids=["mlp", "cnn", "lstm"])
def test_fp16_compute_keeps_every_activation_and_gradient_in_fp16(case):
    policy = parse("mixed")
    with policy:
        model, loss_fn = models()[case]
        model.to(policy)
        loss = loss_fn(model)
        loss.backward(1024.0)
    activations = 0
    for t in loss.graph():
        if t is loss:
            assert t.format == policy.output
            continue
        if t.op == "leaf":
            continue
        assert t.format.name in ("fp16", "fp32"), t.op
        if t.format.name == "fp16":
            activations += 1
            assert in_fp16(t.data), t.op
            assert t.grad is not None and in_fp16(t.grad), t.op
        else:  # parameters in fp32 used by normalization (reduce format)
            assert t.op in ("cast", "reshape")
    assert activations > 5
    for p in model.parameters():
        assert p.format.name == "fp32" and in_fp32(p.data) and in_fp32(p.grad)


def test_fp16_gradients_underflow_without_scaling():
    """A loss gradient of 2**-20 spread over 64 logits underflows in fp16 unscaled."""
    with parse("mixed"):
        logits = fpsim.tensor(np.zeros((64, 10)), requires_grad=True)
        x = F.mul(logits, 1.0)
        loss = F.cross_entropy(x, np.zeros(64, dtype=np.int64))
        loss.backward(2.0**-20)
        assert np.all(x.grad[:, 1:] == 0)  # (0.1 / 64) * 2**-20 < 2**-25: rounds to zero
        loss.backward(2.0**-20 * 2.0**16)  # scaled: representable
    assert np.all(x.grad[:, 1:] != 0)


def test_accum_fp16_linear_is_fpsim_matmul():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(8, 300))
    w = rng.normal(size=(5, 300))
    x16, w16 = fpsim.round(x, "fp16"), fpsim.round(w, "fp16")
    with parse("mixed,accum=fp16,order=sequential"):
        y = F.linear(x, w).data
    expected = fpsim.round(fpsim.matmul(x16, w16.T, accum="fp16"), "fp16")
    np.testing.assert_array_equal(y, expected)
    with parse("mixed"):
        y32 = F.linear(x, w).data
    assert np.any(y32 != y)  # the accumulator matters for K = 300
    # fp32 accumulation: exact fp16 products summed in float32, then rounded to fp16.
    ref = (x16.astype(np.float32) @ w16.T.astype(np.float32)).astype(np.float16)
    np.testing.assert_array_equal(y32, ref.astype(np.float64))


def test_model_policy_products_are_the_tensor_cores():
    """Under ``model=H100`` a linear layer's forward product and both backward products
    are ``fpsim.matmul(..., model=fpsim.hw.H100)`` (the preset with fp16 or bf16 inputs),
    rounded to the compute format; on these inputs that differs from fp32 accumulation."""
    rng = np.random.default_rng(5)
    # Two large terms that cancel in each block of 16: the block aligns the small ones
    # to them and truncates (fp32 accumulation would keep their bits).
    x, w, g = rng.normal(size=(6, 40)), rng.normal(size=(3, 40)), rng.normal(size=(6, 3))
    x[:, [0, 1, 16, 17]] = [2.0**12, -(2.0**12), 2.0**12, -(2.0**12)]
    w[:, [0, 1, 16, 17]] = 1.0
    g[:, 0] = [2.0**12, -(2.0**12), 1, 2, 3, 4]
    for compute, preset in (("fp16", fpsim.hw.H100), ("bf16", fpsim.hw.H100.with_input("bf16"))):
        xs, ws, gs = (fpsim.round(v, compute) for v in (x, w, g))
        runs = {}
        for text in (f"mixed,compute={compute},model=H100", f"mixed,compute={compute}"):
            xt = fpsim.tensor(x, requires_grad=True)
            wt = fpsim.tensor(w, requires_grad=True)
            with parse(text):
                y = F.linear(xt, wt)
                y.backward(g)
            runs[text] = (y.data, xt.grad, wt.grad)
        y, gx, gw = runs[f"mixed,compute={compute},model=H100"]

        def tc(a, b, preset=preset, compute=compute):
            return fpsim.round(fpsim.matmul(a, b, model=preset), compute)

        np.testing.assert_array_equal(y, tc(xs, ws.T))
        np.testing.assert_array_equal(gx, tc(gs, ws))
        np.testing.assert_array_equal(gw, tc(gs.T, xs))
        plain = runs[f"mixed,compute={compute}"]
        assert any(np.any(a != b) for a, b in zip(plain, (y, gx, gw), strict=True))


def test_master_copy_stays_fp32_and_model_copy_is_its_rounding():
    from fpsim.data import load_digits

    data = load_digits(seed=1)
    nn.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 10))
    opt = fpsim.optim.SGD(model.parameters(), lr=0.05)
    trainer = fpsim.training.Trainer(model, opt, "mixed", loss_scale="dynamic")
    x, y = data.x_train[:32], data.y_train[:32]
    for _ in range(5):
        trainer.step(lambda: F.cross_entropy(model(x), y))
    params = model.parameters()
    assert all(in_fp32(p.data) for p in params)
    assert not all(in_fp16(p.data) for p in params)  # the master copy is wider
    with trainer.policy:
        loss = F.cross_entropy(model(x), y)
    copies = [t for t in loss.graph() if t.op == "cast" and t._parents[0] in params]
    assert len(copies) == 4
    for c in copies:
        assert c.format.name == "fp16"
        np.testing.assert_array_equal(
            c.data, c._parents[0].data.astype(np.float16).astype(np.float64))


def test_no_master_weights_live_in_fp16_and_absorbed_updates_are_counted():
    nn.manual_seed(1)
    policy = parse("mixed,params=fp16")
    assert not policy.master_weights
    model = nn.Linear(4, 3)
    opt = fpsim.optim.SGD(model.parameters(), lr=1e-4)
    trainer = fpsim.training.Trainer(model, opt, policy)
    x = np.random.default_rng(0).normal(size=(16, 4))
    before = [p.data.copy() for p in model.parameters()]
    report = trainer.step(lambda: F.mse_loss(model(x), np.zeros((16, 3))))
    lost = nonzero = 0
    for b, p in zip(before, model.parameters(), strict=True):
        assert in_fp16(p.data)
        # Independent count: a nonzero update lr * g that leaves w unchanged, because it
        # rounds to zero in fp16 or because w - u rounds back to w.
        delta = 1e-4 * p.grad
        u = delta.astype(np.float16).astype(np.float64)
        unchanged = (u == 0) | ((b - u).astype(np.float16) == b)
        assert np.array_equal(unchanged & (delta != 0), (delta != 0) & (p.data == b))
        lost += np.count_nonzero(unchanged & (delta != 0))
        nonzero += np.count_nonzero(delta != 0)
    assert report.absorbed_fraction == lost / nonzero
    assert report.absorbed_fraction > 0.5  # lr * grad is far below half an ulp of w


def test_native_policy_uses_hardware_dtypes():
    nn.manual_seed(0)
    policy = parse("native_fp16")
    with policy:
        model = nn.Linear(3, 2).to(policy)
        y = model(np.ones((4, 3)))
        loss = F.mse_loss(y, np.zeros((4, 2)))
        loss.backward()
    assert y.data.dtype == np.float16
    assert loss.data.dtype == np.float32
    assert model.weight.data.dtype == np.float32 and model.weight.grad.dtype == np.float32


def test_override_changes_one_operation():
    policy = parse("mixed,tanh.compute=fp32")
    assert policy.for_op("tanh").compute.name == "fp32"
    assert policy.for_op("relu").compute.name == "fp16"
    x = np.linspace(-1, 1, 50)
    with policy:
        y = F.tanh(x)
    assert y.format.name == "fp32" and not in_fp16(y.data)
    assert "tanh.compute=fp32" in str(policy)
    assert parse(str(policy)) == policy


@pytest.mark.parametrize("text, message", [
    ("mixd", "unknown policy preset"),
    ("compute=fp17", "unknown format"),
    ("comptue=fp16", "unknown policy key"),
    ("native_fp16,compute=bf16", "native policy needs formats"),
    ("mixed,order=random", "unknown order"),
    ("mixed,rounding=nearest", "unknown rounding mode"),
    ("", "a policy string needs"),
    ("mixed,model=H200", "unknown model 'H200'; known models: .*H100"),
    ("mixed,model=H100,accum=fp16", "model=H100 fixes how products are added; drop accum=fp16"),
    ("mixed,model=H100,order=sequential", "drop order=sequential"),
    ("native_fp16,model=H100", "native policy's products are the hardware's"),
])
def test_bad_policy_strings_name_the_problem(text, message):
    with pytest.raises(ValueError, match=message):
        parse(text)


def test_policy_fields_and_presets():
    p = parse("params=fp32,compute=fp16,accum=fp32")
    assert p == parse("mixed") == Policy(compute="fp16")
    assert p.master_weights
    assert parse("fp16").params.name == "fp16"
    assert parse("bf16").compute.name == "bf16"
    with p:
        assert fpsim.precision.current() is p
    assert fpsim.precision.current() == Policy()


def _stochastic_run(seed: int) -> list[np.ndarray]:
    nn.manual_seed(0)
    policy = parse(f"fp16,rounding=stochastic,seed={seed}")
    model = nn.Linear(4, 3)
    opt = fpsim.optim.SGD(model.parameters(), lr=0.01)
    trainer = fpsim.training.Trainer(model, opt, policy)
    x = np.random.default_rng(0).normal(size=(8, 4))
    for _ in range(3):
        trainer.step(lambda: F.mse_loss(model(x), np.ones((8, 3))))
    return [p.data.copy() for p in model.parameters()]


def test_stochastic_rounding_policy_is_reproducible_with_a_seed():
    a, b, c = _stochastic_run(5), _stochastic_run(5), _stochastic_run(6)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)
        assert in_fp16(x)
    assert any(np.any(x != z) for x, z in zip(a, c, strict=True))
