"""Shared fixtures: every backend-sensitive test runs on each CPU backend."""

import pytest

import fpsim

CPU_BACKENDS = ["numpy", "numba"]


@pytest.fixture(params=CPU_BACKENDS)
def backend_name(request):
    """Run the test under each CPU backend in turn."""
    with fpsim.backend(request.param):
        yield request.param
