"""The Numba backend: each kernel compiled per element inside a parallel loop.

Compiled lazily on first use and cached on disk (``cache=True``).
"""

from __future__ import annotations

import contextlib
import hashlib
import math
from collections.abc import Iterator

import numba
import numpy as np
from numba import types
from numba.extending import intrinsic

from fpsim.backends import (
    numba_convert,
    numba_half,
    numba_inline,
    numba_lanes,
    numba_loops,
    numba_vectors,
)
from fpsim.backends._instantiate import clone, instantiate, source_digest
from fpsim.backends.numba_bitcast import bitcast
from fpsim.backends.numba_vectors import wide_vectors
from fpsim.backends.protocol import ARITY
from fpsim.backends.schedule import pairwise_program, stack_depth
from fpsim.formats import format as preset
from fpsim.kernels.carrier import BINARY32, BINARY64, fits_binary32, spec_for
from fpsim.kernels.spec import make_spec

numba_inline.install()

_f64_bits = bitcast(types.float64, types.int64)
_bits_f64 = bitcast(types.int64, types.float64)
_f32_bits = bitcast(types.float32, types.int32)
_bits_f32 = bitcast(types.int32, types.float32)


@intrinsic
def _select(typingctx, c, a, b):
    result = typingctx.unify_types(a, b)
    if isinstance(result, types.Literal):
        result = result.literal_type
    if result is None or not isinstance(result, (types.Integer, types.Float, types.Boolean)):
        return None

    def codegen(context, builder, signature, args):
        cond, x, y = args
        cond = context.cast(builder, cond, signature.args[0], types.boolean)
        x = context.cast(builder, x, signature.args[1], result)
        y = context.cast(builder, y, signature.args[2], result)
        return builder.select(cond, x, y)

    return result(c, a, b), codegen


def _jit(func):
    return numba.njit(cache=True, inline="always")(func)


PRIMITIVES = {
    "select": _select,
    "maximum": _jit(lambda a, b: max(a, b)),
    "minimum": _jit(lambda a, b: min(a, b)),
    "f64_bits": _f64_bits,
    "bits_f64": _bits_f64,
    "i64_f64": _jit(lambda i: float(i)),
    "f64_i64": _jit(lambda x: int(x)),
    "u64": _jit(lambda i: np.uint64(i)),
    "i64": _jit(lambda u: np.int64(u)),
    "fsqrt": _jit(lambda x: math.sqrt(x)),
}

# The binary32 rounding (float32 input): binary32's bit casts in the binary64 names.
# Its integer operations stay in 32-bit lanes (numba_lanes).
PRIMITIVES_BINARY32 = dict(PRIMITIVES, f64_bits=_jit(lambda x: _f32_bits(np.float32(x))),
                           bits_f64=_bits_f32, **numba_lanes.LANE_PRIMITIVES)

_EMPTY_FLAGS = np.zeros(0, dtype=np.uint8)
_NO_KEY = np.uint64(0)
KERNELS_IN_LOOPS = (
    "random53", "representable", "round_value", "op_add", "finite_or_zero", "is_nonfinite",
    "hw_c_exponent", "hw_product", "hw_c_term", "hw_term", "hw_finish", "hw_result",
    "hw_naive",
    "hw_decode", "hw_output", "bits_f64", "f64_bits",
)

# Binary16, nearest_even, subnormals: the accumulations numba_half runs in hardware
# (any number of random bits: they are not drawn).
HALF_SPEC = make_spec(preset("fp16"), "nearest_even", True, False, None)
# The fp16 roundings (subnormals, no saturation) the CPU's conversion may do (numba_half).
HALF_ROUNDINGS = {make_spec(preset("fp16"), mode, True, False, None)._replace(
    rbits=HALF_SPEC.rbits): mode for mode in ("nearest_even", *numba_half.DIRECTED)}

# Float32 arrays at least this long round to binary16 (nearest_even, subnormals, no flags)
# by the CPU's conversion, when it has one (numba_half); shorter ones are not worth its probes.
HALF_ROUND_FROM = 1 << 12

# Arrays at least this long run in a loop compiled for their exact format and
# mode (constants folded: about twice as fast); compiled once, cached on disk.
SPECIALISE_FROM = 1 << 20
# Below this much work a loop runs on one thread: starting the thread pool costs
# more, and BLAS threads still spinning after a product would slow it further.
PARALLEL_FROM = 1 << 20
# Block-FMA models with blocks up to this size run in the tiled loop (others: generic).
MAX_TILED_BLOCK = 256
# The tiled loop is compiled for each model (its rules folded in: seconds of compiling);
# products of fewer multiply-adds than this run in the generic loop, which reads the model.
TILED_FROM = 1 << 18
# Arrays at least this long convert to and from 16-bit floats in compiled loops, and have
# their 16-bit results stored by the rounding loops.
CONVERT_FROM = 1 << 12
# Operand checks of arrays this large or larger count the bad elements before searching.
COUNT_FIRST = 1 << 16


@contextlib.contextmanager
def numba_threads(n: int) -> Iterator[None]:
    """Within: Numba's parallel loops in this thread run on ``n`` threads (restored
    after). The runtime setting: Numba reads NUMBA_NUM_THREADS once, and writing it into a
    running process's environment makes its next compilation fail."""
    before = numba.get_num_threads()
    numba.set_num_threads(n)
    try:
        yield
    finally:
        numba.set_num_threads(before)


def _frozen(*arrays: np.ndarray) -> list[np.ndarray]:
    """Read-only views of a loop's input arrays: Numba compiles a loop once per argument
    type, and a read-only array's type is not a writeable one's."""
    views = [a.view() for a in arrays]
    for view in views:
        view.setflags(write=False)
    return views


class Backend:
    """The CPU backend (``fpsim.backends.protocol.Backend``)."""

    name = "numba"

    def __init__(self) -> None:
        # Numba checks only the caller's file for staleness: key every cache
        # entry by the sources it inlines.
        self.digest = source_digest(numba_loops, numba_vectors, numba_lanes)
        self.kernels = instantiate(PRIMITIVES, _jit, suffix=f"_{self.digest}")
        self._binary32: dict | None = None
        self._loops: dict = {}
        self._choices: dict = {}
        kind = numba_half.compiled_for()
        half_digest = source_digest(numba_half, numba_vectors)
        self.half = kind and numba_half.HalfAccumulation(kind, half_digest)
        self.conversions = numba_convert.Conversions(
            kind is not None, source_digest(numba_half, numba_convert))

    def _loop(self, template, parallel=True, **binding):
        fast = (template, parallel, *binding.items())  # call sites keep their keyword order
        loop = self._loops.get(fast)
        if loop is None:
            loop = self._loops[fast] = self._compile(template, parallel, binding)
        return loop

    def _compile(self, template, parallel, binding):
        key = (template.__name__, parallel, *sorted(binding.items()))
        if key not in self._loops:
            namespace = dict(vars(numba_loops))
            namespace.update(
                {name: self.kernels[name] for name in KERNELS_IN_LOOPS},
                count_flags=_jit(numba_loops.count_flags),
                bits_f32=_bits_f32,
                wide_vectors=wide_vectors,
                **binding,
            )
            if "STORE" in binding:
                namespace["STORE"] = _jit(numba_convert.STORES[binding["STORE"]])
            kernel = binding.get("KERNEL", "")
            if kernel:
                namespace.update(KERNEL=self.kernels[kernel], ARITY=ARITY[kernel])
            if binding.get("ENCODING") == BINARY32.name:
                namespace.update(KERNEL=self.binary32()[kernel], LOAD=np.float32)
            # A distinct qualified name gives each instance its own cache entry.
            tag = hashlib.sha1(repr(key).encode()).hexdigest()[:12]
            func = clone(template, namespace, f"{template.__name__}_{kernel}_{tag}_{self.digest}")
            self._loops[key] = numba.njit(parallel=parallel, cache=True)(func)
        return self._loops[key]

    def binary32(self) -> dict:
        """The rounding compiled on the binary32 encoding (``kernels.carrier``)."""
        if self._binary32 is None:
            self._binary32 = instantiate(PRIMITIVES_BINARY32, _jit,
                                         suffix=f"_binary32_{self.digest}", encoding=BINARY32)
        return self._binary32

    @staticmethod
    def encoding(kernel: str, x_dtype, out_dtype, spec, check: bool = False):
        """The encoding ``apply`` computes on: binary32 for float32 rounded into float32
        where it carries exactly (``kernels.carrier``), binary64 otherwise."""
        if (kernel == "round_value" and not check and x_dtype == np.float32
                and out_dtype == np.float32 and fits_binary32(spec)):
            return BINARY32
        return BINARY64

    def kernel_name(self, kernel: str, x_dtype, out_dtype, spec, *, flags: bool = False,
                    check: bool = False, size: int = HALF_ROUND_FROM) -> str:
        """What ``apply`` computes ``kernel`` with: the CPU's binary16 conversion (its kind,
        ``"f16c"`` or ``"native"``), or the encoding of the software rounding."""
        if self._half_mode(kernel, x_dtype, out_dtype, spec, flags, check, size):
            return self.half.kind
        return self.encoding(kernel, x_dtype, out_dtype, spec, check).name

    def _half_mode(self, kernel, x_dtype, out_dtype, spec, flags, check, size) -> str | None:
        """The rounding mode to give the CPU's binary16 conversion, if it computes this call:
        float32 in and out, fp16 with subnormals and without saturation or flags."""
        if (not self.half or kernel != "round_value" or flags or check
                or size < HALF_ROUND_FROM or x_dtype != np.float32 or out_dtype != np.float32):
            return None
        mode = HALF_ROUNDINGS.get(spec._replace(rbits=HALF_SPEC.rbits))
        return mode if mode in self.half.modes() else None

    def apply(self, kernel, operands, out, flags, spec, key, check=False, hot=False) -> int:
        """``hot``: a call repeated with this spec (a training run): compile for it at any size."""
        size = out.size
        # The loop depends on these alone; most calls repeat an earlier call's choice.
        choice = (kernel, operands[0].dtype, out.dtype, spec, flags is not None, key is not None,
                  check, hot or size >= SPECIALISE_FROM, size >= PARALLEL_FROM,
                  size >= HALF_ROUND_FROM, size >= CONVERT_FROM)
        store, mode, loop, loop_spec = self._choices.get(choice) or self._choose(choice)
        if store is None:
            # A short 16-bit result, or binary16 without the CPU's conversion: the float32
            # loops, then NumPy's conversion (no loop compiled for a 16-bit store).
            wide = np.empty(out.shape, np.float32)
            bad = self.apply(kernel, operands, wide, flags, spec, key, check, hot)
            np.copyto(out, wide, casting="unsafe")
            return bad
        x, *rest = _frozen(*operands)
        if store != "wide":
            out = out.view(np.uint16)  # the loops store the format's encodings
        if mode is not None and self.half.round(x, out, mode):
            return 0
        if loop is None:  # the CPU's conversion refused the call: the software rounding
            store, mode, loop, loop_spec = self._choose(choice, software=True)
        y = rest[0] if rest else x
        z = rest[1] if len(rest) > 1 else x
        return int(loop(x, y, z, out, _EMPTY_FLAGS if flags is None else flags,
                        _NO_KEY if key is None else np.uint64(key), loop_spec))

    def _choose(self, choice: tuple, software: bool = False) -> tuple:
        """``apply``'s (store kind or None, binary16 conversion mode or None, loop or None,
        the loop's spec) for a call's ``choice``. The loop is compiled only where there is
        no conversion mode, or once the conversion refuses a call (``software``; it is
        still tried first on later calls)."""
        (kernel, x_dtype, out_dtype, spec, flags, stochastic, check, specialise, parallel, long,
         converted) = choice
        store = numba_convert.kind(out_dtype)
        if store != "wide" and (not converted or (store == "binary16" and not self.half)):
            self._choices[choice] = (None, None, None, None)
            return self._choices[choice]
        result_dtype = np.dtype(np.float32) if store != "wide" else out_dtype
        mode = self._half_mode(kernel, x_dtype, result_dtype, spec, flags, check,
                               HALF_ROUND_FROM if long else 0)
        if mode is not None and not software:
            self._choices[choice] = (store, mode, None, None)
            return self._choices[choice]
        encoding = self.encoding(kernel, x_dtype, result_dtype, spec, check)
        # The spec in the encoding's lane types: folded into a specialised loop, a
        # binary64 spec's int64 fields would widen the binary32 rounding to 64-bit lanes.
        loop_spec = spec if encoding is BINARY64 else spec_for(spec, encoding)
        loop = self._loop(
            numba_loops.loop,
            parallel,
            KERNEL=kernel,
            WANT_FLAGS=flags,
            STOCHASTIC=stochastic,
            CHECK=check,
            SPEC=loop_spec if specialise else None,
            ENCODING=encoding.name,
            STORE=store,
        )
        self._choices[choice] = (store, mode, loop, loop_spec)
        return self._choices[choice]

    def convert(self, x, out) -> None:
        name = self.conversions.loop(x.dtype, out.dtype) if x.size >= CONVERT_FROM else None
        if name is None:
            np.copyto(out, x, casting="unsafe")
        else:
            self.conversions(name, *(a.view(np.uint16) if a.itemsize == 2 else a
                                     for a in (*_frozen(x), out)))

    def first_unrepresentable(self, x, spec) -> int:
        (x,) = _frozen(x)
        if x.size >= COUNT_FIRST:
            # Most arrays are clean: a count (vectorised, in parallel) says so;
            # the search, which stops at the first bad element, runs only if not.
            count = self._loop(numba_loops.count_unrepresentable, parallel=True)
            if count(x, spec) == 0:
                return -1
        return int(self._loop(numba_loops.first_unrepresentable, parallel=False)(x, spec))

    def narrow(self, x, out) -> int:
        (x,) = _frozen(x)
        first = self._loop(numba_loops.first_not_float32, parallel=False)(x, out)
        return -1 if first == x.size else int(first)

    def accumulate(self, A, B, C, out, spec, *, key, order, rounded, has_c, want_stats):
        A, B, C = _frozen(A, B, C)
        counts = np.zeros((A.shape[0] if want_stats else 1, 5), dtype=np.int64)
        parallel = out.size * max(A.shape[1], 1) >= PARALLEL_FROM
        binding = dict(WANT_FLAGS=want_stats, STOCHASTIC=key is not None, ROUNDED=rounded,
                       SPEC=spec if out.size * max(A.shape[1], 1) >= SPECIALISE_FROM else None)
        if (self.half and order == "sequential" and key is None and not want_stats
                and spec._replace(rbits=HALF_SPEC.rbits) == HALF_SPEC):
            return self._accumulate_half(A, B, C, out, spec, rounded, parallel, binding, counts)
        key = np.uint64(0 if key is None else key)
        if order == "pairwise":
            program = pairwise_program(A.shape[1], has_c)
            loop = self._loop(numba_loops.accumulate_pairwise, parallel, **binding)
            loop(A, B, C, out, counts, key, spec, program, stack_depth(program))
        else:
            loop = self._loop(numba_loops.accumulate_sequential, parallel, **binding)
            loop(A, B, C, out, counts, key, spec)
        return counts.sum(axis=0)

    def _accumulate_half(self, A, B, C, out, spec, rounded, parallel, binding, counts):
        left = self.half.accumulate(A, B, C, out, rounded, parallel)
        if left is None:  # not binary16 inputs, or a floating-point environment that is not IEEE
            left = np.arange(A.shape[0])
        if left.size:
            per_group = A.shape[0] // B.shape[0]
            b = B if B.shape[0] == 1 else B[left // per_group]
            part = np.empty((left.size, out.shape[1]))
            loop = self._loop(numba_loops.accumulate_sequential, parallel, **binding)
            # Read-only as accumulate's own inputs: the loop compiled for them, not again.
            loop(*_frozen(A[left], b, C[left]), part, counts, np.uint64(0), spec)
            out[left] = part
        return counts.sum(axis=0)

    def accumulate_blocks(self, A, B, C, out, hw, out_spec, block, want_stats):
        A, B, C = _frozen(A, B, C)
        counts = np.zeros((A.shape[0] if want_stats else 1, 5), dtype=np.int64)
        parallel = out.size * max(A.shape[1], 1) >= PARALLEL_FROM
        # The tiled loop is compiled per block size and pads K to whole blocks: real
        # tensor-core blocks (4 to 32 products), not a model with a block of 2**40.
        tiled = (not want_stats and block <= MAX_TILED_BLOCK
                 and out.size * A.shape[1] >= TILED_FROM)
        exact_in = _block_work(hw, block) if tiled else None
        if exact_in is not None and np.isfinite(C).all():
            work, acc = exact_in
            inputs = self._block_inputs(A, B, hw, block, parallel, work)
            if inputs is not None:
                loop = self._loop(numba_loops.accumulate_blocks_tiled, parallel, HW=hw,
                                  OUT_SPEC=out_spec, BLOCK=block, WORK=work, ACC=acc,
                                  EXP=np.int16, WORK_BITS=np.dtype(work).itemsize * 8,
                                  TILE_ROWS=32, TILE_COLS=128)
                loop(*inputs, C, out)
                return counts.sum(axis=0)
        loop = self._loop(numba_loops.accumulate_blocks, parallel, WANT_FLAGS=want_stats)
        loop(A, B, C, out, counts, hw, out_spec, block)
        return counts.sum(axis=0)

    def _block_inputs(self, A, B, hw, block, parallel, work):
        """(a, b, exponents of a, exponents of b) for the tiled loop: in ``work``, the inner
        dimension padded with zeros to whole blocks (a zero product changes no block); None
        if an input is not finite."""
        k_len = A.shape[1]
        padded = -(-k_len // block) * block
        a = np.zeros((A.shape[0], padded), dtype=work)
        a[:, :k_len] = A
        b = np.zeros((B.shape[0], padded, B.shape[2]), dtype=work)
        b[:, :k_len] = B
        exponents = []
        for x in (a, b):
            e = np.empty(x.shape, dtype=np.int16)
            bad = self._loop(numba_loops.input_exponents, parallel)(
                x.reshape(-1), e.reshape(-1), hw.t_in, hw.emin_in, numba_loops.ZERO_EXPONENT)
            if bad:
                return None
            exponents.append(e)
        return (a, b, *exponents)


def _block_work(hw, block):
    """The (float, integer) types in which a block model's product terms are exact, or None.

    Binary32 when a product of two inputs is a normal binary32 number (its 2t + 2
    significant bits fit, its exponent is in range) and a block's terms, each below
    2**(frac_bits + 2), fit int32; binary64 likewise, with block sums below 2**53.
    """
    t_in, emin_in, frac_bits = hw.t_in, hw.emin_in, hw.frac_bits
    if hw.round_down:
        return None  # the tiled loop aligns c with the products (truncation)
    if (hw.t_in_b, hw.emin_in_b) != (t_in, emin_in):
        return None  # the tiled loop reads A and B in one format
    emax_in = 2 - emin_in  # at least the largest exponent of every format fpsim defines
    if 2 * (emax_in + 1) > 1000 or 2 * emin_in < -1000:
        return None  # exponents (and the zero's, ZERO_EXPONENT) in int16 sums
    term = 1 << (frac_bits + 2)
    if (2 * t_in + 2 <= 24 and 2 * (emin_in - t_in) >= -126 and 2 * (emax_in + 1) <= 127
            and frac_bits - 2 * emin_in <= 127 and block * (term - 1) < 1 << 31):
        return np.float32, np.int32
    if 2 * t_in + 2 <= 53 and (block + 1) * term < 1 << 53:
        return np.float64, np.int64
    return None
