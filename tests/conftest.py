"""Shared fixtures: every backend-sensitive test runs on each backend.

The CPU backends always run; the GPU one (``cupy``, marked ``gpu``) where a GPU is
usable and skips cleanly elsewhere. ``python3 -m pytest -m gpu`` runs only the GPU
instances: the arithmetic core, TestFloat and accumulation through the cupy backend.

The README's command runs the suite on every core with pytest-xdist (``-n auto --dist
loadgroup``). Tests that share one expensive result (a module- or session-scoped fixture
of their module, a subprocess cached with ``functools.cache``) are one ``xdist_group``, so
that the result is computed once, on one worker; ``python3 -m pytest`` without ``-n`` runs
as before, in one process.
"""

import functools
import importlib.util
import os
import signal
import threading

import pytest

import fpsim

CPU_BACKENDS = ["numpy", "numba"]
BACKENDS = [*CPU_BACKENDS, pytest.param("cupy", marks=pytest.mark.gpu)]


# In a pytest-xdist worker (the tests run on several processes).
XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER")


class SharedResults:
    """Puts the tests that share a result computed once into one ``xdist_group``.

    Before pytest-xdist's own hook reads the groups (``tryfirst``): a module's tests that use
    a fixture of wider than function scope defined in that module are the group named after
    the module, and so are the tests of a module in ``SHARED``. Results cached in a module's
    functions are grouped by a marker in the test file (tests/test_devices.py)."""

    # Modules whose tests share something outside the process: test_typing's two mypy runs
    # share one incremental cache folder.
    SHARED = {"test_typing"}

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, items):
        for item in items:
            module = getattr(item, "module", None)
            info = getattr(item, "_fixtureinfo", None)
            if module is None or info is None:
                continue
            if module.__name__ in self.SHARED:
                item.add_marker(pytest.mark.xdist_group(module.__name__))
                continue
            for name in info.names_closure:
                definitions = info.name2fixturedefs.get(name, ())
                if any(d.scope != "function" and d.baseid == item.nodeid.split("::")[0]
                       for d in definitions):
                    item.add_marker(pytest.mark.xdist_group(module.__name__))
                    break


def pytest_configure(config):
    config.pluginmanager.register(SharedResults(), "fpsim-shared-results")
    if XDIST_WORKER and os.name == "posix":
        # The workers share Numba's on-disk cache: safely, and each kernel compiled once.
        import numba_shared_cache

        numba_shared_cache.install()


# Each test's last duration (setup, call and teardown), kept in pytest's cache.
DURATIONS = "fpsim/durations"


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected
def pytest_collection_modifyitems(config, items):
    """In one process: start the CUDA checks' subprocesses early when their tests are to
    run, and run those tests last, so that the rest of the suite runs while the checks do.
    On pytest-xdist's workers (which all collect every test): start nothing early (each
    check's subprocess starts on the worker that runs its tests, and only there), and
    hand out the longest work first (those tests, then the others by their last duration,
    longest first) so that no long test is left to the end."""
    cuda = [item for item in items
            if getattr(getattr(item, "module", None), "__name__", "") == "test_cuda_backend"]
    if XDIST_WORKER:
        last = getattr(config, "workerinput", {}).get(DURATIONS, {})
        names = {id(item) for item in cuda}
        items.sort(key=lambda item: (id(item) not in names, -last.get(item.nodeid, 0.0)))
    elif cuda:
        cuda[0].module.start_checks({item.originalname for item in cuda})
        config._cuda_checks = cuda[0].module
        items[:] = [item for item in items if item not in cuda] + cuda


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """pytest-xdist, in the controlling process: every worker gets the same durations
    (the workers' orders must agree; a session beside this one may save new ones)."""
    cache = getattr(node.config, "cache", None)
    node.workerinput[DURATIONS] = cache.get(DURATIONS, {}) if cache is not None else {}


def pytest_runtest_logreport(report):
    """Add up each test's duration (on pytest-xdist, the workers' reports reach this
    process too)."""
    if not XDIST_WORKER:
        _durations[report.nodeid] = _durations.get(report.nodeid, 0.0) + report.duration


_durations: dict[str, float] = {}


def pytest_sessionfinish(session):
    module = getattr(session.config, "_cuda_checks", None)
    if module is not None:
        module.stop_checks()
    cache = getattr(session.config, "cache", None)
    if cache is not None and _durations and not XDIST_WORKER:
        cache.set(DURATIONS, {**cache.get(DURATIONS, {}), **_durations})


@pytest.fixture(autouse=True)
def _python_sigint_handler():
    """Each test starts under Python's own SIGINT handler, whatever ran before it in this
    process (on pytest-xdist's workers the order differs from one process's: the suite on
    two workers found SIGINT ignored before tests/test_interrupt.py, whose subprocesses then
    inherited that and ran on)."""
    if (threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield


# The CUDA simulator's tests need numba-cuda (the test and gpu extras install it).
needs_numba_cuda = pytest.mark.skipif(
    importlib.util.find_spec("numba_cuda") is None,
    reason="numba-cuda is not installed (it comes with the test and gpu extras)",
)


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
