"""The GPU backend: the shared kernels compiled for CUDA by numba-cuda.

The kernels are the same source as on the CPU (``fpsim.kernels``), instantiated
with CUDA primitives (libdevice bit casts; ``max``/``min``, integer
conversions and ``math.sqrt`` as numba-cuda compiles them) and inlined into
the grid-stride loops of ``cuda_loops``. They compile lazily, on first use,
with floating-point contraction off (``cuda_contraction``), and are cached on
disk.

Arrays: CuPy arrays (anything with ``__cuda_array_interface__``) are used in
place; NumPy arrays are copied to the device and the results copied back, so
the caller's array type is kept. Under Numba's CUDA simulator
(``NUMBA_ENABLE_CUDASIM=1``) the same loops run as Python on the CPU, with
NumPy-scalar bit casts standing in for libdevice's (the simulator's are
stubs): the tests use this to check the kernels without a GPU.

Variants, as on the CPU (``numba_backend``): arrays of at least
``SPECIALISE_FROM`` elements (or a ``hot`` call) run in a loop compiled for their
exact format and mode, the spec a compile-time constant (its selects and constants
fold); float32 rounded into float32 where binary32 carries it exactly
(``kernels.carrier``) runs the rounding compiled on the binary32 encoding, in 32-bit
integer work (``numba_lanes``' operations; libdevice's ``float_as_int`` and
``int_as_float``) instead of the GPU's emulated 64-bit integers.

Hardware paths (``cuda_hardware``): float32 rounded to fp16 or bf16 in nearest-even
and the directed modes by the GPU's conversion, and fp16/bf16 add, sub, mul and fma by
its instructions, where they are fpsim's rounding; each probed once per process before
its first use (a failed probe: the software kernel and a warning).

Launch: through numba-cuda's dispatcher, or with ``FPSIM_CUDA_LAUNCH=raw``
through ``cuda_launch`` (the same kernels compiled once per signature, launched
through CuPy with pre-packed arguments). The simulator always uses the dispatcher.
"""

from __future__ import annotations

import hashlib
import math
import threading
import warnings

import numpy as np
from numba import cuda

from fpsim.backends import (
    cuda_arrays,
    cuda_blockfma_tiles,
    cuda_hardware,
    cuda_loops,
    cuda_registries,
    cuda_tiles,
    numba_inline,
    numba_lanes,
)
from fpsim.backends._instantiate import clone, instantiate, source_digest
from fpsim.backends.cuda_contraction import KERNEL_OPTIONS, no_contraction
from fpsim.backends.cuda_hardware import Path
from fpsim.backends.cuda_launch import RawLauncher, launch_mode
from fpsim.backends.numba_backend import Backend as CPU
from fpsim.backends.numpy_backend import narrow_arrays
from fpsim.backends.protocol import ARITY, COUNTERS, is_device_array
from fpsim.backends.schedule import pairwise_program, stack_depth
from fpsim.kernels.carrier import BINARY32, BINARY64, Carrier, spec_for
from fpsim.kernels.spec import Spec

numba_inline.install(cuda=True)

SIMULATOR = bool(getattr(getattr(cuda, "config", None), "ENABLE_CUDASIM", False))

KERNELS_IN_LOOPS = (
    "random53", "representable", "round_value", "op_add", "finite_or_zero", "is_nonfinite",
    "hw_c_exponent", "hw_product", "hw_c_term", "hw_term", "hw_finish", "hw_result",
    "hw_naive",
)
# Threads per block; blocks per multiprocessor at most (the loops stride over the rest).
THREADS = 256
BLOCKS_PER_SM = 32
# Under the simulator every thread is a Python thread: a few, each striding far.
SIMULATOR_GRID = (2, 4)
# binary32 and binary64: converted by fpsim's kernel (fpsim.kernels.convert), not CuPy's.
BINARY_DTYPES = frozenset({np.dtype(np.float32), np.dtype(np.float64)})
# Elementwise calls on at least this many elements run in a loop compiled for their exact
# format and mode (NVVM takes seconds per loop, cached on disk; a hot call: at any size).
SPECIALISE_FROM = 1 << 20
# Calls on at least this many elements (or hot) run on a hardware path where there is one
# (``cuda_hardware``); shorter ones are not worth its compilation and probe.
HARDWARE_FROM = 1 << 12


class LaneSpec(Spec):
    """A ``Spec`` with its fields in the binary32 carrier's lane types (``spec_for``): a
    type of its own, so that nothing keeping packed specs by value (``cuda_launch``) takes
    it for the binary64 ``Spec`` it equals field for field."""

    __slots__ = ()


def device_function(func):
    """``func`` as a CUDA device function, inlined where it is called.

    Under the simulator, the plain Python function: the simulator's device-function
    wrapper swaps module globals on every call, far too slow for kernels of a few
    hundred primitive calls (the loops that call them still run simulated).
    """
    return func if SIMULATOR else cuda.jit(device=True, inline="always")(func)


def _f64_bits_host(x):
    return np.float64(x).view(np.int64)


def _bits_f64_host(u):
    return np.int64(u).view(np.float64)


def _f32_bits_host(x):
    return np.float32(x).view(np.int32)


def _bits_f32_host(u):
    return np.int32(u).view(np.float32)


def primitives(encoding: Carrier = BINARY64) -> dict:
    """The kernels' primitives for CUDA on ``encoding`` (``_instantiate.instantiate``);
    under the simulator, NumPy-scalar bit casts and (binary32) NumPy int32 operations."""
    if SIMULATOR:
        f64_bits, bits_f64 = _f64_bits_host, _bits_f64_host
        f32_bits, bits_f32 = _f32_bits_host, _bits_f32_host
        lanes = {name: op for name, (op, _) in numba_lanes.OPERATIONS.items()}
    else:
        from numba.cuda import libdevice

        f64_bits, bits_f64 = libdevice.double_as_longlong, libdevice.longlong_as_double
        f32_bits, bits_f32 = libdevice.float_as_int, libdevice.int_as_float
        lanes = numba_lanes.LANE_PRIMITIVES
    if encoding is BINARY32:  # binary32's bit casts in the binary64 names, 32-bit lanes
        return dict(primitives(), f64_bits=device_function(lambda x: f32_bits(np.float32(x))),
                    bits_f64=bits_f32, **lanes)
    return {
        "select": device_function(lambda c, a, b: a if c else b),
        "maximum": device_function(lambda a, b: max(a, b)),
        "minimum": device_function(lambda a, b: min(a, b)),
        "f64_bits": f64_bits,
        "bits_f64": bits_f64,
        "i64_f64": device_function(lambda i: float(i)),
        "f64_i64": device_function(lambda x: int(x)),
        "u64": device_function(lambda i: np.uint64(i)),
        "i64": device_function(lambda u: np.int64(u)),
        "fsqrt": device_function(lambda x: math.sqrt(x)),
    }


def software_loop(kernel: str, x_dtype: np.dtype, out_dtype: np.dtype, spec: Spec, check: bool,
                  specialise: bool) -> tuple[str, Spec, Spec | None]:
    """The elementwise loop of the software kernels for a call: (its encoding, the spec it
    takes as an argument, the spec it is specialised to or None). The encoding is the
    CPU's (``numba_backend.Backend.encoding``): binary32 for float32 rounded into float32
    where binary32 carries it exactly.

    Examples
    --------
    >>> import numpy as np, fpsim
    >>> from fpsim.kernels.spec import make_spec
    >>> spec = make_spec(fpsim.format("bf16"), "up", True, False, None)
    >>> f32 = np.dtype(np.float32)
    >>> encoding, argument, folded = software_loop("round_value", f32, f32, spec, False, True)
    >>> encoding, type(argument).__name__, int(argument.t), type(argument.t).__name__
    ('binary32', 'LaneSpec', 7, 'int32')
    >>> folded is argument
    True
    >>> software_loop("round_value", np.dtype(np.float64), f32, spec, False, False)[::2]
    ('binary64', None)
    """
    encoding = CPU.encoding(kernel, x_dtype, out_dtype, spec, check)
    loop_spec = spec if encoding is BINARY64 else LaneSpec(*spec_for(spec, encoding))
    return encoding.name, loop_spec, loop_spec if specialise else None


class Backend:
    """The GPU backend (``fpsim.backends.protocol.Backend``)."""

    name = "cupy"

    def __init__(self, launch: str | None = None) -> None:
        # Numba's CUDA simulator is a mode of the whole process (NUMBA_ENABLE_CUDASIM).
        self.simulator = SIMULATOR
        self.raw: RawLauncher | None = None
        self._launcher: RawLauncher | None = None
        self.set_launch(launch_mode(launch))
        if not SIMULATOR:
            cuda_registries.load()
        self.digest = source_digest(cuda_loops, cuda_hardware)
        self.probes = cuda_hardware.Probes()
        self.kernels = instantiate(primitives(), device_function,
                                   suffix=f"_cuda_{self.digest}")
        self._binary32: dict | None = None
        self._arrays: cuda_arrays.DeviceKernels | None = None
        self._loops: dict = {}
        self._choices: dict = {}
        self._no_flags = None
        self._no_count = None
        self._per_thread = threading.local()
        # Small arrays make small grids; that is no reason to warn on every call.
        warnings.filterwarnings("ignore", message=r"Grid size .* under-utilization")

    # -- compilation and launch --------------------------------------------------

    def set_launch(self, mode: str) -> None:
        """Launch through numba-cuda's dispatcher ("numba") or ``cuda_launch`` ("raw");
        under the simulator, always the dispatcher (there is no PTX)."""
        raw = launch_mode(mode) == "raw" and not self.simulator
        if raw and self._launcher is None:
            self._launcher = RawLauncher()
        self.raw = self._launcher if raw else None

    def binary32(self) -> dict:
        """The rounding compiled on the binary32 encoding (``kernels.carrier``)."""
        if self._binary32 is None:
            self._binary32 = instantiate(primitives(BINARY32), device_function,
                                         suffix=f"_binary32_cuda_{self.digest}",
                                         encoding=BINARY32)
        return self._binary32

    def array_kernels(self) -> cuda_arrays.DeviceKernels:
        """The kernels as functions of whole device arrays (``cuda_arrays``): the device's
        ``fpsim.backends.array_kernels``."""
        if self._arrays is None:
            from fpsim.backends import array_kernels

            self._arrays = cuda_arrays.DeviceKernels(self, array_kernels())
        return self._arrays

    def loop(self, template, kernel: str = "", spec: Spec | None = None,
             encoding: str = BINARY64.name, hardware: Path | None = None):
        """The CUDA kernel of ``template`` (a ``cuda_loops`` function), for ``kernel``;
        ``spec``: specialised to that format and mode; ``encoding``: the carrier of the
        rounding ("binary32": float32 input); ``hardware``: the path of a hardware loop."""
        key = self.loop_key(template, kernel, spec, encoding, hardware)
        if key not in self._loops:
            namespace = dict(vars(cuda_loops))
            namespace.update({name: self.kernels[name] for name in KERNELS_IN_LOOPS})
            for helper in cuda_loops.HELPERS:
                namespace[helper] = device_function(clone(getattr(cuda_loops, helper), namespace))
            if kernel:
                namespace.update(KERNEL=self.kernels[kernel], ARITY=ARITY[kernel])
            if encoding == BINARY32.name:
                namespace.update(KERNEL=self.binary32()[kernel], LOAD=np.float32)
            if hardware is not None:
                namespace.update(cuda_hardware.host_instructions(hardware) if self.simulator
                                 else cuda_hardware.device_instructions(hardware))
            namespace.update(SPEC=spec)
            # A distinct qualified name gives each instance its own cache entry.
            tag = hashlib.sha1(repr(key).encode()).hexdigest()[:12]
            func = clone(template, namespace, f"{template.__name__}_{kernel}_{tag}_{self.digest}")
            options = {} if self.simulator else dict(KERNEL_OPTIONS, cache=True)
            self._loops[key] = cuda.jit(func, **options)
        return self._loops[key]

    @staticmethod
    def loop_key(template, kernel: str = "", spec: Spec | None = None,
                 encoding: str = BINARY64.name, hardware: Path | None = None) -> tuple:
        """What tells ``loop``'s instances apart (the generic binary64 ones: as before
        the variants, so that their cache entries stay)."""
        if spec is None and encoding == BINARY64.name and hardware is None:
            return template.__name__, kernel
        key = (template.__name__, kernel, None if spec is None else tuple(spec), encoding)
        return key if hardware is None else (*key, tuple(hardware))

    def grid(self, n: int) -> tuple[int, int]:
        """(blocks, threads per block) for ``n`` work items in grid-stride loops."""
        if self.simulator:
            return SIMULATOR_GRID
        sms = cuda.get_current_device().MULTIPROCESSOR_COUNT
        return max(1, min(-(-n // THREADS), BLOCKS_PER_SM * sms)), THREADS

    def launch(self, template, n: int, *args, kernel: str = "", spec: Spec | None = None,
               encoding: str = BINARY64.name, hardware: Path | None = None) -> None:
        """Run ``loop(template, kernel, spec, encoding, hardware)`` over ``n`` work items."""
        loop = self.loop(template, kernel, spec, encoding, hardware)
        if self.raw is not None:
            self.raw(self.loop_key(template, kernel, spec, encoding, hardware), loop, n, args,
                     THREADS, BLOCKS_PER_SM)
            return
        blocks, threads = self.grid(n)
        with no_contraction():
            loop[blocks, threads](*args)

    # -- arrays ------------------------------------------------------------------

    def to_device(self, x):
        """An input on the device: a device array as it is, a host array copied over."""
        if not is_device_array(x):
            return cuda.to_device(np.ascontiguousarray(x))
        # The simulator copies array arguments back after a launch; an input may be a
        # read-only view, so it is marked input-only there.
        return cuda.In(x) if self.simulator else x

    @staticmethod
    def output(out):
        """A device array to write ``out``'s values into (``out`` itself if on the device)."""
        return out if is_device_array(out) else cuda.device_array(out.shape, out.dtype)

    @staticmethod
    def deliver(device, out) -> None:
        if device is not out:
            device.copy_to_host(out)

    def no_flags(self):
        if self._no_flags is None:
            self._no_flags = cuda.device_array(1, np.uint8)
        return self._no_flags

    def counter(self, check: bool):
        """The operand check's count on the device. Allocating device memory on every call
        cost more on the H100 than rounding a million elements, so the arrays are kept:
        without a check the kernels never write theirs, one for every call; with one, each
        thread has its own, which the kernels only add to (``counted`` reads its rise:
        zeroing it with a copy before each kernel cost more than the kernel, on an H200)."""
        if not check:
            if self._no_count is None:
                self._no_count = cuda.to_device(np.zeros(1, dtype=np.int64))
            return self._no_count
        mine = self._per_thread
        if getattr(mine, "count", None) is None:
            mine.count = cuda.to_device(np.zeros(1, dtype=np.int64))
            mine.host, mine.last = np.zeros(1, dtype=np.int64), 0
        return mine.count

    def counted(self) -> int:
        """What the kernels added to this thread's checked ``counter`` since its last
        reading (one read from the device, which waits for them)."""
        mine = self._per_thread
        mine.count.copy_to_host(mine.host)
        now = int(mine.host[0])
        added, mine.last = now - mine.last, now
        return added

    # -- the protocol ------------------------------------------------------------

    def apply(self, kernel, operands, out, flags, spec, key, check=False, hot=False) -> int:
        """``hot``: a call repeated with this spec (a training run): compile for it at any
        size."""
        if out.size == 0:
            return 0
        if out.dtype.itemsize == 2:  # float16, bfloat16 (host arrays): through binary32
            wide = np.empty(out.shape, np.float32)
            bad = self.apply(kernel, operands, wide, flags, spec, key, check, hot)
            self.convert(wide, out)
            return bad
        choice = (kernel, tuple(x.dtype for x in operands), out.dtype, spec, check,
                  hot or out.size >= SPECIALISE_FROM, flags is not None, key is not None,
                  hot or out.size >= HARDWARE_FROM)
        loop = self._choices.get(choice) or self._choose(choice)
        return self.elementwise(loop, kernel, operands, out, flags, key, check)

    def elementwise(self, loop: tuple, kernel: str, operands, out, flags, key,
                    check: bool) -> int:
        """Run ``loop`` (``_choose``'s) over the operands: ``apply`` without its choice."""
        template, encoding, loop_spec, bound, hardware = loop
        ops = [self.to_device(x) for x in operands]
        x = ops[0]
        y = ops[1] if len(ops) > 1 else x
        z = ops[2] if len(ops) > 2 else x
        d_out = self.output(out)
        d_flags = self.no_flags() if flags is None else self.output(flags)
        bad = self.counter(check)
        self.launch(template, out.size, x, y, z, d_out, d_flags, bad,
                    np.uint64(0 if key is None else key), loop_spec, flags is not None,
                    key is not None, bool(check), kernel=kernel, spec=bound, encoding=encoding,
                    hardware=hardware)
        self.deliver(d_out, out)
        if flags is not None:
            self.deliver(d_flags, flags)
        return self.counted() if check else 0

    def _choose(self, choice: tuple) -> tuple:
        """``apply``'s loop for a call's ``choice``, kept: (template, encoding, its spec
        argument, the spec it is specialised to or None, its hardware path or None)."""
        (kernel, dtypes, out_dtype, spec, check, specialise, flags, stochastic,
         long) = choice
        hardware = cuda_hardware.path(kernel, dtypes, out_dtype, spec, flags,
                                      stochastic) if long else None
        if hardware is not None and self.sound(hardware):
            self._choices[choice] = self.hardware_loop(hardware)
        else:
            self._choices[choice] = (cuda_loops.elementwise, *software_loop(
                kernel, dtypes[0], out_dtype, spec, check, specialise), None)
        return self._choices[choice]

    @staticmethod
    def hardware_loop(hardware: Path) -> tuple:
        """``_choose``'s loop for ``hardware``: one instance per path, on its spec."""
        spec = cuda_hardware.spec_of(hardware)
        template = (cuda_loops.hardware_round if hardware.kernel == "round_value"
                    else cuda_loops.hardware_arithmetic)
        return template, BINARY64.name, spec, spec, hardware

    def sound(self, hardware: Path) -> bool:
        """Whether ``hardware``'s probe passed (it runs once, on first asking)."""
        loop = self.hardware_loop(hardware)
        check = hardware.kernel != "round_value"

        def run(operands, out):
            return self.elementwise(loop, hardware.kernel, operands, out, None, None, check)

        return self.probes.sound(hardware, run)

    def kernel_name(self, kernel: str, x_dtype, out_dtype, spec, *, flags: bool = False,
                    check: bool = False, size: int = SPECIALISE_FROM, hot: bool = False) -> str:
        """What ``apply`` computes ``kernel`` with (every operand of ``x_dtype``):
        ``"hardware"`` (``cuda_hardware``: its probe runs first if it has not), or the
        encoding of the software rounding (``"binary32"`` or ``"binary64"``), with
        ``"+spec"`` where its loop is specialised to the format and mode.

        Examples
        --------
        >>> import numpy as np, fpsim
        >>> from fpsim.kernels.spec import make_spec
        >>> f32, backend = np.dtype(np.float32), Backend()
        >>> spec = make_spec(fpsim.format("fp8_e4m3"), "up", True, False, None)
        >>> backend.kernel_name("round_value", f32, f32, spec, size=10)
        'binary32'
        >>> backend.kernel_name("op_add", f32, f32, spec, check=True)
        'binary64+spec'
        """
        hardware = cuda_hardware.path(kernel, (np.dtype(x_dtype),) * ARITY[kernel],
                                      np.dtype(out_dtype), spec, flags, False)
        if (hot or size >= HARDWARE_FROM) and hardware is not None and self.sound(hardware):
            return "hardware"
        encoding = CPU.encoding(kernel, x_dtype, out_dtype, spec, check).name
        return encoding + ("+spec" if hot or size >= SPECIALISE_FROM else "")

    def convert(self, x, out) -> None:
        if is_device_array(out):
            import cupy

            x = cupy.asarray(x)
            if x.dtype != out.dtype and {x.dtype, out.dtype} <= BINARY_DTYPES:
                # Not CuPy's conversion: its kernels (-ftz=true) flush binary32 subnormals.
                wide = out.dtype == np.float64
                x = self.array_kernels()["to_binary64" if wide else "to_binary32"](x)
            cupy.copyto(out, x, casting="unsafe")
        else:
            np.copyto(out, x, casting="unsafe")

    def first_unrepresentable(self, x, spec) -> int:
        if x.size == 0:
            return -1
        first = cuda.to_device(np.array([x.size], dtype=np.int64))
        self.launch(cuda_loops.first_unrepresentable, x.size, self.to_device(x), first, spec)
        index = int(first.copy_to_host()[0])
        return -1 if index == x.size else index

    def narrow(self, x, out) -> int:
        return narrow_arrays(np, x, out)

    def accumulate(self, A, B, C, out, spec, *, key, order, rounded, has_c, want_stats):
        # Where the GPU's own arithmetic is exact: tiled kernels, the same bits (cuda_tiles).
        counts = cuda_tiles.accumulate(self, A, B, C, out, spec, key=key, order=order,
                                       rounded=rounded, has_c=has_c, want_stats=want_stats)
        if counts is not None:
            return counts
        per_group = A.shape[0] // max(B.shape[0], 1)
        stream = np.uint64(0 if key is None else key)
        if order == "pairwise":
            program = pairwise_program(A.shape[1], has_c)
            if stack_depth(program) > cuda_loops.MAX_DEPTH:
                raise ValueError(f"a pairwise sum of {A.shape[1]} terms is too deep for the GPU")
            return self.accumulation(cuda_loops.accumulate_pairwise, A, B, C, out, stream, spec,
                                     per_group, cuda.to_device(program), key is not None,
                                     want_stats)
        return self.accumulation(cuda_loops.accumulate_sequential, A, B, C, out, stream, spec,
                                 per_group, rounded, key is not None, want_stats)

    def accumulate_blocks(self, A, B, C, out, hw, out_spec, block, want_stats):
        # Models the tiled kernel is exact for, finite inputs: the same bits (cuda_blockfma_tiles).
        counts = cuda_blockfma_tiles.accumulate(self, A, B, C, out, hw, out_spec, block,
                                                want_stats)
        if counts is not None:
            return counts
        return self.accumulation(cuda_loops.accumulate_blocks, A, B, C, out, hw, out_spec,
                                 block, A.shape[0] // max(B.shape[0], 1), want_stats)

    def accumulation(self, template, A, B, C, out, *options) -> np.ndarray:
        """Run an accumulation loop, one thread per output element: the ``COUNTERS``."""
        total = cuda.to_device(np.zeros(len(COUNTERS), dtype=np.int64))
        if out.size == 0:
            return total.copy_to_host()
        a, b, c = (self.to_device(v) for v in (A, B, C))
        d_out = self.output(out)
        self.launch(template, out.size, a, b, c, d_out, total, *options)
        self.deliver(d_out, out)
        return total.copy_to_host()
