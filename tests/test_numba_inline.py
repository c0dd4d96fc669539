"""fpsim.backends.numba_inline: each inlined fpsim function's IR built once per process, the
same code generated, other packages' functions inlined as Numba does."""

import importlib.util
import types

import numba
import numpy as np
import pytest
from numba.core.inline_closurecall import InlineWorker

from fpsim.backends import numba_inline


def _functions(module: str) -> dict:
    """A callee inlined twice into each of two callers, defined as if in ``module``."""
    source = (
        "def leaf(x):\n    if x > 0.5:\n        return x * 3.0 + 1.0\n    return x\n"
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


def test_the_blocks_of_one_ir_are_copied_with_one_memo_and_each_copy_afresh():
    from numba.core import ir

    loc = ir.Loc("probe", 1)
    scope = ir.Scope(None, loc)
    x = scope.define("x", loc)
    blocks = [ir.Block(scope, loc) for _ in range(3)]
    for b in blocks:
        b.append(ir.Assign(ir.Const(1.0, loc), x, loc))
    copies = numba_inline._IRCopies(ir.Block)
    first = [copies.deepcopy(b) for b in blocks]
    # One copy of the scope (and of x) for the copy of the whole IR, as in the original.
    assert len({id(b.scope) for b in first}) == 1 and first[0].scope is not scope
    assert len({id(b.body[0].target) for b in first}) == 1
    assert first[0].body[0].target is first[0].scope.localvars.get("x")
    # The same IR copied again: new objects, nothing shared with the first copy.
    second = [copies.deepcopy(b) for b in blocks]
    assert second[0].scope is not first[0].scope
    assert second[0].body[0].target is not first[0].body[0].target
    # Anything but a block, or a copy with a memo of its own, is copy.deepcopy's.
    assert copies.deepcopy([x])[0] is not x and copies.copy([x])[0] is x
    memo: dict = {}
    assert copies.deepcopy(blocks[0], memo).scope is memo[id(scope)]


@pytest.mark.skipif(importlib.util.find_spec("numba_cuda") is None,
                    reason="numba-cuda is not installed (it comes with the test and gpu extras)")
def test_cuda_kernels_compile_to_the_same_ptx_with_the_shared_copies(monkeypatch):
    """A kernel inlining fpsim device functions (branches: several blocks each) gives the
    same PTX with the kept IR copied with one memo as through numba-cuda's own inliner."""
    import re

    from numba import cuda

    assert numba_inline.install(cuda=True) is True
    source = (
        "def leaf(x):\n    if x > 1.0:\n        return x * 3.0 + 1.0\n"
        "    return x - 0.25\n"
        "def callee(x, y):\n    s = 0.0\n    for k in range(3):\n"
        "        s += leaf(x + k) - leaf(y) * 0.5\n    return s\n"
        "def kernel(a, out):\n    i = cuda.grid(1)\n    if i < out.size:\n"
        "        out[i] = callee(a[i], 2.0) + callee(1.0, a[i])\n"
    )

    def ptx() -> str:
        namespace: dict = {"__name__": "fpsim._inline_probe_cuda", "cuda": cuda}
        exec(compile(source, "<fpsim._inline_probe_cuda>", "exec"), namespace)
        for name in ("leaf", "callee"):
            namespace[name] = cuda.jit(device=True, inline="always")(namespace[name])
        code, _ = cuda.compile_ptx(namespace["kernel"], "void(float64[:], float64[:])",
                                   cc=(9, 0))
        return re.sub(r"kernelB\d+v\d+B", "kernelB", code)  # numbered per compile

    shared = ptx()
    monkeypatch.setattr(numba_inline, "_ours", lambda function: False)  # numba-cuda's path
    assert ptx() == shared
