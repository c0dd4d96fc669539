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


@pytest.mark.parametrize("module", ["numpy", "", "os.path", "cupyx"])
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
