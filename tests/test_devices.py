"""Devices (issue 29, items 1 and 7): tensors, models, optimizers, training and batches on
"cuda", checked without a GPU, and the errors where there is none.

The device checks (tests/device_checks.py) run in one subprocess under Numba's CUDA
simulator with the CuPy stand-in (tests/fake_cupy.py): round trips, device mixing, batches,
and a small model's forward, backward and training steps on "cuda" against "cpu", bit for
bit, with no CuPy reduction of its own in an emulated policy. ``FPSIM_DEVICE_STEPS`` sets
the training steps (default 2).
"""

import functools
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import fpsim
from fpsim import nn
from fpsim.data import batches

HERE = Path(__file__).resolve().parent
CHECKS = ("round_trips", "mixing_devices_is_an_error", "batches_on_the_device",
          "forward_and_backward_match_the_cpu", "lstm_matches_the_cpu",
          "native_policies_use_cupys_arithmetic",
          "training_matches_the_cpu", "one_host_read_per_step",
          "gradient_norm_and_clipping_match_the_cpu", "cnn_and_embedding_match_the_cpu",
          "optimizer_state_follows_a_moved_model",
          "every_operation_matches_the_cpu", "monitors_count_on_the_device",
          "sweeps_train_on_the_device", "elementary_functions_have_the_cpus_bits",
          "binary32_subnormals_survive_the_device")


@functools.cache
def _device_checks() -> subprocess.CompletedProcess:
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    return subprocess.run([sys.executable, str(HERE / "device_checks.py")], env=env,
                          capture_output=True, text=True, timeout=900)


@pytest.mark.skipif(importlib.util.find_spec("numba_cuda") is None,
                    reason="numba-cuda is not installed (it comes with the test and gpu extras)")
@pytest.mark.parametrize("name", CHECKS)
@pytest.mark.xdist_group("device_checks")  # one worker runs the subprocess, once
def test_on_the_simulated_device(name):
    result = _device_checks()
    lines = result.stdout.splitlines()
    assert f"PASS {name}" in lines, result.stdout[-3000:] + result.stderr[-3000:]


def test_every_device_check_is_run():
    defined = re.findall(r"^@check\ndef (\w+)", (HERE / "device_checks.py").read_text(), re.M)
    assert sorted(defined) == sorted(CHECKS)


@functools.cache
def _missing() -> str | None:
    from fpsim.backends import gpu_missing

    return gpu_missing()


def test_without_a_gpu_cuda_says_what_is_missing():
    missing = _missing()
    if missing is None:
        pytest.skip("this machine has a usable GPU (or runs the CUDA simulator)")
    t = fpsim.tensor([1.0, 2.0])
    model = nn.Linear(2, 1)
    calls = [lambda: fpsim.tensor([1.0], device="cuda"), lambda: t.to("cuda"), t.cuda,
             lambda: model.to("cuda"),
             lambda: batches(np.zeros((2, 1)), np.zeros(2), batch_size=1, device="cuda")]
    for call in calls:
        with pytest.raises(RuntimeError) as info:
            call()
        assert str(info.value) == f'device "cuda" cannot be used here: {missing}'
    # Nothing moved: the model's parameters are still on the host.
    assert all(type(p.data) is np.ndarray for p in model.parameters())


@pytest.mark.parametrize("device", ["gpu", "cuda:0", "CPU", "", None, 0])
def test_unknown_devices_are_refused(device):
    t = fpsim.tensor([1.0])
    if device is not None:
        with pytest.raises(ValueError, match="device must be one of 'cpu', 'cuda'"):
            fpsim.tensor([1.0], device=device)
        with pytest.raises(ValueError, match="device must be one of 'cpu', 'cuda'"):
            batches(np.zeros((2, 1)), np.zeros(2), batch_size=1, device=device)
    if isinstance(device, str):
        with pytest.raises(ValueError, match="format"):  # not a device: read as a format
            t.to(device)


def test_on_the_cpu_nothing_changes():
    x = np.array([0.1, 2.0])
    t = fpsim.tensor(x, device="cpu")
    assert t.device == "cpu" and t.to("cpu") is t and t.cpu() is t
    assert t.numpy() is t.data  # the host array itself, not a copy
    assert "device" not in repr(t)
    model = nn.Linear(2, 1)
    assert model.to("cpu") is model and all(p.device == "cpu" for p in model.parameters())
    for (a, b), (c, d) in zip(batches(np.eye(3), np.arange(3), batch_size=2, seed=0),
                              batches(np.eye(3), np.arange(3), batch_size=2, seed=0,
                                      device="cpu"), strict=True):
        assert type(c) is np.ndarray and np.array_equal(a, c) and np.array_equal(b, d)


@pytest.mark.gpu
def test_a_model_on_a_real_gpu_gives_the_cpus_bits():
    """On a GPU (real CuPy): a small model's forward, backward and two training steps on
    "cuda" under an emulated fp16 policy with a defined order equal the cpu's, bit for bit.
    ReLU and mse_loss only: transcendental functions may differ between CUDA's and NumPy's
    float64 libraries (see docs/training.md)."""
    if _missing() is not None:
        pytest.skip("no GPU for device 'cuda' (fpsim.backends.gpu_missing() says why)")
    import cupy

    from fpsim import optim
    from fpsim.nn import functional as F

    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(8, 5)), rng.normal(size=(8, 2))
    runs = {}
    for device in ("cpu", "cuda"):
        nn.manual_seed(0)
        model = nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 2)).to(device)
        opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        trainer = fpsim.training.Trainer(model, opt, "fp16,order=sequential",
                                         loss_scale="dynamic")
        xs, ys = (cupy.asarray(x), cupy.asarray(y)) if device == "cuda" else (x, y)
        reports = [trainer.step(lambda m=model, xs=xs, ys=ys: F.mse_loss(m(xs), ys))
                   for _ in range(2)]
        assert all(p.device == device for p in model.parameters())
        runs[device] = (repr(reports), [p.numpy() for p in model.parameters()])
    assert runs["cuda"][0] == runs["cpu"][0]
    for got, want in zip(runs["cuda"][1], runs["cpu"][1], strict=True):
        assert got.dtype == want.dtype and np.array_equal(got.view(np.int64),
                                                          want.view(np.int64))


def test_call_plans_are_kept_for_gpu_arrays_of_a_type_already_met(monkeypatch):
    """A repeated call on GPU arrays reuses its validated plan (the one-element launch cost);
    the plan's key tells the GPU type apart from a NumPy array of the same dtype and shape,
    and an array type never met through ``array_module`` gets no key (validated anew)."""
    from fpsim._device import GPU_ARRAY_TYPES
    from fpsim._elementwise import _plan_key

    class Stand_in:
        dtype = np.dtype(np.float32)
        shape = (3,)

    options = ("fp16", "nearest_even", True, False, False, None)
    assert _plan_key("round_value", options, False, None, [Stand_in()], None) is None
    monkeypatch.setitem(GPU_ARRAY_TYPES, Stand_in, np)
    gpu = _plan_key("round_value", options, False, None, [Stand_in()], None)
    host = _plan_key("round_value", options, False, None, [np.zeros(3, np.float32)], None)
    assert gpu is not None and host is not None and gpu != host
    assert _plan_key("round_value", options, False, None, [np.zeros(3)], Stand_in()) != \
        _plan_key("round_value", options, False, None, [np.zeros(3)], np.zeros(3, np.float32))
