"""Tensors, models and training on device "cuda", under Numba's CUDA simulator with the
CuPy stand-in (``fake_cupy``), against the same on "cpu", bit for bit.

It must run in its own process (``NUMBA_ENABLE_CUDASIM=1`` is read when numba.cuda is
first imported)::

    NUMBA_ENABLE_CUDASIM=1 python tests/device_checks.py [--only NAME]

On a GPU, ``python tests/device_checks.py --gpu`` runs the same checks on real CuPy. CuPy
keeps no record of its calls or host reads, so there the checks compare bits and kernel
launches only; and native policies (CuPy's own float16 arithmetic and cuBLAS) are reported
against the cpu's NumPy float16, not required to equal it.

Each check prints ``PASS name`` or ``FAIL name: why``; the exit status is 1 if any failed.
``FPSIM_DEVICE_STEPS`` (default 2) sets the training steps of the training check: the
simulator runs each kernel thread as Python, so keep it small.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

GPU = "--gpu" in sys.argv
if GPU:
    import cupy as xp  # noqa: E402
else:
    import fake_cupy as xp  # noqa: E402

    sys.modules["cupy"] = xp  # what fpsim imports as CuPy

import fpsim  # noqa: E402
from fpsim import nn, optim  # noqa: E402
from fpsim.backends import cupy_backend  # noqa: E402
from fpsim.data import batches  # noqa: E402
from fpsim.nn import functional as F  # noqa: E402


class _Uncounted:
    """On a real GPU: CuPy records no calls or reads, so the counts are not checked."""
    calls: list[str] = []
    reads = 0


seen = _Uncounted if GPU else xp
COUNTED = not GPU
STEPS = int(os.environ.get("FPSIM_DEVICE_STEPS", "2"))
# CuPy's own sums and products: an emulated policy must not call them on the device.
REDUCTIONS = ("sum", "matmul", "dot", "einsum", "tensordot", "add.reduce", "cumsum", "mean",
              "inner", "vdot")
CHECKS = {}


def check(func):
    CHECKS[func.__name__] = func
    return func


def bits(a) -> np.ndarray:
    a = xp.asnumpy(a) if isinstance(a, xp.ndarray) else np.asarray(a)
    return a.view({8: np.int64, 4: np.int32, 2: np.int16, 1: np.int8}[a.dtype.itemsize])


def same_bits(what: str, got, want) -> None:
    assert isinstance(got, xp.ndarray), f"{what}: {type(got).__name__} on the host"
    assert not isinstance(want, xp.ndarray), f"{what}: the cpu value is on the device"
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, want.dtype)
    assert np.array_equal(bits(got), bits(want)), f"{what}: {got!r} != {want!r}"


def raises(kind, words, func) -> None:
    try:
        func()
    except kind as exc:
        for w in words:
            assert w in str(exc), f"{w!r} not in {exc}"
        return
    raise AssertionError(f"no {kind.__name__} raised")


def counted_steps(trainer, model, xs, target):
    """``STEPS`` steps of ``trainer`` on ``cross_entropy(model(xs), target)``: their reports,
    and how many device-to-host reads each made."""
    reports, reads = [], []
    for _ in range(STEPS):
        before = seen.reads
        reports.append(trainer.step(lambda: F.cross_entropy(model(xs), target)))
        reads.append(seen.reads - before)
    return reports, reads


class Launches:
    """Counts the cupy backend's kernel calls (roundings, elementwise, accumulations)."""

    def __init__(self) -> None:
        self.count = 0

    def __enter__(self):
        self.saved = {n: getattr(cupy_backend.Backend, n) for n in ("apply", "accumulate")}
        for name, method in self.saved.items():
            def counted(backend, *args, _method=method, **kwargs):
                self.count += 1
                return _method(backend, *args, **kwargs)
            setattr(cupy_backend.Backend, name, counted)
        return self

    def __exit__(self, *exc):
        for name, method in self.saved.items():
            setattr(cupy_backend.Backend, name, method)


@check
def round_trips():
    x = np.array([0.1, -2.5, 1e-6, 70000.0])
    t = fpsim.tensor(x, format="fp16")
    c = t.to("cuda")
    assert c.device == "cuda" and c.format == t.format and isinstance(c.data, xp.ndarray)
    same_bits("to cuda", c.data, t.data)
    back = c.cpu()
    assert back.device == "cpu" and type(back.data) is np.ndarray
    assert np.array_equal(bits(back.data), bits(t.data))
    assert c.to("cuda") is c and t.to("cpu") is t and t.cpu() is t
    # Made there, rounded there: the same values as rounded on the host.
    d = fpsim.tensor(x, format="fp16", device="cuda")
    same_bits("tensor(device=cuda)", d.data, t.data)
    same_bits("tensor(cupy array)", fpsim.tensor(xp.asarray(x)).data, x)
    # numpy() and __array__ copy to the host.
    for host in (c.numpy(), np.asarray(c), np.asarray(c, dtype=np.float32)):
        assert type(host) is np.ndarray and np.array_equal(host, t.data)
    assert float(c[1:2].sum()) == -2.5 and c.argmax().item() == 3
    assert "device='cuda'" in repr(c)
    # .to(device) is differentiable: the gradient comes back to the cpu leaf.
    w = fpsim.tensor([1.5, -3.0], requires_grad=True)
    (w.to("cuda") * 2).sum().backward()
    assert type(w.grad) is np.ndarray and w.grad.tolist() == [2.0, 2.0]
    # Raw CuPy arrays are taken where arrays are: parameters, normalizations' inputs.
    with fpsim.precision.parse("mixed"):
        p = nn.Parameter(xp.asarray([0.1, 3.0]))
        same_bits("Parameter", p.data, nn.Parameter([0.1, 3.0]).data)
        raw = np.array([[1.0, 2.0], [3.0, 5.0]])
        for norm in (lambda v: F.batch_norm(v), lambda v: F.layer_norm(v, 2)):
            same_bits("normalized raw array", norm(xp.asarray(raw)).data, norm(raw).data)
    # A module moves its parameters (and their gradients) and buffers, and back.
    nn.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2))
    before = model.state_dict()
    model.to("cuda")
    assert all(p.device == "cuda" for p in model.parameters())
    assert isinstance(model[1].running_mean, xp.ndarray)
    model.to("cpu")
    for name, value in model.state_dict().items():
        assert type(value) is np.ndarray and np.array_equal(bits(value), bits(before[name]))


@check
def binary32_subnormals_survive_the_device():
    """CuPy compiles its kernels with -ftz=true (so does the stand-in): a binary32
    subnormal it converts or computes on becomes a zero. fpsim's conversions, roundings,
    products and quantization on the device keep them, with the CPU's bits and flags."""
    from fpsim._device import binary32, binary64

    tiny = np.float32([2.0**-149, -(2.0**-140), 1.5 * 2.0**-127, 2.0**-126, -1.0, 0.0])
    wide = tiny.astype(np.float64)
    d32, d64 = xp.asarray(tiny), xp.asarray(wide)
    if not GPU:  # the stand-in flushes, as CuPy does: this check can fail
        assert not np.array_equal(bits(d32.astype(np.float64)), bits(wide))
    same_bits("binary64", binary64(d32), wide)
    same_bits("binary32", binary32(d64), tiny)
    a, b = wide.reshape(2, 3), np.float64([[1.0], [0.5], [-0.25]])
    c = np.full((2, 1), 2.0**-149)
    cpu = {"round": fpsim.round(wide, "fp32"), "round32": fpsim.round(tiny, "fp16"),
           "any": fpsim.matmul(a, b, c=c), "sequential": fpsim.matmul(a, b, order="sequential"),
           "narrowed": fpsim.matmul(tiny.reshape(2, 3), b.astype(np.float32)),
           "quantize": fpsim.quantize(wide, "per_tensor")}
    with fpsim.backend("cupy"):
        gpu = {"round": fpsim.round(d64, "fp32"), "round32": fpsim.round(d32, "fp16"),
               "any": fpsim.matmul(xp.asarray(a), xp.asarray(b), c=xp.asarray(c)),
               "sequential": fpsim.matmul(xp.asarray(a), xp.asarray(b), order="sequential"),
               "narrowed": fpsim.matmul(d32.reshape(2, 3), xp.asarray(b.astype(np.float32))),
               "quantize": fpsim.quantize(d64, "per_tensor")}
    for key in ("round", "round32", "any", "sequential", "narrowed"):
        same_bits(key, gpu[key], cpu[key])
    for field in ("bits", "flags", "values", "scales"):
        same_bits(f"quantize {field}", getattr(gpu["quantize"], field),
                  getattr(cpu["quantize"], field))


@check
def mixing_devices_is_an_error():
    a = fpsim.tensor([1.0, 2.0], device="cuda")
    b = fpsim.tensor([3.0, 4.0])
    words = ("cpu and cuda", ".to(device)")
    raises(ValueError, ("add",) + words, lambda: a + b)
    raises(ValueError, ("mul",) + words, lambda: b * a)
    raises(ValueError, ("matmul",) + words, lambda: a.reshape(1, 2) @ b.reshape(2, 1))
    raises(ValueError, ("cross_entropy",) + words,
           lambda: F.cross_entropy(a.reshape(1, 2), np.array([1])))
    raises(ValueError, ("mse_loss",) + words, lambda: F.mse_loss(a, b))
    raises(ValueError, ("cat",) + words, lambda: F.cat([a, b]))
    nn.manual_seed(0)
    raises(ValueError, words, lambda: nn.Linear(2, 1)(a.reshape(1, 2)))
    # A number (a 0-d constant) goes with a tensor anywhere, as in PyTorch.
    for y in (a * 2, 1 - a, a / np.float64(4)):
        assert y.device == "cuda"
    # What is not yet supported on the device says so.
    raises(ValueError, ("embedding",) + words,
           lambda: F.embedding(np.array([0]), fpsim.tensor(np.ones((2, 2)), device="cuda")))
    with fpsim.precision.parse("fp64"):
        raises(NotImplementedError, ("fp64", "cuda"),
               lambda: a.reshape(1, 2) @ fpsim.tensor([[1.0], [1.0]], device="cuda"))


@check
def batches_on_the_device():
    x, y = np.arange(10.0).reshape(5, 2), np.arange(5)
    host = list(batches(x, y, batch_size=2, seed=3))
    device = list(batches(x, y, batch_size=2, seed=3, device="cuda"))
    assert len(host) == len(device) == 3
    for (hx, hy), (dx, dy) in zip(host, device, strict=True):
        same_bits("x batch", dx, hx)
        assert isinstance(dy, xp.ndarray) and np.array_equal(xp.asnumpy(dy), hy)


def _model():
    nn.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 3))


def _data():
    rng = np.random.default_rng(1)
    return rng.normal(size=(4, 3)), np.array([0, 2, 1, 2])


@check
def forward_and_backward_match_the_cpu():
    x, y = _data()
    for text in ("fp16", "mixed,order=sequential", "bf16,order=pairwise"):
        policy = fpsim.precision.parse(text)
        results = {}
        for device in ("cpu", "cuda"):
            model = _model().to(policy).to(device)
            xs = fpsim.tensor(x, device=device)
            ys = fpsim.tensor(np.zeros(1), device=device)  # unused; tensors made there
            del ys
            target = y if device == "cpu" else xp.asarray(y)
            seen.calls.clear()
            with Launches() as launches, policy:
                out = model(xs)
                loss = F.cross_entropy(out, target)
                loss.backward(1024.0)
            if device == "cuda":
                own = [c for c in seen.calls if c in REDUCTIONS]
                assert not own, f"{text}: CuPy's own reductions ran: {own}"
                assert launches.count > 10, f"{text}: {launches.count} cupy kernel calls"
                graph = [t for t in loss.graph() if t.grad is not None]
                assert all(isinstance(t.data, xp.ndarray) for t in loss.graph())
                assert all(isinstance(t.grad, xp.ndarray) for t in graph)
            else:
                assert launches.count == 0
            results[device] = [out.data, loss.data] + [p.grad for p in model.parameters()]
        for i, (got, want) in enumerate(zip(results["cuda"], results["cpu"], strict=True)):
            same_bits(f"{text}: value {i}", got, want)


@check
def lstm_matches_the_cpu():
    x = np.random.default_rng(2).normal(size=(3, 2, 2))
    policy = fpsim.precision.parse("mixed,order=sequential")
    results = {}
    for device in ("cpu", "cuda"):
        nn.manual_seed(0)
        lstm = nn.LSTM(2, 3).to(policy).to(device)
        seen.calls.clear()
        with policy:
            out, (h, c) = lstm(fpsim.tensor(x, device=device))
            (out.sum() + h.sum() + c.sum()).backward(256.0)
        if device == "cuda":
            own = [c for c in seen.calls if c in REDUCTIONS]
            assert not own, f"CuPy's own reductions ran: {own}"
        results[device] = [out.data, h.data, c.data] + [p.grad for p in lstm.parameters()]
    for i, (got, want) in enumerate(zip(results["cuda"], results["cpu"], strict=True)):
        same_bits(f"lstm: value {i}", got, want)


@check
def native_policies_use_cupys_arithmetic():
    """native_fp16 on the device: CuPy's float16 arrays and its own matmul (cuBLAS on a
    GPU); the stand-in's are NumPy's, so here the bits are the cpu's too."""
    x, y = _data()
    policy = fpsim.precision.parse("native_fp16")
    results = {}
    for device in ("cpu", "cuda"):
        model = _model().to(policy).to(device)
        target = y if device == "cpu" else xp.asarray(y)
        seen.calls.clear()
        with Launches() as launches, policy:
            out = model(fpsim.tensor(x, device=device))
            loss = F.cross_entropy(out, target)
            loss.backward()
        results[device] = [out.data, loss.data] + [p.grad for p in model.parameters()]
    assert (not COUNTED or "matmul" in seen.calls) and launches.count == 0, (seen.calls,
                                                                              launches.count)
    assert results["cuda"][0].dtype == np.float16
    for i, (got, want) in enumerate(zip(results["cuda"], results["cpu"], strict=True)):
        if COUNTED:
            same_bits(f"native_fp16: value {i}", got, want)
        else:  # CuPy's float16 and cuBLAS against NumPy's: reported, not required
            same = np.mean(bits(got) == bits(want))
            print(f"  native_fp16 value {i}: {same:.1%} of the cpu's bits", flush=True)


@check
def training_matches_the_cpu():
    x, y = _data()
    runs = {}
    for device in ("cpu", "cuda"):
        model = _model()
        opt = optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
        trainer = fpsim.training.Trainer(model.to(device), opt, "fp16,order=sequential",
                                         loss_scale="dynamic", clip_norm=None)
        # Raw arrays, as batches(device=...) yields them.
        xs = x if device == "cpu" else xp.asarray(x)
        target = y if device == "cpu" else xp.asarray(y)
        reports = [trainer.step(lambda m=model, xs=xs, t=target: F.cross_entropy(m(xs), t))
                   for _ in range(STEPS)]
        state = [opt.state[id(p)]["momentum_buffer"] for p in model.parameters()
                 if id(p) in opt.state]
        runs[device] = (reports, [p.data for p in model.parameters()], state)
    (cpu_reports, cpu_weights, cpu_state), (gpu_reports, gpu_weights, gpu_state) = (
        runs["cpu"], runs["cuda"])
    # Every field (repr: a float's shortest repr is unique, and NaN shows as nan).
    assert repr(gpu_reports) == repr(cpu_reports), (gpu_reports, cpu_reports)
    assert cpu_reports[0].skipped  # fp16 overflowed at 2**16: the scale fell
    for i, (got, want) in enumerate(zip(gpu_weights + gpu_state, cpu_weights + cpu_state,
                                        strict=True)):
        same_bits(f"weight or state {i}", got, want)


@check
def one_host_read_per_step():
    """A Trainer step on "cuda" reads the device at most once (the finiteness check of the
    loss scale, with cross_entropy's deferred target check), under no, a static and a
    dynamic loss scale; the report's fields are read only when asked for, and then equal
    the cpu's. Clipping adds one read (the norm against clip_norm)."""
    x, y = _data()
    for loss_scale, clip in ((None, None), (1024.0, None), ("dynamic", None),
                             ("dynamic", 0.25)):
        runs = {}
        for device in ("cpu", "cuda"):
            model = _model()
            opt = optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
            trainer = fpsim.training.Trainer(model.to(device), opt, "fp16,order=sequential",
                                             loss_scale=loss_scale, clip_norm=clip)
            xs = x if device == "cpu" else xp.asarray(x)
            target = y if device == "cpu" else xp.asarray(y)
            reports, reads = counted_steps(trainer, model, xs, target)
            if device == "cuda":
                allowed = 1 if clip is None else 2
                assert not COUNTED or max(reads) <= allowed, (loss_scale, clip, reads)
                before = seen.reads
                assert isinstance(reports[-1].loss, float)
                assert not COUNTED or seen.reads == before + 1
                reports[-1].loss  # noqa: B018 - read once, then kept
                assert not COUNTED or seen.reads == before + 1
            runs[device] = (repr(reports), [p.data for p in model.parameters()],
                            opt.absorbed, opt.updated)
        assert runs["cuda"][0] == runs["cpu"][0], (loss_scale, runs["cuda"][0], runs["cpu"][0])
        assert runs["cuda"][2:] == runs["cpu"][2:]
        for i, (got, want) in enumerate(zip(runs["cuda"][1], runs["cpu"][1], strict=True)):
            same_bits(f"{loss_scale}: weight {i}", got, want)
    # Out-of-range classes: outside a step, an error at once; inside one, at its read,
    # before anything is updated.
    logits = fpsim.tensor(np.zeros((2, 3)), device="cuda")
    bad = xp.asarray([0, 3])
    raises(ValueError, ("0..2",), lambda: F.cross_entropy(logits, bad))
    for loss_scale in (None, "dynamic"):
        model = _model().to("cuda")
        trainer = fpsim.training.Trainer(model, optim.SGD(model.parameters(), lr=0.5),
                                         "fp16", loss_scale=loss_scale)
        before = [xp.asnumpy(p.data) for p in model.parameters()]
        xs = xp.asarray(x[:2])
        reads = seen.reads
        raises(ValueError, ("0..2",),
               lambda m=model, t=trainer, xs=xs: t.step(lambda: F.cross_entropy(m(xs), bad)))
        assert (not COUNTED or seen.reads == reads + 1) and trainer.steps == 0
        assert trainer.loss_scale.scale == (1.0 if loss_scale is None else 2.0**16)
        for p, b in zip(model.parameters(), before, strict=True):
            assert np.array_equal(xp.asnumpy(p.data), b)


@check
def gradient_norm_and_clipping_match_the_cpu():
    """The gradient norm and clipping on "cuda" run NumPy's summation order by elementwise
    additions (no CuPy sum): reports and weights are the cpu's bits, with parameters long
    enough for NumPy's pairwise blocks (320 and 48 elements), clipping every step."""
    from fpsim.precision.numerics import float64_sum

    rng = np.random.default_rng(4)
    for shape in [(5,), (129,), (3, 300), (40, 30)]:
        for order in ("C", "F"):
            a = np.asarray(rng.random(shape) * 10.0 ** rng.integers(-8, 8, shape), order=order)
            seen.calls.clear()
            got = float64_sum(xp.asarray(a) if order == "C" else
                              xp.asarray(a.T).T)
            assert not [c for c in seen.calls if c in REDUCTIONS], seen.calls
            same_bits(f"float64_sum {shape} {order}", got.reshape(1), np.sum(a).reshape(1))
    x, y = rng.normal(size=(6, 20)), np.array([0, 2, 1, 2, 0, 1])
    for text in ("fp16,order=sequential", "mixed,order=pairwise"):
        runs = {}
        for device in ("cpu", "cuda"):
            nn.manual_seed(0)
            model = nn.Sequential(nn.Linear(20, 16), nn.ReLU(), nn.Linear(16, 3))
            opt = optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
            trainer = fpsim.training.Trainer(model.to(device), opt, text,
                                             loss_scale="dynamic", clip_norm=0.05)
            xs = x if device == "cpu" else xp.asarray(x)
            target = y if device == "cpu" else xp.asarray(y)
            seen.calls.clear()
            reports = [trainer.step(lambda m=model, xs=xs, t=target: F.cross_entropy(m(xs), t))
                       for _ in range(STEPS)]
            if device == "cuda":
                own = [c for c in seen.calls if c in REDUCTIONS]
                assert not own, f"{text}: CuPy's own reductions ran: {own}"
            runs[device] = (repr(reports), [p.data for p in model.parameters()])
            assert all(r.grad_norm > 0.05 for r in reports if not r.skipped), reports
        assert runs["cuda"][0] == runs["cpu"][0], (runs["cuda"][0], runs["cpu"][0])
        for i, (got, want) in enumerate(zip(runs["cuda"][1], runs["cpu"][1], strict=True)):
            same_bits(f"{text}: weight {i}", got, want)


@check
def cnn_and_embedding_match_the_cpu():
    """conv2d (im2col on the device) and embedding on "cuda": a small CNN's and an
    embedding model's forward, backward and a training step give the cpu's bits, with no
    CuPy reduction; repeated ids' gradients add in np.add.at's order."""
    from fpsim.autograd.shape import add_at

    rng = np.random.default_rng(6)
    # Terms over 16 decades, one row named 30 times: only np.add.at's order gives its bits.
    ids = np.concatenate([np.zeros(30, dtype=np.int64), rng.integers(0, 5, 30)])
    rng.shuffle(ids)
    rows = rng.normal(size=(60, 3)) * 10.0 ** rng.integers(-8, 8, (60, 3))
    start = rng.normal(size=(5, 3))
    want, backwards = start.copy(), start.copy()
    np.add.at(want, ids, rows)
    np.add.at(backwards, ids[::-1], rows[::-1])
    assert not np.array_equal(want, backwards)  # the order shows in the bits
    got = xp.asarray(start)
    seen.calls.clear()
    add_at(got, xp.asarray(ids), xp.asarray(rows))
    assert "add.at" not in seen.calls, seen.calls
    same_bits("add_at", got, want)
    images = rng.normal(size=(2, 1, 5, 5))
    labels = np.array([1, 0])
    tokens = np.array([[1, 4, 1, 1], [0, 4, 2, 1]])
    for name, make, data in (
        ("cnn", lambda: nn.Sequential(nn.Conv2d(1, 2, 3, stride=1, padding=1), nn.ReLU(),
                                      nn.Conv2d(2, 2, 2, stride=2), nn.Flatten(),
                                      nn.Linear(8, 2)), images),
        ("embedding", lambda: nn.Sequential(nn.Embedding(5, 3), nn.Flatten(),
                                            nn.Linear(12, 2)), tokens)):
        runs = {}
        for device in ("cpu", "cuda"):
            nn.manual_seed(0)
            model = make()
            opt = optim.SGD(model.parameters(), lr=0.5)
            trainer = fpsim.training.Trainer(model.to(device), opt, "mixed,order=sequential",
                                             loss_scale="dynamic")
            xs = data if device == "cpu" else xp.asarray(data)
            target = labels if device == "cpu" else xp.asarray(labels)
            seen.calls.clear()
            reports, reads = counted_steps(trainer, model, xs, target)
            if device == "cuda":
                own = [c for c in seen.calls if c in REDUCTIONS + ("add.at",)]
                assert not own, f"{name}: CuPy's own reductions ran: {own}"
                # The embedding's backward reads its ids' largest repeat count.
                assert not COUNTED or reads == [1 if name == "cnn" else 2] * STEPS, reads
            runs[device] = (repr(reports), [p.data for p in model.parameters()])
        assert runs["cuda"][0] == runs["cpu"][0], (name, runs["cuda"][0], runs["cpu"][0])
        for i, (got, want) in enumerate(zip(runs["cuda"][1], runs["cpu"][1], strict=True)):
            same_bits(f"{name}: weight {i}", got, want)
    # Ids out of range: an error at once outside a step (and at the step's read inside).
    table = fpsim.tensor(np.ones((3, 2)), device="cuda")
    raises(ValueError, ("0..2",), lambda: F.embedding(xp.asarray([0, 3]), table))


@check
def optimizer_state_follows_a_moved_model():
    """One step on the cpu, the model moved to "cuda", one more step there: the momentum
    buffers follow the parameters, and the run equals two steps on the cpu."""
    x, y = _data()
    runs = {}
    for moved in (False, True):
        model = _model()
        opt = optim.Adam(model.parameters(), lr=0.01)
        trainer = fpsim.training.Trainer(model, opt, "mixed,order=pairwise")
        for step in range(2):
            on_gpu = moved and step == 1
            if on_gpu:
                model.to("cuda")
            xs = xp.asarray(x) if on_gpu else x
            ys = xp.asarray(y) if on_gpu else y
            trainer.step(lambda m=model, xs=xs, ys=ys: F.cross_entropy(m(xs), ys))
        state = [v for p in model.parameters() for k, v in sorted(opt.state[id(p)].items())
                 if k != "step"]
        runs[moved] = [p.data for p in model.parameters()] + state
    for i, (got, want) in enumerate(zip(runs[True], runs[False], strict=True)):
        same_bits(f"weight or Adam moment {i}", got, want)


@check
def monitors_count_on_the_device():
    from fpsim.training import FlushCounter, GradientCounts, exponent_histogram, flushed_fraction

    values = np.array([0.0, 1e-9, -3e-6, 2.0**-20, 1.5, -70000.0, np.inf, np.nan, 6e-8])
    device = xp.asarray(values)
    # NumPy would take the stand-in's arrays as its own: the calls show CuPy's ran.
    seen.calls.clear()
    assert GradientCounts.of([device], "fp16") == GradientCounts.of([values], "fp16")
    assert not COUNTED or seen.calls.count("count_nonzero") == 3, seen.calls
    for scale in (1.0, 1024.0):
        assert flushed_fraction([device], "fp16", scale) == flushed_fraction([values], "fp16",
                                                                            scale)
    seen.calls.clear()
    got, want = exponent_histogram([device], -30, 20), exponent_histogram([values], -30, 20)
    assert not COUNTED or "bincount" in seen.calls, seen.calls
    assert all(type(g) is type(w) for g, w in zip(got, want, strict=True))
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    assert got[2] == want[2] == 1
    counts = {}
    for where in ("cpu", "cuda"):
        w = fpsim.tensor([1.0, 3e-3], requires_grad=True, device=where)
        with fpsim.precision.parse("mixed"):
            loss = (w * 1e-4 * 1e-4).sum()
            with FlushCounter("fp16") as counter:
                loss.backward()
        counts[where] = (counter.flushed, counter.nonzero)
    assert counts["cuda"] == counts["cpu"] and counts["cpu"][0] > 0, counts


def tiny_setup(seed):
    """A sweep task's Setup small enough for the simulator: 12 samples of 6 features."""
    from fpsim.sweep import Setup

    rng = np.random.default_rng(seed)
    x, y = rng.normal(size=(12, 6)), rng.integers(0, 3, 12)
    nn.manual_seed(seed)
    model = nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 3))

    def evaluate(model, policy):
        with policy, fpsim.no_grad():
            xs = fpsim.tensor(x[:6], device=next(iter(model.parameters())).device)
            return float(np.mean(np.argmax(model(xs).numpy(), axis=1) == y[:6]) * 100)

    return Setup(model, optim.SGD(model.parameters(), lr=0.5, momentum=0.9),
                 batches(x, y, batch_size=4, seed=seed),
                 lambda m, batch: F.cross_entropy(m(batch[0]), batch[1]), evaluate)


@check
def sweeps_train_on_the_device():
    """fpsim.sweep.train with ``device="cuda"``: the model moved there, the batches copied
    there, the evaluation run there, and the record the cpu's (curve, losses, metric);
    the cache key names the device. With --gpu, also 20 steps of the built-in digits
    MLP task (its evaluation on the whole test set) under every emulated ablation."""
    from dataclasses import replace

    from fpsim.reproduce.tasks import task
    from fpsim.sweep import Ablation, Task, ablation
    from fpsim.sweep.ablation import ABLATIONS
    from fpsim.sweep.train import train

    tasks = {"tiny": lambda device: Task("tiny", tiny_setup, steps=STEPS + 1,
                                         eval_every=STEPS + 1, device=device)}
    # A defined order: with order=any the cpu adds by BLAS and the GPU in sequence.
    policies = [Ablation("mixed_sequential", "mixed,order=sequential", "dynamic"),
                ablation("fp16_accum")]
    if GPU:  # 20 steps of the digits MLP under every emulated ablation, in order
        tasks["digits_mlp"] = lambda device: replace(
            task("digits_mlp").for_sweep("quick", device), steps=20, eval_every=10)
        policies = [Ablation(a.name, a.policy if "order=" in a.policy
                             else a.policy + ",order=sequential", a.loss_scale)
                    for a in ABLATIONS.values() if not a.precision().native]
    for name, make in tasks.items():
        for policy in policies:
            records = {}
            for device in ("cpu", "cuda"):
                made = make(device)
                records[device] = train(made, policy, seed=0)
                records[device].pop("seconds")
                key = made.key()
                assert ("device" in key) == (device == "cuda"), key
            assert records["cuda"] == records["cpu"], (name, policy.name, records["cuda"],
                                                       records["cpu"])


# test_gradcheck's operation cases whose builders hold host arrays (targets, running
# statistics): on "cuda" their operations must refuse them, naming both devices.
HOST_CONSTANTS = ("cross_entropy_", "mse_loss_", "batch_norm_2d_", "batch_norm_3d_",
                  "batch_norm_4d_", "embedding_")
# Operations not yet on the GPU: a NotImplementedError naming "cuda".
REFUSED = ()


@check
def elementary_functions_have_the_cpus_bits():
    """exp, log and tanh of an emulated policy in binary64 (the shared kernels): the same
    bits on "cuda" as on the cpu, where the two C libraries differ in the last place."""
    from fpsim.precision import Policy, numerics

    rng = np.random.default_rng(11)
    n = 64 if not GPU else 1 << 16
    x = np.concatenate([rng.uniform(-750.0, 712.0, n), rng.standard_normal(n) * 3.0,
                        [0.0, -0.0, np.inf, -np.inf, np.nan, 2.0**-1074, 1e-300, 22.0]])
    for name in numerics.ELEMENTARY:
        arg = np.abs(x) if name == "log" else x
        want = numerics.elementary(name, arg, Policy())
        got = numerics.elementary(name, xp.asarray(arg), Policy())
        same_bits(f"{name} in binary64", got, want)


@check
def every_operation_matches_the_cpu():
    """Each of test_gradcheck's operation cases under an emulated fp16 policy with a defined
    order: forward values and every leaf's gradient on "cuda" are the cpu's bits."""
    import test_gradcheck

    from fpsim import _device

    policy = fpsim.precision.parse("fp16,order=sequential")
    compared = 0
    for name, factory in test_gradcheck.OPS.items():
        results = {}
        for device in ("cpu", "cuda"):
            build, leaves = factory()
            for t in leaves:
                t.data = _device.transfer(t.data, device)

            def run(build=build, device=device):
                with policy:
                    y = build()
                    w = fpsim.tensor(np.random.default_rng(5).standard_normal(y.shape),
                                     device=device)
                    (y * w).sum().backward(64.0)
                return y

            if device == "cuda" and name.startswith(HOST_CONSTANTS):
                raises(ValueError, ("cpu and cuda",), run)
                break
            if device == "cuda" and name.startswith(REFUSED):
                raises(NotImplementedError, ("cuda",), run)
                break
            y = run()
            results[device] = [y.data] + [t.grad for t in leaves]
        else:
            for i, (got, want) in enumerate(zip(results["cuda"], results["cpu"], strict=True)):
                same_bits(f"{name}: value {i}", got, want)
            compared += 1
    assert compared >= 60, compared


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default="")
    parser.add_argument("--gpu", action="store_true", help="real CuPy on a GPU")
    args = parser.parse_args()
    assert GPU or cupy_backend.SIMULATOR, "run with NUMBA_ENABLE_CUDASIM=1 (or --gpu)"
    failed = 0
    for name, func in CHECKS.items():
        if args.only not in name:
            continue
        try:
            func()
            print(f"PASS {name}", flush=True)
        except Exception as exc:  # report every check
            failed += 1
            print(f"FAIL {name}: {type(exc).__name__}: {exc}", flush=True)
            traceback.print_exc()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
