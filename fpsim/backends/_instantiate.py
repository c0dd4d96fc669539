"""Build a backend's copy of the kernels: the same code, the backend's primitives."""

from __future__ import annotations

import ast
import hashlib
import inspect
import sys
import textwrap
import types
from collections.abc import Callable

from fpsim.kernels import (
    blockfma,
    blockscale,
    carrier,
    convert,
    core,
    ops,
    prims,
    random,
    transcendental,
)
from fpsim.kernels.carrier import BINARY64, Carrier

KERNEL_MODULES = (core, random, ops, blockfma, transcendental, blockscale, convert)


def clone(func: types.FunctionType, namespace: dict, qualname: str | None = None,
          code: types.CodeType | None = None):
    """``func`` with its global names looked up in ``namespace`` (and ``code`` for its own)."""
    new = types.FunctionType(code or func.__code__, namespace, func.__name__, func.__defaults__)
    new.__qualname__ = qualname or func.__qualname__
    new.__module__ = func.__module__
    new.__doc__ = func.__doc__
    return new


def source_digest(*modules) -> str:
    """A short hash of the kernel sources, this module's and ``modules``', to key compiled
    caches."""
    digest = hashlib.sha1()
    for module in (*KERNEL_MODULES, prims, carrier, sys.modules[__name__], *modules):
        with open(module.__file__, "rb") as f:
            digest.update(f.read())
    return digest.hexdigest()[:12]


def instantiate(primitives: dict, wrap: Callable = lambda f: f, suffix: str = "",
                encoding: Carrier = BINARY64, entry: str = carrier.BINARY32_ENTRY) -> dict:
    """One namespace holding every kernel function, calling ``primitives``.

    ``wrap`` is applied to each function (``numba.njit`` for the Numba backend);
    ``suffix`` is appended to qualified names (a compiled cache is keyed by them).
    With another ``encoding`` than binary64 the namespace holds ``entry`` (the rounding,
    ``carrier.BINARY32_ENTRY``, by default) and what it calls, with that encoding's constants
    and every number it uses in that encoding's lane types; ``primitives`` then
    supply that encoding's bit casts as ``f64_bits`` and ``bits_f64``, and its integer
    operations as ``LANE_OPERATIONS`` (``in_lanes``).
    """
    namespace: dict = {}
    for module in KERNEL_MODULES:
        namespace.update(
            (k, v) for k, v in vars(module).items() if not k.startswith("__")
        )
    kernel_funcs = [
        v
        for module in KERNEL_MODULES
        for v in vars(module).values()
        if isinstance(v, types.FunctionType) and v.__module__ == module.__name__
    ]
    needed = [n for n, v in vars(prims).items() if isinstance(v, types.FunctionType)]
    missing = [n for n in needed if n not in primitives]
    if missing:
        raise AssertionError(f"backend lacks primitives {missing}")
    namespace.update((n, primitives[n]) for n in needed)
    codes = {}
    if encoding is not BINARY64:
        missing = [n for n in LANE_OPERATIONS.values() if n not in primitives]
        if missing:
            raise AssertionError(f"backend lacks the {encoding.name} operations {missing}")
        namespace.update((n, primitives[n]) for n in LANE_OPERATIONS.values())
        namespace.update(encoding.constants)
        kept = reachable(namespace, entry)
        for func in kernel_funcs:  # no binary64 kernel left behind under another encoding
            if func not in kept:
                del namespace[func.__name__]
        kernel_funcs = kept
        for func in kernel_funcs:
            codes[func.__name__] = retyped(in_lanes(func), encoding)
            for name in func.__code__.co_names:
                value = namespace.get(name)
                if isinstance(value, (bool, type(None))) or not isinstance(value, (int, float)):
                    continue
                namespace[name] = (encoding.integer if isinstance(value, int)
                                   else encoding.floating)(value)
    for func in kernel_funcs:
        namespace[func.__name__] = wrap(clone(func, namespace, func.__qualname__ + suffix,
                                              codes.get(func.__name__)))
    return namespace


def reachable(namespace: dict, entry: str) -> list[types.FunctionType]:
    """The kernel functions ``entry`` calls, directly or not, and itself."""
    found: dict[str, types.FunctionType] = {}
    todo = [entry]
    while todo:
        name = todo.pop()
        func = namespace.get(name)
        if name in found or not isinstance(func, types.FunctionType) or not any(
                func.__module__ == m.__name__ for m in KERNEL_MODULES):
            continue
        found[name] = func
        todo.extend(func.__code__.co_names)
    return list(found.values())


def retyped(code: types.CodeType, encoding: Carrier) -> types.CodeType:
    """``code`` with its integer and float literals in the encoding's lane types (so that
    ``x + 1`` stays in 32-bit lanes, where a Python int would widen it to 64)."""
    def lane(c):
        if isinstance(c, bool) or c is None:
            return c
        if isinstance(c, int):
            return encoding.integer(c)
        if isinstance(c, float):
            return encoding.floating(c)
        return c

    return code.replace(co_consts=tuple(lane(c) for c in code.co_consts))


# The binary operators ``in_lanes`` hands to the encoding's primitives.
LANE_OPERATIONS = {ast.Add: "lane_add", ast.Sub: "lane_sub", ast.Mult: "lane_mul",
                   ast.BitAnd: "lane_and", ast.BitOr: "lane_or", ast.BitXor: "lane_xor",
                   ast.LShift: "lane_lshift", ast.RShift: "lane_rshift"}


class _ToLanes(ast.NodeTransformer):
    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        name = LANE_OPERATIONS.get(type(node.op))
        if name is None:
            return node
        return ast.copy_location(
            ast.Call(ast.Name(name, ast.Load()), [node.left, node.right], []), node)


def in_lanes(func: types.FunctionType) -> types.CodeType:
    """``func``'s code with each binary operation ``a op b`` written ``lane_op(a, b)``:
    the encoding's primitive, which keeps two integers of its lane width in that width
    (Numba widens them to 64 bits; ``numba_lanes``)."""
    return _rewritten(func, _ToLanes())


class _Spread(ast.NodeTransformer):
    def __init__(self, name: str, count: int) -> None:
        self.name, self.count = name, count

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        args: list[ast.expr] = []
        for a in node.args:
            if (isinstance(a, ast.Starred) and isinstance(a.value, ast.Name)
                    and a.value.id == self.name):
                args += [ast.Subscript(ast.Name(self.name, ast.Load()), ast.Constant(k),
                                       ast.Load()) for k in range(self.count)]
            else:
                args.append(a)
        node.args = args
        return node


def spread(func: types.FunctionType, name: str, count: int) -> types.CodeType:
    """``func``'s code with each ``f(..., *name)`` written ``f(..., name[0], ...,
    name[count - 1])``: numba-cuda does not inline a device function called with ``*args``."""
    return _rewritten(func, _Spread(name, count))


def _rewritten(func: types.FunctionType, transformer: ast.NodeTransformer) -> types.CodeType:
    """``func``'s code with its source rewritten by ``transformer`` (same file and lines)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    tree = ast.fix_missing_locations(transformer.visit(tree))
    ast.increment_lineno(tree, func.__code__.co_firstlineno - 1)
    module = compile(tree, func.__code__.co_filename, "exec")
    return next(c for c in module.co_consts
                if isinstance(c, types.CodeType) and c.co_name == func.__name__)
