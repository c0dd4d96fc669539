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


# What a user's code sees: the overloads pick an array or a scalar, with or without flags
# or stats, never Any for an ordinary call (an argument whose type holds Any, as
# np.array's does, must not make the choice ambiguous).
USE = '''\
import numpy as np
import fpsim
x = np.array([0.1, 1.0])
reveal_type(fpsim.round(0.1, "fp16"))
reveal_type(fpsim.round(x, "fp16"))
reveal_type(fpsim.round(x, "fp16", flags=True))
reveal_type(fpsim.add(x, x, "fp16"))
reveal_type(fpsim.fma(1.0, 2.0, 3.0, "fp16", flags=True))
reveal_type(fpsim.to_bits(x, "fp16"))
reveal_type(fpsim.sum(x, accum="fp16"))
reveal_type(fpsim.matmul(x, x, stats=True))
reveal_type(fpsim.tensor(x) * 2.0 @ fpsim.tensor(x))
reveal_type(fpsim.Policy(compute="fp16").compute)
'''
REVEALED = [
    "numpy.floating[Any]",
    "numpy.ndarray[tuple[Any, ...], numpy.dtype[numpy.floating[Any]]]",
    "tuple[numpy.ndarray[tuple[Any, ...], numpy.dtype[numpy.floating[Any]]], "
    "numpy.ndarray[tuple[Any, ...], numpy.dtype[numpy.unsignedinteger[",
    "numpy.ndarray[tuple[Any, ...], numpy.dtype[numpy.floating[Any]]]",
    "tuple[numpy.floating[Any], numpy.unsignedinteger[",
    "numpy.ndarray[tuple[Any, ...], numpy.dtype[numpy.unsignedinteger[Any]]]",
    "numpy.floating[Any]",
    "tuple[numpy.ndarray[tuple[Any, ...], numpy.dtype[numpy.floating[Any]]], "
    "fpsim.accumulation.stats.AccumulationStats]",
    "fpsim.autograd.tensor.Tensor",
    "fpsim.formats.Format",
]


def test_users_see_precise_types(tmp_path, monkeypatch):
    api = pytest.importorskip("mypy.api")
    monkeypatch.chdir(ROOT)
    script = tmp_path / "use.py"
    script.write_text(USE)
    cache = os.environ.get("FPSIM_MYPY_CACHE",
                           str(Path(tempfile.gettempdir()) / "fpsim-mypy-cache"))
    out, err, _ = api.run(["--strict", "--cache-dir", cache, "--no-error-summary",
                           str(script)])
    revealed = [line.split('Revealed type is "', 1)[1].rstrip('"')
                for line in out.splitlines() if "Revealed type is" in line]
    assert len(revealed) == len(REVEALED), out + err
    for got, want in zip(revealed, REVEALED, strict=True):
        assert got.startswith(want), f"{got} is not {want}"
