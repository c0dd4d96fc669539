"""The parallel loop of the Numba backend, instantiated once per kernel.

``KERNEL``, ``ARITY`` and ``random53`` are bound per instance (see
``numba_backend``); Numba prunes the arity branches that do not apply.
"""

from numba import prange

KERNEL = None
ARITY = 0
STOCHASTIC = 6


def random53(key, index):
    raise NotImplementedError("bound per instance")


def loop(x, y, z, out, flags, key, spec, want_flags):
    stochastic = spec[7] == STOCHASTIC
    for i in prange(out.size):
        rnd = 0
        if stochastic:
            rnd = random53(key, i)
        if ARITY == 1:
            value, flag = KERNEL(float(x[i]), rnd, spec, want_flags)
        elif ARITY == 2:
            value, flag = KERNEL(float(x[i]), float(y[i]), rnd, spec, want_flags)
        else:
            value, flag = KERNEL(float(x[i]), float(y[i]), float(z[i]), rnd, spec, want_flags)
        out[i] = value
        if want_flags:
            flags[i] = flag


def first_unrepresentable(x, spec):
    for i in range(x.size):
        if not KERNEL(float(x[i]), spec):
            return i
    return -1
