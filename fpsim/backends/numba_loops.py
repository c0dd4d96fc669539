"""The loops of the Numba backend, instantiated once per kernel and variant.

``KERNEL``, ``ARITY``, ``WANT_FLAGS``, ``STOCHASTIC`` and ``random53`` are
bound per instance (see ``numba_backend``), so that Numba prunes the branches
that do not apply and LLVM vectorises what is left.
"""

from numba import prange

KERNEL = None
ARITY = 0
WANT_FLAGS = False
STOCHASTIC = False


def random53(key, index):
    raise NotImplementedError("bound per instance")


def loop(x, y, z, out, flags, key, spec):
    for i in prange(out.size):
        rnd = random53(key, i) if STOCHASTIC else 0
        if ARITY == 1:
            value, flag = KERNEL(float(x[i]), rnd, spec, WANT_FLAGS)
        elif ARITY == 2:
            value, flag = KERNEL(float(x[i]), float(y[i]), rnd, spec, WANT_FLAGS)
        else:
            value, flag = KERNEL(float(x[i]), float(y[i]), float(z[i]), rnd, spec, WANT_FLAGS)
        out[i] = value
        if WANT_FLAGS:
            flags[i] = flag


def first_unrepresentable(x, spec):
    for i in range(x.size):
        if not KERNEL(float(x[i]), spec):
            return i
    return -1
