"""Training under each recipe preset gives the same bits on both CPU backends (NumPy's
reference loops and Numba's kernels): the losses, every parameter and the recipes' states.

The ``cupy`` backend is not covered: ``fpsim.quantize`` refuses GPU arrays (under the cupy
backend it takes host arrays, computes the scales on the host and rounds the elements on
the device, returning host arrays), the products of ``Quantized`` operands
(``fpsim.quantize.product``, ``fpsim.accumulation.scaled``) are computed on the host, and
the engine copies no GPU tensor to the host; so a layer on device ``cuda`` refuses a
recipe (checked below).
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


def test_a_recipe_on_a_device_array_is_refused():
    import fpsim.autograd.scaled as scaled

    class Device:  # what _device.device_of reports for a CuPy array
        pass

    from unittest import mock

    with mock.patch.object(scaled._device, "device_of", return_value="cuda"), \
            pytest.raises(NotImplementedError, match="not supported on device 'cuda'"):
        scaled._host(Device())
