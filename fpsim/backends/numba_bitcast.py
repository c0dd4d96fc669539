"""Bit casts between a float type and the integer type of its width, as Numba intrinsics."""

from numba.extending import intrinsic


def bitcast(source, target):
    """An intrinsic reinterpreting a ``source`` value's bits as ``target`` (same width)."""

    @intrinsic
    def cast(typingctx, x):
        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], context.get_value_type(target))

        return target(source), codegen

    return cast
