"""The documentation site builds with ``mkdocs build --strict``: no broken link, and
(docs/hooks.py) no public name without a docstring or missing from the API reference."""

import importlib
import importlib.util
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("mkdocs")
pytest.importorskip("mkdocstrings_handlers.python")
pytest.importorskip("material")

ROOT = Path(__file__).resolve().parent.parent
# docs/hooks.py, loaded from its file: docs/ on sys.path would make its folders packages
# for the whole process (docs/torch/, the bridge's records, would be "import torch").
_spec = importlib.util.spec_from_file_location("hooks", ROOT / "docs" / "hooks.py")
hooks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(hooks)

# The packages whose every public name the API reference renders.
DOCUMENTED = ["fpsim", "fpsim.hw", "fpsim.autograd", "fpsim.nn", "fpsim.nn.functional",
              "fpsim.optim", "fpsim.precision", "fpsim.training", "fpsim.compare",
              "fpsim.testing", "fpsim.sweep"]


def build(config: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
        capture_output=True, text=True, cwd=config.parent, timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(ROOT)},
    )


def test_site_builds_strict_with_every_public_name(tmp_path):
    result = build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert result.returncode == 0, result.stderr[-4000:]
    api = "".join(p.read_text() for p in (tmp_path / "site" / "api").rglob("*.html"))
    ids = set(re.findall(r'\bid="([^"]+)"', api))
    for name in DOCUMENTED:
        module = importlib.import_module(name)
        for public in module.__all__:
            # Rendered under this path, or under another module's that holds the same
            # object (where it is defined, or another re-export).
            obj = getattr(module, public)
            paths = {f"{name}.{public}", getattr(obj, "__name__", "")}
            if hasattr(obj, "__qualname__"):
                paths.add(f"{obj.__module__}.{obj.__qualname__}")
            paths |= {f"{m}.{public}" for m, mod in list(sys.modules.items())
                      if m.startswith("fpsim") and getattr(mod, public, None) is obj}
            assert paths & ids, f"{name}.{public} is not in the API pages"
    assert (tmp_path / "site" / "results" / "index.html").exists()
    assert (tmp_path / "site" / "results" / "final_metrics.png").exists()


def planted_site(tmp_path: Path, module: str) -> Path:
    """A site whose API page renders the package ``pkg``, written from ``module``."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text(textwrap.dedent(module))
    (tmp_path / "docs" / "api").mkdir(parents=True)
    (tmp_path / "docs" / "index.md").write_text("# Home\n")
    (tmp_path / "docs" / "api" / "pkg.md").write_text("# pkg\n\n::: pkg\n")
    config = tmp_path / "mkdocs.yml"
    config.write_text(textwrap.dedent(f"""\
        site_name: planted
        nav: [index.md, api/pkg.md]
        plugins:
          - mkdocstrings:
              handlers:
                python:
                  paths: [.]
                  options: {{docstring_style: numpy, show_if_no_docstring: true}}
        hooks: [{ROOT / "docs" / "hooks.py"}]
        """))
    return config


DOCUMENTED_PKG = '''\
    """A package."""

    __all__ = ["documented"]


    def documented():
        """A docstring."""
    '''


def test_planted_site_builds(tmp_path):
    result = build(planted_site(tmp_path, DOCUMENTED_PKG), tmp_path / "site")
    assert result.returncode == 0, result.stderr[-4000:]


def test_an_undocumented_public_name_fails_the_build(tmp_path):
    module = DOCUMENTED_PKG.replace('["documented"]', '["documented", "bare"]') + (
        "\n\n    def bare():\n        pass\n")
    result = build(planted_site(tmp_path, module), tmp_path / "site")
    assert result.returncode != 0
    assert "API reference: pkg.bare: no docstring" in result.stderr
    assert "Aborted with 1 warnings in strict mode" in result.stdout + result.stderr


def check(tmp_path: Path, source: str, anchors=None) -> list[str]:
    (tmp_path / "pkg").mkdir(exist_ok=True)
    (tmp_path / "pkg" / "__init__.py").write_text(textwrap.dedent(source))
    return hooks.undocumented(["pkg"], anchors, search_paths=[str(tmp_path)])


def test_the_check_walks_classes_attributes_and_submodules(tmp_path):
    source = '''\
        """A package."""

        __all__ = ["Thing", "LIMIT", "sub"]

        LIMIT = 3

        class Thing:
            """A class.

            Attributes
            ----------
            size : int
                Described here, so it needs no docstring of its own.
            """

            size: int = 0
            other: int = 1

            def method(self):
                pass

            def _private(self):
                pass
        '''
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "sub.py").write_text('"""A submodule."""\n\ndef f():\n    pass\n')
    assert check(tmp_path, source) == [
        "pkg.LIMIT: no docstring", "pkg.Thing.method: no docstring",
        "pkg.Thing.other: no docstring", "pkg.sub.f: no docstring",
    ]
    # Rendered: each public path must be an anchor of an API page.
    problems = check(tmp_path, source, anchors={"pkg", "pkg.Thing", "pkg.LIMIT"})
    assert "pkg.sub: public but not rendered in the API reference" in problems
    assert "pkg.Thing.method: public but not rendered in the API reference" in problems


def test_the_check_sees_a_function_where_griffe_sees_its_module(tmp_path):
    # ``from pkg.run import run``: Python binds the function, griffe keeps the submodule.
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "run.py").write_text('"""A module."""\n\ndef run():\n    pass\n')
    source = '"""A package."""\n\nfrom pkg.run import run\n\n__all__ = ["run"]\n'
    assert check(tmp_path, source) == ["pkg.run: no docstring"]
    assert check(tmp_path, source, anchors={"pkg", "pkg.run.run"}) == ["pkg.run: no docstring"]


def test_a_sphinx_comment_documents_a_constant(tmp_path):
    # "#:" lines above an assignment are its docstring (docs/griffe_comments.py).
    source = ('"""A package."""\n\n__all__ = ["LIMIT", "BARE"]\n\n'
              '#: The limit.\nLIMIT = 3\n# Not a docstring.\nBARE = 4\n')
    assert check(tmp_path, source) == ["pkg.BARE: no docstring"]


def test_a_package_named_like_one_of_its_functions_is_walked(tmp_path):
    # fpsim.sweep exports the function sweep: the package is still walked, name by name.
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "engine.py").write_text('"""A module."""\n\ndef pkg():\n    """Run."""\n')
    source = ('"""A package."""\n\nfrom pkg.engine import pkg\n\n__all__ = ["pkg", "other"]\n\n'
              'def other():\n    pass\n')
    assert check(tmp_path, source) == ["pkg.other: no docstring"]
    assert "pkg.other: public but not rendered in the API reference" in check(
        tmp_path, source, anchors={"pkg", "pkg.pkg"})
