"""`fpsim reproduce --device gpu` and the gpu budget without a GPU: the arguments, the
budget's sizes, the native ablations, and the error where no GPU is usable. Training on
the device itself is checked by tests/device_checks.py (sweeps_train_on_the_device)."""

import importlib
import subprocess
import sys

import pytest

from fpsim.backends import gpu_missing
from fpsim.reproduce.command import STUDIES
from fpsim.reproduce.tasks import BUDGETS, TASKS, task
from fpsim.sweep import Task, ablation
from fpsim.sweep.ablation import ABLATIONS, NATIVE_ABLATIONS

NO_GPU = gpu_missing()


def test_every_study_sizes_every_budget():
    """A study's tables keyed by budget (trials, multiples, exponents) have every budget:
    ``--gpu-budget`` reaches no KeyError."""
    for name in STUDIES:
        module = importlib.import_module(f"fpsim.experiments.{name}")
        for attr, value in vars(module).items():
            if isinstance(value, dict) and "quick" in value and "full" in value:
                assert set(value) == set(BUDGETS), (name, attr)
    for t in TASKS.values():
        for budget in BUDGETS:
            t.budget(budget)


def test_the_gpu_budget_is_the_papers_regime():
    lm = task("char_lstm")
    key = lm.for_sweep("gpu").key()
    assert key["batch_size"] * key["seq_len"] == 2**14  # tokens per batch
    assert key["hidden"] == 512
    # The budget's sizes replace the task's own there only.
    assert lm.for_sweep("quick").key()["batch_size"] == lm.hyperparameters["batch_size"]
    assert lm.at("quick") is lm and lm.at("gpu").hyperparameters["batch_size"] == 512
    assert lm.for_sweep("gpu", "cpu").key() == key  # a cpu task's key names no device


def test_native_ablations_beside_the_emulated_ones():
    for name, emulated in (("native_no_master", "no_master"),
                           ("native_no_loss_scaling", "no_loss_scaling")):
        native, twin = ablation(name), ablation(emulated)
        assert native.precision().native and not twin.precision().native
        assert native.loss_scale == twin.loss_scale
        assert native.precision().params == twin.precision().params
    assert not set(NATIVE_ABLATIONS) & set(ABLATIONS)
    with pytest.raises(ValueError, match="native_no_master"):
        ablation("native_bf16")


@pytest.mark.parametrize("device", ["gpu", "cuda:0", "", None, 1])
def test_a_task_refuses_unknown_devices(device):
    with pytest.raises(ValueError, match="task 'toy': device must be one of 'cpu', 'cuda'"):
        Task("toy", lambda seed: None, steps=2, eval_every=1, device=device)


@pytest.mark.skipif(NO_GPU is None, reason="this machine has a usable GPU")
def test_without_a_gpu_the_command_says_what_is_missing(tmp_path):
    out = tmp_path / "results"
    result = subprocess.run([sys.executable, "-m", "fpsim", "reproduce", "--device", "gpu",
                             "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last == f'fpsim reproduce: error: device "cuda" cannot be used here: {NO_GPU}'
    assert not out.exists() and result.stdout == ""


@pytest.mark.skipif(NO_GPU is None, reason="this machine has a usable GPU")
def test_bench_train_on_the_gpu_says_what_is_missing(capsys):
    from fpsim.bench import main

    for argv, message in ((["train", "--device", "gpu"], f"--device gpu: {NO_GPU}"),
                          (["elementwise", "--device", "gpu"],
                           "--device gpu measures the training step only (fpsim bench train)")):
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert err == f"fpsim bench: error: {message}", err
