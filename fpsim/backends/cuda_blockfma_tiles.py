"""Tiled block-FMA products on the GPU: ``fpsim.matmul(a, b, model=...)`` in 32-bit lanes.

The generic loop (``cuda_loops.accumulate_blocks``) runs one thread per output and the
block FMA of ``kernels.blockfma`` in 64-bit integers on the model's parameters read at
run time. This module runs the same blocks, in the same k order, as a tiled kernel
compiled for one model (its parameters are constants), on 32-bit integers, with each
input decoded once per shared-memory tile. It covers the models ``covers`` accepts:
truncation (``align="truncate"``), an fp32 accumulator rounded toward zero (no
saturation), blocks of at most 16 products, and inputs of at most 12 significant bits
whose block sum fits 31 bits; among the presets: ``V100``, ``T4``, ``A100``, ``L40``,
``H100``, ``B200``, ``RTX5090`` (fp16), their bf16 variants, and ``H100_TF32``.

Why it gives ``kernels.blockfma``'s bits. Each input x of a finite call is packed (once,
``prepare``) from ``hw_decode`` itself: ``(S, e)`` with |x| = S * 2**(e - t), S below
2**(t + 1), and its sign; an input whose decode is not exact (not a value of the input
format), or that is not finite, sends the whole call back to the generic loop. Then for
each output and block:

1. E, the block's alignment exponent, is the maximum of c's exponent (``c_exponent``: c's
   ``hw_decode`` exponent, or none for c = 0, and at least ``exp_floor``) and each nonzero
   product's ``ex + ey``. A zero input's exponent here is ``ZERO_E``, so far below every
   other that a zero product never decides E (``hw_product`` gives it ``NO_EXPONENT``).
2. A product's term is ``hw_truncate(Sx*Sy, ex + ey - tx - ty, E, F)`` = floor(Sx*Sy *
   2**(ex + ey - tx - ty - E + F)). With L = F - tx - ty >= 0 and d = E - ex - ey >= 0
   (E is at least ex + ey), that is ``((Sx << L) * Sy) >> d``: the left shift is exact
   and the right one is the floor (``shr``: amounts of 32 or more give 0, as do the
   generic loop's clamped ones, since (Sx << L) * Sy < 2**31). L < 0 moves -L into d. A
   term is added with the sign of x*y (``hw_term``); a zero product's term is 0.
3. c's term is ``hw_c_term``: ``(Sc << (F - 23)) >> (E - ec)`` signed, likewise.
4. The terms of a block are summed in int32: each is below 2**31 / BLOCK (``covers``
   checks ``BLOCK * (2**(tx+1) - 1) * (2**(ty+1) - 1) << L < 2**31``), so no partial sum
   overflows; c's term (below 2**27) joins in binary64, where the sum of two integers
   below 2**32 is exact.
5. ``hw_finish``: the exact sum times 2**(E - F) is exact in binary64 (for a nonzero sum
   E - F is at least -2 * 255 - 33, as ``covers`` keeps the inputs' emin at least -255),
   and one conversion to binary32
   toward zero (``cvt.rz.f32.f64``, subnormals kept) is ``round_mag``'s rounding. An
   overflow (the exact value at least 2**128: toward zero, anything below rounds to
   the largest finite value) gives +-inf (``overflow_inf``; the models covered have it);
   a zero is +0, or keeps a negative sum's sign with ``signed_zero``.
6. The block's result is c for the next block; an infinite c (an overflow) stays as it
   is, as ``hw_result``'s IEEE sum of c and finite products keeps it.

The padding of a ragged tile (rows, columns, or k beyond K) is +0: a zero product changes
neither E nor the sum (steps 1 and 2), so the last block of K, shorter than ``BLOCK``,
runs over the whole tile. The order is the documented one: block after block in k order,
each output from its c; tiling changes only which thread computes an output and when.

Not covered (``accumulate`` returns None, the caller runs the generic loop): stats,
infinite or NaN inputs or c (the generic loop's ``hw_naive`` path), any other model.
"""

from __future__ import annotations

import hashlib
from typing import Any, NamedTuple

import numpy as np
from numba import cuda

from fpsim.backends._instantiate import clone
from fpsim.backends.cuda_contraction import no_contraction
from fpsim.backends.cuda_tiles import MAX_GRID_YZ, SIMULATOR, Tiles, compile_pair, tile_constants
from fpsim.backends.protocol import COUNTERS
from fpsim.formats import format as preset
from fpsim.kernels.core import NO_EXPONENT
from fpsim.kernels.spec import BlockSpec, Spec, make_spec

# The accumulator the kernel rounds to: binary32, toward zero, subnormals, no saturation.
OUT_SPEC = make_spec(preset("fp32"), "toward_zero", True, False, None)
MAX_BLOCK = 16
# The packed input (``prepare``): S in bits 0-11, e + E_BIAS in bits 12-21, the sign in 31.
SIG_BITS = 12
E_BIAS = 512
# A zero input's exponent in the maximum: two of them, plus any real exponent, stay far
# below c's "none" and any product's exponent, with no int32 overflow anywhere.
ZERO_E = -(1 << 20)
C_NONE = -(1 << 22)
TWO_128 = 2.0**128


class Folded(NamedTuple):
    """What the kernel folds in of a model (``covers``)."""

    block: int
    frac_bits: int
    t_a: int
    emin_a: int
    t_b: int
    emin_b: int
    exp_floor: int | None
    signed_zero: int


def covers(hw: BlockSpec, out_spec: Spec, block: int) -> Folded | None:
    """The constants of the tiled kernel for a block FMA, or None if it is not exact for it.

    Examples
    --------
    >>> import fpsim
    >>> from fpsim.backends.cuda_blockfma_tiles import OUT_SPEC, covers
    >>> covers(fpsim.hw.H100.params(), OUT_SPEC, 16)
    Folded(block=16, frac_bits=25, t_a=10, emin_a=-14, t_b=10, emin_b=-14, exp_floor=-133, ...)
    >>> covers(fpsim.hw.H100_FP8.params(), OUT_SPEC, 32) is None
    True
    """
    if hw.round_down != 0 or hw.overflow_inf != 1 or hw.t_out != 23 or hw.emin_out != -126:
        return None
    if out_spec._replace(rbits=OUT_SPEC.rbits) != OUT_SPEC or not 1 <= block <= MAX_BLOCK:
        return None
    f, ta, tb = hw.frac_bits, hw.t_in, hw.t_in_b
    if max(ta, tb) >= SIG_BITS or min(ta, tb) < 0 or not 0 <= f - 23 <= 8:
        return None
    # Every exponent at least -255: a nonzero block's 2**(E - F) is a normal binary64.
    if min(hw.emin_in, hw.emin_in_b) < -255:
        return None
    most = ((1 << (ta + 1)) - 1) * ((1 << (tb + 1)) - 1) << max(f - ta - tb, 0)
    if block * most >= 1 << 31:
        return None
    floor = None if hw.exp_floor <= NO_EXPONENT else int(hw.exp_floor)
    if floor is not None and not -1000 < floor < 1000:
        return None
    return Folded(block, f, ta, hw.emin_in, tb, hw.emin_in_b, floor, int(hw.signed_zero != 0))


# -- bound per compiled kernel -----------------------------------------------------------


def _bound_per_instance(*args):
    raise NotImplementedError("bound per kernel by cuda_blockfma_tiles.kernel")


hw_decode = representable = f64_bits = bits_f64 = f32_bits = shr = f32_rz = _bound_per_instance
lane_add = lane_sub = lane_mul = lane_and = lane_or = lane_lshift = lane_rshift = (
    _bound_per_instance)
T_A = T_B = EMIN_A = EMIN_B = F = LA = LD = LC = FLOOR = HAS_FLOOR = SIGNED_ZERO = 0
BM = BN = BK = TM = TN = TR = TC = THREADS = A_STEP = B_STEP = LOADS_A = LOADS_B = 1
SA = SB = AW = BNL = 1
uBM = uBN = uBK = uTR = uTC = uAW = uA_STEP = uB_STEP = uBNL = ZERO = np.uint64(1)
I32 = np.int32


# -- the input conversion ------------------------------------------------------------------


def pack(x, t, emin):
    """x's packed word: ``hw_decode``'s (S, e) and the sign, and whether the word holds x
    exactly (x finite, S * 2**(e - t) == |x|, e within the field)."""
    u = f64_bits(x)
    finite = (u & 0x7FF0000000000000) != 0x7FF0000000000000
    y = x if finite else 0.0
    s, e = hw_decode(y, t, emin)
    e = min(max(e, -E_BIAS), E_BIAS - 1)
    exact = bits_f64(np.int64(e - t + 1023) << 52) * float(s) == abs(y)
    word = (np.int64(s) | (np.int64(e + E_BIAS) << SIG_BITS)
            | np.int64(np.int64(u < 0) << 31))
    return np.uint32(word), finite & exact & (s < (1 << SIG_BITS))


def prepare(a, b, c, a_out, b_out, c_out, bad):
    """``a_out``, ``b_out``: the packed words of ``a`` and ``b`` (A's and B's formats);
    ``c_out``: ``c`` in binary32. Adds to ``bad[0]`` the elements the kernel cannot take:
    a word that is not exact, a c that is not a finite binary32 value."""
    count = 0
    for i in range(cuda.grid(1), max(a.size, b.size, c.size), cuda.gridsize(1)):
        if i < a.size:
            w, ok = pack(a[i], T_A, EMIN_A)
            a_out[i] = w
            count += 0 if ok else 1
        if i < b.size:
            w, ok = pack(b[i], T_B, EMIN_B)
            b_out[i] = w
            count += 0 if ok else 1
        if i < c.size:
            v = c[i]
            c_out[i] = np.float32(v)
            ok = (np.float64(np.float32(v)) == v) & (abs(v) < TWO_128)
            count += 0 if ok else 1
    if count:
        cuda.atomic.add(bad, 0, count)


# -- the 32-bit steps --------------------------------------------------------------------


def unpack(w):
    """A packed word's exponent (``ZERO_E`` for zero), significand, and sign as +-1."""
    v = I32(w)
    s = lane_and(v, I32((1 << SIG_BITS) - 1))
    e = lane_sub(lane_and(lane_rshift(v, I32(SIG_BITS)), I32(1023)), I32(E_BIAS))
    return (I32(ZERO_E) if s == 0 else e), s, lane_or(lane_rshift(v, I32(31)), I32(1))


def c_exponent32(c):
    """``c_exponent`` of the binary32 c: its exponent (none for 0), at least the floor."""
    u = f32_bits(c)
    ec = lane_sub(max(lane_and(lane_rshift(u, I32(23)), I32(255)), I32(1)), I32(127))
    e = I32(C_NONE) if lane_and(u, I32(0x7FFFFFFF)) == 0 else ec
    return max(e, I32(FLOOR)) if HAS_FLOOR else e


def finish(total, top, c):
    """The block's result: c's term (``hw_c_term``) added to the products' ``total`` and
    the sum times 2**(top - F) rounded toward zero to binary32 (``hw_finish``,
    ``hw_output``)."""
    u = f32_bits(c)
    be = lane_and(lane_rshift(u, I32(23)), I32(255))
    sc = lane_or(lane_and(u, I32(0x7FFFFF)), I32(0x800000) if be != 0 else I32(0))
    ec = lane_sub(max(be, I32(1)), I32(127))
    cut = shr(lane_lshift(sc, I32(LC)), lane_sub(top, ec))
    exact = float(total) + float(-cut if u < 0 else cut)
    scale = bits_f64(np.int64(max(lane_sub(top, I32(F)), I32(-1000)) + 1023) << 52)
    d = abs(exact * scale)
    v = np.float32(np.inf) if d >= TWO_128 else f32_rz(d)
    v = -v if (exact < 0) & ((v != 0) | (SIGNED_ZERO != 0)) else v
    # An infinite c (an earlier block's overflow) stays: its block's IEEE sum (hw_result)
    # adds finite products to it.
    return c if abs(c) == np.float32(np.inf) else v


# -- the kernel --------------------------------------------------------------------------


def tiled(A, B, C, out, m, k_len, n):
    """``out`` (binary64) from the block FMAs of ``C`` (binary32) and the products of ``A``
    (groups * m, k_len) and ``B`` (groups, k_len, n) (packed words), all flat.

    Block (x, y, z) computes the outputs of rows y*BM.. and columns x*BN.. of group z;
    thread t those of rows tr + TR*i (i < TM) and columns tc + TC*j (j < TN). Each tile
    of BK = BLOCK steps of k is one block: loaded into shared memory decoded (A
    transposed and padded against bank conflicts; exponents, significands and signs in
    their own arrays; +0 beyond the matrix or K), then each thread finds its outputs'
    alignment exponents (a pass over the tile), sums their terms (a second pass) and
    rounds each block's result (``finish``). Indices are unsigned.
    """
    g = np.uint64(cuda.blockIdx.z)
    row0 = np.uint64(cuda.blockIdx.y) * uBM
    col0 = np.uint64(cuda.blockIdx.x) * uBN
    t = np.uint64(cuda.threadIdx.x)
    tr = t // uTC
    tc = t - tr * uTC
    a_e = cuda.shared.array(SA, np.int32)
    a_s = cuda.shared.array(SA, np.int32)
    a_g = cuda.shared.array(SA, np.int32)
    b_e = cuda.shared.array(SB, np.int32)
    b_s = cuda.shared.array(SB, np.int32)
    b_g = cuda.shared.array(SB, np.int32)
    acc = cuda.local.array((TM, TN), np.int32)
    top = cuda.local.array((TM, TN), np.int32)
    cv = cuda.local.array((TM, TN), np.float32)
    ea = cuda.local.array(TM, np.int32)
    sa = cuda.local.array(TM, np.int32)
    ga = cuda.local.array(TM, np.int32)
    eb = cuda.local.array(TN, np.int32)
    sb = cuda.local.array(TN, np.int32)
    gb = cuda.local.array(TN, np.int32)
    first = g * m + row0  # the block's first row of A, C and out
    for i in range(TM):
        r = tr + uTR * np.uint64(i)
        for j in range(TN):
            c = col0 + tc + uTC * np.uint64(j)
            cv[i, j] = C[(first + r) * n + c] if (row0 + r < m) & (c < n) else np.float32(0)
    # This thread loads A[rows ar + A_STEP*q, column ak] and B[rows bk + B_STEP*q, column
    # bc] of each tile.
    ar = t // uBK
    ak = t - ar * uBK
    bk = t // uBNL
    bc = t - bk * uBNL
    a_at = (first + ar) * k_len + ak
    b_at = (g * k_len + bk) * n + col0 + bc
    b_col = col0 + bc < n
    none = np.uint32(0)
    for k0 in range(ZERO, k_len, uBK):
        a_k = k0 + ak < k_len
        for q in range(LOADS_A):
            dr = uA_STEP * np.uint64(q)
            ok = a_k & (row0 + ar + dr < m)
            e, s, sg = unpack(A[a_at + dr * k_len] if ok else none)
            at = ak * uAW + ar + dr
            a_e[at] = e
            a_s[at] = lane_lshift(s, I32(LA))
            a_g[at] = sg
        for q in range(LOADS_B):
            dk = uB_STEP * np.uint64(q)
            ok = b_col & (k0 + bk + dk < k_len)
            e, s, sg = unpack(B[b_at + dk * n] if ok else none)
            at = (bk + dk) * uBNL + bc
            b_e[at] = e
            b_s[at] = s
            b_g[at] = sg
        a_at += uBK
        b_at += uBK * n
        cuda.syncthreads()
        # Step 1: the alignment exponent of each output's block.
        for i in range(TM):
            for j in range(TN):
                top[i, j] = c_exponent32(cv[i, j])
        for kk in range(ZERO, uBK):
            for i in range(TM):
                ea[i] = a_e[kk * uAW + tr + uTR * np.uint64(i)]
            for j in range(TN):
                eb[j] = b_e[kk * uBNL + tc + uTC * np.uint64(j)]
            for i in range(TM):
                for j in range(TN):
                    top[i, j] = max(top[i, j], lane_add(ea[i], eb[j]))
        # Steps 2 and 4: the products' terms, summed.
        for i in range(TM):
            for j in range(TN):
                acc[i, j] = I32(0)
        for kk in range(ZERO, uBK):
            for i in range(TM):
                at = kk * uAW + tr + uTR * np.uint64(i)
                ea[i] = a_e[at]
                sa[i] = a_s[at]
                ga[i] = a_g[at]
            for j in range(TN):
                at = kk * uBNL + tc + uTC * np.uint64(j)
                eb[j] = b_e[at]
                sb[j] = b_s[at]
                gb[j] = b_g[at]
            for i in range(TM):
                for j in range(TN):
                    d = lane_sub(lane_sub(lane_add(top[i, j], I32(LD)), ea[i]), eb[j])
                    cut = shr(lane_mul(sa[i], sb[j]), d)
                    acc[i, j] = lane_add(acc[i, j], lane_mul(cut, lane_mul(ga[i], gb[j])))
        # Steps 3, 5 and 6.
        for i in range(TM):
            for j in range(TN):
                cv[i, j] = finish(acc[i, j], top[i, j], cv[i, j])
        cuda.syncthreads()
    for i in range(TM):
        r = tr + uTR * np.uint64(i)
        if row0 + r < m:
            for j in range(TN):
                c = col0 + tc + uTC * np.uint64(j)
                if c < n:
                    out[(first + r) * n + c] = np.float64(cv[i, j])


# -- instances ---------------------------------------------------------------------------

# 256 threads, 4 x 8 outputs each (three registers an output: the sum, the exponent, c),
# one block of k a tile; one block per multiprocessor at most (launch bounds: 255 registers).
DEVICE_TILES = (64, 128, 4, 8)
BLOCKS_PER_SM = 1
# Under the simulator every thread is a Python thread: small tiles, the same code.
SIMULATOR_TILES = (8, 8, 2, 2)
_compiled: dict = {}


def tiles_for(block: int, shape: tuple[int, int, int, int] | None = None) -> Tiles:
    """The tiles of the kernel for blocks of ``block``: ``shape`` (rows, cols,
    thread_rows, thread_cols), by default the device's (or the simulator's)."""
    bm, bn, tm, tn = shape or (SIMULATOR_TILES if SIMULATOR else DEVICE_TILES)
    return Tiles(bm, bn, block, tm, tn)


def _shr_host(x, s):
    """PTX ``shr.u32``: an amount of 32 or more (unsigned) gives 0."""
    s = int(s) & 0xFFFFFFFF
    return np.int32(0) if s >= 32 else np.int32((int(x) & 0xFFFFFFFF) >> s)


def _f32_rz_host(d):
    """binary64 to binary32 toward zero (``cvt.rz.f32.f64``): nearest, then one step
    toward zero where that went past (subnormals and overflow to the largest finite)."""
    with np.errstate(over="ignore"):
        v = np.float32(d)
    if abs(float(v)) > abs(float(d)):
        v = np.nextafter(v, np.float32(0))
    return v


def _device_instructions() -> dict:
    """``shr`` (``shr.u32``: amounts of 32 or more give 0, not LLVM's poison) as inline PTX,
    and libdevice's conversions."""
    from llvmlite import ir
    from numba.core import types
    from numba.cuda import libdevice
    from numba.cuda.extending import intrinsic

    def shr_typer(typingctx, x, s):
        def codegen(context, builder, signature, args):
            i32 = ir.IntType(32)
            asm = ir.InlineAsm(ir.FunctionType(i32, [i32, i32]), "shr.u32 $0, $1, $2;",
                               "=r,r,r")
            return builder.call(asm, [context.cast(builder, v, t, types.int32)
                                      for v, t in zip(args, signature.args, strict=True)])
        return types.int32(x, s), codegen

    return {"shr": intrinsic(shr_typer), "f32_rz": libdevice.double2float_rz,
            "f32_bits": libdevice.float_as_int}


def namespace(folded: Folded, tiles: Tiles, kernels: dict) -> dict:
    """The globals of the kernel's loops for a model's constants and tiles; ``kernels``: the
    cupy backend's instance of the shared kernels (``hw_decode`` and its primitives)."""
    from fpsim.backends import numba_lanes

    space = dict(globals())
    space.update(tile_constants(tiles, 1))
    wrap = (lambda f: f) if SIMULATOR else cuda.jit(device=True, inline="always")
    if SIMULATOR:
        space.update({name: op for name, (op, _) in numba_lanes.OPERATIONS.items()})
        space.update(shr=_shr_host, f32_rz=_f32_rz_host,
                     f32_bits=lambda x: np.float32(x).view(np.int32))
    else:
        space.update(numba_lanes.LANE_PRIMITIVES)
        space.update(_device_instructions())
    la = folded.frac_bits - folded.t_a - folded.t_b
    space.update(
        hw_decode=kernels["hw_decode"], f64_bits=kernels["f64_bits"],
        bits_f64=kernels["bits_f64"],
        T_A=folded.t_a, EMIN_A=folded.emin_a, T_B=folded.t_b, EMIN_B=folded.emin_b,
        F=folded.frac_bits, LA=max(la, 0), LD=max(-la, 0), LC=folded.frac_bits - 23,
        FLOOR=0 if folded.exp_floor is None else folded.exp_floor,
        HAS_FLOOR=folded.exp_floor is not None, SIGNED_ZERO=folded.signed_zero)
    for name in ("pack", "unpack", "c_exponent32", "finish"):
        space[name] = wrap(clone(globals()[name], space))
    return space


def _digest() -> str:
    with open(__file__, "rb") as f:
        return hashlib.sha1(f.read()).hexdigest()[:12]


def kernel(folded: Folded, tiles: Tiles, kernels: dict) -> tuple:
    """(prepare, tiled) for a model's constants and tiles (``kernels``: ``namespace``'s):
    compiled on first launch (inside ``no_contraction``), cached on disk."""
    key = (folded, tiles)
    if key not in _compiled:
        tag = hashlib.sha1(repr(key).encode()).hexdigest()[:12]
        _compiled[key] = compile_pair((prepare, tiled), namespace(folded, tiles, kernels),
                                      f"blockfma_{tag}_{_digest()}", tiles.threads,
                                      BLOCKS_PER_SM)
    return _compiled[key]


class Launch(NamedTuple):
    """One launch of the tiled block-FMA kernel: the model's constants, the tiles and grid,
    and the product's sizes (``m`` rows per group of B)."""

    folded: Folded
    tiles: Tiles
    grid: tuple[int, int, int]
    m: int
    k_len: int
    n: int


def plan(A: Any, B: Any, C: Any, out: Any, hw: BlockSpec, out_spec: Spec, block: int,
         want_stats: bool, shape: tuple[int, int, int, int] | None = None) -> Launch | None:
    """The tiled launch for ``accumulate_blocks``' arguments, from the model and the shapes
    alone (the values are checked on the device), or None.

    Examples
    --------
    >>> import numpy as np, fpsim
    >>> from fpsim.backends.cuda_blockfma_tiles import OUT_SPEC, plan, DEVICE_TILES
    >>> A, B, C = np.ones((300, 40)), np.ones((1, 40, 200)), np.zeros((300, 200))
    >>> plan(A, B, C, C, fpsim.hw.H100.params(), OUT_SPEC, 16, False, DEVICE_TILES).grid
    (2, 5, 1)
    >>> plan(A, B, C, C, fpsim.hw.H100.params(), OUT_SPEC, 16, True) is None  # stats
    True
    """
    if want_stats or A.shape[1] == 0 or out.size == 0:
        return None
    if any(x.dtype != np.float64 for x in (A, B, C, out)):
        return None
    folded = covers(hw, out_spec, block)
    if folded is None:
        return None
    try:
        tiles = tiles_for(block, shape)
        tile_constants(tiles, 1)
    except ValueError:
        return None
    groups, k_len, n = B.shape
    m = A.shape[0] // groups
    grid = (-(-n // tiles.cols), -(-m // tiles.rows), groups)
    if max(grid[1:]) > MAX_GRID_YZ or grid[0] >= 1 << 31:
        return None
    return Launch(folded, tiles, grid, m, k_len, n)


def accumulate(backend: Any, A: Any, B: Any, C: Any, out: Any, hw: BlockSpec, out_spec: Spec,
               block: int, want_stats: bool,
               shape: tuple[int, int, int, int] | None = None) -> np.ndarray | None:
    """``Backend.accumulate_blocks`` of the cupy backend on the tiled kernel, where it applies.

    The arguments are ``protocol.Backend.accumulate_blocks``'; ``backend`` is the cupy
    backend (its array handling and grid). Returns the ``COUNTERS`` (zeros: no stats are
    kept) after writing ``out``, or None, with ``out`` untouched, where the kernel does not
    compute this call: stats, a model it does not cover (``covers``), K = 0, an input that
    is not finite or not a value of its format, a c that is not a finite binary32 value,
    or a grid too large. ``shape``: (rows, cols, thread_rows, thread_cols) of the tiles.
    """
    launch = plan(A, B, C, out, hw, out_spec, block, want_stats, shape)
    if launch is None:
        return None
    prepare_loop, tiled_loop = kernel(launch.folded, launch.tiles, backend.kernels)
    bad = cuda.to_device(np.zeros(1, dtype=np.int64))
    words = [cuda.device_array(A.size, np.uint32), cuda.device_array(B.size, np.uint32),
             cuda.device_array(C.size, np.float32)]
    blocks, threads = backend.grid(max(A.size, B.size, C.size))
    with no_contraction():
        prepare_loop[blocks, threads](*(backend.to_device(x.reshape(-1)) for x in (A, B, C)),
                                      *words, bad)
    if int(bad.copy_to_host()[0]):
        return None
    d_out = backend.output(out)
    with no_contraction():
        tiled_loop[launch.grid, launch.tiles.threads](
            *words, d_out.reshape(-1), np.uint64(launch.m), np.uint64(launch.k_len),
            np.uint64(launch.n))
    backend.deliver(d_out, out)
    return np.zeros(len(COUNTERS), dtype=np.int64)
