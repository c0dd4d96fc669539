# mypy: ignore-errors
# (As pyproject.toml exempts cuda_loops and cupy_backend: Numba compiles the kernels below
# from Python functions on scalars; mypy cannot check what Numba infers.)
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
  Then ``s <- round(s + a*b)`` is the binary16 fused multiply-add ``fma.rn.f16`` (one
  rounding of a*b + s: CUDA's ``__hfma``); with ``rounded`` products it is
  ``mul.rn.f16`` then ``add.rn.f16`` (``__hmul_rn``, ``__hadd_rn``: the ``.rn`` keeps
  ptxas from fusing them).

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
thread does what and when, never that order: a thread keeps ``TILE_ROWS x TILE_COLS``
outputs (register blocking) and walks k through shared-memory tiles of A and B. Terms
beyond K (padding of the last tile) are never added: a thread stops at K; rows and
columns beyond the matrix are computed on zeros and never stored.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any, NamedTuple

import numpy as np
from numba import cuda

from fpsim.backends._instantiate import clone
from fpsim.backends.cuda_contraction import no_contraction
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


# 256 threads of 8 x 8 outputs over 128 x 128 tiles, k in steps of 16: 64 accumulators
# per thread, 16 shared-memory loads for 64 (binary16) or 128 (binary32) arithmetic
# instructions per step; two blocks per multiprocessor (launch bounds: 128 registers).
DEVICE_TILES = Tiles(128, 128, 16, 8, 8)
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


# Bound per compiled kernel (``kernel``): the element type, the accumulation step, the
# test of an input, the binary64 bit cast and the tile constants.
TYPE: Any = np.float32
STEP = ACCEPT = f64_bits = _bound_per_instance
BM = BN = BK = TM = TN = TR = TC = THREADS = A_STEP = B_STEP = LOADS_A = LOADS_B = 1
SA = SB = AW = 1
uBM = uBN = uBK = uTR = uTC = uAW = uA_STEP = uB_STEP = ZERO = np.uint64(1)
NAN = math.nan


# -- the steps -------------------------------------------------------------------------


def step_binary32(s, a, b):
    """round(s + a*b) in binary32, the product exact: a multiply and an add, not fused."""
    return s + a * b


def step_binary16_fma(s, a, b):
    """round(a*b + s) in binary16, one rounding (IEEE fusedMultiplyAdd)."""
    return FMA16(a, b, s)


def step_binary16_rounded(s, a, b):
    """round(s + round(a*b)) in binary16."""
    return ADD16(s, MUL16(a, b))


FMA16 = MUL16 = ADD16 = _bound_per_instance


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


def _half_instructions() -> dict:
    """``fma.rn.f16``, ``mul.rn.f16`` and ``add.rn.f16`` as Numba intrinsics (numba-cuda
    holds a binary16 value as 16 bits)."""
    from llvmlite import ir
    from numba.core import types
    from numba.cuda.extending import intrinsic

    def instruction(op: str, arity: int):
        def codegen(context, builder, signature, args):
            i16 = ir.IntType(16)
            operands = ", ".join(f"${i}" for i in range(arity + 1))
            asm = ir.InlineAsm(ir.FunctionType(i16, [i16] * arity), f"{op} {operands};",
                               "=h" + ",h" * arity)
            return builder.call(asm, list(args))

        f16 = types.float16
        if arity == 3:
            def three(typingctx, a, b, c):
                return f16(f16, f16, f16), codegen
            return intrinsic(three)

        def two(typingctx, a, b):
            return f16(f16, f16), codegen
        return intrinsic(two)

    return {"FMA16": instruction("fma.rn.f16", 3), "MUL16": instruction("mul.rn.f16", 2),
            "ADD16": instruction("add.rn.f16", 2)}


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


def prepare(x, out, bad, factor):
    """``out[i]``: ``x[i]`` in the kernel's type; adds to ``bad[0]`` the elements the
    kernel cannot take (``ACCEPT``)."""
    count = 0
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        v = x[i]
        out[i] = TYPE(v)
        count += 0 if ACCEPT(v, factor) else 1
    if count:
        cuda.atomic.add(bad, 0, count)


def tiled(A, B, C, out, m, k_len, n):
    """``out`` (binary64) from the sequential accumulation of ``C`` (the kernel's type)
    and the products of ``A`` (groups * m, k_len) and ``B`` (groups, k_len, n), all flat:
    every output from its c, then one ``STEP`` per k in k order.

    Block (x, y, z) computes the outputs of rows y*BM.. and columns x*BN.. of group z;
    thread t those of rows tr + TR*i and columns tc + TC*j (i < TM, j < TN). Each tile of
    BK steps is loaded into shared memory (A transposed, padded against bank conflicts)
    by all threads, then each thread runs its steps on it; the last tile stops at k_len.
    Indices are unsigned: no negative-index wraparound in the address arithmetic.
    """
    g = np.uint64(cuda.blockIdx.z)
    row0 = np.uint64(cuda.blockIdx.y) * uBM
    col0 = np.uint64(cuda.blockIdx.x) * uBN
    t = np.uint64(cuda.threadIdx.x)
    tr = t // uTC
    tc = t - tr * uTC
    a_tile = cuda.shared.array(SA, TYPE)
    b_tile = cuda.shared.array(SB, TYPE)
    acc = cuda.local.array((TM, TN), TYPE)
    a = cuda.local.array(TM, TYPE)
    b = cuda.local.array(TN, TYPE)
    first = g * m + row0  # the block's first row of A, C and out
    for i in range(TM):
        r = tr + uTR * np.uint64(i)
        for j in range(TN):
            c = col0 + tc + uTC * np.uint64(j)
            acc[i, j] = C[(first + r) * n + c] if (row0 + r < m) & (c < n) else TYPE(0)
    # This thread loads A[rows ar + A_STEP*q, column ak] and B[rows bk + B_STEP*q, column bc]
    # of each tile.
    ar = t // uBK
    ak = t - ar * uBK
    bk = t // uBN
    bc = t - bk * uBN
    a_at = (first + ar) * k_len + ak
    b_at = (g * k_len + bk) * n + col0 + bc
    b_col = col0 + bc < n
    for k0 in range(ZERO, k_len, uBK):
        a_k = k0 + ak < k_len
        for q in range(LOADS_A):
            dr = uA_STEP * np.uint64(q)
            ok = a_k & (row0 + ar + dr < m)
            a_tile[ak * uAW + ar + dr] = A[a_at + dr * k_len] if ok else TYPE(0)
        for q in range(LOADS_B):
            dk = uB_STEP * np.uint64(q)
            ok = b_col & (k0 + bk + dk < k_len)
            b_tile[(bk + dk) * uBN + bc] = B[b_at + dk * n] if ok else TYPE(0)
        a_at += uBK
        b_at += uBK * n
        cuda.syncthreads()
        for kk in range(ZERO, min(uBK, k_len - k0)):
            for i in range(TM):
                a[i] = a_tile[kk * uAW + tr + uTR * np.uint64(i)]
            for j in range(TN):
                b[j] = b_tile[kk * uBN + tc + uTC * np.uint64(j)]
            for i in range(TM):
                for j in range(TN):
                    acc[i, j] = STEP(acc[i, j], a[i], b[j])
        cuda.syncthreads()
    for i in range(TM):
        r = tr + uTR * np.uint64(i)
        if row0 + r < m:
            for j in range(TN):
                c = col0 + tc + uTC * np.uint64(j)
                if c < n:
                    v = np.float64(acc[i, j])
                    out[(first + r) * n + c] = v if v == v else NAN


_STEPS = {"binary32": step_binary32, "binary16_fma": step_binary16_fma,
          "binary16_rounded": step_binary16_rounded}
_compiled: dict = {}


def _digest() -> str:
    with open(__file__, "rb") as f:
        return hashlib.sha1(f.read()).hexdigest()[:12]


def tile_constants(tiles: Tiles) -> dict:
    """The constants ``tiled`` reads, for ``tiles``; ValueError if the shape does not
    divide as the loads need."""
    bm, bn, bk, tm, tn = tiles
    if min(tiles) < 1 or bm % tm or bn % tn:
        raise ValueError(f"tiles {tiles}: a block's tile must be whole threads' tiles")
    threads = tiles.threads
    if threads % bk or bm % (threads // bk) or threads % bn or bk % (threads // bn):
        raise ValueError(f"tiles {tiles}: {threads} threads cannot load the tiles evenly")
    u = np.uint64
    return dict(
        BM=bm, BN=bn, BK=bk, TM=tm, TN=tn, TR=bm // tm, TC=bn // tn, THREADS=threads,
        A_STEP=threads // bk, B_STEP=threads // bn,
        LOADS_A=bm // (threads // bk), LOADS_B=bk // (threads // bn),
        # A's tile is stored transposed, each row one element longer than BM: the threads
        # that store one row of A write to different banks.
        AW=bm + 1, SA=bk * (bm + 1), SB=bk * bn,
        uBM=u(bm), uBN=u(bn), uBK=u(bk), uTR=u(bm // tm), uTC=u(bn // tn), uAW=u(bm + 1),
        uA_STEP=u(threads // bk), uB_STEP=u(threads // bn), ZERO=u(0),
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
    """The globals of kernel ``name``'s two loops: its type, step, input test, tiles."""
    if name not in _STEPS:
        raise ValueError(f"unknown tiled kernel {name!r}; known: {', '.join(KERNELS)}")
    half = name != "binary32"
    space = dict(globals())
    space.update(tile_constants(tiles))
    wrap = (lambda f: f) if SIMULATOR else cuda.jit(device=True, inline="always")
    if half:
        space.update({"FMA16": fma16_host, "MUL16": mul16_host, "ADD16": add16_host}
                     if SIMULATOR else _half_instructions())
    space.update(TYPE=np.float16 if half else np.float32, f64_bits=f64_bits_primitive())
    space["STEP"] = wrap(clone(_STEPS[name], space))
    space["ACCEPT"] = wrap(clone(accept_binary16 if half else accept_binary32, space))
    return space


def kernel(name: str, tiles: Tiles) -> tuple:
    """(prepare, tiled) of kernel ``name`` (one of ``KERNELS``) for ``tiles``: compiled on
    first launch (inside ``no_contraction``), cached on disk."""
    key = (name, tiles)
    if key not in _compiled:
        space = namespace(name, tiles)
        tag = hashlib.sha1(repr(key).encode()).hexdigest()[:12]
        options: dict = {} if SIMULATOR else {"cache": True}
        loops = []
        for template, bounds in ((prepare, None), (tiled, (tiles.threads, BLOCKS_PER_SM))):
            func = clone(template, space, f"{template.__name__}_{name}_{tag}_{_digest()}")
            if bounds is not None and not SIMULATOR:
                options = dict(options, launch_bounds=bounds)
            loops.append(cuda.jit(**options)(func))
        _compiled[key] = tuple(loops)
    return _compiled[key]


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
    name = choose(spec, key=key, order=order, rounded=rounded, want_stats=want_stats)
    if name is None or A.shape[1] == 0 or out.size == 0:
        return None
    if any(x.dtype != np.float64 for x in (A, B, C, out)):
        return None
    tiles = tiles or (SIMULATOR_TILES if SIMULATOR else DEVICE_TILES)
    groups, k_len, n = B.shape
    m = A.shape[0] // groups
    grid = (-(-n // tiles.cols), -(-m // tiles.rows), groups)
    if max(grid[1:]) > MAX_GRID_YZ or grid[0] >= 1 << 31:
        return None
    prepare_loop, tiled_loop = kernel(name, tiles)
    dtype = np.float16 if name != "binary32" else np.float32
    bad = cuda.to_device(np.zeros(1, dtype=np.int64))
    flat = []
    with no_contraction():
        for x, factor in ((A, True), (B, True), (C, False)):
            converted = cuda.device_array(x.size, dtype)
            blocks, threads = backend.grid(x.size)
            prepare_loop[blocks, threads](backend.to_device(x.reshape(-1)), converted, bad,
                                          factor)
            flat.append(converted)
        if int(bad.copy_to_host()[0]):
            return None
        d_out = backend.output(out)
        tiled_loop[grid, tiles.threads](*flat, d_out.reshape(-1), np.uint64(m),
                                        np.uint64(k_len), np.uint64(n))
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
