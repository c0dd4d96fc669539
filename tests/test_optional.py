"""fpsim._optional: a missing optional dependency is one line naming the extra to install."""

import sys

import pytest

from fpsim._optional import EXTRAS, MissingDependency, require


@pytest.mark.parametrize("module, extra", [("distributed", "cluster"), ("dask.array", "cluster"),
                                           ("cupy", "gpu"), ("mkdocs", "docs"),
                                           ("torch", "torch")])
def test_missing_names_the_extra(monkeypatch, module, extra):
    # A None entry in sys.modules makes the import fail as if the package were absent.
    monkeypatch.setitem(sys.modules, module.partition(".")[0], None)
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(MissingDependency) as info:
        require(module, "the thing")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("the thing needs ")
    assert message.endswith(f"pip install 'fpsim[{extra}]'")
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_present_module_is_returned():
    pytest.importorskip("dask")
    import dask
    assert require("dask", "x") is dask


def test_numba_cuda_is_named_as_pip_names_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "numba.cuda", None)
    with pytest.raises(MissingDependency) as info:
        require("numba.cuda", "the thing")
    assert str(info.value) == ("the thing needs numba-cuda, which is not installed: "
                               "pip install 'fpsim[gpu]'")


@pytest.mark.parametrize("module", ["numpy", "", "os.path", "cupyx", "numba", "numba.cudax",
                                    None, 3, b"cupy"])
def test_unknown_module_is_refused(module):
    with pytest.raises(ValueError, match="not an optional dependency"):
        require(module, "x")


def test_every_extra_exists_in_pyproject():
    import pathlib

    tomllib = pytest.importorskip("tomllib")
    root = pathlib.Path(__file__).resolve().parent.parent
    extras = tomllib.loads((root / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    for package, extra in EXTRAS.items():
        if extra != "torch":  # the torch extra arrives with fpsim.torch (issue 34)
            assert extra in extras, (package, extra)


# --- the GPU: what the cupy backend and fpsim compare say is missing --------------------


@pytest.mark.parametrize("loads, expected", [
    (True, None), (False, "no NVIDIA driver (libcuda.so.1 cannot be loaded)")])
def test_cuda_driver_missing(monkeypatch, loads, expected):
    import ctypes

    from fpsim._optional import cuda_driver_missing

    monkeypatch.setattr(sys, "platform", "linux")
    tried = []

    def cdll(name, *args, **kwargs):
        tried.append(name)
        if not loads:
            raise OSError(f"{name}: cannot open shared object file")
        return object()

    monkeypatch.setattr(ctypes, "CDLL", cdll)
    assert cuda_driver_missing() == expected and tried == ["libcuda.so.1"]


@pytest.fixture
def numba_cuda():
    cuda = pytest.importorskip("numba.cuda", reason="numba-cuda is not installed")
    if cuda.config.ENABLE_CUDASIM:
        pytest.skip("under the CUDA simulator the cupy backend runs")
    return cuda


@pytest.mark.parametrize("module, package", [("numba.cuda", "numba-cuda"), ("cupy", "cupy")])
def test_the_cupy_backend_names_the_gpu_extra(monkeypatch, numba_cuda, module, package):
    import fpsim
    from fpsim.backends import gpu_missing

    monkeypatch.setitem(sys.modules, module, None)
    expected = (f"running fpsim on a GPU needs {package}, which is not installed: "
                "pip install 'fpsim[gpu]'")
    assert gpu_missing() == expected
    before = fpsim.get_backend_name()
    with pytest.raises(RuntimeError) as info:
        fpsim.set_backend("cupy")
    assert str(info.value) == f"the cupy backend cannot run here: {expected}"
    assert fpsim.get_backend_name() == before


def test_without_a_driver_the_cupy_backend_says_there_is_no_gpu(monkeypatch, numba_cuda):
    import types

    import fpsim._optional
    from fpsim.backends import gpu_missing

    cupy = types.ModuleType("cupy")  # CuPy installed, but no driver: it would blame the driver
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setattr(numba_cuda, "is_available", lambda: False)
    monkeypatch.setattr(fpsim._optional, "cuda_driver_missing", lambda: "no NVIDIA driver (x)")
    assert gpu_missing() == "no usable CUDA GPU: no NVIDIA driver (x)"
