"""fpsim.backends.numba_inline: each inlined fpsim function's IR built once per process, the
same code generated, other packages' functions inlined as Numba does."""

import types

import numba
import numpy as np
import pytest
from numba.core.inline_closurecall import InlineWorker

from fpsim.backends import numba_inline


def _functions(module: str) -> dict:
    """A callee inlined twice into each of two callers, defined as if in ``module``."""
    source = (
        "def leaf(x):\n    return x * 3.0 + 1.0\n"
        "def callee(x, y):\n    return leaf(x) - leaf(y) * 0.5\n"
        "def first(x, y):\n    return callee(x, y) + callee(y, x)\n"
        "def second(x):\n    return callee(x, 2.0) * callee(1.0, x)\n"
    )
    namespace: dict = {"__name__": module}
    exec(compile(source, f"<{module}>", "exec"), namespace)
    for name in ("leaf", "callee"):
        namespace[name] = numba.njit(inline="always")(namespace[name])
    for name in ("first", "second"):
        namespace[name] = numba.njit(namespace[name])
    return namespace


@pytest.fixture
def builds(monkeypatch):
    """The functions whose IR Numba builds for inlining, in order."""
    built: list[str] = []
    original = InlineWorker.run_untyped_passes

    def counted(self, func, enable_ssa=False):
        built.append(func.__name__)
        return original(self, func, enable_ssa)

    monkeypatch.setattr(InlineWorker, "run_untyped_passes", counted)
    return built


def test_installed_once_on_numbas_inliner():
    assert numba_inline.install() is True
    patched = InlineWorker.inline_function
    assert getattr(patched, "_fpsim_kept_ir", False)
    assert numba_inline.install() is True
    assert InlineWorker.inline_function is patched  # not wrapped twice


def test_fpsims_functions_are_built_once_and_compute_the_same(builds):
    numba_inline.install()
    ours = _functions("fpsim._inline_probe")
    assert ours["first"](2.0, 5.0) == (7.0 - 8.0) + (16.0 - 3.5)
    assert ours["second"](4.0) == (13.0 - 3.5) * (4.0 - 6.5)
    # Four call sites of callee (each inlining leaf twice): callee built once, leaf once.
    assert sorted(builds) == ["callee", "leaf"]


def test_other_packages_functions_are_built_at_every_call_site(builds):
    numba_inline.install()
    theirs = _functions("someone_else")
    assert theirs["first"](2.0, 5.0) == (7.0 - 8.0) + (16.0 - 3.5)
    assert theirs["second"](4.0) == (13.0 - 3.5) * (4.0 - 6.5)
    assert builds.count("callee") == 4 and builds.count("leaf") == 8


def test_the_same_code_as_numbas_own_inlining():
    """An fpsim loop's LLVM IR, with the kept IR and without, is the same (up to the
    names Numba numbers per compile)."""
    import re

    numba_inline.install()
    codes = []
    for module in ("fpsim._inline_probe_llvm", "someone_else_llvm"):
        f = _functions(module)["first"]
        f(np.float64(1.0), np.float64(2.0))
        code = f.inspect_llvm(f.signatures[0])
        code = re.sub(r"fpsim\._inline_probe_llvm|someone_else_llvm", "M", code)
        code = re.sub(r'"[^"]*"|\[\d+ x i8\]', "s", code)  # the module's name in strings
        code = re.sub(r"([%@!#])[-\w.$]+", r"\1v", code)  # names Numba numbers per compile
        codes.append(code)
    assert codes[0] == codes[1]


def test_an_inliner_of_another_shape_is_left_as_it_is():
    class Other:
        def inline_function(self, caller_ir, block, i, function):  # no arg_typs
            return "theirs"

        def run_untyped_passes(self, func, enable_ssa=False):
            return None

        def inline_ir(self, *args, **kwargs):
            return None

    original = Other.inline_function
    assert numba_inline._patch(Other) is False
    assert Other.inline_function is original
    assert numba_inline._patch(types.SimpleNamespace()) is False
