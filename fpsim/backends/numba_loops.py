"""The loops of the Numba backend, instantiated once per kernel and variant.

``KERNEL``, ``ARITY``, ``WANT_FLAGS``, ``STOCHASTIC``, ``CHECK``, ``ROUNDED``,
``SPEC`` and the kernels (``random53``, ``representable``, ``round_value``,
``op_add``) are bound per instance (see ``numba_backend``),
so that Numba prunes the branches that do not apply and LLVM vectorises the
rest. ``SPEC`` is None in the generic instance and the format's tuple in one
specialised to a format (its constants fold into the code).
"""

import numpy as np
from numba import prange

from fpsim.accumulation.schedule import PUSH_C
from fpsim.kernels.core import NO_EXPONENT

KERNEL = None
ROUNDED = False
ARITY = 0
WANT_FLAGS = False
STOCHASTIC = False
CHECK = False
SPEC = None


def _bound_per_instance(*args):
    raise NotImplementedError("a kernel bound per instance by numba_backend")


# Kernels the loops call; each instance binds the Numba-compiled ones.
random53 = representable = round_value = op_add = finite_or_zero = is_nonfinite = (
    _bound_per_instance
)
hw_c_exponent = hw_product = hw_c_term = hw_term = hw_finish = hw_result = hw_decode = (
    _bound_per_instance
)
bits_f64 = _bound_per_instance


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


def count_flags(counts, row, flag):
    """Add one rounded addition with flags ``flag`` to ``counts[row]`` (see accumulation.stats)."""
    counts[row, 0] += 1
    counts[row, 1] += (flag & 1) != 0
    counts[row, 2] += (flag & 32) != 0
    counts[row, 3] += (flag & 2) != 0
    counts[row, 4] += (flag & 4) != 0


def accumulate_sequential(A, B, C, out, counts, key, spec_in):
    spec = spec_in if SPEC is None else SPEC
    rows, k_len = A.shape
    n = B.shape[2]
    per_group = rows // B.shape[0]
    stride = 2 * k_len + 1
    for r in prange(rows):
        g = r // per_group
        for j in range(n):
            out[r, j] = C[r, j]
        for k in range(k_len):
            a = float(A[r, k])
            for j in range(n):
                p = a * float(B[g, k, j])
                base = (r * n + j) * stride + 2 * k
                if ROUNDED:
                    rnd = random53(key, base) if STOCHASTIC else 0
                    p, unused = round_value(p, rnd, spec, False)
                value, flag = op_add(
                    out[r, j], p, random53(key, base + 1) if STOCHASTIC else 0, spec, WANT_FLAGS
                )
                out[r, j] = value
                if WANT_FLAGS:
                    count_flags(counts, r, flag)


def accumulate_pairwise(A, B, C, out, counts, key, spec_in, program, depth):
    spec = spec_in if SPEC is None else SPEC
    rows, k_len = A.shape
    n = B.shape[2]
    per_group = rows // B.shape[0]
    stride = 2 * k_len + 1
    for r in prange(rows):
        g = r // per_group
        stack = np.zeros((depth, n))
        top = 0
        adds = 0
        for op in program:
            if op >= 0:
                a = float(A[r, op])
                for j in range(n):
                    rnd = random53(key, (r * n + j) * stride + 2 * op) if STOCHASTIC else 0
                    value, unused = round_value(a * float(B[g, op, j]), rnd, spec, False)
                    stack[top, j] = value
                top += 1
            elif op == PUSH_C:
                for j in range(n):
                    stack[top, j] = C[r, j]
                top += 1
            else:
                # The addition of c comes after the k_len - 1 of the tree: stream index 2K.
                step = 2 * k_len if adds == k_len - 1 else 2 * adds + 1
                for j in range(n):
                    rnd = random53(key, (r * n + j) * stride + step) if STOCHASTIC else 0
                    value, flag = op_add(stack[top - 2, j], stack[top - 1, j], rnd, spec,
                                         WANT_FLAGS)
                    stack[top - 2, j] = value
                    if WANT_FLAGS:
                        count_flags(counts, r, flag)
                top -= 1
                adds += 1
        for j in range(n):
            out[r, j] = stack[0, j]


def accumulate_blocks(A, B, C, out, counts, hw, out_spec, block):
    rows, k_len = A.shape
    n = B.shape[2]
    per_group = rows // B.shape[0]
    for r in prange(rows):
        g = r // per_group
        align = np.empty(n, dtype=np.int64)
        total = np.empty(n, dtype=np.int64)
        naive = np.empty(n)
        bad = np.empty(n, dtype=np.bool_)
        for j in range(n):
            out[r, j] = C[r, j]
        for k0 in range(0, k_len, block):
            k1 = min(k_len, k0 + block)
            for j in range(n):
                c = out[r, j]
                align[j] = hw_c_exponent(finite_or_zero(c), hw)
                naive[j] = c
                bad[j] = is_nonfinite(c)
            for k in range(k0, k1):
                a = float(A[r, k])
                for j in range(n):
                    b = float(B[g, k, j])
                    p, e_top, e_lsb = hw_product(finite_or_zero(a), finite_or_zero(b), hw)
                    align[j] = max(align[j], e_top)
                    naive[j] += a * b
                    bad[j] = bad[j] | is_nonfinite(a) | is_nonfinite(b)
            vanished = 0
            for j in range(n):
                term, lost = hw_c_term(finite_or_zero(out[r, j]), align[j], hw)
                total[j] = term
                vanished += lost
            for k in range(k0, k1):
                a = finite_or_zero(float(A[r, k]))
                for j in range(n):
                    term, lost = hw_term(a, finite_or_zero(float(B[g, k, j])), align[j], hw)
                    total[j] += term
                    vanished += lost
            for j in range(n):
                value, flag = hw_finish(total[j], align[j], hw, out_spec, WANT_FLAGS)
                out[r, j] = hw_result(value, naive[j], bad[j])
                if WANT_FLAGS:
                    count_flags(counts, r, flag)
            if WANT_FLAGS:
                counts[r, 2] += vanished


def input_exponents(x, out, t, emin):
    """Each input's exponent as the block FMA reads it (NO_EXPONENT for zero)."""
    for i in prange(x.size):
        sig, e = hw_decode(x[i], t, emin)
        out[i] = e if sig != 0 else NO_EXPONENT


def accumulate_blocks_binary64(A, B, EA, EB, C, out, hw, out_spec, block):
    """``accumulate_blocks`` for finite inputs, with each product's term computed in
    binary64: a*b is exact there, and so is the scaling by 2**(frac_bits - E); the
    truncated terms are integers whose block sum stays below 2**53 (checked by the
    caller). The accumulator's term and the rounding are the shared block kernels."""
    rows, k_len = A.shape
    n = B.shape[2]
    per_group = rows // B.shape[0]
    frac_bits = hw[4]
    for r in prange(rows):
        g = r // per_group
        align = np.empty(n, dtype=np.int64)
        scale = np.empty(n)
        total = np.empty(n)
        for j in range(n):
            out[r, j] = C[r, j]
        for k0 in range(0, k_len, block):
            k1 = min(k_len, k0 + block)
            for j in range(n):
                align[j] = hw_c_exponent(finite_or_zero(out[r, j]), hw)
            for k in range(k0, k1):
                ea = EA[r, k]
                for j in range(n):
                    align[j] = max(align[j], ea + EB[g, k, j])
            for j in range(n):
                # 2**(frac_bits - E); E is above -900 whenever a term is nonzero.
                scale[j] = bits_f64((frac_bits - max(align[j], -900) + 1023) << 52)
                total[j] = 0.0
            for k in range(k0, k1):
                a = A[r, k]
                for j in range(n):
                    total[j] += np.trunc(a * B[g, k, j] * scale[j])
            for j in range(n):
                c = out[r, j]
                term, lost = hw_c_term(finite_or_zero(c), align[j], hw)
                value, flag = hw_finish(np.int64(total[j]) + term, align[j], hw, out_spec, False)
                # An infinite block result (nearest_even output) stays, as IEEE addition keeps it.
                out[r, j] = value if not is_nonfinite(c) else c
