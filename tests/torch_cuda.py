"""The fpsim.torch GPU tests' precondition: a CUDA build of torch, a GPU and the cupy backend."""

import pytest


def skip_without_cuda():
    """Skip the calling test unless CUDA tensors can be rounded by the cupy backend."""
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA torch")
    from fpsim.backends import gpu_missing

    missing = gpu_missing()
    if missing:
        pytest.skip(missing)
