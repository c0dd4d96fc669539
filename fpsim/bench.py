"""Benchmarks: ``python -m fpsim.bench [elementwise|first|matmul|train|quantize]``
(all by default: each but quantize, whose rows elementwise has).

elementwise: million elements per second of ``round`` in every mode and of
add, mul and fma, beside the same run's ``np.copyto`` and float16 round-trip
cast, as ratios. first: the first calls on a new array in a fresh process, beside
the first ``x.copy()``, as ratios to the steady call. matmul: emulated matrix
products beside float32 ``np.matmul`` of the same shape, as time ratios. train:
one training step of the digits MLP and a small CNN under emulated policies, as
time ratios to the same step in plain float32 (no emulation). quantize: elementwise's
rows of MXFP8 and NVFP4 quantization, the copy and ml_dtypes' casts alone. The torch
bridge's benchmark is its own (``python -m fpsim.torch.bench``: nothing in fpsim imports
the bridge).
Medians over repeats, timed in pairs with their reference; the machine is shared and noisy.
"""

from __future__ import annotations

import argparse
import ctypes
import itertools
import json
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

import fpsim
from fpsim._machine import compiled_for, machine
from fpsim.backends import get_backend
from fpsim.kernels.carrier import BINARY64
from fpsim.kernels.spec import make_spec
from fpsim.quantize.schemes import scheme as quantize_scheme

ROUND_FORMATS = ("fp16", "bf16", "fp8_e4m3")
ARITH_FORMATS = ("fp16", "bf16")
OUT_FORMATS = ("fp16", "bf16")
OUT_MODES = ("nearest_even", "toward_zero", "stochastic")
QUANTIZE_SCHEMES = ("mxfp8_e4m3", "nvfp4")
# fpsim bench quantize: block quantization beside the copy and ml_dtypes' plain casts.
QUANTIZE_ROWS = ("np.copyto", "ml_dtypes astype", "quantize")


def quantize_kernel(x: np.ndarray, backend: str) -> str:
    """The encoding ``fpsim.quantize`` rounds the elements of ``x`` on."""
    if backend != "numba":
        return BINARY64.name
    from fpsim.backends import numba_quantize

    return numba_quantize.kernel_name(x)


def seed(mode: str) -> int | None:
    """The seed the benchmarks give a rounding in ``mode``: one for stochastic rounding,
    none for the others (which warn that a seed does nothing)."""
    return 1 if mode == "stochastic" else None


def inputs(n: int, seed: int = 0) -> np.ndarray:
    """float32 values over a wide exponent range: subnormal, normal and overflowing for fp16."""
    rng = np.random.default_rng(seed)
    mantissa = rng.uniform(1.0, 2.0, n) * rng.choice([-1.0, 1.0], n)
    return (mantissa * np.exp2(rng.integers(-30, 20, n))).astype(np.float32)


def timed_pairs(func, reference, repeats: int, pause: float = 0.0, func_pause: float = 0.0,
                warm: bool = False) -> np.ndarray:
    """``repeats`` rows of (reference's seconds, ``func``'s seconds), each timed right
    before the other: drift in the machine's speed (shared, noisy hosts) cancels out of
    their ratio. Each repeat first waits ``pause`` seconds (and with ``warm`` calls the
    reference once untimed), and waits ``func_pause`` seconds between the two."""
    pairs = []
    for _ in range(repeats):
        time.sleep(pause)
        if warm:
            reference()
        start = time.perf_counter()
        reference()
        middle = time.perf_counter()
        time.sleep(func_pause)
        middle_pause = time.perf_counter()
        func()
        end = time.perf_counter()
        pairs.append((middle - start, end - middle_pause))
    return np.array(pairs)


def measure(func, copy, repeats: int) -> tuple[float, float]:
    """Median seconds of ``func`` and the median ratio of its throughput to ``copy``'s,
    ``copy`` timed right before ``func`` in each repeat."""
    pairs = timed_pairs(func, copy, repeats)
    return float(np.median(pairs[:, 1])), float(np.median(pairs[:, 0] / pairs[:, 1]))


def run(n: int = 10_000_000, repeats: int = 7, backend: str = "numba",
        xp=None, part: tuple[int, int] = (0, 1), only: tuple[str, ...] = ()) -> list[tuple]:
    """Rows of (what, format, kernel, M elements/s, throughput ratio to the reference copy).

    ``kernel``: what fpsim computed with: the encoding of its software rounding
    (``binary32`` or ``binary64``) or the CPU's binary16 conversion (``f16c``,
    ``native``); empty for the references. On the CPU the reference is ``np.copyto``; NumPy's
    float16 and ml_dtypes' casts (round to nearest) are rows to compare with. With
    ``backend="cupy"`` the arrays live on the GPU (``xp``: CuPy by default), the
    reference is a device-to-device copy of the same array, and every call is timed to
    the device's completion. ``cpfloat_src``: CPFloat's source folder, for rows of
    CPFloat into a preallocated array (``cpfloat``), each checked against fpsim.
    ``part=(k, parts)``: only every ``parts``-th row from the ``k``-th (``compile_ahead``).
    ``only``: only the rows whose names start with one of these (``QUANTIZE_ROWS``).
    """
    x = inputs(n)
    sync = None
    if backend == "cupy":
        if xp is None:
            from fpsim._optional import require

            xp = require("cupy", "fpsim bench on the GPU")
        x = xp.asarray(x)
        sync = xp.cuda.Device().synchronize
    else:
        xp = np
    out = xp.empty_like(x)
    rows = []

    def timed(func):
        if sync is None:
            return func

        def call():
            func()
            sync()

        return call

    copy = timed(partial(xp.copyto, out, x))

    index = itertools.count()

    def row(what, fmt, func, kernel=""):
        if only and not what.startswith(only):
            return
        if next(index) % part[1] != part[0]:
            return
        func = timed(func)
        func()  # compile, allocate
        seconds, ratio = measure(func, copy, repeats)
        rows.append((what, fmt, kernel, n / seconds / 1e6, ratio))

    row("device copy" if sync else "np.copyto", "", copy)
    with np.errstate(over="ignore"):
        row("NumPy astype(float16)", "fp16", lambda: x.astype(np.float16))
        if sync is None:
            import ml_dtypes

            for fmt, dtype in (("bf16", ml_dtypes.bfloat16), ("fp8_e4m3", ml_dtypes.float8_e4m3fn),
                               ("fp8_e5m2", ml_dtypes.float8_e5m2)):
                row("ml_dtypes astype", fmt, partial(x.astype, dtype))
            # Into a bfloat16 array allocated once: as fpsim's out= rows write.
            narrow_out = np.empty(x.shape, ml_dtypes.bfloat16)
            row("ml_dtypes astype, out=", "bf16",
                partial(np.copyto, narrow_out, x, casting="unsafe"))
    with fpsim.backend(backend):
        engine = get_backend()
        kind = getattr(engine, "kernel_name", lambda *args, **kw: BINARY64.name)
        for fmt in ROUND_FORMATS:
            for mode in fpsim.ROUNDING_MODES:
                spec = make_spec(fpsim.format(fmt), mode, True, False, None)
                row(f"round {mode}", fmt, partial(fpsim.round, x, fmt, mode, seed=seed(mode)),
                    kind("round_value", x.dtype, np.dtype(np.float32), spec, size=x.size))
        # Into an array allocated once (out=), as np.copyto writes: no page faults per call.
        for fmt in OUT_FORMATS:
            for mode in OUT_MODES:
                spec = make_spec(fpsim.format(fmt), mode, True, False, None)
                row(f"round {mode}, out=", fmt, partial(fpsim.round, x, fmt, mode,
                                                        seed=seed(mode), out=out),
                    kind("round_value", x.dtype, np.dtype(np.float32), spec, size=x.size))
        if sync is None:
            # Results in the format's own 16-bit dtype (half the bytes of float32), as
            # ml_dtypes' casts give them; and float16 operands.
            for fmt, dtype in (("fp16", np.float16), ("bf16", ml_dtypes.bfloat16)):
                spec = make_spec(fpsim.format(fmt), "nearest_even", True, False, None)
                name = kind("round_value", x.dtype, np.dtype(np.float32), spec, size=x.size)
                row("round nearest_even, dtype=", fmt,
                    partial(fpsim.round, x, fmt, dtype=dtype), name)
                row("round nearest_even, out= (16 bits)", fmt,
                    partial(fpsim.round, x, fmt, out=np.empty(x.shape, dtype)), name)
            halves = fpsim.round(x, "fp16", dtype=np.float16)
            for fmt in ("fp16", "bf16"):
                spec = make_spec(fpsim.format(fmt), "nearest_even", True, False, None)
                row("round nearest_even, float16 in", fmt, partial(fpsim.round, halves, fmt),
                    kind("round_value", x.dtype, np.dtype(np.float32), spec, size=x.size))
            row("add, float16 operands", "fp16", partial(fpsim.add, halves, halves, "fp16"),
                BINARY64.name)
        if sync is None:
            # Block quantization of the same float32 values (issue 32): MXFP8 and NVFP4,
            # beside ml_dtypes' plain casts to their element formats (fp8_e4m3 above).
            row("ml_dtypes astype", "fp4_e2m1", partial(x.astype, ml_dtypes.float4_e2m1fn))
            for scheme in QUANTIZE_SCHEMES:
                row(f"quantize {scheme}", quantize_scheme(scheme).element.name,
                    partial(fpsim.quantize, x, scheme, pad=True), quantize_kernel(x, backend))
        for fmt in ARITH_FORMATS:
            a = fpsim.round(x, fmt, saturate=True)
            b = fpsim.round(xp.asarray(inputs(n, seed=1)), fmt, saturate=True)
            c = fpsim.round(xp.asarray(inputs(n, seed=2)), fmt, saturate=True)
            spec = make_spec(fpsim.format(fmt), "nearest_even", True, False, None)
            for op, func in (("add", partial(fpsim.add, a, b, fmt)),
                             ("mul", partial(fpsim.mul, a, b, fmt)),
                             ("fma", partial(fpsim.fma, a, b, c, fmt))):
                row(op, fmt, func, kind(f"op_{op}", a.dtype, np.dtype(np.float32), spec,
                                        check=True, size=a.size))
    return rows


def _compile_part(backend: str, k: int, parts: int) -> None:
    run(1 << 20, 1, backend, part=(k, parts))


def compile_ahead(backend: str, jobs: int) -> float:
    """Run every elementwise row once on 2**20 elements (the size from which loops are
    specialised) in ``jobs`` fresh processes, each a share of the rows, so that their
    kernels are compiled into Numba's on-disk cache before anything is timed (a GPU
    compiles each kernel variant for seconds); the seconds it took."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    start = time.perf_counter()
    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        list(pool.map(_compile_part, [backend] * jobs, range(jobs), [jobs] * jobs))
    return time.perf_counter() - start


def _halves(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float16).astype(np.float64)


def _gpu_median_seconds(run: Any, repeats: int, sync: Any) -> float:
    """``median_seconds`` of ``run`` on a device: each call timed to its completion."""
    sync()

    def synced() -> None:
        run()
        sync()

    return median_seconds(synced, repeats)


def _same_bits(x: Any, y: Any) -> bool:
    return bool(np.array_equal(np.asarray(x).view(np.int64), np.asarray(y).view(np.int64)))


def run_matmul_gpu(n: int, repeats: int = 5, generic_n: int = 512,
          check_shape: tuple[int, int, int, int] = (2, 150, 301, 260)) -> list[str]:
    """Time each tiled kernel on n x n x n products of binary16 values on the GPU, beside the
    generic loop (at ``min(n, generic_n)``) and cuBLAS SGEMM (binary32, TF32 off), after
    checking the kernels' bits against the generic loop (on ``check_shape``: groups of B,
    rows per group, K, N; and on rows of the n x n products); returns the report's lines
    (also printed). Needs a GPU and CuPy.
    """
    import os
    from importlib.metadata import version

    if "cupy" not in sys.modules:
        os.environ["CUPY_TF32"] = "0"  # cuBLAS in binary32 (CUBLAS_COMPUTE_32F), no TF32
    import cupy

    from fpsim._device import binary32_blas
    from fpsim.backends import cupy_backend
    from fpsim.backends.cuda_tiles import (
        BINARY16_SPEC,
        BINARY32_SPEC,
        accumulate,
        generic_sequential,
        plan,
        prepare_inputs,
        run_tiled,
    )

    lines: list[str] = []
    # (label, accumulator, rounded products) of each tiled kernel timed.
    cases = (("binary32", BINARY32_SPEC, False), ("binary16_fma", BINARY16_SPEC, False),
             ("binary16_rounded", BINARY16_SPEC, True))

    def say(line: str) -> None:
        print(line, flush=True)
        lines.append(line)

    backend = cupy_backend.Backend()
    device = cupy.cuda.Device()
    props = cupy.cuda.runtime.getDeviceProperties(device.id)
    name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    runtime = cupy.cuda.runtime
    say(f"GPU: {name} (cc {props['major']}.{props['minor']}, "
        f"{props.get('multiProcessorCount', '?')} SMs); CUDA runtime "
        f"{runtime.runtimeGetVersion()}, driver {runtime.driverGetVersion()}; CuPy "
        f"{cupy.__version__}, numba-cuda {version('numba-cuda')}, numba {version('numba')}, "
        f"NumPy {np.__version__}")
    rng = np.random.default_rng(35)
    sync = device.synchronize

    # Bits first: every kernel against the generic loop, on a shape of part tiles, two
    # groups of B, signed zeros, infinities, NaN and a binary16 overflow.
    groups, m, k_len, cols = check_shape
    A, B, C = (_halves(rng, s) for s in ((groups * m, k_len), (groups, k_len, cols),
                                         (groups * m, cols)))
    # A[0, 0] * B[0, 0, 3] = 120000 overflows binary16.
    A.flat[0], A.flat[5], A.flat[7], B.flat[9], B.flat[3], C.flat[0], C.flat[5] = (
        4.0, np.inf, -0.0, 0.0, 30000.0, np.nan, -0.0)
    A, B, C = cupy.asarray(A), cupy.asarray(B), cupy.asarray(C)
    for label, spec, rounded in cases:
        got, want = cupy.empty(C.shape), cupy.empty(C.shape)
        counts = accumulate(backend, A, B, C, got, spec, key=None, order="sequential",
                            rounded=rounded, has_c=True, want_stats=False)
        generic_sequential(backend, A, B, C, want, spec, rounded)
        same = counts is not None and _same_bits(cupy.asnumpy(got), cupy.asnumpy(want))
        say(f"bits: {label} on {groups} x ({m} x {k_len}) x {cols} with specials: "
            f"{'identical to the generic loop' if same else 'DIFFERS FROM THE GENERIC LOOP'}")

    A = cupy.asarray(_halves(rng, (n, n)))
    B = cupy.asarray(_halves(rng, (1, n, n)))
    C = cupy.zeros((n, n))
    flops = 2.0 * n**3
    rows = np.r_[0:4, n - 4:n]
    results = []
    for label, spec, rounded in cases:
        out = cupy.empty((n, n))
        options: dict[str, Any] = dict(key=None, order="sequential", rounded=rounded,
                                       want_stats=False)

        def call(out=out, spec=spec, options=options) -> None:
            accumulate(backend, A, B, C, out, spec, has_c=False, **options)

        call()  # compiles (or loads from the cache)
        whole = _gpu_median_seconds(call, repeats, sync)
        launch = plan(spec, A, B, out, **options)
        assert launch is not None  # the call above ran the tiled kernel
        inputs = prepare_inputs(backend, launch, A, B, C)
        flat = out.reshape(-1)
        alone = _gpu_median_seconds(lambda launch=launch, inputs=inputs, flat=flat: run_tiled(
            launch, inputs, flat), repeats, sync)
        want = cupy.empty((rows.size, n))
        generic_sequential(backend, A[rows], B, C[rows], want, spec, rounded)
        same = _same_bits(cupy.asnumpy(out[rows]), cupy.asnumpy(want))
        say(f"bits: {label} at n={n}, rows {rows.tolist()}: "
            f"{'identical to the generic loop' if same else 'DIFFERS FROM THE GENERIC LOOP'}")
        results.append((f"{label} (the whole call)", whole, n))
        results.append((f"{label} (the tiled kernel)", alone, n))

    g = min(n, generic_n)
    for label, spec, rounded in cases[:2]:
        a, b, c, out = A[:g, :g], B[:, :g, :g], C[:g, :g], cupy.empty((g, g))
        a, b, c = (cupy.ascontiguousarray(x) for x in (a, b, c))

        def generic(a=a, b=b, c=c, out=out, spec=spec, rounded=rounded) -> None:
            generic_sequential(backend, a, b, c, out, spec, rounded)

        generic()
        results.append((f"generic loop, {label[:8]} accumulator", _gpu_median_seconds(
            generic, max(1, repeats // 2), sync), g))

    results += _block_fma_gpu(backend, A, B, C, n, g, repeats, sync, say, check_shape, rng)

    a32, b32 = A.astype(np.float32), B[0].astype(np.float32)
    cupy.matmul(a32, b32)
    sgemm = _gpu_median_seconds(lambda: cupy.matmul(a32, b32), repeats, sync)
    results.append(("cuBLAS SGEMM (cupy.matmul, float32)", sgemm, n))
    sgemm_rate = flops / sgemm
    say(f"SGEMM in binary32 (no TF32): {binary32_blas(cupy)}; CUPY_TF32="
        f"{os.environ.get('CUPY_TF32', '(unset)')}")
    say(f"median of {repeats}; n x n x n products of binary16 values (TFLOP/s: 2 n**3 / s)")
    say(f"{'':44s} {'n':>5s} {'seconds':>10s} {'TFLOP/s':>8s} {'of SGEMM':>9s}")
    for label, seconds, size in results:
        rate = 2.0 * size**3 / seconds
        say(f"{label:44s} {size:5d} {seconds:10.4g} {rate / 1e12:8.3f} "
            f"{rate / sgemm_rate:9.1%}")
    return lines


def _block_fma_gpu(backend: Any, A: Any, B: Any, C: Any, n: int, g: int, repeats: int,
                   sync: Callable[[], None], say: Callable[[str], None],
                   check_shape: tuple[int, int, int, int],
                   rng: np.random.Generator) -> list[tuple[str, float, int]]:
    """The H100 block-FMA preset on the GPU: the tiled kernel's bits against the generic
    loop (the check shape, with signed zeros; rows of the n x n product), then the tiled
    kernel timed at ``n`` and the generic loop at ``g``: (label, seconds, n) rows."""
    import cupy

    from fpsim.backends import cuda_blockfma_tiles as tiles

    hw, out_spec, block = fpsim.hw.H100.params(), tiles.OUT_SPEC, fpsim.hw.H100.block

    def tiled(a: Any, b: Any, c: Any, out: Any) -> bool:
        return tiles.accumulate(backend, a, b, c, out, hw, out_spec, block, False) is not None

    def generic(a: Any, b: Any, c: Any, out: Any) -> None:
        # With stats the backend runs the generic loop (the tiled kernel keeps none).
        backend.accumulate_blocks(a, b, c, out, hw, out_spec, block, True)

    groups, m, k_len, cols = check_shape
    a, b, c = (cupy.asarray(_halves(rng, s)) for s in ((groups * m, k_len),
                                                       (groups, k_len, cols),
                                                       (groups * m, cols)))
    a[0, 1], b[0, 2, 0], c[0, 3] = -0.0, 0.0, -0.0
    got, want = cupy.empty(c.shape), cupy.empty(c.shape)
    ran = tiled(a, b, c, got)
    generic(a, b, c, want)
    same = ran and _same_bits(cupy.asnumpy(got), cupy.asnumpy(want))
    say(f"bits: H100 block FMA on {groups} x ({m} x {k_len}) x {cols}: "
        f"{'identical to the generic loop' if same else 'DIFFERS FROM THE GENERIC LOOP'}")
    out = cupy.empty((n, n))
    rows = np.r_[0:4, n - 4:n]
    tiled(A, B, C, out)  # compiles (or loads from the cache)
    want = cupy.empty((rows.size, n))
    generic(cupy.ascontiguousarray(A[rows]), B, cupy.ascontiguousarray(C[rows]), want)
    same = _same_bits(cupy.asnumpy(out[rows]), cupy.asnumpy(want))
    say(f"bits: H100 block FMA at n={n}, rows {rows.tolist()}: "
        f"{'identical to the generic loop' if same else 'DIFFERS FROM THE GENERIC LOOP'}")
    results = [("H100 block FMA (tiled kernel, whole call)",
                _gpu_median_seconds(lambda: tiled(A, B, C, out), repeats, sync), n)]
    a, b, c, small = (cupy.ascontiguousarray(x) for x in (A[:g, :g], B[:, :g, :g], C[:g, :g],
                                                          cupy.empty((g, g))))
    generic(a, b, c, small)
    results.append(("generic loop (with stats), H100 block FMA", _gpu_median_seconds(
        lambda: generic(a, b, c, small), max(1, repeats // 2), sync), g))
    return results


# The first-call rows: (format, mode) of a float32 rounding on a new array.
FIRST_CALLS = (("fp16", "toward_zero"), ("bf16", "nearest_even"))


def first_calls_child(fmt: str, mode: str, n: int, calls: int = 6) -> dict[str, list[float]]:
    """In a fresh process: milliseconds of ``calls`` calls each, in this order, of
    ``x.copy()`` (the machine: fresh pages), ``fpsim.round(x, fmt, mode, out=out)`` into a
    buffer already written (no page faults: what fpsim loads on its first large call) and
    ``fpsim.round(x, fmt, mode)`` (a new result array each call, as ``x.copy()``).

    One rounding of 64 values comes first: it imports Numba and builds the backend, which
    any first call pays, large or small.
    """
    x = inputs(n)
    fpsim.round(x[:64], fmt, mode, seed=seed(mode))
    out = np.ones_like(x)
    cases: dict[str, Callable[[], object]] = {
        "copy": x.copy,
        "round, out=": partial(fpsim.round, x, fmt, mode, seed=seed(mode), out=out),
        "round": partial(fpsim.round, x, fmt, mode, seed=seed(mode)),
    }
    times: dict[str, list[float]] = {}
    for name, func in cases.items():
        times[name] = []
        for _ in range(calls):
            start = time.perf_counter()
            func()
            times[name].append((time.perf_counter() - start) * 1e3)
    return times


def run_first_calls(n: int = 10_000_000, processes: int = 3,
                    warm_up: bool = True) -> list[tuple]:
    """Rows of (what, format, mode, first call's ms, median ms of the later ones, their
    ratio, the ms of each call), the medians over ``processes`` fresh processes (after one
    more, discarded, that compiles whatever Numba's disk cache lacks, with ``warm_up``)."""
    rows = []
    for fmt, mode in FIRST_CALLS:
        code = (f"import json, fpsim.bench as b; "
                f"print(json.dumps(b.first_calls_child({fmt!r}, {mode!r}, {n})))")
        runs = []
        for _ in range(processes + warm_up):
            done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                  check=True)
            runs.append(json.loads(done.stdout.splitlines()[-1]))
        runs = runs[warm_up:]
        for name in runs[0]:
            calls = np.median([r[name] for r in runs], axis=0)
            steady = float(np.median(calls[1:]))
            what = "x.copy()" if name == "copy" else name
            rows.append((what, fmt, mode, float(calls[0]), steady, float(calls[0]) / steady,
                         [float(c) for c in calls]))
    return rows


def median_seconds(func, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def paired(func, reference, repeats: int, pause: float,
           func_pause: float) -> tuple[float, float]:
    """Median seconds of ``func`` and the median of its time over ``reference``'s.

    Each repeat waits ``pause`` seconds, calls the reference twice and times the second
    call (BLAS's threads awake: its best), then times ``func`` after ``func_pause``
    seconds: right after a parallel loop BLAS's or Numba's threads still spin for a while
    and compete with the next loop's (``run_matmul`` gives no pause to work that is
    itself a BLAS call). Pairs cancel the machine's drift out of the ratio.
    """
    pairs = timed_pairs(func, reference, repeats, pause, func_pause, warm=True)
    return float(np.median(pairs[:, 1])), float(np.median(pairs[:, 1] / pairs[:, 0]))


def run_matmul(sizes=(512, 1024), repeats: int = 3, backend: str = "numba",
               pause: float = 0.2) -> list[tuple]:
    """Rows of (what, size, seconds, time ratio to float32 np.matmul), the ratio the
    median of ``repeats`` pairs (``paired``)."""
    from fpsim import hw

    rows = []
    for n in sizes:
        rng = np.random.default_rng(n)
        a = fpsim.round(rng.standard_normal((n, n)), "fp16").astype(np.float32)
        b = fpsim.round(rng.standard_normal((n, n)), "fp16").astype(np.float32)
        a64, b64 = a.astype(np.float64), b.astype(np.float64)  # the same values in float64
        blas = partial(np.matmul, a, b)
        blas()
        rows.append(("np.matmul float32", n, median_seconds(blas, max(repeats, 7)), 1.0))
        # (what, the call, whether it is a BLAS call: timed right after BLAS's, not after
        # a pause)
        cases: tuple[tuple[str, Callable[[], object], bool], ...] = (
            ("fp16 accum, sequential", partial(fpsim.matmul, a, b, accum="fp16"), False),
            ("fp32 accum, order=any",
             partial(fpsim.matmul, a, b, accum="fp32", order="any"), True),
            ("fp32 accum, order=any, float64 in",
             partial(fpsim.matmul, a64, b64, order="any"), True),
            ("H100 block-FMA model", partial(fpsim.matmul, a, b, model=hw.H100), False),
        )
        with fpsim.backend(backend):
            engine = get_backend()
            half = getattr(engine, "half", None)
            if half is not None:
                cases = (
                    (f"{cases[0][0]} ({half.kind})", cases[0][1], False),
                    (f"{cases[0][0]} (software)", partial(without_half, engine, cases[0][1]),
                     False),
                    *cases[1:],
                )
            for what, func, uses_blas in cases:
                func()
                rows.append((what, n, *paired(func, blas, repeats, pause,
                                              0.0 if uses_blas else pause)))
    return rows


def without_half(engine, func):
    """``func`` with the Numba backend's binary16 hardware path switched off."""
    half, engine.half = engine.half, None
    try:
        return func()
    finally:
        engine.half = half


_MX = "mxfp8_e4m3:rule=transformer_engine:pad=on"  # the models' K of 9, 10 and 144
TRAIN_POLICIES = (
    ("emulated mixed precision", "mixed", "dynamic"),
    ("emulated fp16 accumulation", "mixed,accum=fp16,order=sequential", "dynamic"),
    # Issue 33's target: the MXFP8 step against the emulated mixed step (x mixed).
    ("emulated MXFP8 recipe", f"mxfp8,act={_MX},weight={_MX},grad={_MX}", None),
)


def training_step(model_name: str, policy: str, loss_scale, batch: int = 64):
    """A function running one training step of ``model_name`` under ``policy``."""
    from fpsim import nn, optim
    from fpsim.nn import functional as F
    from fpsim.training import Trainer

    nn.manual_seed(0)
    rng = np.random.default_rng(0)
    if model_name == "digits MLP":
        model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
        x = rng.random((batch, 64))
    else:
        model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(),
                              nn.Conv2d(8, 16, 3, stride=2), nn.ReLU(), nn.Flatten(),
                              nn.Linear(144, 10))
        x = rng.random((batch, 1, 8, 8))
    y = rng.integers(0, 10, batch)
    opt = optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    trainer = Trainer(model, opt, policy, loss_scale=loss_scale, monitor=False)
    return partial(trainer.step, lambda: F.cross_entropy(model(x), y))


# glibc's mallopt parameters: freed memory kept below the top of the heap up to this much,
# and arrays up to this size taken from the heap rather than mapped afresh (its maximum).
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
TRIM_LIMIT, MMAP_LIMIT = (1 << 31) - 1, 32 << 20


def hold_freed_memory() -> bool:
    """Have the C library's malloc keep freed memory in the process: no row of the training
    table then pays page faults for fresh pages that another row's history spared it. By
    default glibc maps a large array afresh or not depending on what was freed before
    (a dynamic threshold): the CNN's mixed step paid 4 ms of faults in one order of rows
    and not in another. False where malloc takes no such setting (not glibc)."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, TypeError, AttributeError):  # no C library by that name (Windows: None)
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_LIMIT)) and bool(mallopt(M_TRIM_THRESHOLD,
                                                                         TRIM_LIMIT))


def run_training(repeats: int = 40, rounds: int = 5) -> list[tuple]:
    """Rows of (model, policy, ms per step, time ratio to the float32 step).

    Each policy is timed in blocks of ``repeats`` steps alternating with blocks
    of the float32 step (median of block medians): Numba's loops and BLAS's
    threads are not interleaved across the two, as they are not in a real run.
    ``main`` keeps freed memory first (``hold_freed_memory``).
    """
    rows = []
    for model_name in ("digits MLP", "small CNN"):
        reference = training_step(model_name, "native_fp32", None)
        for what, policy, scale in (("fp32 (no emulation)", None, None), *TRAIN_POLICIES):
            step = reference if policy is None else training_step(model_name, policy, scale)
            for _ in range(5):
                step()
            ref_times, times = [], []
            for _ in range(rounds):
                ref_times.append(median_seconds(reference, repeats))
                times.append(median_seconds(step, repeats))
            seconds = float(np.median(times))
            rows.append((model_name, what, seconds * 1e3, seconds / float(np.median(ref_times))))
    return rows


def language_model_step(policy: str, loss_scale, device: str) -> Callable[[], None]:
    """One training step of the language model at its GPU size (``char_lstm`` at the
    ``gpu`` budget: batches of 2^14 tokens) under ``policy`` on ``device``; the step
    returns once the device has finished it."""
    from fpsim.nn import functional as F
    from fpsim.reproduce.tasks import task
    from fpsim.sweep.train import on_device
    from fpsim.training import Trainer

    lm = task("char_lstm").at("gpu")
    model, optimizer = lm.build(0)
    model.to(device)
    x, y = on_device(next(lm.batches(0)), device)
    trainer = Trainer(model, optimizer, policy, loss_scale=loss_scale, monitor=False,
                      clip_norm=lm.clip_norm)
    finish = fpsim._device.gpu_module().cuda.Device().synchronize if device == "cuda" else None

    def step() -> None:
        trainer.step(lambda: F.cross_entropy(model(x), y.reshape(-1)))
        if finish is not None:
            finish()

    return step


def profile_step(policy: str = "mixed", device: str = "cuda", top: int = 30) -> str:
    """cProfile's table (by own time, then by cumulative time) of one training step of the
    language model at its GPU size under ``policy`` on ``device``, after two warm-up steps."""
    import cProfile
    import io
    import pstats

    step = language_model_step(policy, "dynamic", device)
    for _ in range(2):
        step()
    profiler = cProfile.Profile()
    profiler.runcall(step)
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    return text.getvalue()


DEVICE_STEPS = (
    ("emulated mixed precision", "mixed", "dynamic", "cuda"),
    ("native fp16 (the paper's recipe)", "native_fp16", "dynamic", "cuda"),
    ("native fp32", "native_fp32", None, "cuda"),
    ("emulated mixed precision", "mixed", "dynamic", "cpu"),
)


def run_training_on_device(repeats: int = 5) -> list[tuple[str, str, float]]:
    """Rows of (policy, device, seconds per step: the median of ``repeats`` after two
    warm-up steps) of the language model at its GPU size."""
    rows = []
    for what, policy, scale, device in DEVICE_STEPS:
        step = language_model_step(policy, scale, device)
        for _ in range(2):
            step()
        rows.append((what, device, median_seconds(step, repeats)))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fpsim bench", description=__doc__.splitlines()[0])
    parser.add_argument("which", nargs="?", default="all",
                        choices=["all", "elementwise", "first", "matmul", "train", "quantize"])
    parser.add_argument("-n", type=int, default=10_000_000, help="elements (default 10M)")
    parser.add_argument("--repeats", type=int, default=7, help="timed repeats (median)")
    parser.add_argument("--sizes", default="512,1024", help="matmul sizes (default 512,1024)")
    parser.add_argument("--backend", default="numba", choices=["numpy", "numba", "cupy"])
    parser.add_argument("--device", default="cpu", choices=["cpu", "gpu"],
                        help="train: the language model's step on a GPU, emulated and native, "
                             "against the emulated step on the CPU")
    parser.add_argument("--jobs", type=int, default=1,
                        help="elementwise: compile the kernels first in this many processes")
    parser.add_argument("--profile", action="store_true",
                        help="train --device gpu: also profile one emulated step on the GPU")
    args = parser.parse_args(argv)
    if args.n < 1:
        parser.error(f"-n must be at least 1, got {args.n}")
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1, got {args.repeats}")
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    try:
        sizes = tuple(int(v) for v in args.sizes.split(","))
    except ValueError:
        parser.error(f"--sizes takes matrix sizes separated by commas, got {args.sizes!r}")
    if any(n < 1 for n in sizes):
        parser.error(f"--sizes must be positive, got {args.sizes!r}")
    if args.backend == "cupy" and args.which not in ("all", "elementwise", "matmul"):
        parser.error("--backend cupy measures the elementwise operations and products only")
    if args.profile and args.device != "gpu":
        parser.error("--profile goes with train --device gpu")
    if args.device == "gpu" and args.which != "train":
        parser.error("--device gpu measures the training step only (fpsim bench train)")
    if "cupy" in (args.backend, args.device.replace("gpu", "cupy")):
        from fpsim.backends import gpu_missing

        if gpu_missing():
            parser.error(f"--{'device' if args.device == 'gpu' else 'backend'} "
                         f"{args.device if args.device == 'gpu' else 'cupy'}: {gpu_missing()}")
    if args.device == "gpu":
        print(f"fpsim {fpsim.__version__}, the language model's training step at its GPU "
              f"size (char_lstm, budget gpu: 512 x 32 tokens, hidden 512), median of "
              f"{args.repeats} after 2 warm-up steps")
        print(machine(True))
        print(machine(False))
        steps = run_training_on_device(args.repeats)
        base = {d: s for w, d, s in steps if w == "emulated mixed precision"}
        print(f"{'policy':34} {'device':6} {'s/step':>9} {'x emulated on GPU':>18}")
        for what, device, seconds in steps:
            print(f"{what:34} {device:6} {seconds:9.4f} {seconds / base['cuda']:18.2f}")
        print(f"emulated mixed precision: the GPU step is {base['cpu'] / base['cuda']:.1f}x "
              "faster than the CPU's")
        if args.profile:
            print("\none emulated mixed-precision step on the GPU, profiled:")
            print(profile_step())
        return 0
    gpu = args.backend == "cupy"
    print(f"fpsim {fpsim.__version__}, backend {args.backend}, median of {args.repeats}, "
          "each timed in pairs with its reference")
    print(machine(gpu))
    if not gpu:
        print(compiled_for())
    if args.which in ("all", "elementwise", "quantize"):
        reference = "a device-to-device copy's" if gpu else "np.copyto's"
        print(f"\nelementwise, n={args.n:,} float32; ratio: throughput / {reference}")
        if args.jobs > 1:
            print(f"(kernels compiled ahead in {args.jobs} processes: "
                  f"{compile_ahead(args.backend, args.jobs):.0f} s)")
        print(f"{'operation':34} {'format':9} {'kernel':13} {'M elem/s':>10} {'x copy':>8}")
        only = QUANTIZE_ROWS if args.which == "quantize" else ()
        rows = run(args.n, args.repeats, args.backend, only=only)
        for what, fmt, kernel, rate, ratio in rows:
            print(f"{what:34} {fmt:9} {kernel:13} {rate:10.1f} {ratio:8.3f}")
    if gpu:
        if args.which in ("all", "matmul"):
            print("\nproducts on the GPU: the tiled kernels (fpsim.backends.cuda_tiles) "
                  "against the generic loop and cuBLAS SGEMM")
            for n in sizes:
                run_matmul_gpu(n, args.repeats)
        return 0
    if args.which in ("all", "first"):
        print(f"\nfirst calls on a new array, n={args.n:,} float32, in fresh processes (median "
              "of 3); ratio: first call / median of the later ones")
        print(f"{'call':14} {'format':8} {'mode':13} {'first ms':>9} {'later ms':>9} "
              f"{'ratio':>6}  each call (ms)")
        for what, fmt, mode, first, steady, ratio, calls in run_first_calls(args.n):
            each = " ".join(f"{c:.1f}" for c in calls)
            print(f"{what:14} {fmt:8} {mode:13} {first:9.1f} {steady:9.1f} {ratio:6.1f}  {each}")
    if args.which in ("all", "matmul"):
        print("\nmatmul n x n x n, fp16-valued float32 inputs; ratio: median of time / "
              "float32 np.matmul's, timed in pairs")
        print(f"{'product':36} {'n':>5} {'seconds':>9} {'x BLAS':>8}")
        for what, n, seconds, ratio in run_matmul(sizes, args.repeats, args.backend):
            print(f"{what:36} {n:5d} {seconds:9.4f} {ratio:8.1f}")
    if args.which in ("all", "train"):
        held = hold_freed_memory()
        print("\ntraining step, batch 64, SGD with momentum; ratio: median time / the "
              "float32 step's (alternating blocks); malloc "
              + ("keeps freed memory (no page faults for fresh pages)" if held else
                 "as the C library sets it"))
        print(f"{'model':12} {'policy':28} {'ms/step':>8} {'x fp32':>7} {'x mixed':>7}")
        mixed: dict[str, float] = {}
        for model_name, what, ms, ratio in run_training():
            if what == TRAIN_POLICIES[0][0]:
                mixed[model_name] = ratio
            versus = f"{ratio / mixed[model_name]:7.2f}" if "MXFP8" in what else ""
            print(f"{model_name:12} {what:28} {ms:8.2f} {ratio:7.2f} {versus}".rstrip())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
