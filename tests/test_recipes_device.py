"""Block quantization and the scaling recipes on device "cuda" give the CPU's bits.

In Numba's CUDA simulator with the CuPy stand-in (``tests/recipes_simulator.py``, one
subprocess for both parts): ``fpsim.quantize`` of device arrays for every scheme, mode and
NaN/infinite/zero block, ``dequantize``, ``stats()``, the Hadamard transform and the
products of two ``Quantized``, against the Numba backend on the host; and two training
steps of a small MLP under each preset of ``RECIPES`` on device "cuda", against the same
run on the CPU (losses, weights, delayed scales). On a GPU (``gpu`` marker) the same
script runs with CuPy at four times the sizes.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fpsim.backends import gpu_missing

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "recipes_simulator.py"


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    # fpsim from this checkout, installed or not.
    path = os.pathsep.join(p for p in (str(HERE.parent), env.get("PYTHONPATH")) if p)
    env = dict(env, PYTHONPATH=path)
    return subprocess.run([sys.executable, str(SCRIPT), *args], env=env, capture_output=True,
                          text=True, timeout=1800)


@pytest.mark.skipif(importlib.util.find_spec("numba_cuda") is None,
                    reason="numba-cuda is not installed (it comes with the test and gpu extras)")
def test_quantize_and_every_preset_on_the_simulated_device_give_the_cpus_bits():
    env = {k: v for k, v in os.environ.items() if k != "FPSIM_CUDA_LAUNCH"}
    done = _run(dict(env, NUMBA_ENABLE_CUDASIM="1"))
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    assert ", 0 differ" in done.stdout
    compared = int(done.stdout.rsplit(" compared", 1)[0].split()[-1])
    assert compared > 1000  # every scheme's fields, the products, five presets' runs


@pytest.mark.gpu
@pytest.mark.skipif(gpu_missing() is not None, reason="no GPU for the cupy backend "
                    "(fpsim.backends.gpu_missing() says why)")
def test_quantize_and_every_preset_on_a_gpu_give_the_cpus_bits():
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    done = _run(env, "--size=4")
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    assert ", 0 differ" in done.stdout
