"""Binary16 on the CPU's own half-precision arithmetic: sequential accumulation, and
rounding float32 to binary16.

The generic loops round every addition in software. When the accumulator is
IEEE binary16 with ``nearest_even`` and subnormals, and every input is a
binary16 value, each step ``acc <- round(acc + a*b)`` is one IEEE operation
that the CPU performs exactly:

- ``native``: a binary16 fused multiply-add (x86 AVX512-FP16), which rounds
  a*b + acc once (IEEE 754-2019 5.4.1);
- ``f16c``: binary32 arithmetic plus the binary32-to-binary16 conversion. The
  product of two binary16 values is exact in binary32 (22 <= 24 bits); the sum
  is made round-to-odd in binary32 from its TwoSum error, and round-to-odd to
  p + 2 or more bits followed by nearest-even to p bits is nearest-even to p
  bits (Boldo and Melquiond, "Emulation of FMA and correctly rounded sums:
  proved algorithms using rounding to odd", IEEE TC 2008).

Which one runs depends on the CPU features Numba compiles for; before each
call a few probes check that the compiled step rounds as IEEE binary16 does
(ties to even, no double rounding, subnormals neither flushed nor treated as
zero), so a changed floating-point environment falls back to the generic
loops instead of giving wrong bits. Rows whose result is not finite are
recomputed by the generic loops (they own the IEEE special cases and flags).

Rounding float32 to binary16 with ``nearest_even`` and subnormals, without flags or
saturation, is the CPU's float32-to-binary16 conversion (IEEE 754-2019 5.4.2,
``formatOf`` conversion) and its exact way back: no software rounding at all.
``toward_zero``, ``up`` and ``down`` are that conversion and one correction (a
directed rounding is the nearest one or its neighbour). Probes guard each mode the
same way (``round_sound``).
"""

from __future__ import annotations

import platform
import re

import numba
import numpy as np
from llvmlite import ir
from numba import prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from fpsim.backends._instantiate import clone
from fpsim.backends.numba_bitcast import bitcast
from fpsim.backends.numba_vectors import wide_vectors

STEP = LOAD = OPERAND = TO_HALF = FROM_HALF = None
TILE_ROWS = 4
TILE_COLS = 512
# Conversions of arrays this large or larger run in parallel.
PARALLEL_CONVERSION = 1 << 16


@intrinsic
def _half_fma(typingctx, a, b, c):
    def codegen(context, builder, signature, args):
        half = ir.HalfType()
        fma = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(half, [half] * 3), "llvm.fma.f16")
        value = builder.call(fma, [builder.bitcast(v, half) for v in args])
        return builder.bitcast(value, ir.IntType(16))

    return types.uint16(types.uint16, types.uint16, types.uint16), codegen


@intrinsic
def _half_f32(typingctx, h):
    def codegen(context, builder, signature, args):
        return builder.fpext(builder.bitcast(args[0], ir.HalfType()), ir.FloatType())

    return types.float32(types.uint16), codegen


@intrinsic
def _f32_half(typingctx, x):
    """binary32 to binary16 bits, rounded by the floating-point environment (nearest-even)."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(builder.fptrunc(args[0], ir.HalfType()), ir.IntType(16))

    return types.uint16(types.float32), codegen


_f32_bits = bitcast(types.float32, types.int32)
_bits_f32 = bitcast(types.int32, types.float32)


def _fma_native(a, b, c):
    return _half_fma(a, b, c)


def _fma_f16c(a, b, c):
    """round(a*b + c) as binary16 bits; a and b are binary16 values in binary32, c bits."""
    x = a * b  # exact: 11 + 11 significant bits
    y = _half_f32(c)
    s = x + y
    # TwoSum (Knuth): the exact error of the binary32 sum.
    xv = s - y
    yv = s - xv
    e = (x - xv) + (y - yv)
    sb = _f32_bits(s)
    # Round to odd: an inexact sum becomes the odd one of the two binary32 values around the
    # exact sum, which are s and its neighbour toward zero when e and s differ in sign
    # (encodings are sign-magnitude: that neighbour's is sb - 1), else s and the one above.
    odd = (sb + ((sb ^ _f32_bits(e)) >> 31)) | np.int32(1)
    return _f32_half(_bits_f32(odd if e != 0 else sb))


def _rounded_f16c(a, b, c):
    """round(round(a*b) + c): the product is exact in binary32 and converts once; the
    binary32 sum of two binary16 values rounds to binary16 as the exact sum would,
    since 24 >= 2*11 + 2 (Figueroa, "When is double rounding innocuous?", 1995)."""
    return _f32_half(_half_f32(_f32_half(a * b)) + _half_f32(c))


def _loop(A, B, C, out):
    """out[r] = C[r] + sum_k A[r, k] * B[g, k], each step rounded to binary16 (as bits).

    Work runs over tiles of ``TILE_ROWS`` rows and ``TILE_COLS`` columns, so that each
    stretch of B read from memory serves several rows; every element still adds its
    products in the order k = 0, 1, ... (the order is the result).
    """
    rows, k_len = A.shape
    n = B.shape[2]
    per_group = rows // B.shape[0]
    row_tiles = (per_group + TILE_ROWS - 1) // TILE_ROWS
    col_tiles = (n + TILE_COLS - 1) // TILE_COLS
    for tile in prange(B.shape[0] * row_tiles * col_tiles):
        wide_vectors()
        g = tile // (row_tiles * col_tiles)
        r0 = g * per_group + (tile // col_tiles) % row_tiles * TILE_ROWS
        height = min(TILE_ROWS, (g + 1) * per_group - r0)
        j0 = tile % col_tiles * TILE_COLS
        width = min(TILE_COLS, n - j0)
        acc = np.empty((TILE_ROWS, TILE_COLS), dtype=np.uint16)
        b = np.empty(TILE_COLS, dtype=OPERAND)
        for i in range(height):
            acc[i, :width] = C[r0 + i, j0:j0 + width]
        for k in range(k_len):
            # The stretch of B is loaded once for the tile's rows.
            b_k = B[g, k, j0:j0 + width]
            for j in range(width):
                b[j] = LOAD(b_k[j])
            for i in range(height):
                a = LOAD(A[r0 + i, k])
                row = acc[i]
                for j in range(width):
                    row[j] = STEP(a, b[j], row[j])
        for i in range(height):
            out[r0 + i, j0:j0 + width] = acc[i, :width]


def _to_half(x, out):
    """Binary16 bits of the float64 values ``x``; False if one is not a finite binary16 value."""
    bad = 0
    for i in prange(x.size):
        h = _f32_half(np.float32(x[i]))
        out[i] = h
        bad += ((h & 0x7C00) == 0x7C00) | (np.float64(_half_f32(h)) != x[i])
    return bad == 0


def _from_half(h, out):
    for i in prange(h.size):
        out[i] = _half_f32(h[i])


def _round(x, out):
    """``out``: the float32 values ``x`` rounded to binary16 by ``TO_HALF`` (as float32, or
    as binary16 bits: ``FROM_HALF``)."""
    for i in prange(x.size):
        out[i] = FROM_HALF(TO_HALF(x[i]))


def _bits(h):
    return h


_same_bits = numba.njit(inline="always")(_bits)


def _toward_zero(x):
    """x rounded to binary16 toward zero, as bits: the nearest rounding, or its neighbour
    toward zero where that went away from zero (a directed rounding is the nearest one
    or its neighbour on the side of x; encodings are sign-magnitude, so the neighbour
    toward zero is one less, infinity's being the largest finite value)."""
    h = _f32_half(x)
    return np.uint16(h - np.int32(1)) if abs(_half_f32(h)) > abs(x) else h


def _up(x):
    """x rounded to binary16 toward +inf, as bits (see ``_toward_zero``): one unit up in
    magnitude from a positive result below x, one down from a negative one."""
    h = _f32_half(x)
    step = np.int32(1) if h < 0x8000 else np.int32(-1)
    return np.uint16(h + step) if _half_f32(h) < x else h


def _down(x):
    """x rounded to binary16 toward -inf, as bits (see ``_up``)."""
    h = _f32_half(x)
    step = np.int32(-1) if h < 0x8000 else np.int32(1)
    return np.uint16(h + step) if _half_f32(h) > x else h


# The directed roundings, IEEE 754-2019 4.3.2, overflow included: each derived from the
# CPU's nearest-even conversion, so that the loops vectorise as that one does.
DIRECTED = {"down": _down, "up": _up, "toward_zero": _toward_zero}


def _rounded_native(a, b, c):
    # round(a*b) is round(a*b + (-0)): -0 leaves every sum, signed zeros included.
    return _half_fma(_half_fma(a, b, np.uint16(0x8000)), np.uint16(0x3C00), c)


# kind: (the step round(a*b + c), the rounded products' step round(round(a*b) + c), the
# operands a and b as the steps take them: binary16 bits, or binary32)
_STEPS = {"native": (_fma_native, _rounded_native, (_same_bits, np.uint16)),
          "f16c": (_fma_f16c, _rounded_f16c, (_half_f32, np.float32))}

# (a, b, c, IEEE binary16 round(a*b + c)) as bits; each fails one way of getting it wrong.
PROBES = (
    (0x3C01, 0x3BFF, 0x0009, 0x3C01),  # (1+2**-10)(1-2**-11) + 9*2**-24: double rounding
    (0x3C00, 0x3C00, 0x1000, 0x3C00),  # 1 + 2**-11: a tie goes to even, not up or away
    (0x3C00, 0x3C00, 0x1002, 0x3C01),  # 1 + 2**-11(1+2**-9): above the tie, not toward zero
    (0xBC00, 0x3C00, 0x9002, 0xBC01),  # the same, negative: not toward +inf
    (0x0C00, 0x0C00, 0x0000, 0x0001),  # 2**-12 * 2**-12 = 2**-24: subnormal result not flushed
    (0x0001, 0x3C00, 0x0000, 0x0001),  # 2**-24 * 1: subnormal input not read as zero
    (0x8000, 0x3C00, 0x8000, 0x8000),  # -0 + -0 = -0
)


# (binary32 input, its IEEE binary16 rounding, as binary32) as bits, for each mode.
ROUND_PROBES = {
    "nearest_even": (
        (0x3F801000, 0x3F800000),  # 1 + 2**-11: a tie goes to even (down)
        (0x3F803000, 0x3F804000),  # 1 + 3 * 2**-11: a tie goes to even (up)
        (0x3F801001, 0x3F802000),  # just above a tie: up, not toward zero
        (0xBF801001, 0xBF802000),  # the same, negative: not toward +inf
        (0x33800000, 0x33800000),  # 2**-24, the least subnormal: not flushed
        (0x33000000, 0x00000000),  # 2**-25, a tie between 0 and 2**-24: to even (0)
        (0x33400000, 0x33800000),  # 3 * 2**-26: above that tie, up to 2**-24
        (0x80000001, 0x80000000),  # a binary32 subnormal: -0 (treated as zero or not)
        (0x477FEFFF, 0x477FE000),  # just below 65520: the largest binary16 value, 65504
        (0x477FF000, 0x7F800000),  # 65520, the overflow threshold: infinity
        (0xFF800000, 0xFF800000),  # -inf
    ),
    "toward_zero": (
        (0x3F801FFF, 0x3F800000),  # just below 1 + 2**-10: truncated
        (0xBF801FFF, 0xBF800000),  # the same, negative
        (0x337FFFFF, 0x00000000),  # just below 2**-24: zero, not flushed later
        (0x33BFFFFF, 0x33800000),  # just below 1.5 * 2**-24: the least subnormal
        (0x477FFFFF, 0x477FE000),  # beyond 65504: 65504, no overflow to infinity
        (0xFF7FFFFF, 0xC77FE000),  # the most negative binary32: -65504
        (0x7F800000, 0x7F800000),  # inf stays inf
    ),
    "up": (
        (0x3F800001, 0x3F802000),  # just above 1: up
        (0xBF801FFF, 0xBF800000),  # negative: toward zero
        (0x00000001, 0x33800000),  # the least binary32 subnormal: 2**-24, not zero
        (0x80000001, 0x80000000),  # its negative: -0
        (0x477FE001, 0x7F800000),  # just above 65504: infinity
        (0xFF7FFFFF, 0xC77FE000),  # the most negative binary32: -65504
    ),
    "down": (
        (0x3F800001, 0x3F800000),  # just above 1: down
        (0xBF800001, 0xBF802000),  # negative: away from zero
        (0x00000001, 0x00000000),  # the least binary32 subnormal: +0
        (0x80000001, 0xB3800000),  # its negative: -2**-24, not -0
        (0x477FE001, 0x477FE000),  # just above 65504: 65504
        (0xC77FE001, 0xFF800000),  # just below -65504: -infinity
    ),
}


# Two functions for LLVM to compile as Numba would: what instructions they become says
# which binary16 arithmetic the target offers.
_PROBE_IR = r"""
declare half @llvm.fma.f16(half, half, half)
define half @fma16(half %a, half %b, half %c) {
  %r = call half @llvm.fma.f16(half %a, half %b, half %c)
  ret half %r
}
define half @trunc16(float %x) {
  %r = fptrunc float %x to half
  ret half %r
}
"""


def compiled_for() -> str | None:
    """The half-precision arithmetic of the CPU Numba compiles for, if any.

    Asked of LLVM with Numba's own target (``NUMBA_CPU_NAME`` and ``NUMBA_CPU_FEATURES``
    or the host's, as Numba combines them): a CPU name alone implies its features.
    """
    machine = platform.machine().lower()
    if machine in ("aarch64", "arm64"):
        return "f16c"
    if machine not in ("x86_64", "amd64"):
        return None
    from llvmlite import binding

    binding.initialize_native_target()
    binding.initialize_native_asmprinter()
    cpu = numba.config.CPU_NAME or binding.get_host_cpu_name()
    features = numba.config.CPU_FEATURES
    if features is None:
        features = binding.get_host_cpu_features().flatten()
    target = binding.Target.from_default_triple().create_target_machine(
        cpu=cpu, features=features, opt=2)
    asm = target.emit_assembly(binding.parse_assembly(_PROBE_IR))
    fma16, trunc16 = asm.split("trunc16:", 1)
    if re.search(r"\bvfmadd\d*sh\b", fma16.split("fma16:", 1)[-1]):
        return "native"
    return "f16c" if "vcvtps2ph" in trunc16 else None


class HalfAccumulation:
    """The compiled loops of one kind (``"native"`` or ``"f16c"``)."""

    def __init__(self, kind: str, digest: str,
                 tile: tuple[int, int] = (TILE_ROWS, TILE_COLS)) -> None:
        self.kind = kind
        self.digest = digest
        self.tile = tile
        self._loops: dict = {}
        self._conversions = {
            parallel: tuple(numba.njit(parallel=parallel, cache=True)(
                clone(f, globals(), f"{f.__name__}_{int(parallel)}"))
                for f in (_to_half, _from_half))
            for parallel in (False, True)
        }

    def convert(self, size: int):
        """(to_half, from_half) for arrays of ``size`` elements: parallel for large ones."""
        return self._conversions[size >= PARALLEL_CONVERSION]

    def loop(self, rounded: bool, parallel: bool):
        key = (rounded, parallel)
        if key not in self._loops:
            namespace = dict(globals())
            load, operand = _STEPS[self.kind][2]
            namespace.update(STEP=numba.njit(inline="always")(_STEPS[self.kind][rounded]),
                             LOAD=load, OPERAND=operand,
                             TILE_ROWS=self.tile[0], TILE_COLS=self.tile[1])
            rows, cols = self.tile
            name = (f"half_{self.kind}_{int(rounded)}_{int(parallel)}_{rows}x{cols}_"
                    f"{self.digest}")
            self._loops[key] = numba.njit(parallel=parallel, cache=True)(
                clone(_loop, namespace, name))
        return self._loops[key]

    def halves(self, x: np.ndarray) -> np.ndarray | None:
        """``x`` as binary16 bits, or None if it holds a value that is not finite binary16."""
        bits = np.empty(x.shape, dtype=np.uint16)
        return bits if self.convert(x.size)[0](x.reshape(-1), bits.reshape(-1)) else None

    def sound(self) -> bool:
        """The probes: the compiled step rounds as IEEE binary16 does, here and now."""
        p = np.array(PROBES, dtype=np.uint16)
        got = np.empty((len(p), 1), dtype=np.uint16)
        self.loop(False, False)(p[:, :1], p[:, 1].reshape(-1, 1, 1), p[:, 2:3], got)
        return bool(np.array_equal(got[:, 0], p[:, 3]))

    def modes(self) -> tuple[str, ...]:
        """The rounding modes the conversion offers: nearest_even, and the directed ones
        derived from it."""
        return ("nearest_even", *DIRECTED)

    def rounder(self, mode: str, parallel: bool, bits: bool = False):
        """The loop rounding float32 to binary16 in ``mode`` (one of ``modes()``), into
        float32 or (``bits``) binary16 encodings."""
        key = ("round", mode, parallel, bits)
        if key not in self._loops:
            namespace = dict(globals(), TO_HALF=_f32_half if mode == "nearest_even"
                             else numba.njit(inline="always")(DIRECTED[mode]),
                             FROM_HALF=_same_bits if bits else _half_f32)
            name = f"round_{mode}_{int(parallel)}{'_bits' if bits else ''}_{self.digest}"
            self._loops[key] = numba.njit(parallel=parallel, cache=True)(
                clone(_round, namespace, name))
        return self._loops[key]

    def round_sound(self, mode: str, parallel: bool = False, bits: bool = False) -> bool:
        """The probes of ``mode``: the compiled conversion (the loop ``rounder(mode,
        parallel, bits)`` a call runs: no other loop is loaded for the probes) rounds as IEEE
        does, here and now."""
        p = np.array(ROUND_PROBES[mode], dtype=np.uint32)
        want = p[:, 1].view(np.float32)
        got = np.empty(len(p), dtype=np.uint16 if bits else np.float32)
        self.rounder(mode, parallel, bits)(p[:, 0].view(np.float32), got)
        if bits:  # binary16 encodings: the expected values are binary16 values
            return bool(np.array_equal(got, want.astype(np.float16).view(np.uint16)))
        return bool(np.array_equal(got.view(np.uint32), p[:, 1]))

    def round(self, x: np.ndarray, out: np.ndarray, mode: str = "nearest_even") -> bool:
        """``out`` (float32, or uint16 for binary16 encodings): the float32 ``x`` rounded to
        binary16 in ``mode``; False (and ``out`` untouched) when the floating-point
        environment does not allow this path."""
        parallel, bits = x.size >= PARALLEL_CONVERSION, out.dtype == np.uint16
        if not self.round_sound(mode, parallel, bits):
            return False
        self.rounder(mode, parallel, bits)(x, out)
        return True

    def accumulate(self, A, B, C, out, rounded: bool, parallel: bool) -> np.ndarray | None:
        """``out`` (float64) from the binary16 accumulation; returns the rows left to do
        (not finite), or None when the inputs or the environment do not allow this path."""
        halves = [self.halves(x) for x in (A, B, C)]
        if any(h is None for h in halves) or not self.sound():
            return None
        bits = np.empty(out.shape, dtype=np.uint16)
        self.loop(rounded, parallel)(*halves, bits)
        self.convert(out.size)[1](bits.reshape(-1), out.reshape(-1))
        return np.flatnonzero(~np.isfinite(out).all(axis=1))
