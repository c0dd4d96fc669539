"""The loops of the Numba backend, instantiated once per kernel and variant.

``KERNEL``, ``ARITY``, ``WANT_FLAGS``, ``STOCHASTIC``, ``CHECK``, ``ROUNDED``,
``SPEC``, ``LOAD`` (the conversion of a one-operand kernel's input to its carrier's
type: ``float``, or ``np.float32`` for the binary32 rounding), ``STORE`` (a result
as the output array holds it: itself, or the bits of a 16-bit format) and the kernels
(``random53``, ``representable``, ``round_value``, ``op_add``) are bound per
instance (see ``numba_backend``),
so that Numba prunes the branches that do not apply and LLVM vectorises the
rest. ``SPEC`` is None in the generic instance and the format's tuple in one
specialised to a format (its constants fold into the code).
"""

import numpy as np
from numba import prange

from fpsim.backends.schedule import PUSH_C
from fpsim.flags import ABSORBED, INEXACT, OVERFLOW, UNDERFLOW

KERNEL = None
ROUNDED = False
HW = OUT_SPEC = WORK = ACC = EXP = None
BLOCK = TILE_ROWS = TILE_COLS = WORK_BITS = 0
# The exponent the block loops give a zero input: a product with it is below any other.
ZERO_EXPONENT = -1024
ARITY = 0
WANT_FLAGS = False
STOCHASTIC = False
CHECK = False
SPEC = None
LOAD = float


def _bound_per_instance(*args):
    raise NotImplementedError("a kernel bound per instance by numba_backend")


# Kernels the loops call; each instance binds the Numba-compiled ones.
random53 = representable = round_value = op_add = finite_or_zero = is_nonfinite = (
    _bound_per_instance
)
hw_c_exponent = hw_product = hw_c_term = hw_term = hw_finish = hw_result = hw_decode = (
    _bound_per_instance
)
hw_naive = _bound_per_instance
hw_output = _bound_per_instance
bits_f32 = wide_vectors = STORE = _bound_per_instance
bits_f64 = f64_bits = _bound_per_instance


def loop(x, y, z, out, flags, key, spec_in):
    spec = spec_in if SPEC is None else SPEC
    bad = 0
    for i in prange(out.size):
        rnd = random53(key, i) if STOCHASTIC else 0
        if ARITY == 1:
            value, flag = KERNEL(LOAD(x[i]), rnd, spec, WANT_FLAGS)
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
        out[i] = STORE(value)
        if WANT_FLAGS:
            flags[i] = flag
        bad += 0 if ok else 1
    return bad


def first_unrepresentable(x, spec):
    for i in range(x.size):
        if not representable(float(x[i]), spec):
            return i
    return -1


def count_unrepresentable(x, spec):
    """How many elements of ``x`` are not values of the format (no early exit: it
    vectorises and runs in parallel)."""
    bad = 0
    for i in prange(x.size):
        bad += 0 if representable(float(x[i]), spec) else 1
    return bad


def first_not_float32(x, out):
    """``out``: the float64 ``x`` rounded to float32. Returns the index of the first
    element that float32 does not hold, or ``x.size``: one pass, serial (an operand
    check beside a BLAS call, whose threads may still be spinning), no early exit (it
    vectorises). Held means the same encoding back, so that a CPU reading subnormals
    as zero cannot hide one; every NaN is held."""
    n = x.size
    first = n
    for i in range(n):
        v = np.float32(x[i])
        out[i] = v
        held = (f64_bits(np.float64(v)) == f64_bits(x[i])) | (x[i] != x[i])
        first = min(first, n if held else i)
    return first


def count_flags(counts, row, flag):
    """Add one rounded addition with flags ``flag`` to ``counts[row]`` (protocol.COUNTERS)."""
    counts[row, 0] += 1
    counts[row, 1] += (flag & INEXACT) != 0
    counts[row, 2] += (flag & ABSORBED) != 0
    counts[row, 3] += (flag & UNDERFLOW) != 0
    counts[row, 4] += (flag & OVERFLOW) != 0


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
                    share, odd = hw_naive(a, b, hw)
                    naive[j] += share
                    bad[j] = bad[j] | odd
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
                value, flag = hw_finish(total[j], align[j], finite_or_zero(out[r, j]), hw,
                                        out_spec, WANT_FLAGS)
                out[r, j] = hw_result(value, naive[j], bad[j])
                if WANT_FLAGS:
                    count_flags(counts, r, flag)
            if WANT_FLAGS:
                counts[r, 2] += vanished


def input_exponents(x, out, t, emin, zero):
    """Each input's exponent as the block FMA reads it (``zero`` for zero); returns how
    many inputs are not finite."""
    bad = 0
    for i in prange(x.size):
        sig, e = hw_decode(x[i], t, emin)
        out[i] = e if sig != 0 else zero
        bad += 0 if np.isfinite(x[i]) else 1
    return bad


def accumulate_blocks_tiled(A, B, EA, EB, C, out):
    """``accumulate_blocks`` for finite inputs whose products are exact in ``WORK``
    (binary32 or binary64), bound with ``HW``, ``OUT_SPEC``, ``BLOCK``, ``ACC``, ``EXP``
    and the tile shape.

    ``EA``, ``EB``: the inputs' exponents (``EXP``, zero's is far below any product's).
    Each product's term is trunc(a * b * 2**(frac_bits - E)): a*b and the scaling are
    exact in ``WORK``, and the conversion to the integer type ``ACC`` cuts toward zero;
    the caller checks that a block's terms cannot overflow ``ACC``. The block's sum
    with c's term is an integer below 2**53, so ``sum * 2**(E - frac_bits)`` is exact
    in binary64 and ``round_value`` rounds it once to the output. ``A`` and ``B`` are
    padded with zeros to whole blocks (a zero product changes no block). Work runs
    over tiles of rows and columns so that a block of B stays in cache for many rows.
    """
    groups, k_len, n = B.shape
    per_group = A.shape[0] // groups
    row_tiles = (per_group + TILE_ROWS - 1) // TILE_ROWS
    col_tiles = (n + TILE_COLS - 1) // TILE_COLS
    frac_bits = HW.frac_bits
    lowest = 2 * HW.emin_in  # a nonzero product's exponent is at least 2 * emin
    for tile in prange(groups * row_tiles * col_tiles):
        wide_vectors()
        g = tile // (row_tiles * col_tiles)
        r0 = g * per_group + (tile // col_tiles) % row_tiles * TILE_ROWS
        r1 = min(r0 + TILE_ROWS, (g + 1) * per_group)
        # Unsigned column indices: no negative-index fix-up, so the column loops vectorise.
        j0 = np.uint64(tile % col_tiles * TILE_COLS)
        j1 = np.uint64(min(n, tile % col_tiles * TILE_COLS + TILE_COLS))
        c_align = np.empty((TILE_ROWS, TILE_COLS), dtype=WORK)
        align = np.empty(TILE_COLS, dtype=WORK)
        top = np.empty(TILE_COLS, dtype=EXP)
        total = np.empty(TILE_COLS, dtype=ACC)
        for r in range(r0, r1):
            for j in range(j0, j1):
                out[r, j] = C[r, j]
                c_align[r - r0, j - j0] = hw_c_exponent(finite_or_zero(C[r, j]), HW)
        for k0 in range(0, k_len, BLOCK):
            for r in range(r0, r1):
                ea = EA[r, k0:k0 + BLOCK]
                a = A[r, k0:k0 + BLOCK]
                c_row = c_align[r - r0]
                for j in range(j0, j1):
                    # The largest product exponent, in EXP (narrow lanes); four running
                    # maxima make a shorter dependency chain than one.
                    e0 = EXP(2 * ZERO_EXPONENT)
                    e1 = e0
                    e2 = e0
                    e3 = e0
                    for kk in range(0, BLOCK - 3, 4):
                        e0 = max(e0, EXP(ea[kk] + EB[g, k0 + kk, j]))
                        e1 = max(e1, EXP(ea[kk + 1] + EB[g, k0 + kk + 1, j]))
                        e2 = max(e2, EXP(ea[kk + 2] + EB[g, k0 + kk + 2, j]))
                        e3 = max(e3, EXP(ea[kk + 3] + EB[g, k0 + kk + 3, j]))
                    for kk in range(BLOCK - BLOCK % 4, BLOCK):
                        e0 = max(e0, EXP(ea[kk] + EB[g, k0 + kk, j]))
                    top[j - j0] = max(max(e0, e1), max(e2, e3))
                for j in range(j0, j1):
                    # A block of zero products leaves its top far below c's exponent or the floor.
                    e = max(c_row[j - j0], WORK(top[j - j0]))
                    q = frac_bits - max(e, lowest)  # 2**q, from its encoding
                    if WORK_BITS == 32:
                        scale = bits_f32(np.int32(np.int32(q + 127) << 23))
                    else:
                        scale = bits_f64(np.int64(q + 1023) << 52)
                    t = ACC(0)
                    for kk in range(BLOCK):
                        t += ACC(a[kk] * B[g, k0 + kk, j] * scale)
                    total[j - j0] = t
                    align[j - j0] = e
                for j in range(j0, j1):
                    c = out[r, j]
                    # E is at least c's exponent, so c's term is exact before its cut.
                    e = max(np.int64(align[j - j0]), -900)
                    c_term = np.trunc(finite_or_zero(c) * bits_f64((frac_bits - e + 1023) << 52))
                    exact = (float(total[j - j0]) + c_term) * bits_f64((e - frac_bits + 1023) << 52)
                    value, flags = round_value(exact, 0, OUT_SPEC, True)
                    value = hw_output(abs(value), flags, exact < 0, HW)
                    # An infinite result (nearest_even output) stays, as IEEE addition keeps it.
                    value = value if not is_nonfinite(c) else c
                    out[r, j] = value
                    c_row[j - j0] = hw_c_exponent(finite_or_zero(value), HW)

