"""The package list in pyproject.toml: every package folder ships, experiments/ included."""

from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent


def test_every_package_folder_is_listed():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts)
             for p in (ROOT / "fpsim").rglob("__init__.py")}
    assert found <= listed, f"add to pyproject.toml's packages: {sorted(found - listed)}"
    assert config["package-dir"] == {"fpsim.experiments": "experiments"}
    assert (ROOT / "experiments" / "__init__.py").exists()
    assert listed - found == {"fpsim.experiments"}


def test_experiments_import_as_part_of_fpsim():
    from fpsim.experiments import final_metrics

    assert Path(final_metrics.__file__).resolve().parent == ROOT / "experiments"
