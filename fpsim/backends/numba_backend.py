"""The Numba backend: each kernel compiled per element inside a parallel loop.

Compiled lazily on first use and cached on disk (``cache=True``).
"""

from __future__ import annotations

import math

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from fpsim.backends import numba_loops
from fpsim.backends._instantiate import clone, instantiate, source_digest


@intrinsic
def _f64_bits(typingctx, x):
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(64))

    return types.int64(types.float64), codegen


@intrinsic
def _bits_f64(typingctx, u):
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())

    return types.float64(types.int64), codegen


def _jit(func):
    return numba.njit(cache=True)(func)


PRIMITIVES = {
    "select": _jit(lambda c, a, b: a if c else b),
    "maximum": _jit(lambda a, b: max(a, b)),
    "minimum": _jit(lambda a, b: min(a, b)),
    "f64_bits": _f64_bits,
    "bits_f64": _bits_f64,
    "i64_f64": _jit(lambda i: float(i)),
    "f64_i64": _jit(lambda x: int(x)),
    "u64": _jit(lambda i: np.uint64(i)),
    "i64": _jit(lambda u: np.int64(u)),
    "fsqrt": _jit(lambda x: math.sqrt(x)),
}

ARITY = {
    "round_value": 1,
    "op_sqrt": 1,
    "op_add": 2,
    "op_sub": 2,
    "op_mul": 2,
    "op_div": 2,
    "op_fma": 3,
}

_EMPTY_FLAGS = np.zeros(0, dtype=np.uint8)


class Backend:
    name = "numba"

    def __init__(self) -> None:
        # Numba checks only the caller's file for staleness: key every cache
        # entry by the sources it inlines.
        self.digest = source_digest(numba_loops)
        self.kernels = instantiate(PRIMITIVES, _jit, suffix=f"_{self.digest}")
        self._loops: dict = {}

    def _loop(self, kernel: str, template, parallel: bool = True):
        key = (kernel, template.__name__)
        if key not in self._loops:
            namespace = dict(vars(numba_loops))
            namespace.update(
                KERNEL=self.kernels[kernel],
                ARITY=ARITY.get(kernel, 1),
                random53=self.kernels["random53"],
            )
            # A distinct qualified name gives each instance its own cache entry.
            qualname = f"{template.__name__}_{kernel}_{self.digest}"
            func = clone(template, namespace, qualname)
            self._loops[key] = numba.njit(parallel=parallel, cache=True)(func)
        return self._loops[key]

    def apply(self, kernel, operands, out, flags, spec, key) -> None:
        x = operands[0]
        y = operands[1] if len(operands) > 1 else x
        z = operands[2] if len(operands) > 2 else x
        want_flags = flags is not None
        self._loop(kernel, numba_loops.loop)(
            x, y, z, out, flags if want_flags else _EMPTY_FLAGS,
            np.uint64(0 if key is None else key), spec, want_flags,
        )

    def first_unrepresentable(self, x, spec) -> int:
        return int(self._loop("representable", numba_loops.first_unrepresentable, False)(x, spec))
