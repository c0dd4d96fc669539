"""The loops of the Numba backend, instantiated once per kernel and variant.

``KERNEL``, ``ARITY``, ``WANT_FLAGS``, ``STOCHASTIC``, ``CHECK``, ``SPEC`` and
``random53``/``representable`` are bound per instance (see ``numba_backend``),
so that Numba prunes the branches that do not apply and LLVM vectorises the
rest. ``SPEC`` is None in the generic instance and the format's tuple in one
specialised to a format (its constants fold into the code).
"""

from numba import prange

KERNEL = None
ARITY = 0
WANT_FLAGS = False
STOCHASTIC = False
CHECK = False
SPEC = None


def random53(key, index):
    raise NotImplementedError("bound per instance")


def representable(x, spec):
    raise NotImplementedError("bound per instance")


def loop(x, y, z, out, flags, key, spec_in):
    spec = spec_in if SPEC is None else SPEC
    bad = 0
    for i in prange(out.size):
        rnd = random53(key, i) if STOCHASTIC else 0
        if ARITY == 1:
            value, flag = KERNEL(float(x[i]), rnd, spec, WANT_FLAGS)
            ok = representable(float(x[i]), spec) if CHECK else True
        elif ARITY == 2:
            value, flag = KERNEL(float(x[i]), float(y[i]), rnd, spec, WANT_FLAGS)
            ok = (
                representable(float(x[i]), spec) & representable(float(y[i]), spec)
                if CHECK
                else True
            )
        else:
            value, flag = KERNEL(float(x[i]), float(y[i]), float(z[i]), rnd, spec, WANT_FLAGS)
            ok = (
                representable(float(x[i]), spec)
                & representable(float(y[i]), spec)
                & representable(float(z[i]), spec)
                if CHECK
                else True
            )
        out[i] = value
        if WANT_FLAGS:
            flags[i] = flag
        bad += 0 if ok else 1
    return bad


def first_unrepresentable(x, spec):
    for i in range(x.size):
        if not representable(float(x[i]), spec):
            return i
    return -1
