"""The package list in pyproject.toml: every package folder ships, experiments/ included."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_every_package_folder_is_listed():
    tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library "
                                  "from Python 3.11")
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts)
             for p in (ROOT / "fpsim").rglob("__init__.py")}
    assert found <= listed, f"add to pyproject.toml's packages: {sorted(found - listed)}"
    assert config["package-dir"] == {"fpsim.experiments": "experiments"}
    assert (ROOT / "experiments" / "__init__.py").exists()
    assert listed == found  # fpsim/experiments/ in the source tree points at experiments/


def test_experiments_import_as_part_of_fpsim():
    from fpsim.experiments import final_metrics

    assert Path(final_metrics.__file__).resolve().parent == ROOT / "experiments"


def test_the_source_tree_finds_the_experiments_without_an_install():
    """``python3 -m fpsim reproduce`` run in the repository root imports fpsim from the
    source tree, shadowing the installed copy (and an editable install's mapping)."""
    code = (
        "import sys\n"
        "sys.meta_path[:] = [f for f in sys.meta_path\n"
        "                    if 'Editable' not in getattr(f, '__name__', type(f).__name__)]\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "import fpsim, fpsim.experiments.final_metrics as m\n"
        "print(fpsim.__file__); print(m.__file__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True).stdout.split()
    assert [Path(p).resolve() for p in out] == [ROOT / "fpsim" / "__init__.py",
                                               ROOT / "experiments" / "final_metrics.py"]
