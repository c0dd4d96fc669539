"""fpsim in PyTorch: fpsim's exact rounding on torch tensors, differentiable.

An adapter on top of fpsim that nothing in fpsim imports (``import fpsim`` imports no
torch); it needs the ``torch`` extra (``pip install 'fpsim[torch]'``).

- ``to_array`` and ``to_tensor``: a tensor's memory as fpsim's arrays and back, without a
  copy (DLPack: NumPy arrays for CPU tensors, CuPy arrays for CUDA tensors).
- ``round`` (a ``torch.autograd.Function``) and ``Round`` (an ``nn.Module``): the forward is
  ``fpsim.round``; the backward passes the gradient straight through or rounds it to its
  own format and mode (``Rounding``), as QPyTorch's quantizer does.
- ``matmul``, ``bmm``, ``linear`` and ``conv2d``: ``fpsim.matmul``'s emulated accumulation
  (``accum=``, ``order=``, ``model=fpsim.hw.H100``, ...) in the forward and in the
  backward's products.
- ``quantize``: a block-scaled quantization (MX, NVFP4, ...) and back, the gradient
  straight through.
- ``emulate(model, policy)``: an fpsim precision policy (``"mixed"``, ``"bf16"``, ...) on a
  torch model: parameters, activations, gradients and dot products as the policy says.
- ``MasterWeights``, ``LossScaler`` and ``Trainer``: master weights (or none, with
  stochastic-rounding updates), torch.amp.GradScaler's calls over fpsim's loss scales, and
  a training step reported as ``fpsim.training.StepReport``.

docs/torch.md shows an example and says what is not built yet.

Examples
--------
>>> import torch
>>> import fpsim.torch
>>> fpsim.torch.round(torch.tensor([0.1, 70000.0]), "fp16").tolist()
[0.0999755859375, inf]
"""

from fpsim._optional import require

require("torch", "fpsim.torch")

from fpsim.torch.emulation import Emulation, emulate  # noqa: E402
from fpsim.torch.exchange import to_array, to_tensor  # noqa: E402
from fpsim.torch.products import bmm, conv2d, linear, matmul  # noqa: E402
from fpsim.torch.quantizing import quantize  # noqa: E402
from fpsim.torch.rounding import Round, Rounding, round  # noqa: E402
from fpsim.torch.training import LossScaler, MasterWeights, Trainer  # noqa: E402

__all__ = ["Emulation", "LossScaler", "MasterWeights", "Round", "Rounding", "Trainer", "bmm",
           "conv2d", "emulate", "linear", "matmul", "quantize", "round", "to_array",
           "to_tensor"]
