"""fpsim.torch's training: LossScaler against torch.amp.GradScaler itself (weights, scales
and state dicts, bit for bit); MasterWeights against updates computed here with
fpsim.round; Trainer against fpsim.training.Trainer on the same model, policy, loss
scale and data (every StepReport field and the weights)."""

import math

import pytest

torch = pytest.importorskip("torch")

import numpy as np  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import fpsim  # noqa: E402
import fpsim.torch  # noqa: E402
from fpsim import nn, optim, training  # noqa: E402


def _model(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))


def test_the_loss_scaler_trains_as_torch_amp_grad_scaler():
    models = [_model(), _model()]
    opts = [torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9) for m in models]
    theirs = torch.amp.GradScaler("cpu", init_scale=2.0**10, growth_interval=2)
    mine = fpsim.torch.LossScaler(training.DynamicLossScale(scale=2.0**10, growth_interval=2))
    g = torch.Generator().manual_seed(1)
    for step in range(9):
        x, y = torch.randn(5, 6, generator=g), torch.randint(0, 3, (5,), generator=g)
        blow_up = 1e36 if step in (3, 4, 7) else 1.0  # scaled, these overflow binary32
        for model, opt, scaler in zip(models, opts, (theirs, mine), strict=True):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y) * blow_up
            scaler.scale(loss).backward()
            scaler.unscale_(opt)  # as before clipping
            scaler.step(opt)
            scaler.update()
        assert theirs.get_scale() == mine.get_scale()
        for a, b in zip(*(m.parameters() for m in models), strict=True):
            assert torch.equal(a, b)
    assert mine.get_scale() != 2.0**10  # it grew and backed off
    state = theirs.state_dict()
    assert {k: v for k, v in mine.state_dict().items() if k in state} == state
    other = fpsim.torch.LossScaler("dynamic")
    other.load_state_dict(state)
    assert other.state_dict()["scale"] == state["scale"]
    back = torch.amp.GradScaler("cpu")
    back.load_state_dict(mine.state_dict())
    assert back.state_dict() == state


def test_the_loss_scaler_refuses_what_grad_scaler_refuses():
    w = torch.nn.Parameter(torch.ones(2))
    opt = torch.optim.SGD([w], lr=0.1)
    scaler = fpsim.torch.LossScaler(128)
    assert scaler.scale([torch.ones(1), (torch.ones(1),)])[1][0].item() == 128.0
    with pytest.raises(TypeError, match="outputs must be a tensor"):
        scaler.scale(1.0)
    with pytest.raises(RuntimeError, match="update\\(\\) without a step"):
        scaler.update()
    w.grad = torch.tensor([256.0, math.inf])
    scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match="already been called"):
        scaler.unscale_(opt)
    assert scaler.step(opt) is None and w.tolist() == [1.0, 1.0]  # inf: skipped
    with pytest.raises(RuntimeError, match="already been called"):
        scaler.step(opt)
    scaler.update()
    with pytest.raises(RuntimeError, match="closure"):
        scaler.step(opt, closure=lambda: 0.0)
    with pytest.raises(ValueError, match="finite positive"):
        scaler.update(new_scale=math.nan)
    with pytest.raises(ValueError, match="unknown loss scale"):
        fpsim.torch.LossScaler("huge")
    off = fpsim.torch.LossScaler(enabled=False)
    assert off.get_scale() == 1.0 and off.state_dict() == {}
    unscaled = fpsim.torch.LossScaler(None)  # no loss scale: an inf step is applied
    w.grad = torch.tensor([1.0, math.inf])
    unscaled.step(opt)
    unscaled.update()
    assert math.isinf(w[1].item())


def test_master_weights_round_the_float64_update_into_fp32_then_fp16():
    rng = np.random.default_rng(2)
    start = rng.standard_normal(50).astype(np.float32)
    grads = [rng.standard_normal(50).astype(np.float32) * 2.0**-8 for _ in range(3)]
    w = torch.nn.Parameter(torch.from_numpy(start.copy()))
    opt = fpsim.torch.MasterWeights([w], lambda ps: torch.optim.SGD(ps, lr=0.1), "mixed")
    master = fpsim.round(start.astype(np.float64), "fp32")
    np.testing.assert_array_equal(w.detach().numpy(), fpsim.round(master, "fp16"))
    for g in grads:
        w.grad = torch.from_numpy(g)
        opt.step()
        new = fpsim.round(master - 0.1 * fpsim.round(g.astype(np.float64), "fp32"), "fp32")
        moved = (master - 0.1 * g.astype(np.float64)) != master
        assert (opt.absorbed, opt.updated) == (int((moved & (new == master)).sum()),
                                               int(moved.sum()))
        master = new
        np.testing.assert_array_equal(opt.masters[0].numpy(), master)
        np.testing.assert_array_equal(w.detach().numpy(), fpsim.round(master, "fp16"))


def test_without_masters_stochastic_updates_are_not_lost_on_average():
    n = 20000
    ones = torch.ones(n)
    # An update of a quarter of fp16's ulp below 1 (2**-11 / 4): nearest even loses all.
    for rounding, low, high in (("nearest_even", 0, 0), ("stochastic", 0.23, 0.27)):
        w = torch.nn.Parameter(ones.clone())
        opt = fpsim.torch.MasterWeights([w], lambda ps: torch.optim.SGD(ps, lr=1.0),
                                        "mixed,params=fp16", rounding=rounding,
                                        seed=3 if rounding == "stochastic" else None)
        w.grad = torch.full((n,), 2.0**-13)
        opt.step()
        moved = float((w != 1.0).float().mean())
        assert low <= moved <= high
        assert set(w.unique().tolist()) <= {1.0, 1.0 - 2.0**-11}
        assert opt.updated == n and opt.absorbed == n - int((w != 1.0).sum())


def test_stochastic_updates_replay_with_their_seed():
    def run(seed):
        w = torch.nn.Parameter(torch.ones(1000))
        opt = fpsim.torch.MasterWeights([w], lambda ps: torch.optim.SGD(ps, lr=1.0),
                                        "bf16,params=bf16", rounding="stochastic", seed=seed)
        for _ in range(3):
            w.grad = torch.full((1000,), 2.0**-11)
            opt.step()
        return w.detach().clone()

    assert torch.equal(run(5), run(5)) and not torch.equal(run(5), run(6))


def test_master_weights_state_and_hostile_input():
    w = torch.nn.Parameter(torch.tensor([0.1, 0.2]))
    opt = fpsim.torch.MasterWeights([w], lambda ps: torch.optim.Adam(ps, lr=0.01), "bf16")
    w.grad = torch.tensor([1.0, -1.0])
    opt.step()
    saved = opt.state_dict()
    w.grad = torch.tensor([1.0, -1.0])
    opt.step()
    after = w.detach().clone()
    opt.load_state_dict(saved)
    w.grad = torch.tensor([1.0, -1.0])
    opt.step()
    assert torch.equal(w.detach(), after)
    assert opt.param_groups[0]["lr"] == 0.01
    opt.zero_grad()
    assert w.grad is None
    wide = torch.nn.Parameter(torch.tensor([1.0, 2.0], dtype=torch.float64))
    exact = fpsim.torch.MasterWeights([wide], lambda ps: torch.optim.SGD(ps, lr=0.5), "fp64")
    assert exact.masters[0].data_ptr() != wide.data_ptr()  # a copy, where nothing rounds
    wide.grad = torch.ones(2, dtype=torch.float64)
    exact.step()
    assert wide.tolist() == [0.5, 1.5] and exact.masters[0].tolist() == [0.5, 1.5]
    with pytest.raises(ValueError, match="no parameters"):
        fpsim.torch.MasterWeights([], torch.optim.SGD)
    with pytest.raises(TypeError, match="a parameter must be a torch.Tensor"):
        fpsim.torch.MasterWeights([1.0], torch.optim.SGD)
    with pytest.raises(TypeError, match="optimizer must make"):
        fpsim.torch.MasterWeights([w], "sgd")
    with pytest.raises(TypeError, match="not a torch.optim.Optimizer"):
        fpsim.torch.MasterWeights([w], lambda ps: ps)
    with pytest.raises(ValueError, match="unknown rounding mode"):
        fpsim.torch.MasterWeights([w], torch.optim.SGD, rounding="sideways")
    with pytest.raises(ValueError, match="seed"):
        fpsim.torch.MasterWeights([w], torch.optim.SGD, rounding="stochastic", seed=-1)
    with pytest.raises(ValueError, match="unknown policy preset"):
        fpsim.torch.MasterWeights([w], torch.optim.SGD, "mixd")


def _grid(rng, shape, low):
    return (rng.integers(-32, 33, shape) * 2.0 ** rng.integers(low, low + 3, shape)).astype(
        np.float32)


@pytest.mark.parametrize("policy, scaling", [
    ("mixed,order=sequential", lambda: training.DynamicLossScale(2.0**12, growth_interval=2)),
    ("mixed,accum=fp16,order=sequential", lambda: 2.0**10),
    ("mixed,order=sequential", lambda: None)])
def test_the_trainer_reports_what_fpsim_training_reports(policy, scaling):
    loss_scale = scaling()
    # Values on grids and a power-of-two learning rate: every update and every sum exact
    # where the two stacks differ in how they round (fpsim.optim rounds lr * g first).
    rng = np.random.default_rng(4)
    model = _model(1)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.from_numpy(_grid(rng, tuple(p.shape), -9)))
    reference = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    for mine, theirs in zip(reference.parameters(), model.parameters(), strict=True):
        mine.data = theirs.detach().double().numpy().copy()
    ref_trainer = training.Trainer(reference, optim.SGD(reference.parameters(), lr=2.0**-8),
                                   policy, loss_scale=loss_scale)
    trainer = fpsim.torch.Trainer(model, torch.optim.SGD(model.parameters(), lr=2.0**-8),
                                  policy, loss_scale=scaling())
    losses, compared = [], []

    def reference_loss(x, t):
        losses.append(fpsim.nn.functional.mse_loss(reference(x.astype(np.float64)),
                                                   t.astype(np.float64), "sum"))
        return losses[-1]

    for step in range(4):
        huge = step == 1 and loss_scale is not None  # overflows fp16: a skipped step
        x = _grid(rng, (4, 6), 12 if huge else -6)
        t = _grid(rng, (4, 3), -6)
        report = trainer.step(lambda x=x, t=t: F.mse_loss(model(torch.from_numpy(x)),
                                                          torch.from_numpy(t), reduction="sum"))
        want = ref_trainer.step(lambda x=x, t=t: reference_loss(x, t))
        # The loss is the one value torch sums inside a function (mse_loss's reduction, in
        # its own order, as docs/torch.md says): equal within binary32's rounding.
        assert math.isclose(report.loss, want.loss, rel_tol=2.0**-20) or (
            math.isnan(report.loss) and math.isnan(want.loss))
        for name in ("loss_scale", "skipped", "grad_norm", "flushed_fraction",
                     "weight_grads"):
            got, expected = getattr(report, name), getattr(want, name)
            assert got == expected or (got != got and expected != expected), (step, name)
            if report.skipped:  # the counts differ where gradients are not finite: an inf
                break  # meets an inactive ReLU as inf * 0 = NaN in fpsim, 0 in torch
        compared.append(not report.skipped)
        if report.skipped:
            continue
        # fpsim.training.gradients counts the transposed fp16 copies of the weights (F.linear
        # as x @ transpose(w)) among the activations; the activations proper are the rest.
        fmt = fpsim.precision.parse(policy).compute
        activations = [v.grad for v in losses[-1].graph() if v.grad is not None
                       and v.format == fmt and v.op not in ("leaf", "cast", "transpose")]
        assert report.activation_grads == training.GradientCounts.of(activations, fmt), (
            step, report, want)
        assert math.isnan(report.absorbed_fraction)  # a torch optimizer: not counted
        for mine, theirs in zip(model.parameters(), reference.parameters(), strict=True):
            np.testing.assert_array_equal(mine.detach().double().numpy(), theirs.data)
    assert trainer.steps == 4 and trainer.skipped == ref_trainer.skipped
    assert sum(compared) >= 2  # steps whose every field was compared


def test_the_trainer_counts_absorbed_updates_with_master_weights():
    model = torch.nn.Linear(4, 1)
    opt = fpsim.torch.MasterWeights(model.parameters(),
                                    lambda ps: torch.optim.SGD(ps, lr=1e-9), "mixed,params=fp16")
    trainer = fpsim.torch.Trainer(model, opt, "mixed,params=fp16")
    report = trainer.step(lambda: model(torch.ones(2, 4)).sum())
    assert report.absorbed_fraction == 1.0  # updates of 1e-9 are lost in fp16 weights
    with pytest.raises(ValueError, match="give a fpsim.torch.MasterWeights"):
        fpsim.torch.Trainer(torch.nn.Linear(2, 2), torch.optim.SGD(
            torch.nn.Linear(2, 2).parameters(), lr=0.1), "mixed,params=fp16")
    with pytest.raises(ValueError, match="one-element tensor"):
        trainer.step(lambda: model(torch.ones(2, 4)))


def test_flush_counter_counts_fpsim_torch_gradient_roundings():
    w = torch.nn.Parameter(torch.tensor([1.0]))
    with training.FlushCounter("fp16") as counter:
        y = fpsim.torch.round(w * 1e-4, "fp16", backward="fp16")
        (y * 1e-8).sum().backward()
    assert (counter.flushed, counter.nonzero) == (1, 1)  # 1e-8 is below fp16's subnormals
    assert w.grad.item() == 0.0
