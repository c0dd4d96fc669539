"""fpsim.torch's training: LossScaler against torch.amp.GradScaler itself (weights, scales
and state dicts, bit for bit); MasterWeights against updates computed here with
fpsim.round; Trainer against fpsim.training.Trainer on the same model, policy, loss
scale and data (every StepReport field and the weights)."""

import math

import pytest

torch = pytest.importorskip("torch")

import numpy as np  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch_cuda import assert_same_bits, grid, skip_without_cuda, torch_arithmetic  # noqa: E402

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


# -- on CUDA tensors: the CPU's bits ----------------------------------------------------
# Each run below is made on "cpu" and on "cuda" from the same data. The optimizers' steps
# are SGD with a power-of-two learning rate and momentum 0.5 (each of torch's update
# operations rounds once: lr * buf and 0.5 * buf are exact, so a fused a + lr * buf, as
# CUDA's kernels may compute it, is the unfused one) and the loss scales are powers of
# two; test_the_cuda_runs_premise_torchs_arithmetic_is_order_free checks on the CPU that
# every other operation torch computes in them gives the same bits on any device.


def _sgd(params, foreach=None, lr=2.0**-4):
    return torch.optim.SGD(params, lr=lr, momentum=0.5, foreach=foreach)


def _master_weights_run(device, policy, rounding=None, foreach=None):
    """Three steps of MasterWeights over SGD from standard normal float32 weights and
    gradients of magnitudes from 2**-30 to 2**-5 (not on a grid: fpsim rounds every value
    the wrapper stores): the working weights, the masters and the absorbed and updated
    counts after each."""
    rng = np.random.default_rng(6)
    w = torch.nn.Parameter(torch.from_numpy(rng.standard_normal((8, 64)).astype(np.float32))
                           .to(device))
    opt = fpsim.torch.MasterWeights([w], lambda ps: _sgd(ps, foreach), policy,
                                    rounding=rounding, seed=3 if rounding else None)
    steps = []
    for _ in range(3):
        g = rng.standard_normal((8, 64)) * 2.0 ** rng.integers(-30, -4, (8, 64))
        w.grad = torch.from_numpy(g.astype(np.float32)).to(device)
        opt.step()
        steps.append((w.detach().cpu().clone(), opt.masters[0].detach().cpu().clone(), opt.absorbed,
                      opt.updated))
    return steps


def _cnn():
    return torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3, stride=2, padding=1),
                               torch.nn.ReLU(), torch.nn.Flatten(),
                               torch.nn.Linear(2 * 3 * 3, 3))


def _on_grid(model, device, seed):
    """``model`` with weights on a grid (tests/torch_cuda.py), moved to ``device``."""
    rng = np.random.default_rng(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.from_numpy(grid(rng, tuple(p.shape), -6)))
    return model.to(device)


def _batches(kind, device, steps=6, huge=(), tiny=False, seed=9):
    """(input, target) pairs on grids; at the steps in ``huge`` targets beyond fp16's
    range (infinite in fp16: the gradients overflow, a skipped step); with ``tiny`` the
    inputs' first column (of each image, the CNN's) 2**-14 times smaller, fp16
    subnormals: some weights' gradients are flushed or subnormal in fp16."""
    rng = np.random.default_rng(seed)
    for step in range(steps):
        x = grid(rng, (4, 6) if kind == "mlp" else (4, 1, 6, 6), -3)
        if tiny:
            x[..., 0] *= 2.0**-14
        t = grid(rng, (4, 3), 17 if step in huge else -4)
        yield torch.from_numpy(x).to(device), torch.from_numpy(t).to(device)


def _scaled_training_run(device, scaler_kind="fpsim"):
    """Six SGD steps of an emulated MLP ("mixed,accum=fp16,order=sequential") with dynamic
    loss scaling, the loss scaled by 2**100 more at steps 2, 3 and 5 (its gradients
    overflow: skipped steps): the scale and the weights after each step, and the scaler's
    state_dict. ``scaler_kind``: "fpsim" (LossScaler) or "torch" (GradScaler)."""
    model = _on_grid(_model(1), device, 5)
    emulation = fpsim.torch.emulate(model, "mixed,accum=fp16,order=sequential")
    opt = _sgd(model.parameters())
    scaler = (fpsim.torch.LossScaler(training.DynamicLossScale(2.0**8, growth_interval=2))
              if scaler_kind == "fpsim"
              else torch.amp.GradScaler(device, init_scale=2.0**8, growth_interval=2))
    steps = []
    for step, (x, t) in enumerate(_batches("mlp", device)):
        opt.zero_grad()
        with emulation:
            loss = F.mse_loss(model(x), t, reduction="sum")
        scaler.scale(loss * (2.0**100 if step in (2, 3, 5) else 1.0)).backward()
        scaler.unscale_(opt)
        scaler.step(opt)
        scaler.update()
        steps.append((scaler.get_scale(), [p.detach().cpu().clone() for p in model.parameters()]))
    return steps, scaler.state_dict()


TRAINER_RUNS = [("mlp", "mixed,order=sequential", None),
                ("cnn", "mixed,accum=fp16,order=sequential,params=fp16", "stochastic")]


def _trainer_run(device, kind, policy, rounding):
    """Four steps of fpsim.torch.Trainer with MasterWeights over SGD and a dynamic loss
    scale, step 1's targets overflowing fp16's gradients: each step's report and weights,
    and the masters at the end."""
    model = _on_grid(_model(1) if kind == "mlp" else _cnn(), device, 7)
    opt = fpsim.torch.MasterWeights(model.parameters(), lambda ps: _sgd(ps, lr=2.0**-10),
                                    policy, rounding=rounding, seed=4 if rounding else None)
    trainer = fpsim.torch.Trainer(model, opt, policy, loss_scale=training.DynamicLossScale(
        2.0**-6, growth_interval=2))
    steps = []
    for x, t in _batches(kind, device, 4, huge=(1,), tiny=True):
        report = trainer.step(lambda x=x, t=t: F.mse_loss(model(x), t, reduction="sum"))
        steps.append((report, [p.detach().cpu().clone() for p in model.parameters()]))
    assert any(report.skipped for report, _ in steps)
    return steps, [m.detach().cpu() for m in opt.masters]


PREMISES = {
    "master weights, fp32 masters": lambda: _master_weights_run("cpu", "mixed"),
    "master weights, fp32 masters, foreach": lambda: _master_weights_run(
        "cpu", "mixed", foreach=True),
    "master weights, stochastic updates": lambda: _master_weights_run(
        "cpu", "mixed,params=fp16", "stochastic", foreach=True),
    "loss scaler": lambda: _scaled_training_run("cpu"),
    "grad scaler": lambda: _scaled_training_run("cpu", "torch"),
    **{f"trainer {kind} {policy}": (lambda k=kind, p=policy, r=rounding: _trainer_run(
        "cpu", k, p, r)) for kind, policy, rounding in TRAINER_RUNS},
}


@pytest.mark.parametrize("run", PREMISES)
def test_the_cuda_runs_premise_torchs_arithmetic_is_order_free(run):
    """Every operation torch computes itself in the runs the CUDA tests compare gives the
    same bits in any order on any device (tests/torch_cuda.py's TorchArithmetic: single
    roundings, exact sums and products), but mse_loss's value, compared within binary32's
    rounding. (SGD's foreach path, CUDA's default, is checked on the CPU too.)"""
    with torch_arithmetic() as audit:
        PREMISES[run]()
    assert audit.problems == [] and audit.checked > 0


@pytest.mark.gpu
@pytest.mark.parametrize("policy, rounding", [("mixed", None),
                                              ("mixed,params=fp16", "stochastic")])
def test_cuda_master_weights_give_the_cpus_bits(policy, rounding):
    """MasterWeights on CUDA tensors: fp32 masters beside fp16 working weights, and fp16
    weights without masters updated by stochastic rounding (seeded). The working weights,
    the masters and the absorbed and updated counts after each step equal the CPU's: the
    roundings are fpsim's (the cupy backend's bits, stochastic ones keyed by seed and
    index), the float64 SGD step torch's own single roundings (its foreach kernels on
    CUDA, its per-tensor loop on the CPU: the same operations, see above)."""
    skip_without_cuda()
    cpu = _master_weights_run("cpu", policy, rounding)
    gpu = _master_weights_run("cuda", policy, rounding)
    for (w, m, absorbed, updated), (w_gpu, m_gpu, absorbed_gpu, updated_gpu) in zip(
            cpu, gpu, strict=True):
        assert_same_bits(w_gpu, w)
        assert_same_bits(m_gpu, m)
        assert (absorbed_gpu, updated_gpu) == (absorbed, updated)
    assert any(absorbed for *_, absorbed, _ in cpu)  # some updates were lost


@pytest.mark.gpu
def test_cuda_loss_scaling_gives_the_cpus_bits_and_grad_scalers():
    """LossScaler on CUDA tensors trains an emulated MLP through scale growths and
    overflow backoffs to the CPU's weights and scales, bit for bit, and as
    torch.amp.GradScaler("cuda") does (GradScaler multiplies by the reciprocal of a
    power-of-two scale: LossScaler's division exactly); each loads the other's state_dict.
    The model's values are fpsim's; torch's own arithmetic in the run is order-free
    (test_the_cuda_runs_premise_torchs_arithmetic_is_order_free)."""
    skip_without_cuda()
    cpu, cpu_state = _scaled_training_run("cpu")
    gpu, gpu_state = _scaled_training_run("cuda")
    theirs, their_state = _scaled_training_run("cuda", "torch")
    for (scale, weights), *others in zip(cpu, gpu, theirs, strict=True):
        for other_scale, other_weights in others:
            assert other_scale == scale
            for got, want in zip(other_weights, weights, strict=True):
                assert_same_bits(got, want)
    assert len({scale for scale, _ in cpu}) > 2  # grown and backed off
    assert gpu_state == cpu_state
    assert {k: v for k, v in gpu_state.items() if k in their_state} == their_state
    mine = fpsim.torch.LossScaler("dynamic")
    mine.load_state_dict(their_state)
    back = torch.amp.GradScaler("cuda")
    back.load_state_dict(gpu_state)
    assert mine.get_scale() == back.get_scale() == their_state["scale"]


@pytest.mark.gpu
@pytest.mark.parametrize("kind, policy, rounding", TRAINER_RUNS)
def test_cuda_trainer_gives_the_cpus_reports_and_bits(kind, policy, rounding):
    """fpsim.torch.Trainer on CUDA tensors: an MLP under "mixed" with fp32 masters (in
    sequential order: trained weights are off the grids, so torch's own products, which
    "mixed" in any order would use, would round in the device's order), and a CNN with
    fp16 accumulation and fp16 weights updated by stochastic rounding, for four steps (one
    skipped: its gradients overflow fp16). Every StepReport field equals the
    CPU's (the counts are fpsim.training's of the same gradient bits, the norm its float64
    sum of them on the host), but the loss, which is torch's mse_loss: its sum runs in the
    device's order, so it is compared within binary32's rounding. The weights after each
    step and the masters equal the CPU's bit for bit."""
    skip_without_cuda()
    cpu, cpu_masters = _trainer_run("cpu", kind, policy, rounding)
    gpu, gpu_masters = _trainer_run("cuda", kind, policy, rounding)
    for (report, weights), (got, got_weights) in zip(cpu, gpu, strict=True):
        assert math.isclose(got.loss, report.loss, rel_tol=2.0**-16) or (
            got.loss == report.loss or (math.isnan(got.loss) and math.isnan(report.loss)))
        for name in ("loss_scale", "skipped", "grad_norm", "absorbed_fraction",
                     "flushed_fraction", "activation_grads", "weight_grads"):
            mine, theirs = getattr(got, name), getattr(report, name)
            assert mine == theirs or (mine != mine and theirs != theirs), name
        for a, b in zip(got_weights, weights, strict=True):
            assert_same_bits(a, b)
    for a, b in zip(gpu_masters, cpu_masters, strict=True):
        assert_same_bits(a, b)
