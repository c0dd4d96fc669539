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
from numba.extending import intrinsic

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


def _lane_operation(op, method: str):
    @intrinsic
    def lane(typingctx, a, b):
        if _narrow(a) and _narrow(b):
            def int32_op(context, builder, signature, args):
                x, y = (context.cast(builder, v, t, types.int32)
                        for v, t in zip(args, signature.args, strict=True))
                return getattr(builder, method)(x, y)

            return types.int32(a, b), int32_op
        # Anything else: Numba's own operation (its typing and implementation).
        resolved = typingctx.resolve_function_type(op, (a, b), {})
        if resolved is None:
            return None

        def numba_op(context, builder, signature, args):
            cast = [context.cast(builder, v, t, u)
                    for v, t, u in zip(args, signature.args, resolved.args, strict=True)]
            return context.get_function(op, resolved)(builder, cast)

        return resolved.return_type(a, b), numba_op

    return lane


LANE_PRIMITIVES = {name: _lane_operation(op, method)
                   for name, (op, method) in OPERATIONS.items()}
