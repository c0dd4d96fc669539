"""fpsim's public API is typed: mypy passes with pyproject.toml's [tool.mypy] (strict on the
public modules) and the package ships its py.typed marker (PEP 561)."""

import importlib.resources
import os
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_py_typed_is_shipped():
    marker = importlib.resources.files("fpsim").joinpath("py.typed")
    assert marker.is_file()


def test_mypy_passes(monkeypatch):
    api = pytest.importorskip("mypy.api")
    monkeypatch.chdir(ROOT)  # the config's files = ["fpsim"]
    # An incremental cache kept between runs, outside the tree (a clean start takes ~10 s).
    cache = os.environ.get("FPSIM_MYPY_CACHE",
                           str(Path(tempfile.gettempdir()) / "fpsim-mypy-cache"))
    out, err, status = api.run(["--config-file", str(ROOT / "pyproject.toml"),
                                "--cache-dir", cache, "--no-error-summary",
                                "--hide-error-context", "--show-error-codes"])
    assert status == 0, f"mypy found errors:\n{out}{err}"
