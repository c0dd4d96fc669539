"""Numba's ``inline="always"``, with each inlined kernel's IR built once per process.

The kernels are Numba functions inlined into every loop that calls them (``inline="always"``:
LLVM alone does not inline a function as large as a rounding, and a loop that calls one
neither vectorises nor folds a specialised format's constants). For each call site, Numba
(0.59 to 0.68, and numba-cuda's copy of the same code) builds the callee's IR again from
its bytecode, inlining the callee's own callees on the way (``InlineWorker.inline_function``
calls ``run_untyped_passes``): a loop's kernel tree was rebuilt for every loop variant,
most of the time a cold compile takes.

``install`` keeps the IR that ``run_untyped_passes`` returns for fpsim's functions, keyed by
the function and the compiler flags it was built under, and hands it to ``inline_ir``, which
copies it before changing anything (so the kept IR is never mutated). The generated code is
unchanged: the IR is the one Numba would have built again. Functions of other packages go
through Numba's own path.

``inline_ir`` copies the callee's IR a block at a time, each block with ``copy.deepcopy`` of
its own: every block's copy took a copy of the function's whole scope (all its variables),
so a copy cost blocks x variables: three quarters of a CUDA kernel's compile, a tenth of a
CPU loop's. For fpsim's functions the copies share one memo per copy of an IR
(``_IRCopies``): the scope and the variables are copied once, and the copy's blocks share
them as the original's do. The code generated is the same (tests/test_numba_inline.py:
the LLVM IR of a CPU loop, the PTX of a CUDA kernel).
"""

from __future__ import annotations

import copy
import inspect
import sys
import types
from typing import Any

_KEPT: dict[tuple[Any, ...], Any] = {}


def _ours(func: types.FunctionType) -> bool:
    return getattr(func, "__module__", "").startswith("fpsim.")


class _IRCopies:
    """``copy`` as ``inline_ir`` sees it while it inlines one of fpsim's functions: the
    blocks of one IR (one scope) are deep-copied with one memo, a new memo each time a
    block of it is copied again (the next copy of that IR)."""

    def __init__(self, block_type: Any) -> None:
        self._block = block_type
        self._copies: dict[int, tuple[set[int], dict[int, Any]]] = {}

    def deepcopy(self, x: Any, memo: dict[int, Any] | None = None) -> Any:
        if memo is None and isinstance(x, self._block):
            seen, memo = self._copies.get(id(x.scope), (set(), {}))
            if id(x) in seen:  # a second copy of the same IR
                seen, memo = set(), {}
            seen.add(id(x))
            self._copies[id(x.scope)] = (seen, memo)
        return copy.deepcopy(x, memo)

    def __getattr__(self, name: str) -> Any:
        return getattr(copy, name)


def _patch(worker: Any) -> bool:
    """Wrap ``worker.inline_function`` (an InlineWorker class), once; False where its
    interface is not the one this wrapper was written for."""
    original = getattr(worker, "inline_function", None)
    if original is None or getattr(original, "_fpsim_kept_ir", False):
        return original is not None
    try:
        names = list(inspect.signature(original).parameters)
        untyped = list(inspect.signature(worker.run_untyped_passes).parameters)
    except (AttributeError, TypeError, ValueError):
        return False
    if (names != ["self", "caller_ir", "block", "i", "function", "arg_typs"]
            or untyped != ["self", "func", "enable_ssa"] or not hasattr(worker, "inline_ir")):
        return False
    module: Any = sys.modules[worker.__module__]
    block_type = getattr(getattr(module, "ir", None), "Block", None)
    if getattr(module, "copy", None) is not copy or not isinstance(block_type, type):
        return False

    def inline_function(self: Any, caller_ir: Any, block: Any, i: int,
                        function: types.FunctionType, arg_typs: Any = None) -> Any:
        if not _ours(function):
            return original(self, caller_ir, block, i, function, arg_typs=arg_typs)
        # run_untyped_passes turns the caller's SSA flag off (its callee IR is not in SSA
        # form): done first here, so that the key is the flags the IR is built under.
        self.flags.enable_ssa = False
        key = (function, type(self.targetctx), self.flags.get_mangle_string())
        callee_ir = _KEPT.get(key)
        if callee_ir is None:
            callee_ir = _KEPT[key] = self.run_untyped_passes(function)
        module.copy = _IRCopies(block_type)
        try:
            return self.inline_ir(caller_ir, block, i, callee_ir,
                                  function.__code__.co_freevars, arg_typs=arg_typs)
        finally:
            module.copy = copy

    inline_function._fpsim_kept_ir = True  # type: ignore[attr-defined]
    worker.inline_function = inline_function
    return True


def install(cuda: bool = False) -> bool:
    """Keep inlined IR in Numba's CPU compiler, or (``cuda``) in numba-cuda's own copy of
    it; False where that compiler's inliner is not the one this was written for (it then
    runs as it is)."""
    try:
        if cuda:
            from numba.cuda.core.inline_closurecall import InlineWorker
        else:
            from numba.core.inline_closurecall import InlineWorker
    except ImportError:
        return False
    return _patch(InlineWorker)
