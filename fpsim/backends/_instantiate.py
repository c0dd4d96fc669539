"""Build a backend's copy of the kernels: the same code, the backend's primitives."""

from __future__ import annotations

import hashlib
import types
from collections.abc import Callable

from fpsim.kernels import blockfma, core, ops, prims, random

KERNEL_MODULES = (core, random, ops, blockfma)


def clone(func: types.FunctionType, namespace: dict, qualname: str | None = None):
    """``func`` with its global names looked up in ``namespace``."""
    new = types.FunctionType(func.__code__, namespace, func.__name__, func.__defaults__)
    new.__qualname__ = qualname or func.__qualname__
    new.__module__ = func.__module__
    new.__doc__ = func.__doc__
    return new


def source_digest(*modules) -> str:
    """A short hash of the kernel sources (and ``modules``), to key compiled caches."""
    digest = hashlib.sha1()
    for module in (*KERNEL_MODULES, prims, *modules):
        with open(module.__file__, "rb") as f:
            digest.update(f.read())
    return digest.hexdigest()[:12]


def instantiate(primitives: dict, wrap: Callable = lambda f: f, suffix: str = "") -> dict:
    """One namespace holding every kernel function, calling ``primitives``.

    ``wrap`` is applied to each function (``numba.njit`` for the Numba backend);
    ``suffix`` is appended to qualified names (a compiled cache is keyed by them).
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
    for func in kernel_funcs:
        namespace[func.__name__] = wrap(clone(func, namespace, func.__qualname__ + suffix))
    return namespace
