"""Training under each recipe preset gives the same bits on both CPU backends (NumPy's
reference loops and Numba's kernels): the losses, every parameter and the recipes' states.

The ``cupy`` backend (device "cuda") is covered by ``tests/test_recipes_device.py``: there
``fpsim.quantize`` takes CuPy arrays and every step of a recipe runs on the device, checked
against the CPU in Numba's CUDA simulator (not yet on a GPU). What still runs on the host
only, a block-scaled instruction as the recipe's ``gemm``, is refused on the device
(checked below).
"""

from __future__ import annotations

import numpy as np
import pytest

import fpsim
from fpsim import nn, optim, training
from fpsim.nn import functional as F
from fpsim.precision.recipes import RECIPES
from fpsim.precision.scaling import states

PAD = {
    "fp8_blockwise": ",act=fp8_block1x128:pow2=on:pad=on,weight=fp8_block128x128:pow2=on:"
                     "pad=on,grad=fp8_block1x128:pow2=on:pad=on",
}


def train(preset: str, backend: str):
    with fpsim.backend(backend):
        nn.manual_seed(0)
        model = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(),
                              nn.Linear(32, 4))
        opt = optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        trainer = training.Trainer(model, opt, f"{preset},seed=5,keep=last{PAD.get(preset, '')}")
        rng = np.random.default_rng(0)
        losses = []
        for _ in range(2):  # the second step uses the first one's delayed scales
            x, y = rng.normal(size=(32, 32)), rng.integers(0, 4, 32)
            losses.append(trainer.step(lambda x=x, y=y: F.cross_entropy(model(x), y)).loss)
        scales = [float(s.scale) for p in model.parameters() for s in states(p).values()]
        return losses, [p.data.copy() for p in model.parameters()], scales


@pytest.mark.parametrize("preset", list(RECIPES))
def test_each_preset_trains_to_the_same_bits_on_both_cpu_backends(preset):
    numba = train(preset, "numba")
    numpy = train(preset, "numpy")
    assert numba[0] == numpy[0] and numba[2] == numpy[2]
    for a, b in zip(numba[1], numpy[1], strict=True):
        np.testing.assert_array_equal(a, b)
        assert not np.any(np.signbit(a) != np.signbit(b))


def test_a_block_scaled_gemm_on_a_device_array_is_refused():
    from dataclasses import replace
    from unittest import mock

    import fpsim.precision.scaling as scaling

    r = replace(RECIPES["mxfp8"], gemm="B200_MXF8F6F4")
    q = fpsim.quantize(np.ones((2, 32)), "mxfp8_e4m3")
    op = scaling.Operand(q.values, q.scheme.element, None, 32, q)
    policy = fpsim.precision.parse("mxfp8")
    with mock.patch.object(scaling._device, "array_module", return_value=object()), \
            pytest.raises(NotImplementedError, match="B200_MXF8F6F4.*host only.*'cuda'"):
        scaling.product(op, op, policy, r, ("act", "weight"))
