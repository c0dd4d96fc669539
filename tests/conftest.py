"""Shared fixtures: every backend-sensitive test runs on each backend.

The CPU backends always run; the GPU one (``cupy``, marked ``gpu``) where a GPU is
usable and skips cleanly elsewhere. ``python3 -m pytest -m gpu`` runs only the GPU
instances: the arithmetic core, TestFloat and accumulation through the cupy backend.
"""

import functools

import pytest

import fpsim

CPU_BACKENDS = ["numpy", "numba"]
BACKENDS = [*CPU_BACKENDS, pytest.param("cupy", marks=pytest.mark.gpu)]


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected
def pytest_collection_modifyitems(config, items):
    """Start the CUDA checks' subprocesses early when their tests are to run, and run
    those tests last, so that the rest of the suite runs while the checks do."""
    cuda = [item for item in items
            if getattr(getattr(item, "module", None), "__name__", "") == "test_cuda_backend"]
    if cuda:
        cuda[0].module.start_checks({item.originalname for item in cuda})
        config._cuda_checks = cuda[0].module
        items[:] = [item for item in items if item not in cuda] + cuda


def pytest_sessionfinish(session):
    module = getattr(session.config, "_cuda_checks", None)
    if module is not None:
        module.stop_checks()


@functools.cache
def gpu_missing():
    from fpsim.backends import gpu_missing

    return gpu_missing()


@pytest.fixture(params=BACKENDS)
def backend_name(request):
    """Run the test under each backend in turn."""
    if request.param == "cupy" and gpu_missing():
        pytest.skip("no GPU for the cupy backend (fpsim.backends.gpu_missing() says why)")
    with fpsim.backend(request.param):
        yield request.param


@pytest.fixture
def fp64_policy():
    """Run a test under the fp64 policy: plain float64, nothing rounded."""
    with fpsim.precision.parse("fp64"):
        yield
