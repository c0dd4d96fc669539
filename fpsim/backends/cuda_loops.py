"""The CUDA kernels of the cupy backend: the shared numerics in grid-stride loops.

One thread per element (elementwise) or per output element (accumulation).
``KERNEL`` and ``ARITY`` and the device functions (``random53``, ``round_value``,
``op_add``, the block-FMA steps, and this module's ``HELPERS`` compiled for the
device) are bound per instance by ``cupy_backend``. Flags, stochastic rounding
and the operand check are arguments, not compiled variants: a branch that every
thread takes the same way costs next to nothing on a GPU, and one kernel per
operation keeps the first call's compilation (NVVM, seconds per kernel) short.

The hardware loops run the GPU's own conversion (``NARROW``) or binary16/bfloat16
instruction (``OPERATE``) where it is fpsim's rounding (``cuda_hardware``); they take
the elementwise loop's arguments, so that they launch the same way.

The elementwise loop has two more bindings: ``SPEC``, None in the generic
instance and the format's tuple in one specialised to a format and mode (its
constants fold: the ``spec`` argument is then unused), and ``LOAD``, the
conversion of a one-operand kernel's input to its carrier's type (``float``, or
``np.float32`` for the rounding on the binary32 encoding, ``kernels.carrier``).
"""

import numpy as np
from numba import cuda

from fpsim.backends.schedule import PUSH_C
from fpsim.flags import ABSORBED, INEXACT, OVERFLOW, UNDERFLOW

KERNEL = None
ARITY = 0
SPEC = None
LOAD = float
# ``array_kernel``'s operands (1 to 4) and results (1 or 2), bound per instance.
OPERANDS = RESULTS = 1
# The hardware loops' instructions (``cuda_hardware``), bound per instance.
NARROW = EXACT = WIDEN = OPERATE = None
QUIET_NAN = np.float32(np.nan)  # fpsim's NaN, as float32 holds it
# A pairwise stack holds at most ceil(log2 K) + 2 partial sums: 64 covers any K.
MAX_DEPTH = 64
HELPERS = ("count_flags", "clear_counts", "position", "add_counts")


def _bound_per_instance(*args):
    raise NotImplementedError("a device function bound per instance by cupy_backend")


random53 = representable = round_value = op_add = finite_or_zero = is_nonfinite = (
    _bound_per_instance
)
hw_c_exponent = hw_product = hw_c_term = hw_term = hw_finish = hw_result = hw_naive = (
    _bound_per_instance
)


def elementwise(x, y, z, out, flags, bad, key, spec_in, want_flags, stochastic, check):
    """``out[i], flags[i] = KERNEL(x[i], ...)``; adds to ``bad[0]`` the elements with an
    operand that is not a value of the format (``check``)."""
    spec = spec_in if SPEC is None else SPEC
    count = 0
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        rnd = random53(key, i) if stochastic else 0
        if ARITY == 1:
            value, flag = KERNEL(LOAD(x[i]), rnd, spec, want_flags)
            ok = representable(float(x[i]), spec) if check else True
        elif ARITY == 2:
            value, flag = KERNEL(float(x[i]), float(y[i]), rnd, spec, want_flags)
            ok = (representable(float(x[i]), spec) & representable(float(y[i]), spec)
                  if check else True)
        else:
            value, flag = KERNEL(float(x[i]), float(y[i]), float(z[i]), rnd, spec, want_flags)
            ok = (representable(float(x[i]), spec) & representable(float(y[i]), spec)
                  & representable(float(z[i]), spec) if check else True)
        out[i] = value
        if want_flags:
            flags[i] = flag
        count += 0 if ok else 1
    if count:
        cuda.atomic.add(bad, 0, count)


def hardware_round(x, y, z, out, flags, bad, key, spec_in, want_flags, stochastic, check):
    """``out[i]``: the float32 ``x[i]`` rounded by the GPU's conversion ``NARROW`` and
    widened back (exact); a NaN gives fpsim's NaN, not the GPU's canonical one."""
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        v = x[i]
        out[i] = WIDEN(NARROW(v)) if v == v else QUIET_NAN


def hardware_arithmetic(x, y, z, out, flags, bad, key, spec_in, want_flags, stochastic,
                        check):
    """``out[i]``: ``OPERATE`` on the float32 operands, where each is a value of the format
    (its conversion ``EXACT`` gives it back) and the result is not NaN; elsewhere the
    software ``KERNEL`` on ``SPEC`` (its exact operation rounded once, fpsim's NaN), which
    also adds to ``bad[0]`` the elements with an operand not of the format (``check``)."""
    count = 0
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        a = x[i]
        b = y[i]
        c = z[i]
        ha = EXACT(a)
        hb = EXACT(b)
        hc = EXACT(c) if ARITY == 3 else ha
        ok = (WIDEN(ha) == a) & (WIDEN(hb) == b)
        if ARITY == 3:
            ok = ok & (WIDEN(hc) == c)
        value = WIDEN(OPERATE(ha, hb, hc))
        if ok & (value == value):
            out[i] = value
        else:
            if ARITY == 2:
                result, unused = KERNEL(float(a), float(b), 0, SPEC, False)
                fine = representable(float(a), SPEC) & representable(float(b), SPEC)
            else:
                result, unused = KERNEL(float(a), float(b), float(c), 0, SPEC, False)
                fine = (representable(float(a), SPEC) & representable(float(b), SPEC)
                        & representable(float(c), SPEC))
            out[i] = result
            count += 0 if (fine or not check) else 1
    if count:
        cuda.atomic.add(bad, 0, count)


def array_kernel(a, b, c, d, first, second, params):
    """``first[i](, second[i]) = KERNEL(a[i], ..., *params)``: a kernel on whole device
    arrays (``cuda_arrays``), its ``OPERANDS`` arrays and ``RESULTS`` results."""
    for i in range(cuda.grid(1), first.size, cuda.gridsize(1)):
        if OPERANDS == 1:
            r = KERNEL(a[i], *params)
        elif OPERANDS == 2:
            r = KERNEL(a[i], b[i], *params)
        elif OPERANDS == 3:
            r = KERNEL(a[i], b[i], c[i], *params)
        else:
            r = KERNEL(a[i], b[i], c[i], d[i], *params)
        if RESULTS == 1:
            first[i] = r
        else:
            first[i] = r[0]
            second[i] = r[1]


def first_unrepresentable(x, first, spec):
    """Lowers ``first[0]`` to the index of each element that is not a value of the format."""
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        if not representable(float(x[i]), spec):
            cuda.atomic.min(first, 0, i)


def count_flags(counts, flag):
    """Add one rounded addition with flags ``flag`` to the thread's ``counts``
    (``protocol.COUNTERS``)."""
    counts[0] += 1
    counts[1] += (flag & INEXACT) != 0
    counts[2] += (flag & ABSORBED) != 0
    counts[3] += (flag & UNDERFLOW) != 0
    counts[4] += (flag & OVERFLOW) != 0


def clear_counts(counts):
    for f in range(5):
        counts[f] = 0


def position(e, n, per_group):
    """Output element ``e`` of an accumulation: its row, column and group of B."""
    r = e // n
    return r, e - r * n, r // per_group


def add_counts(total, counts):
    """The thread's counters into the launch's ``total``."""
    for f in range(5):
        if counts[f]:
            cuda.atomic.add(total, f, counts[f])


def accumulate_sequential(A, B, C, out, total, key, spec, per_group, rounded, stochastic,
                          want_flags):
    """For each output (r, j): from C[r, j], add each term A[r, k] * B[g, k, j] in k order,
    each addition rounded (``op_add``); with ``rounded``, each term rounded first."""
    k_len = A.shape[1]
    n = B.shape[2]
    stride = 2 * k_len + 1
    counts = cuda.local.array(5, np.int64)
    clear_counts(counts)
    for e in range(cuda.grid(1), A.shape[0] * n, cuda.gridsize(1)):
        r, j, g = position(e, n, per_group)
        s = C[r, j]
        for k in range(k_len):
            p = A[r, k] * B[g, k, j]
            base = e * stride + 2 * k
            if rounded:
                p, unused = round_value(p, random53(key, base) if stochastic else 0, spec, False)
            s, flag = op_add(s, p, random53(key, base + 1) if stochastic else 0, spec,
                             want_flags)
            if want_flags:
                count_flags(counts, flag)
        out[r, j] = s
    if want_flags:
        add_counts(total, counts)


def accumulate_pairwise(A, B, C, out, total, key, spec, per_group, program, stochastic,
                        want_flags):
    """For each output (r, j): the terms, rounded, summed by the stack machine
    ``program`` (``schedule.pairwise_program``)."""
    k_len = A.shape[1]
    n = B.shape[2]
    stride = 2 * k_len + 1
    counts = cuda.local.array(5, np.int64)
    clear_counts(counts)
    stack = cuda.local.array(MAX_DEPTH, np.float64)
    for e in range(cuda.grid(1), A.shape[0] * n, cuda.gridsize(1)):
        r, j, g = position(e, n, per_group)
        top = 0
        adds = 0
        for q in range(program.size):
            op = program[q]
            if op >= 0:
                rnd = random53(key, e * stride + 2 * op) if stochastic else 0
                value, unused = round_value(A[r, op] * B[g, op, j], rnd, spec, False)
                stack[top] = value
                top += 1
            elif op == PUSH_C:
                stack[top] = C[r, j]
                top += 1
            else:
                # The addition of c comes after the k_len - 1 of the tree: stream index 2K.
                step = 2 * k_len if adds == k_len - 1 else 2 * adds + 1
                rnd = random53(key, e * stride + step) if stochastic else 0
                value, flag = op_add(stack[top - 2], stack[top - 1], rnd, spec, want_flags)
                stack[top - 2] = value
                top -= 1
                adds += 1
                if want_flags:
                    count_flags(counts, flag)
        out[r, j] = stack[0] if top > 0 else C[r, j]
    if want_flags:
        add_counts(total, counts)


def accumulate_blocks(A, B, C, out, total, hw, out_spec, block, per_group, want_flags):
    """For each output (r, j): each block of ``block`` terms and the running sum added as
    the block FMA ``hw`` does (``kernels.blockfma``), rounded to ``out_spec``."""
    k_len = A.shape[1]
    n = B.shape[2]
    counts = cuda.local.array(5, np.int64)
    clear_counts(counts)
    for e in range(cuda.grid(1), A.shape[0] * n, cuda.gridsize(1)):
        r, j, g = position(e, n, per_group)
        c = C[r, j]
        for k0 in range(0, k_len, block):
            k1 = min(k_len, k0 + block)
            align = hw_c_exponent(finite_or_zero(c), hw)
            naive = c
            bad = is_nonfinite(c)
            for k in range(k0, k1):
                a = A[r, k]
                b = B[g, k, j]
                p, e_top, e_lsb = hw_product(finite_or_zero(a), finite_or_zero(b), hw)
                align = max(align, e_top)
                share, odd = hw_naive(a, b, hw)
                naive += share
                bad = bad | odd
            acc, lost = hw_c_term(finite_or_zero(c), align, hw)
            vanished = 1 if lost else 0
            for k in range(k0, k1):
                term, lost = hw_term(finite_or_zero(A[r, k]), finite_or_zero(B[g, k, j]),
                                     align, hw)
                acc += term
                vanished += 1 if lost else 0
            value, flag = hw_finish(acc, align, finite_or_zero(c), hw, out_spec, want_flags)
            c = hw_result(value, naive, bad)
            if want_flags:
                count_flags(counts, flag)
                counts[2] += vanished
        out[r, j] = c
    if want_flags:
        add_counts(total, counts)
