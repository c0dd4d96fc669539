"""The backend seam: every registered backend offers what the protocol names, and
imports run one way (formats/kernels -> backends -> accumulation -> hw presets)."""

import ast
import importlib
import inspect
from pathlib import Path

import pytest

from fpsim import backends
from fpsim.backends.protocol import Backend

ROOT = Path(__file__).resolve().parent.parent / "fpsim"
METHODS = [name for name, v in vars(Backend).items()
           if callable(v) and not name.startswith("_")]


def backend_class(name):
    if name == "cupy":
        # Importing it needs numba-cuda (the "gpu" or "test" extra), not a GPU.
        pytest.importorskip("numba.cuda", reason="numba-cuda is not installed")
    return importlib.import_module(backends._MODULES[name]).Backend


@pytest.mark.parametrize("name", list(backends._MODULES))
def test_each_backend_declares_every_method_of_the_protocol(name):
    cls = backend_class(name)
    assert cls.name == name
    for method in METHODS:
        assert hasattr(cls, method), f"backend {name!r} lacks {method}"
        want = inspect.signature(getattr(Backend, method))
        have = inspect.signature(getattr(cls, method))
        # Names, kinds and defaults must agree (annotations may be left out).
        strip = [(p.name, p.kind, p.default) for p in want.parameters.values()]
        got = [(p.name, p.kind, p.default) for p in have.parameters.values()]
        assert got == strip, f"{name}.{method}{have} differs from the protocol's {want}"


def test_the_protocol_names_every_backend_method_the_core_calls():
    """Every ``get_backend().<attr>`` / ``backend.<attr>`` outside fpsim/backends is in it."""
    called = set()
    for path in ROOT.rglob("*.py"):
        if "backends" in path.parts:
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute):
                continue
            owner = node.value
            via_call = (isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name)
                        and owner.func.id == "get_backend")
            via_name = isinstance(owner, ast.Name) and owner.id in ("backend", "engine")
            if via_call or via_name:
                called.add((path.name, node.attr))
    assert called, "the scan found no backend calls: the test is broken"
    protocol = set(METHODS) | {"name"}
    outside = {(f, attr) for f, attr in called if attr not in protocol}
    # bench.py reads the Numba backend's hardware-accumulation switch on purpose, and
    # fpsim.compare.launch switches the cupy backend's launch path.
    assert outside <= {("bench.py", "half"), ("launch.py", "set_launch")}, outside


def imports_of(path: Path) -> set[str]:
    """Every fpsim module ``path`` imports, at the top or inside functions."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("fpsim"))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("fpsim"):
            for a in node.names:
                full = f"{node.module}.{a.name}"
                is_module = (ROOT.parent / (full.replace(".", "/") + ".py")).exists()
                found.add(full if is_module else node.module)
    return found


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


# A layer may import only from the layers listed for it (and from itself).
BOTTOM = {"fpsim.formats", "fpsim.modes", "fpsim.flags", "fpsim._checks", "fpsim._dtypes",
          "fpsim._optional"}
LOWER = {
    "fpsim.formats": BOTTOM,
    "fpsim.kernels": BOTTOM | {"fpsim.kernels"},
    "fpsim.backends": BOTTOM | {"fpsim.backends", "fpsim.kernels"},
}


def layer(module: str) -> str:
    return ".".join(module.split(".")[:2])


@pytest.mark.parametrize("low", list(LOWER))
def test_lower_layers_do_not_import_upward(low):
    for path in ROOT.rglob("*.py"):
        name = module_name(path)
        if layer(name) != low:
            continue
        bad = {m for m in imports_of(path) if layer(m) not in LOWER[low]}
        assert not bad, f"{name} imports {sorted(bad)}, above its layer"


def test_accumulation_does_not_import_the_hardware_presets():
    for path in (ROOT / "accumulation").rglob("*.py"):
        assert "fpsim.hw" not in imports_of(path), path.name


def test_no_import_cycles():
    graph = {module_name(p): imports_of(p) for p in ROOT.rglob("*.py")}
    # The package fpsim itself re-exports everything; submodules may import names from it
    # only lazily (the bench and the command line), so it is left out of the walk.
    graph.pop("fpsim")
    state: dict = {}

    def visit(node, trail):
        state[node] = "open"
        for nxt in graph.get(node, ()):
            if nxt not in graph:
                continue
            if state.get(nxt) == "open":
                raise AssertionError(" -> ".join(trail[trail.index(nxt):] + [nxt]))
            if nxt not in state:
                visit(nxt, trail + [nxt])
        state[node] = "done"

    for node in graph:
        if node not in state:
            visit(node, [node])


def test_nothing_in_fpsim_imports_the_torch_bridge():
    for path in ROOT.rglob("*.py"):
        name = module_name(path)
        if name.startswith("fpsim.torch"):
            continue
        bad = {m for m in imports_of(path) if m == "fpsim.torch" or
               m.startswith("fpsim.torch.")}
        assert not bad, f"{name} imports {sorted(bad)}: the bridge sits on top of fpsim"
