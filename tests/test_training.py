"""The training policy: loss scaling step by step, skipped steps, optimizers, and digits."""

import numpy as np
import pytest

import fpsim
from fpsim import nn, optim
from fpsim.nn import functional as F
from fpsim.training import DynamicLossScale, NoLossScale, StaticLossScale, Trainer


def test_dynamic_scale_follows_pytorch_rule():
    s = DynamicLossScale(scale=8.0, growth_interval=3)
    s.update(False)
    s.update(False)
    assert s.scale == 8.0
    s.update(False)
    assert s.scale == 16.0  # grown after 3 good steps
    s.update(False)
    s.update(True)
    assert s.scale == 8.0  # halved, and the good-step count restarts
    s.update(False)
    s.update(False)
    assert s.scale == 8.0
    s.update(False)
    assert s.scale == 16.0


def test_dynamic_scale_hysteresis_and_minimum():
    s = DynamicLossScale(scale=4.0, hysteresis=2, min_scale=1.0, growth_interval=2)
    s.update(True)
    assert s.scale == 4.0  # first overflow tolerated
    s.update(True)
    assert s.scale == 2.0
    s.update(True)
    assert s.scale == 1.0  # hysteresis spent: every overflow backs off
    s.update(True)
    assert s.scale == 1.0  # floor
    s.update(False)
    s.update(False)
    assert s.scale == 2.0 and s.tolerance == 2  # growth restores the hysteresis


def test_dynamic_scale_does_not_grow_to_infinity():
    s = DynamicLossScale(scale=2.0**126, growth_interval=1)
    s.update(False)
    assert s.scale == 2.0**127  # binary32's largest power of two
    s.update(False)
    assert s.scale == 2.0**127


@pytest.mark.parametrize("kwargs", [dict(scale=0), dict(growth_factor=1), dict(backoff_factor=1),
                                    dict(growth_interval=0), dict(min_scale=1e9)])
def test_dynamic_scale_rejects_bad_settings(kwargs):
    with pytest.raises(ValueError):
        DynamicLossScale(**kwargs)


def test_as_loss_scale():
    from fpsim.training import as_loss_scale

    assert isinstance(as_loss_scale(None), NoLossScale)
    assert as_loss_scale(128).scale == 128.0
    assert as_loss_scale("dynamic").scale == 2.0**16
    with pytest.raises(ValueError, match="unknown loss scale"):
        as_loss_scale("static")
    with pytest.raises(ValueError, match="positive"):
        StaticLossScale(-1.0)


def _setup(policy="mixed", loss_scale="dynamic", lr=0.1, momentum=0.9):
    nn.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    opt = optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    return model, opt, Trainer(model, opt, policy, loss_scale=loss_scale)


def test_overflow_skips_the_step_and_halves_the_scale():
    model, opt, trainer = _setup(loss_scale=DynamicLossScale(scale=2.0**16, growth_interval=2),
                                 lr=1e-6)
    x = np.full((4, 4), 30.0)
    target = np.array([0, 1, 0, 1])
    before = [p.data.copy() for p in model.parameters()]
    scales, skipped = [], []
    for _ in range(12):
        r = trainer.step(lambda: F.cross_entropy(model(x) * 100.0, target))
        scales.append(r.loss_scale)
        skipped.append(r.skipped)
        if not r.skipped:
            break
        # A skipped step leaves the weights and the optimizer state untouched.
        for b, p in zip(before, model.parameters(), strict=True):
            np.testing.assert_array_equal(b, p.data)
        assert opt.state == {}
    assert skipped[0] and not skipped[-1]
    assert scales == [2.0**16 * 0.5**i for i in range(len(scales))]
    assert trainer.skipped == len(scales) - 1
    assert r.weight_grads.overflow == 0 and opt.state  # the good step updated
    # Growth after growth_interval good steps.
    r2 = trainer.step(lambda: F.cross_entropy(model(x) * 0.01, target))
    r3 = trainer.step(lambda: F.cross_entropy(model(x) * 0.01, target))
    assert not r2.skipped and r3.loss_scale == 2 * scales[-1]


def test_overflow_report_counts_infinities():
    model, opt, trainer = _setup(loss_scale=DynamicLossScale(scale=2.0**40))
    r = trainer.step(lambda: F.cross_entropy(model(np.ones((2, 4))), np.array([0, 1])))
    assert r.skipped and r.weight_grads.overflow > 0


def test_without_a_scaler_nonfinite_gradients_are_applied():
    model, opt, trainer = _setup(policy="fp16", loss_scale=None)
    x = np.full((4, 4), 1e4)
    r = trainer.step(lambda: F.mse_loss(model(x), np.zeros((4, 2))))
    assert not r.skipped
    assert any(not np.all(np.isfinite(p.data)) for p in model.parameters())


def test_static_scaling_unscales_exactly():
    """With a power-of-two scale and nothing under/overflowing, unscaled gradients equal the
    unscaled run's (fp32 policy)."""
    x = np.random.default_rng(0).normal(size=(8, 4))
    target = np.arange(8) % 2
    grads = []
    for scale in (None, 1024.0):
        model, opt, trainer = _setup("fp32", scale, momentum=0)
        opt.step = lambda: None  # look at the gradients the optimizer would get
        trainer.step(lambda: F.cross_entropy(model(x), target))  # noqa: B023
        grads.append([p.grad.copy() for p in model.parameters()])
    for a, b in zip(*grads, strict=True):
        np.testing.assert_array_equal(a, b)


def test_clipping_bounds_the_norm():
    model, opt, trainer = _setup("fp32", None, lr=0.1, momentum=0)
    trainer.clip_norm = 1e-3
    opt_step = opt.step
    seen = []

    def step():
        seen.append(np.sqrt(sum(np.sum(p.grad**2) for p in model.parameters())))
        opt_step()

    opt.step = step
    r = trainer.step(lambda: F.cross_entropy(model(np.ones((2, 4)) * 3), np.array([0, 1])))
    assert r.grad_norm > 1e-3 and seen[0] == pytest.approx(1e-3, rel=1e-5)


def test_sgd_matches_pytorch_rule_in_fp64():
    p = nn.Parameter(np.array([1.0, -2.0]), policy=fpsim.precision.parse("fp64"))
    opt = optim.SGD([p], lr=0.1, momentum=0.9, weight_decay=0.01, nesterov=True,
                    policy="fp64")
    w, buf = p.data.copy(), None
    for g in (np.array([0.5, 0.25]), np.array([-1.0, 2.0])):
        p.grad = g.copy()
        opt.step()
        d = g + 0.01 * w
        buf = d if buf is None else 0.9 * buf + d
        w = w - 0.1 * (d + 0.9 * buf)
        np.testing.assert_allclose(p.data, w, rtol=1e-15)


def test_adam_matches_its_definition_in_fp64():
    p = nn.Parameter(np.array([1.0, -2.0]), policy=fpsim.precision.parse("fp64"))
    opt = optim.Adam([p], lr=0.01, policy="fp64")
    w, m, v = p.data.copy(), 0.0, 0.0
    for t, g in enumerate((np.array([0.5, 0.25]), np.array([-1.0, 2.0])), start=1):
        p.grad = g.copy()
        opt.step()
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        w = w - 0.01 * (m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.999**t)) + 1e-8)
        np.testing.assert_allclose(p.data, w, rtol=1e-14)


def test_optimizer_state_format():
    p = nn.Parameter(np.array([1.0]), policy=fpsim.precision.parse("fp32"))
    opt = optim.SGD([p], lr=0.1, momentum=0.9, state_format="bf16")
    p.grad = np.array([0.1])
    opt.step()
    buf = opt.state[id(p)]["momentum_buffer"]
    assert buf[0] == np.float64(fpsim.round(np.float32(0.1), "bf16"))


def test_optimizer_rejects_bad_arguments():
    with pytest.raises(ValueError, match="no parameters"):
        optim.SGD([], lr=0.1)
    with pytest.raises(ValueError, match="lr"):
        optim.SGD(nn.Linear(2, 2).parameters(), lr=-1)


def test_digits_mlp_fp32_and_mixed_precision_agree():
    """>= 95% test accuracy in fp32 and in mixed precision (fp16 compute, fp32 master
    weights, dynamic loss scaling), within one percentage point of each other."""
    from fpsim.data import batches, load_digits

    data = load_digits(seed=0, standardize=True)
    accuracy = {}
    for policy, scale in (("fp32", None), ("mixed", "dynamic")):
        nn.manual_seed(0)
        model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
        opt = optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        trainer = Trainer(model, opt, policy, loss_scale=scale, monitor=False)
        for epoch in range(10):
            for xb, yb in batches(data.x_train, data.y_train, batch_size=32, seed=epoch):
                trainer.step(lambda m=model, xb=xb, yb=yb: F.cross_entropy(m(xb), yb))
        with trainer.policy, fpsim.no_grad():
            predicted = model(data.x_test).data.argmax(axis=1)
        accuracy[policy] = np.mean(predicted == data.y_test)
    assert accuracy["fp32"] >= 0.95 and accuracy["mixed"] >= 0.95
    assert abs(accuracy["fp32"] - accuracy["mixed"]) <= 0.01


def test_a_trained_model_evaluates_under_its_training_policy():
    """Issue 30 item 5: after training under "mixed", ``with no_grad(): model(x)`` computes
    in fp16 as the explicit ``with trainer.policy, no_grad():`` does, not in fp32; an
    explicitly active policy still wins."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(6, 4))
    model, opt, trainer = _setup("mixed", "dynamic")
    trainer.step(lambda: F.cross_entropy(model(x), np.arange(6) % 2))
    with fpsim.no_grad():
        evaluated = model(x)
    with trainer.policy, fpsim.no_grad():
        explicit = model(x)
    with fpsim.precision.parse("fp32"), fpsim.no_grad():
        fp32 = model(x)
    assert evaluated.format.name == explicit.format.name == "fp16"
    np.testing.assert_array_equal(evaluated.data, explicit.data)
    assert fp32.format.name == "fp32" and not np.array_equal(evaluated.data, fp32.data)
    # Each sub-module remembers the policy too, and a fresh model none.
    assert all(m.policy is trainer.policy for m in model.modules())
    assert nn.Linear(2, 2).policy is None


def test_a_cpu_report_holds_plain_numbers_and_is_a_frozen_value():
    """On the cpu a StepReport's fields are Python numbers, as they always were; it compares,
    hashes and pickles by its fields and cannot be changed."""
    import dataclasses
    import pickle

    from fpsim.training import GradientCounts, StepReport

    model, opt, trainer = _setup(loss_scale="dynamic")
    x, target = np.random.default_rng(3).normal(size=(4, 4)), np.array([0, 1, 1, 0])
    with trainer.policy:
        want = F.cross_entropy(model(x), target).item()
    r = trainer.step(lambda: F.cross_entropy(model(x), target))
    kinds = (float, float, bool, float, float, float, GradientCounts, GradientCounts)
    assert [type(getattr(r, n)) for n in StepReport.FIELDS] == list(kinds)
    assert all(type(getattr(r.weight_grads, n)) is int
               for n in ("total", "zero", "subnormal", "overflow"))
    assert pickle.loads(pickle.dumps(r)) == r and hash(pickle.loads(pickle.dumps(r))) == hash(r)
    assert r.loss == want
    assert repr(r).startswith(f"StepReport(loss={r.loss!r}, loss_scale=65536.0, skipped=False")
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.loss = 0.0  # type: ignore[misc]
    other = StepReport(r.loss, r.loss_scale, r.skipped, r.grad_norm, r.absorbed_fraction,
                       r.flushed_fraction, r.activation_grads, r.weight_grads)
    assert other == r and (other != StepReport(0.0, *[getattr(r, n) for n in
                                                      StepReport.FIELDS[1:]]))
    # The optimizer's counts read as ints too.
    assert type(opt.absorbed) is int and type(opt.updated) is int and opt.updated > 0


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 127, 128, 129, 136, 255, 256, 1000, 4097, 70001])
def test_pairwise_sum_is_numpys_sum(n):
    """The gradient norm's sum on a GPU (elementwise additions in NumPy's pairwise order)
    equals NumPy's own sum bit for bit, over lengths around its block sizes and values
    spread over 16 decades (where another order would differ)."""
    from fpsim.precision.numerics import float64_sum, pairwise_sum

    rng = np.random.default_rng(n)
    a = rng.random(n) * 10.0 ** rng.integers(-8, 8, n)
    got = pairwise_sum(a)
    assert got.shape == () and got.tobytes() == np.sum(a).tobytes()
    # float64_sum's memory order of a dense array is NumPy's order for any layout.
    cube = rng.random((6, 10, 7)) * 10.0 ** rng.integers(-8, 8, (6, 10, 7))
    for view in (cube, cube.transpose(2, 0, 1), np.asfortranarray(cube)):
        squares = np.square(view)
        assert pairwise_sum(squares.ravel(order="K")) == np.sum(squares) == float64_sum(squares)
