"""Tiled products on the GPU: sequential accumulation where the GPU's own arithmetic is exact.

The generic loops of ``cuda_loops`` run one thread per output element and round every
addition in software (``op_add``). Two accumulators need no software rounding at all
when the inputs allow it, and run here as tiled kernels:

- ``binary32``: the accumulator is IEEE binary32 (``nearest_even``, subnormals, no
  saturation) and every product ``A[r, k] * B[g, k, j]`` is exact in binary32. Then
  ``s <- round(s + a*b)`` is one binary32 multiply (exact) and one binary32 add
  (IEEE 754-2019 5.4.1: correctly rounded), compiled with contraction off
  (``cuda_contraction``): ``mul.rn.f32`` and ``add.rn.f32``, never an FMA. With
  ``rounded`` products the product's rounding to binary32 changes nothing (it is exact).
- ``binary16_fma`` and ``binary16_rounded``: the accumulator is IEEE binary16
  (``nearest_even``, subnormals, no saturation) and every input is a binary16 value.
  Then ``s <- round(s + a*b)`` is the binary16 fused multiply-add (one rounding of
  a*b + s: CUDA's ``__hfma``); with ``rounded`` products, a binary16 multiply then a
  binary16 add (``__hmul_rn``, ``__hadd_rn``: the ``.rn`` keeps ptxas from fusing them).
  Each runs on two outputs at once, as ``fma.rn.f16x2`` (or ``mul.rn.f16x2`` and
  ``add.rn.f16x2``): each half of the pair is rounded on its own (PTX ISA, half-precision
  instructions), so that a pair is two independent IEEE operations.

When the exact products are ``binary32``'s: every input is 0, inf, NaN, or has at most
12 significant bits and a magnitude in [2**-62, 2**63). A product of two such finite
values has at most 24 significant bits and a magnitude in [2**-124, 2**126), inside
binary32's normal range: exact. Every binary16 value qualifies (11 bits, 2**-24 to
65504), and so does every bfloat16 or TF32 value in that range. Inputs are checked on
the device while they are converted to the kernel's type; one that does not qualify
sends the whole call back to the generic loop (``accumulate`` returns None).

Infinities and NaN follow IEEE arithmetic in both (as ``op_add`` does); every NaN
result is stored as the canonical NaN the generic loop gives (``kernels.core.NAN``).

The order of additions is the documented one (docs/accumulation.md): each output is
``s = C[r, j]`` followed by one step per k, k = 0, 1, ..., K - 1. Tiling changes which
thread does what and when, never that order: a thread keeps ``thread_rows x thread_cols``
outputs (``Tiles``; register blocking, binary16 outputs in pairs: two adjacent columns in
32 bits, computed by one ``f16x2`` instruction) and walks k through shared-memory tiles of
A and B. Terms beyond K (padding of the last tile) are never added: a thread stops at K;
rows and columns beyond the matrix are computed on zeros and never stored.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any, NamedTuple

import numpy as np
from numba import cuda

from fpsim.backends._instantiate import clone
from fpsim.backends.cuda_contraction import KERNEL_OPTIONS, no_contraction
from fpsim.backends.protocol import COUNTERS
from fpsim.formats import format as preset
from fpsim.kernels.spec import Spec, make_spec

SIMULATOR = bool(getattr(getattr(cuda, "config", None), "ENABLE_CUDASIM", False))

# The accumulators the tiled kernels compute (any number of random bits: none are drawn).
BINARY32_SPEC = make_spec(preset("fp32"), "nearest_even", True, False, None)
BINARY16_SPEC = make_spec(preset("fp16"), "nearest_even", True, False, None)
KERNELS = ("binary32", "binary16_fma", "binary16_rounded")


class Tiles(NamedTuple):
    """A tiled kernel's shape: a block computes ``rows x cols`` outputs, walking k in steps
    of ``depth``; each thread computes ``thread_rows x thread_cols`` of them."""

    rows: int
    cols: int
    depth: int
    thread_rows: int
    thread_cols: int

    @property
    def threads(self) -> int:
        return (self.rows // self.thread_rows) * (self.cols // self.thread_cols)


# Each kernel's tiles on the device: 256 threads, k in steps of 16, 64 accumulator
# registers per thread (8 x 8 binary32 outputs, or 8 x 16 binary16 outputs in pairs), and
# per step of k 16 shared-memory loads, then a binary32 multiply and add per output, or a
# paired binary16 FMA (or paired multiply and add) per two outputs; two blocks per
# multiprocessor (launch bounds: at most 128 registers).
DEVICE_TILES = {"binary32": Tiles(128, 128, 16, 8, 8),
                "binary16_fma": Tiles(128, 256, 16, 8, 16),
                "binary16_rounded": Tiles(128, 256, 16, 8, 16)}
BLOCKS_PER_SM = 2
# Under the simulator every thread is a Python thread: small tiles, the same code.
SIMULATOR_TILES = Tiles(8, 8, 4, 2, 2)
# The grid's y and z extents (row tiles, groups of B) are at most this (CUDA's limit).
MAX_GRID_YZ = 65535

# binary32's test on an input's binary64 encoding (see the module's doc).
LOW_41 = (1 << 41) - 1  # 52 - 11 fraction bits: at most 12 significant bits
FACTOR_EXPONENTS = (1023 - 62, 1023 + 62)  # biased exponents of [2**-62, 2**63)
MAG = 0x7FFF_FFFF_FFFF_FFFF


def _bound_per_instance(*args):
    raise NotImplementedError("bound per kernel by cuda_tiles.kernel")


# Bound per compiled kernel (``kernel``). A lane is what one step computes on: one binary32
# value, or a pair of binary16 values (two adjacent columns) in 32 bits. ELEMENT: the type
# of the converted inputs (float32, or binary16 encodings as uint16); LANE: the lanes' type.
LANES = 1
ELEMENT: Any = np.float32
LANE: Any = np.float32
STEP = ACCEPT = STORE = SPREAD = PAIR = VALUE = f64_bits = _bound_per_instance
BM = BN = BK = TM = TN = TR = TC = THREADS = A_STEP = B_STEP = LOADS_A = LOADS_B = 1
SA = SB = AW = BNL = 1
uBM = uBN = uBK = uTR = uTC = uAW = uA_STEP = uB_STEP = uBNL = uLANES = ZERO = np.uint64(1)
NAN = math.nan


# -- binary32 lanes ------------------------------------------------------------------------


def step_binary32(s, a, b):
    """round(s + a*b) in binary32, the product exact: a multiply and an add, not fused."""
    return s + a * b


def store_binary32(v):
    return np.float32(v)


def spread_binary32(x):
    return x


def pair_binary32(lo, hi):
    return lo


def value_binary32(lane, h):
    return np.float64(lane)


# -- binary16 pairs ------------------------------------------------------------------------


def step_binary16_fma(s, a, b):
    """round(a*b + s) in binary16 in each half, one rounding (IEEE fusedMultiplyAdd)."""
    return FMA16X2(a, b, s)


def step_binary16_rounded(s, a, b):
    """round(s + round(a*b)) in binary16 in each half."""
    return ADD16X2(s, MUL16X2(a, b))


def store_binary16(v):
    """The binary16 encoding of ``v`` rounded to binary16."""
    return HALF_BITS(np.float16(v))


def spread_binary16(x):
    """The pair (x, x) of the encoding ``x``."""
    return np.uint32(x) * np.uint32(0x10001)


def pair_binary16(lo, hi):
    """The pair (lo, hi) of two encodings, lo in the low half."""
    return np.uint32(lo) | (np.uint32(hi) << np.uint32(16))


def value_binary16(lane, h):
    """Half ``h`` (0: low) of a pair, as binary64."""
    return HALF_F64(np.uint16((lane >> np.uint32(16 * h)) & np.uint32(0xFFFF)))


FMA16X2 = MUL16X2 = ADD16X2 = HALF_BITS = HALF_F64 = _bound_per_instance


def fma16_host(a, b, c):
    """Binary16 round(a*b + c) on the CPU, for the simulator: the exact product plus c,
    made round-to-odd in binary64 from its TwoSum error, then rounded to binary16 (odd
    rounding to 53 >= 11 + 2 bits, then nearest-even to 11, is nearest-even to 11:
    Boldo and Melquiond, IEEE TC 2008)."""
    p = float(a) * float(b)  # exact: 11 + 11 significant bits
    z = float(c)
    s = p + z
    if math.isfinite(p) and math.isfinite(z):
        bb = s - p
        err = (p - (s - bb)) + (z - bb)
        if err != 0 and not np.float64(s).view(np.int64) & 1:
            s = float(np.nextafter(s, math.inf if err > 0 else -math.inf))
    return np.float16(s)


def mul16_host(a, b):
    """Binary16 round(a*b) on the CPU: the binary64 product is exact."""
    return np.float16(float(a) * float(b))


def add16_host(a, b):
    """Binary16 round(a + b) on the CPU: the binary64 sum of two binary16 values is exact."""
    return np.float16(float(a) + float(b))


def _split_pair(x):
    x = int(x)
    return (np.uint16(x & 0xFFFF).view(np.float16), np.uint16(x >> 16).view(np.float16))


def _join_pair(lo, hi):
    return np.uint32(int(lo.view(np.uint16)) | int(hi.view(np.uint16)) << 16)


def _pairwise_host(op):
    """``op`` on binary16 values, on each half of pairs: the simulator's f16x2 instruction."""
    def on_pairs(*pairs):
        halves = [_split_pair(p) for p in pairs]
        return _join_pair(op(*(h[0] for h in halves)), op(*(h[1] for h in halves)))
    return on_pairs


HOST_HALF = {
    "FMA16X2": _pairwise_host(fma16_host), "MUL16X2": _pairwise_host(mul16_host),
    "ADD16X2": _pairwise_host(add16_host),
    "HALF_BITS": lambda h: np.float16(h).view(np.uint16),
    "HALF_F64": lambda u: np.float64(np.uint16(u).view(np.float16)),
}


def _half_instructions() -> dict:
    """``fma.rn.f16x2``, ``mul.rn.f16x2`` and ``add.rn.f16x2`` on pairs in 32 bits, and the
    conversions between numba-cuda's binary16 (16 bits), its encoding and binary64, as
    Numba intrinsics (inline PTX)."""
    from llvmlite import ir
    from numba.core import types
    from numba.cuda.extending import intrinsic

    def asm(op: str, result, operands, constraints):
        def codegen(context, builder, signature, args):
            names = ", ".join(f"${i}" for i in range(len(operands) + 1))
            call = ir.InlineAsm(ir.FunctionType(result, operands), f"{op} {names};",
                                constraints)
            return builder.call(call, list(args))
        return codegen

    i32, i16, f64 = ir.IntType(32), ir.IntType(16), ir.DoubleType()
    u32 = types.uint32

    def three(op):
        def typer(typingctx, a, b, c):
            return u32(u32, u32, u32), asm(op, i32, [i32] * 3, "=r,r,r,r")
        return intrinsic(typer)

    def two(op):
        def typer(typingctx, a, b):
            return u32(u32, u32), asm(op, i32, [i32] * 2, "=r,r,r")
        return intrinsic(typer)

    def half_bits(typingctx, h):
        return types.uint16(types.float16), lambda context, builder, sig, args: args[0]

    def half_f64(typingctx, u):
        return types.float64(types.uint16), asm("cvt.f64.f16", f64, [i16], "=d,h")

    return {"FMA16X2": three("fma.rn.f16x2"), "MUL16X2": two("mul.rn.f16x2"),
            "ADD16X2": two("add.rn.f16x2"), "HALF_BITS": intrinsic(half_bits),
            "HALF_F64": intrinsic(half_f64)}


# -- the input tests -------------------------------------------------------------------


def accept_binary32(v, factor):
    """Whether ``v`` may enter the binary32 kernel: as a factor (``factor``), one whose
    products are exact in binary32 (see the module's doc); as c, a binary32 value or NaN."""
    if factor:
        u = f64_bits(v)
        e = (u >> 52) & 0x7FF
        return (((u & LOW_41) == 0) & (e >= FACTOR_EXPONENTS[0]) & (e <= FACTOR_EXPONENTS[1])
                | ((u & MAG) == 0) | (e == 0x7FF))
    return (v != v) | (np.float64(np.float32(v)) == v)


def accept_binary16(v, factor):
    """Whether ``v`` may enter the binary16 kernels: a binary16 value (or NaN)."""
    return (v != v) | (np.float64(np.float16(v)) == v)


# -- the kernels -------------------------------------------------------------------------


def prepare(a, b, c, a_out, b_out, c_out, bad):
    """``a_out``, ``b_out``, ``c_out``: the elements of ``a``, ``b`` (factors) and ``c``
    as the kernel's ``ELEMENT``; adds to ``bad[0]`` the elements the kernel cannot take
    (``ACCEPT``). One launch for the three."""
    count = 0
    for i in range(cuda.grid(1), max(a.size, b.size, c.size), cuda.gridsize(1)):
        if i < a.size:
            v = a[i]
            a_out[i] = STORE(v)
            count += 0 if ACCEPT(v, True) else 1
        if i < b.size:
            v = b[i]
            b_out[i] = STORE(v)
            count += 0 if ACCEPT(v, True) else 1
        if i < c.size:
            v = c[i]
            c_out[i] = STORE(v)
            count += 0 if ACCEPT(v, False) else 1
    if count:
        cuda.atomic.add(bad, 0, count)


def tiled(A, B, C, out, m, k_len, n):
    """``out`` (binary64) from the sequential accumulation of ``C`` and the products of
    ``A`` (groups * m, k_len) and ``B`` (groups, k_len, n), all flat, the inputs as
    ``ELEMENT``: every output from its c, then one ``STEP`` per k in k order.

    Block (x, y, z) computes the outputs of rows y*BM.. and columns x*BN.. of group z;
    thread t those of rows tr + TR*i (i < TM) and of the lanes tc + TC*j (j < TN) of
    LANES columns each. Each tile of BK steps is loaded into shared memory (A transposed,
    padded against bank conflicts, each element spread over a lane; B by lanes) by all
    threads, then each thread runs its steps on it; the last tile stops at k_len.
    Indices are unsigned: no negative-index wraparound in the address arithmetic.
    """
    g = np.uint64(cuda.blockIdx.z)
    row0 = np.uint64(cuda.blockIdx.y) * uBM
    col0 = np.uint64(cuda.blockIdx.x) * uBN
    t = np.uint64(cuda.threadIdx.x)
    tr = t // uTC
    tc = t - tr * uTC
    a_tile = cuda.shared.array(SA, LANE)
    b_tile = cuda.shared.array(SB, LANE)
    acc = cuda.local.array((TM, TN), LANE)
    a = cuda.local.array(TM, LANE)
    b = cuda.local.array(TN, LANE)
    none = ELEMENT(0)
    first = g * m + row0  # the block's first row of A, C and out
    for i in range(TM):
        r = tr + uTR * np.uint64(i)
        for j in range(TN):
            c = col0 + (tc + uTC * np.uint64(j)) * uLANES
            at = (first + r) * n + c
            row = row0 + r < m
            lo = C[at] if row & (c < n) else none
            hi = C[at + 1] if (LANES == 2) & row & (c + 1 < n) else none
            acc[i, j] = PAIR(lo, hi)
    # This thread loads A[rows ar + A_STEP*q, column ak] and the lanes of B's rows
    # bk + B_STEP*q, lane bc, of each tile.
    ar = t // uBK
    ak = t - ar * uBK
    bk = t // uBNL
    bc = t - bk * uBNL
    a_at = (first + ar) * k_len + ak
    b_at = (g * k_len + bk) * n + col0 + bc * uLANES
    b_col = col0 + bc * uLANES < n
    b_next = col0 + bc * uLANES + 1 < n
    for k0 in range(ZERO, k_len, uBK):
        a_k = k0 + ak < k_len
        for q in range(LOADS_A):
            dr = uA_STEP * np.uint64(q)
            ok = a_k & (row0 + ar + dr < m)
            a_tile[ak * uAW + ar + dr] = SPREAD(A[a_at + dr * k_len] if ok else none)
        for q in range(LOADS_B):
            dk = uB_STEP * np.uint64(q)
            ok = k0 + bk + dk < k_len
            at = b_at + dk * n
            lo = B[at] if ok & b_col else none
            hi = B[at + 1] if (LANES == 2) & ok & b_next else none
            b_tile[(bk + dk) * uBNL + bc] = PAIR(lo, hi)
        a_at += uBK
        b_at += uBK * n
        cuda.syncthreads()
        for kk in range(ZERO, min(uBK, k_len - k0)):
            for i in range(TM):
                a[i] = a_tile[kk * uAW + tr + uTR * np.uint64(i)]
            for j in range(TN):
                b[j] = b_tile[kk * uBNL + tc + uTC * np.uint64(j)]
            for i in range(TM):
                for j in range(TN):
                    acc[i, j] = STEP(acc[i, j], a[i], b[j])
        cuda.syncthreads()
    for i in range(TM):
        r = tr + uTR * np.uint64(i)
        if row0 + r < m:
            for j in range(TN):
                for h in range(LANES):
                    c = col0 + (tc + uTC * np.uint64(j)) * uLANES + np.uint64(h)
                    if c < n:
                        v = VALUE(acc[i, j], h)
                        out[(first + r) * n + c] = v if v == v else NAN


_STEPS = {"binary32": step_binary32, "binary16_fma": step_binary16_fma,
          "binary16_rounded": step_binary16_rounded}
_compiled: dict = {}


def _digest() -> str:
    with open(__file__, "rb") as f:
        return hashlib.sha1(f.read()).hexdigest()[:12]


def tile_constants(tiles: Tiles, lanes: int = 1) -> dict:
    """The constants ``tiled`` reads, for ``tiles`` and lanes of ``lanes`` columns;
    ValueError if the shape does not divide as the loads need."""
    bm, bn, bk, tm, tn = tiles
    if min(tiles) < 1 or bm % tm or bn % tn or tn % lanes:
        raise ValueError(f"tiles {tiles}: a block's tile must be whole threads' tiles, "
                         f"each of whole lanes of {lanes} columns")
    threads, bnl = tiles.threads, bn // lanes
    if threads % bk or bm % (threads // bk) or threads % bnl or bk % (threads // bnl):
        raise ValueError(f"tiles {tiles}: {threads} threads cannot load the tiles evenly")
    u = np.uint64
    return dict(
        BM=bm, BN=bn, BK=bk, TM=tm, TN=tn // lanes, TR=bm // tm, TC=bn // tn,
        THREADS=threads, A_STEP=threads // bk, B_STEP=threads // bnl, BNL=bnl, LANES=lanes,
        LOADS_A=bm // (threads // bk), LOADS_B=bk // (threads // bnl),
        # A's tile is stored transposed, each row one element longer than BM: the threads
        # that store one row of A write to different banks.
        AW=bm + 1, SA=bk * (bm + 1), SB=bk * bnl,
        uBM=u(bm), uBN=u(bn), uBK=u(bk), uTR=u(bm // tm), uTC=u(bn // tn), uAW=u(bm + 1),
        uA_STEP=u(threads // bk), uB_STEP=u(threads // bnl), uBNL=u(bnl), uLANES=u(lanes),
        ZERO=u(0),
    )


def _f64_bits_host(x):
    return np.float64(x).view(np.int64)


def f64_bits_primitive():
    """A binary64 value's encoding as an int64: libdevice's, or NumPy's under the simulator
    (whose libdevice functions are stubs)."""
    if SIMULATOR:
        return _f64_bits_host
    from numba.cuda import libdevice

    return libdevice.double_as_longlong


def namespace(name: str, tiles: Tiles) -> dict:
    """The globals of kernel ``name``'s two loops: its types, step, input test, tiles."""
    if name not in _STEPS:
        raise ValueError(f"unknown tiled kernel {name!r}; known: {', '.join(KERNELS)}")
    half = name != "binary32"
    space = dict(globals())
    space.update(tile_constants(tiles, 2 if half else 1))
    wrap = (lambda f: f) if SIMULATOR else cuda.jit(device=True, inline="always")
    if half:
        space.update(HOST_HALF if SIMULATOR else _half_instructions())
    kind = "binary16" if half else "binary32"
    space.update(ELEMENT=np.uint16 if half else np.float32, LANE=np.uint32 if half else np.float32,
                 f64_bits=f64_bits_primitive())
    for slot, func in (("STEP", _STEPS[name]), ("ACCEPT", space[f"accept_{kind}"]),
                       ("STORE", space[f"store_{kind}"]), ("SPREAD", space[f"spread_{kind}"]),
                       ("PAIR", space[f"pair_{kind}"]), ("VALUE", space[f"value_{kind}"])):
        space[slot] = wrap(clone(func, space))
    return space


def kernel(name: str, tiles: Tiles) -> tuple:
    """(prepare, tiled) of kernel ``name`` (one of ``KERNELS``) for ``tiles``: compiled on
    first launch (inside ``no_contraction``), cached on disk."""
    key = (name, tiles)
    if key not in _compiled:
        tag = hashlib.sha1(repr(key).encode()).hexdigest()[:12]
        _compiled[key] = compile_pair((prepare, tiled), namespace(name, tiles),
                                      f"{name}_{tag}_{_digest()}", tiles.threads,
                                      BLOCKS_PER_SM)
    return _compiled[key]


def compile_pair(templates: tuple, space: dict, label: str, threads: int,
                 blocks_per_sm: int) -> tuple:
    """A (prepare, tiled) pair of templates cloned into ``space`` (named after ``label``)
    and compiled for CUDA with the kernels' options, the tiled one with its launch bounds
    (``threads`` a block, ``blocks_per_sm``); cached on disk, except in the simulator."""
    options: dict = {} if SIMULATOR else dict(KERNEL_OPTIONS, cache=True)
    loops = []
    for template, bounds in zip(templates, (None, (threads, blocks_per_sm)), strict=True):
        func = clone(template, space, f"{template.__name__}_{label}")
        if bounds is not None and not SIMULATOR:
            options = dict(options, launch_bounds=bounds)
        loops.append(cuda.jit(func, **options))
    return tuple(loops)


def choose(spec: Spec, *, key: int | None, order: str, rounded: bool,
           want_stats: bool) -> str | None:
    """The tiled kernel for an accumulation's options (one of ``KERNELS``), or None.

    Examples
    --------
    >>> from fpsim.backends.cuda_tiles import BINARY16_SPEC, choose
    >>> choose(BINARY16_SPEC, key=None, order="sequential", rounded=True, want_stats=False)
    'binary16_rounded'
    >>> choose(BINARY16_SPEC, key=None, order="pairwise", rounded=True, want_stats=False)
    """
    if order != "sequential" or key is not None or want_stats:
        return None
    plain = spec._replace(rbits=BINARY32_SPEC.rbits)
    if plain == BINARY32_SPEC:
        return "binary32"
    if plain == BINARY16_SPEC:
        return "binary16_rounded" if rounded else "binary16_fma"
    return None


class Launch(NamedTuple):
    """One tiled kernel's launch: the kernel, its tiles and grid, and the product's sizes
    (``m`` rows per group of B)."""

    name: str
    tiles: Tiles
    grid: tuple[int, int, int]
    m: int
    k_len: int
    n: int


def plan(spec: Spec, A: Any, B: Any, out: Any, *, key: int | None, order: str, rounded: bool,
         want_stats: bool, tiles: Tiles | None = None) -> Launch | None:
    """The tiled launch for an accumulation, from its options and shapes alone (the values
    are checked on the device, ``prepare_inputs``), or None (see ``accumulate``).

    Examples
    --------
    >>> import numpy as np
    >>> from fpsim.backends.cuda_tiles import BINARY32_SPEC, DEVICE_TILES, plan
    >>> A, B, out = np.ones((300, 5)), np.ones((1, 5, 200)), np.empty((300, 200))
    >>> plan(BINARY32_SPEC, A, B, out, key=None, order="sequential", rounded=False,
    ...      want_stats=False, tiles=DEVICE_TILES["binary32"]).grid
    (2, 3, 1)
    """
    name = choose(spec, key=key, order=order, rounded=rounded, want_stats=want_stats)
    if name is None or A.shape[1] == 0 or out.size == 0:
        return None
    if any(x.dtype != np.float64 for x in (A, B, out)):
        return None
    tiles = tiles or (SIMULATOR_TILES if SIMULATOR else DEVICE_TILES[name])
    groups, k_len, n = B.shape
    m = A.shape[0] // groups
    grid = (-(-n // tiles.cols), -(-m // tiles.rows), groups)
    if max(grid[1:]) > MAX_GRID_YZ or grid[0] >= 1 << 31:
        return None
    return Launch(name, tiles, grid, m, k_len, n)


def prepare_inputs(backend: Any, launch: Launch, A: Any, B: Any, C: Any) -> list[Any] | None:
    """A, B and C, flat, on the device in the kernel's type; None if one holds a value the
    kernel cannot take (one read of a count from the device)."""
    prepare_loop = kernel(launch.name, launch.tiles)[0]
    dtype = np.float32 if launch.name == "binary32" else np.uint16
    bad = cuda.to_device(np.zeros(1, dtype=np.int64))
    flat = [cuda.device_array(x.size, dtype) for x in (A, B, C)]
    blocks, threads = backend.grid(max(A.size, B.size, C.size))
    with no_contraction():
        prepare_loop[blocks, threads](*(backend.to_device(x.reshape(-1)) for x in (A, B, C)),
                                      *flat, bad)
    return None if int(bad.copy_to_host()[0]) else flat


def run_tiled(launch: Launch, inputs: list[Any], out: Any) -> None:
    """The tiled kernel on ``prepare_inputs``' arrays, into the flat binary64 device ``out``."""
    tiled_loop = kernel(launch.name, launch.tiles)[1]
    with no_contraction():
        tiled_loop[launch.grid, launch.tiles.threads](
            *inputs, out, np.uint64(launch.m), np.uint64(launch.k_len), np.uint64(launch.n))


def accumulate(backend: Any, A: Any, B: Any, C: Any, out: Any, spec: Spec, *,
               key: int | None, order: str, rounded: bool, has_c: bool,
               want_stats: bool, tiles: Tiles | None = None) -> np.ndarray | None:
    """``Backend.accumulate`` of the cupy backend on a tiled kernel, where one applies.

    The arguments are ``protocol.Backend.accumulate``'s (``has_c`` changes nothing in
    sequential order); ``backend`` is the cupy backend (its array handling and grid).
    Returns the ``COUNTERS`` (zeros: no stats are kept) after writing ``out``, or None,
    with ``out`` untouched, when no tiled kernel computes this call: another order,
    stochastic rounding, stats, another accumulator (``choose``), K = 0, an input the
    kernel cannot take, or a grid too large. ``tiles``: the kernel's tile shape (default:
    the device's, or under the simulator a small one).

    Examples
    --------
    >>> import numpy as np
    >>> from fpsim.backends.cuda_tiles import BINARY32_SPEC, accumulate
    >>> A, B, C, out = np.ones((1, 1)), np.ones((1, 1, 1)), np.zeros((1, 1)), np.empty((1, 1))
    >>> accumulate(None, A, B, C, out, BINARY32_SPEC, key=1, order="sequential",
    ...            rounded=False, has_c=False, want_stats=False) is None  # stochastic
    True
    """
    launch = plan(spec, A, B, out, key=key, order=order, rounded=rounded,
                  want_stats=want_stats, tiles=tiles)
    if launch is None or C.dtype != np.float64:
        return None
    inputs = prepare_inputs(backend, launch, A, B, C)
    if inputs is None:
        return None
    d_out = backend.output(out)
    run_tiled(launch, inputs, d_out.reshape(-1))
    backend.deliver(d_out, out)
    return np.zeros(len(COUNTERS), dtype=np.int64)


def generic_sequential(backend: Any, A: Any, B: Any, C: Any, out: Any, spec: Spec,
                       rounded: bool) -> np.ndarray:
    """The same accumulation on the cupy backend's generic loop (one thread per output,
    every addition ``op_add``): what the tiled kernels must equal, bit for bit."""
    from fpsim.backends import cuda_loops

    per_group = A.shape[0] // max(B.shape[0], 1)
    return backend.accumulation(cuda_loops.accumulate_sequential, A, B, C, out, np.uint64(0),
                                spec, per_group, rounded, False, False)
