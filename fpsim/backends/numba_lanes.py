"""Integer operations that stay in 32-bit lanes, for the rounding on the binary32 encoding.

Numba types ``int32 & int32`` (and every other operation on integers narrower than
64 bits) as int64, after Python. Vectorised, the binary32 rounding's integer steps
then run in 64-bit lanes: four to an AVX2 vector instead of eight. Every integer of
that rounding fits int32 (``kernels.carrier``: shift counts are capped below 31, and
magnitudes are binary32 encodings), so its operations on two int32 values are
compiled here as int32 instructions. Operands of other types (floats, booleans, the
64 random bits of stochastic rounding) keep Numba's own operation.
"""

from __future__ import annotations

import operator

from numba import types
from numba.extending import intrinsic, overload

# name -> (Python operator, the llvmlite IRBuilder method of its int32 instruction)
OPERATIONS = {
    "lane_add": (operator.add, "add"),
    "lane_sub": (operator.sub, "sub"),
    "lane_mul": (operator.mul, "mul"),
    "lane_and": (operator.and_, "and_"),
    "lane_or": (operator.or_, "or_"),
    "lane_xor": (operator.xor, "xor"),
    "lane_lshift": (operator.lshift, "shl"),
    "lane_rshift": (operator.rshift, "ashr"),  # signed int32: arithmetic, as Python's >>
}


def _narrow(typ) -> bool:
    return isinstance(typ, types.Integer) and typ.signed and typ.bitwidth <= 32


def _lane_operation(name: str, op, method: str):
    @intrinsic
    def int32_op(typingctx, a, b):
        def codegen(context, builder, signature, args):
            x, y = (context.cast(builder, v, t, types.int32)
                    for v, t in zip(args, signature.args, strict=True))
            return getattr(builder, method)(x, y)

        return types.int32(a, b), codegen

    def python(a, b):
        return op(a, b)

    python.__name__ = python.__qualname__ = name

    @overload(python, inline="always")
    def typed(a, b):
        if _narrow(a) and _narrow(b):
            return lambda a, b: int32_op(a, b)
        return lambda a, b: op(a, b)

    return python


LANE_PRIMITIVES = {name: _lane_operation(name, op, method)
                   for name, (op, method) in OPERATIONS.items()}
