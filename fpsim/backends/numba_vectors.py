"""A hint to LLVM that a compiled loop may use the CPU's widest vectors.

On AVX-512 CPUs LLVM's x86 tuning prefers 256-bit vectors (the ``prefer-256-bit``
tuning flag, set because older Xeons slow their clock for 512-bit work), so a
loop vectorised over binary64 lanes gets 4 of them rather than 8. The block-FMA
and binary16 accumulation loops are arithmetic-bound and measured about 30%
faster with 512-bit vectors here. LLVM reads the function attribute
``"prefer-vector-width"`` per function; calling ``wide_vectors()`` inside a loop
body sets it on the function being compiled (with ``prange``, the outlined loop
body). It changes which instructions run, never the values they compute.
"""

from numba import types
from numba.extending import intrinsic

ATTRIBUTE = '"prefer-vector-width"="512"'


@intrinsic
def wide_vectors(typingctx):
    def codegen(context, builder, signature, args):
        attributes = builder.function.attributes
        # llvmlite's attribute set checks names against LLVM's enum attributes only; a
        # string attribute goes into the set as the text LLVM's IR parser reads.
        try:
            set.add(attributes, ATTRIBUTE)
        except TypeError:  # a future llvmlite with another representation: only a hint
            pass
        return context.get_dummy_value()

    return types.none(), codegen
