"""Shared fixtures: every backend-sensitive test runs on each CPU backend."""

import pytest

import fpsim

CPU_BACKENDS = ["numpy", "numba"]


@pytest.fixture(params=CPU_BACKENDS)
def backend_name(request):
    """Run the test under each CPU backend in turn."""
    with fpsim.backend(request.param):
        yield request.param


@pytest.fixture
def fp64_policy():
    """Run a test under the fp64 policy: plain float64, nothing rounded."""
    with fpsim.precision.parse("fp64"):
        yield
