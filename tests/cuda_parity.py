"""The cupy backend's CUDA kernels against the NumPy backend, under Numba's CUDA simulator.

The simulator runs the kernels' loops as Python on the CPU, with the device build's
primitives except the libdevice bit casts (NumPy stand-ins: the simulator's are stubs).
Every kernel and variant is compared bit for bit with the NumPy reference backend:
results, flags and operand-check counts of every elementwise operation over every
preset format (and two custom ones), rounding mode, subnormals on and off and
saturation, on values that include ties, subnormals, overflow, infinities and NaN;
``first_unrepresentable``; small accumulations in every order, with and without c,
stochastic and with stats; every block-FMA model. It also goes through the public API
with host arrays, and with device arrays (``fake_cupy``).

It must run in its own process, since ``NUMBA_ENABLE_CUDASIM=1`` must be set before
numba.cuda is first imported::

    NUMBA_ENABLE_CUDASIM=1 python tests/cuda_parity.py [--values N] [--plant BUG]

``--values``: values per (format, mode, subnormals, saturate) and kernel (default 96).
``--cover``: the elementwise kernels on each format and mode once, not under all four
subnormals/saturation settings each; the settings cycle so that every format and every
mode meets each of them (a quarter of the launches: the suite's default).
``--plant``: first plant a bug in a loop's launch bounds (``elementwise`` or
``accumulate``), in the specialisation (``specialised``) or in a hardware loop
(``hardware``); the run must then report differences. ``--only``: the checks whose
names contain this. ``--first``: stop at the first difference (a planted bug's run
needs no more). Exit status 1 on any difference.
"""

from __future__ import annotations

import argparse
import inspect
import itertools
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fake_cupy  # noqa: E402

sys.modules["cupy"] = fake_cupy  # what fpsim imports as CuPy

import fpsim  # noqa: E402
from fpsim.backends import cuda_loops, numpy_backend  # noqa: E402
from fpsim.backends.protocol import ARITY, KERNELS  # noqa: E402
from fpsim.formats import as_format  # noqa: E402
from fpsim.kernels.spec import make_spec  # noqa: E402
from fpsim.modes import STOCHASTIC  # noqa: E402

FORMATS = [*fpsim.PRESETS.values(), fpsim.Format(6, 9), fpsim.Format(3, 2, infinities=False)]
SENTINEL = np.array([0x7FF4DEADBEEF0001], dtype=np.int64).view(np.float64)[0]
PLANTS = {
    "elementwise": ("range(cuda.grid(1), out.size, cuda.gridsize(1))",
                    "range(cuda.grid(1), out.size - 1, cuda.gridsize(1))"),
    "accumulate": ("range(cuda.grid(1), A.shape[0] * n, cuda.gridsize(1))",
                   "range(cuda.grid(1) + 1, A.shape[0] * n, cuda.gridsize(1))"),
    # A specialised loop folding the wrong format: one fraction bit fewer.
    "specialised": ("spec = spec_in if SPEC is None else SPEC",
                    "spec = spec_in if SPEC is None else SPEC._replace(t=SPEC.t - 1)"),
    # A hardware loop giving the GPU's canonical NaN, not fpsim's.
    "hardware": ("out[i] = WIDEN(NARROW(v)) if v == v else QUIET_NAN",
                 "out[i] = WIDEN(NARROW(v))"),
}
PLANTED_IN = {"elementwise": "elementwise", "accumulate": "accumulate_sequential",
              "specialised": "elementwise", "hardware": "hardware_round"}


class FirstDifference(Exception):
    """Raised by a Report made with ``first=True`` at its first difference."""


class Report:
    def __init__(self, first: bool = False) -> None:
        self.cases = 0
        self.failures: list[str] = []
        self.first = first

    def check(self, what: str, ok: bool, detail: str = "") -> None:
        self.cases += 1
        if not ok:
            self.failures.append(f"{what}: {detail}")
            if self.first:
                raise FirstDifference

    def same_bits(self, what: str, got, want, inputs=()) -> None:
        """Arrays equal encoding for encoding."""
        got, want = np.ravel(got), np.ravel(want)
        ok = got.dtype == want.dtype and np.array_equal(bits(got), bits(want))
        self.check(what, ok, "" if ok else first_difference(got, want, inputs))

    def equal(self, what: str, got, want) -> None:
        ok = bool(np.all(np.asarray(got) == np.asarray(want)))
        self.check(what, ok, "" if ok else f"{got!r}, the NumPy backend {want!r}")


def bits(x) -> np.ndarray:
    """Floats as their encodings (NaN payloads and signed zeros compared too)."""
    x = np.asarray(x)
    if x.dtype.kind != "f":
        return x
    return x.view({8: np.int64, 4: np.int32, 2: np.int16}[x.dtype.itemsize])


def shown(v) -> str:
    v = np.asarray(v)
    return f"{v!r} ({int(bits(v)) & (2**(8 * v.itemsize) - 1):#x})" if v.dtype.kind == "f" \
        else repr(v)


def first_difference(got, want, inputs) -> str:
    if got.dtype != want.dtype:
        return f"dtype {got.dtype}, the NumPy backend {want.dtype}"
    i = int(np.flatnonzero(bits(got) != bits(want))[0])
    args = ", ".join(shown(np.asarray(v)[i]) for v in inputs)
    return (f"element {i} of {np.size(got)}: inputs ({args}) gave {shown(np.asarray(got)[i])}, "
            f"the NumPy backend {shown(np.asarray(want)[i])}")


# -- values ------------------------------------------------------------------------


def format_values(fmt, n, rng) -> np.ndarray:
    """Values of ``fmt``: random encodings (every class: subnormal, inf, NaN) and extremes."""
    codes = rng.integers(0, 2**fmt.bits, n, dtype=np.uint64)
    v = np.asarray(fpsim.from_bits(codes, fmt), dtype=np.float64)
    extremes = [0.0, -0.0, fmt.max, -fmt.max, fmt.smallest_subnormal, -fmt.smallest_normal,
                np.nan, np.inf if fmt.infinities else np.nan, 1.0, -1.5]
    k = min(n, len(extremes))
    v[rng.choice(n, k, replace=False)] = extremes[:k]
    return v


def ulp(v, fmt) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        e = np.floor(np.log2(np.abs(v)))
    e = np.where(np.isfinite(e), np.maximum(e, fmt.emin), fmt.emin)
    return np.exp2(e - fmt.man_bits)


def round_inputs(fmt, n, rng) -> np.ndarray:
    """Float64 values at, between and beside the format's values, beyond its range, NaN."""
    v = format_values(fmt, n, rng)
    v = np.where(np.isfinite(v), v, 1.0)
    u = ulp(v, fmt)
    pick = rng.integers(0, 6, n)
    with np.errstate(over="ignore", invalid="ignore"):
        mid = v + np.copysign(u / 2, v)  # ties (exact in binary64 for these formats)
        out = np.select(
            [pick == 0, pick == 1, pick == 2, pick == 3, pick == 4],
            [v, mid, np.nextafter(mid, np.inf), np.nextafter(mid, -np.inf),
             v * 2.0 ** rng.integers(-8, 9, n)],
            rng.standard_normal(n) * 2.0 ** rng.integers(fmt.emin - fmt.man_bits - 3,
                                                         min(fmt.emax + 3, 1000), n),
        )
    special = [np.inf, -np.inf, np.nan, fmt.max + ulp(np.array([fmt.max]), fmt)[0] / 2,
               -2.0 * fmt.max, fmt.smallest_subnormal / 2, -fmt.smallest_subnormal * 0.75,
               fmt.smallest_normal * (1 - 2.0**-30), 0.0, -0.0]
    k = min(n, len(special))
    out[rng.choice(n, k, replace=False)] = special[:k]
    return out


def operands(fmt, arity, n, rng) -> list[np.ndarray]:
    """Values of the format; the second operand often near the first (cancellation,
    absorption, ties), and a few values that are not of the format (the operand check)."""
    ops = [format_values(fmt, n, rng) for _ in range(arity)]
    if arity >= 2:
        near = rng.random(n) < 0.4
        scale = 2.0 ** rng.integers(-fmt.man_bits - 3, 3, n) * rng.choice([-1, 1], n)
        with np.errstate(all="ignore"):
            product = ops[0] * scale
            # A format without NaN (fp6, fp4) refuses to round one: NaN moves nothing.
            moved = numpy_round(np.where(np.isnan(product), 0.0, product), fmt)
        ops[1] = np.where(near & np.isfinite(moved) & ~np.isnan(product), moved, ops[1])
    if fmt.man_bits < 52:
        for op in ops:
            bad = rng.random(n) < 0.02
            with np.errstate(invalid="ignore"):
                op[bad] = op[bad] + np.copysign(ulp(op[bad], fmt) / 2, op[bad])
    return ops


def numpy_round(x, fmt, mode="nearest_even") -> np.ndarray:
    with fpsim.backend("numpy"):
        return np.asarray(fpsim.round(x, fmt, mode, saturate=True), dtype=np.float64)


# -- the checks ----------------------------------------------------------------------


SETTINGS = ((True, False), (False, True), (False, False), (True, True))  # subnormals, saturate


def elementwise_cases(cover: bool) -> list[tuple]:
    """(format, mode, subnormals, saturate): every combination; with ``cover``, each format
    and mode once, the settings cycling so that every format meets each of the four
    settings (over its modes) and every mode too (over the formats)."""
    modes = fpsim.ROUNDING_MODES
    if not cover:
        return [(f, m, *s) for f, m, s in itertools.product(FORMATS, modes, SETTINGS)]
    return [(f, m, *SETTINGS[(i + j) % len(SETTINGS)])
            for i, f in enumerate(FORMATS) for j, m in enumerate(modes)]


def check_elementwise(gpu, ref, report, values, rng, cover=False) -> None:
    for index, (fmt, mode, subnormals, saturate) in enumerate(elementwise_cases(cover)):
        spec = make_spec(fmt, mode, subnormals, saturate, None)
        key = int(rng.integers(0, 2**63)) if spec.mode == STOCHASTIC else None
        narrow = fmt.dtype != np.float64 and index % 3 == 0  # float32 operands and result
        work = np.float32 if narrow else np.float64
        for kernel in KERNELS:
            if kernel != "round_value" and fmt.man_bits > 29:
                continue  # arithmetic takes formats of up to 29 fraction bits
            arity = ARITY[kernel]
            ops = ([round_inputs(fmt, values, rng)] if kernel == "round_value"
                   else operands(fmt, arity, values, rng))
            ops = [op.astype(work) for op in ops]
            for want_flags, check, device in ((True, True, index % 2 == 0),
                                              (False, False, index % 2 == 1)):
                what = (f"{kernel} {fmt.name} {mode} subnormals={subnormals} "
                        f"saturate={saturate} {np.dtype(work).name} flags={want_flags} "
                        f"check={check} {'device' if device else 'host'} arrays")
                outs = []
                for backend in (gpu, ref):
                    out = np.full(values, SENTINEL, dtype=work)
                    flags = np.full(values, 0xFF, np.uint8) if want_flags else None
                    args = ops
                    if device and backend is gpu:
                        out = fake_cupy.asarray(out)
                        flags = None if flags is None else fake_cupy.asarray(flags)
                        args = [fake_cupy.asarray(op) for op in ops]
                    bad = backend.apply(kernel, args, out, flags, spec, key, check=check)
                    outs.append((fake_cupy.asnumpy(out), None if flags is None
                                 else fake_cupy.asnumpy(flags), bad))
                (o1, f1, b1), (o2, f2, b2) = outs
                report.same_bits(what + ": values", o1, o2, ops)
                if want_flags:
                    report.same_bits(what + ": flags", f1, f2, ops)
                report.equal(what + ": operand check (unrepresentable count)", b1, b2)


def float32_edges() -> np.ndarray:
    """Float32 inputs at the edges of the 16- and 8-bit formats: ties (even and odd kept
    bits) and their neighbours at several scales, the subnormal ranges, the overflow
    thresholds, both zeros, infinities, NaN of both signs, the binary32 subnormals."""
    high = np.array([0x3F80, 0x3F81, 0x3F82, 0x4780, 0x477F, 0x3380, 0x3300, 0x3340, 0x0080,
                     0x0001, 0x7F7F, 0x0000, 0x387F, 0x3880, 0x3B00, 0x4370, 0x47EF, 0x4760],
                    dtype=np.uint32)
    low = np.array([0x0000, 0x0001, 0x0FFF, 0x1000, 0x1001, 0x3000, 0x7FFF, 0x8000, 0x8001,
                    0xF000, 0xFFFF], dtype=np.uint32)
    codes = (high[:, None] << 16 | low[None, :]).ravel()
    codes = np.concatenate([codes, codes | 0x80000000,
                            np.array([0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001, 0x7F800001,
                                      0x00000001, 0x807FFFFF, 0x477FEFFF, 0x477FF000,
                                      0x7F7FFFFF, 0x43F00000, 0x43700000], dtype=np.uint32)])
    return codes.view(np.float32)


def check_variants(gpu, ref, report, values, rng) -> None:
    """The loops specialised to a format and mode (``hot``, as a large array would be),
    and the rounding on the binary32 encoding (float32 in and out), generic and
    specialised: every mode, the formats binary32 carries and two it does not."""
    edges = float32_edges()
    formats = [fpsim.format(f) for f in ("fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "fp6_e2m3",
                                         "e8m0", "fp32", "fp64")] + [fpsim.Format(3, 2)]
    for fmt, mode, index in ((f, m, i) for i, (f, m) in enumerate(
            itertools.product(formats, fpsim.ROUNDING_MODES))):
        subnormals, saturate = index % 4 != 3, index % 5 == 4
        spec = make_spec(fmt, mode, subnormals, saturate, None)
        key = int(rng.integers(0, 2**63)) if spec.mode == STOCHASTIC else None
        x = np.concatenate([edges[rng.choice(edges.size, values, replace=False)],
                            round_inputs(fmt, values, rng).astype(np.float32)])
        for work, hot, want_flags in ((np.float32, False, index % 2 == 0),
                                      (np.float32, True, index % 2 == 1),
                                      (np.float64, True, index % 2 == 0)):
            name = gpu.kernel_name("round_value", np.dtype(work), np.dtype(work), spec, hot=hot,
                                   size=x.size, flags=want_flags)
            what = (f"round_value {fmt.name} {mode} subnormals={subnormals} saturate={saturate} "
                    f"{np.dtype(work).name} flags={want_flags} ({name})")
            check_call(gpu, ref, report, what, "round_value", [x.astype(work)], spec, key,
                       want_flags, False, hot)
        if fmt.man_bits > 29:
            continue
        for kernel in ("op_add", "op_mul", "op_fma", "op_div", "op_sqrt"):
            ops = operands(fmt, ARITY[kernel], values // 2, rng)
            for work, check in ((np.float32, True), (np.float64, False)):
                if work is np.float32 and fmt.dtype == np.float64:
                    continue
                what = f"{kernel} {fmt.name} {mode} {np.dtype(work).name} check={check} hot"
                check_call(gpu, ref, report, what, kernel, [op.astype(work) for op in ops],
                           spec, key, index % 2 == 0, check, True)
    check_hardware(gpu, ref, report, values, rng)
    # Each variant ran: (spec folded or not, encoding) of the elementwise loops built.
    built = {(len(k) > 2 and k[2] is not None, k[3] if len(k) > 2 else "binary64")
             for k in gpu._loops if k[0] == "elementwise"}
    built |= {(k[0], k[4][0]) for k in gpu._loops if k[0].startswith("hardware")}
    report.check("the variants ran", built >= {
        (True, "binary32"), (False, "binary32"), (True, "binary64"),
        ("hardware_round", "round_value"), *(("hardware_arithmetic", kernel) for kernel in (
            "op_add", "op_sub", "op_mul", "op_fma"))},
                 f"built {sorted(map(str, gpu._loops))}")


def check_hardware(gpu, ref, report, values, rng) -> None:
    """The hardware paths (cupy_backend's ``cuda_hardware``: under the simulator, exact
    stand-ins of the instructions): float32 rounded to fp16 and bf16 in each mode the
    conversion has, and their arithmetic in nearest-even on values of the format, on
    operands that are not (the software kernel in the same loop), NaN and infinities."""
    from fpsim.backends import cuda_hardware

    edges = float32_edges()
    for fmt, mode in itertools.product(cuda_hardware.FORMATS, cuda_hardware.CONVERSION_MODES):
        spec = make_spec(fpsim.format(fmt), mode, True, False, None)
        f32 = np.dtype(np.float32)
        name = gpu.kernel_name("round_value", f32, f32, spec, hot=True)
        report.check(f"round_value {fmt} {mode} runs on the hardware", name == "hardware", name)
        x = np.concatenate([edges, round_inputs(fpsim.format(fmt), values, rng)]).astype(f32)
        check_call(gpu, ref, report, f"round_value {fmt} {mode} float32 (hardware)",
                   "round_value", [x], spec, None, False, False, True)
        if mode != "nearest_even":
            continue
        for kernel in cuda_hardware.ARITHMETIC:
            name = gpu.kernel_name(kernel, f32, f32, spec, check=True, hot=True)
            report.check(f"{kernel} {fmt} runs on the hardware", name == "hardware", name)
            ops = [op.astype(f32) for op in operands(fpsim.format(fmt), ARITY[kernel],
                                                     values, rng)]
            for check in (True, False):
                check_call(gpu, ref, report, f"{kernel} {fmt} float32 check={check} (hardware)",
                           kernel, ops, spec, None, False, check, True)


def check_call(gpu, ref, report, what, kernel, ops, spec, key, want_flags, check, hot) -> None:
    """One elementwise call on both backends: values, flags and the operand check's count."""
    outs = []
    for backend in (gpu, ref):
        out = np.full(ops[0].size, SENTINEL, dtype=ops[0].dtype)
        flags = np.full(out.size, 0xFF, np.uint8) if want_flags else None
        bad = backend.apply(kernel, ops, out, flags, spec, key, check=check, hot=hot)
        outs.append((out, flags, bad))
    (o1, f1, b1), (o2, f2, b2) = outs
    report.same_bits(what + ": values", o1, o2, ops)
    if want_flags:
        report.same_bits(what + ": flags", f1, f2, ops)
    report.equal(what + ": operand check (unrepresentable count)", b1, b2)


def check_first_unrepresentable(gpu, ref, report, rng) -> None:
    for fmt in FORMATS:
        spec = make_spec(fmt, "nearest_even", True, False, None)
        for n in (0, 1, 7, 300):
            x = format_values(fmt, n, rng)
            for where in {None, 0, n // 2, n - 1} if n else {None}:
                y = x.copy()
                if where is not None and fmt.man_bits < 52:
                    y[where:] = 1.0 + fmt.eps / 2  # not a value of the format
                for arr in (y, fake_cupy.asarray(y)):
                    got = gpu.first_unrepresentable(arr, spec)
                    want = ref.first_unrepresentable(y, spec)
                    report.equal(f"first_unrepresentable {fmt.name} n={n} bad from {where}",
                                 got, want)


def accumulation_inputs(in_fmt, rows, k_len, n, groups, rng, special, b_fmt=None):
    a = format_values(in_fmt, rows * k_len, rng).reshape(rows, k_len)
    b = format_values(b_fmt or in_fmt, groups * k_len * n, rng).reshape(groups, k_len, n)
    for x in (a, b):
        finite = np.isfinite(x)
        if not special:
            x[~finite] = 1.0
        x[rng.random(x.shape) < 0.2] = 0.0
    return a, b


def check_accumulate(gpu, ref, report, rng) -> None:
    cases = itertools.product(
        ("fp16", "bf16", "fp8_e4m3", "fp32"), ("nearest_even", "toward_zero", "odd",
                                               "stochastic"),
        ((0, "sequential"), (1, "sequential"), (5, "pairwise"), (17, "sequential"),
         (17, "pairwise"), (1, "pairwise"), (0, "pairwise")),
    )
    for index, (accum, mode, (k_len, order)) in enumerate(cases):
        fmt = fpsim.format(accum)
        spec = make_spec(fmt, mode, index % 4 != 3, index % 5 == 4, None)
        key = int(rng.integers(0, 2**63)) if spec.mode == STOCHASTIC else None
        rows, n = 6, 5
        groups = 3 if index % 2 else 1
        a, b = accumulation_inputs(fpsim.format("fp16"), rows, k_len, n, groups, rng,
                                   special=index % 3 == 0)
        c = numpy_round(format_values(fmt, rows * n, rng), fmt).reshape(rows, n)
        has_c = index % 2 == 0
        if not has_c:
            c[:] = 0.0
        for rounded, stats, device in ((index % 3 == 1, True, index % 2 == 0),
                                       (False, False, index % 2 == 1)):
            what = (f"accumulate {order} K={k_len} {accum} {mode} rounded={rounded} "
                    f"has_c={has_c} stats={stats} groups={groups}")
            results = []
            for backend in (gpu, ref):
                out = np.full((rows, n), SENTINEL)
                args = (a, b, c)
                if device and backend is gpu:
                    out = fake_cupy.asarray(out)
                    args = tuple(fake_cupy.asarray(v) for v in args)
                counts = backend.accumulate(*args, out, spec, key=key, order=order,
                                            rounded=rounded, has_c=has_c, want_stats=stats)
                results.append((fake_cupy.asnumpy(out), np.asarray(counts)))
            (o1, c1), (o2, c2) = results
            report.same_bits(what + ": values", o1, o2)
            report.equal(what + ": stats", c1.tolist(), c2.tolist())


def check_blocks(gpu, ref, report, rng) -> None:
    models = [*fpsim.hw.PRESETS.values(),
              fpsim.hw.BlockFMA("custom", block=3, frac_bits=3, exp_floor=None,
                                input="fp8_e5m2", output="bf16",
                                output_rounding="nearest_even"),
              fpsim.hw.BlockFMA("custom-e4m3", block=5, frac_bits=30, exp_floor=-140,
                                input="fp8_e4m3", output="fp16"),
              fpsim.hw.H100_FP8.with_inputs("fp8_e5m2", "fp8_e4m3"),
              fpsim.hw.L40_FP8.with_inputs("fp8_e4m3", "fp8_e5m2"),
              fpsim.hw.B200_FP8.with_inputs("fp6_e3m2", "fp4_e2m1"),
              # AMD CDNA3's two-stage alignment (the presets are in PRESETS), and a custom
              # one: no floor, saturation, +0 for every zero, bf16 output.
              fpsim.hw.BlockFMA("custom-round-down", block=3, frac_bits=6, exp_floor=None,
                                input="fp8_e5m2", output="bf16", overflow="saturate",
                                output_rounding="nearest_even", align="round_down",
                                sum_bits=9)]
    for index, (model, k_len) in enumerate(itertools.product(models, (0, 3, 16, 33))):
        hw = model.params()
        fin, fout = as_format(model.input), as_format(model.output)
        # Each step's result rounded to the block output (e8m13) where the model has one.
        out_spec = make_spec(as_format(model.block_output or fout), model.output_rounding,
                             True, False, None)
        rows, n, groups = 4, 3, 2 if index % 2 else 1
        a, b = accumulation_inputs(fin, rows, k_len, n, groups, rng, special=index % 3 == 0,
                                   b_fmt=as_format(model.input_b or fin))
        c = numpy_round(format_values(fout, rows * n, rng), fout).reshape(rows, n)
        for stats in (True, False):
            what = f"accumulate_blocks {model.name} K={k_len} stats={stats} groups={groups}"
            results = []
            for backend in (gpu, ref):
                out = np.full((rows, n), SENTINEL)
                counts = backend.accumulate_blocks(a, b, c, out, hw, out_spec, model.block,
                                                   stats)
                results.append((out, np.asarray(counts)))
            (o1, c1), (o2, c2) = results
            report.same_bits(what + ": values", o1, o2)
            report.equal(what + ": stats", c1.tolist(), c2.tolist())


def public_calls(rng) -> list:
    """Results of a few public calls (the core's checks, layout and dtypes included)."""
    x = round_inputs(fpsim.format("fp16"), 200, rng)
    h = numpy_round(x, "fp16")
    a = numpy_round(rng.standard_normal((2, 4, 24)), "fp16").astype(np.float32)
    b = numpy_round(rng.standard_normal((24, 5)), "fp16")
    image = numpy_round(rng.standard_normal((2, 3, 7, 6)), "fp16")
    kernels = numpy_round(rng.standard_normal((4, 3, 3, 3)), "fp16")
    return [
        lambda xp: fpsim.conv2d(xp.asarray(image), xp.asarray(kernels), stride=2, padding=1,
                                accum="fp16", order="pairwise"),
        lambda xp: fpsim.round(xp.asarray(x), "bf16", "stochastic", seed=3),
        lambda xp: fpsim.round(xp.asarray(x.astype(np.float32)), "fp8_e4m3", saturate=True),
        lambda xp: fpsim.add(xp.asarray(h), xp.asarray(h[::-1]), "fp16", flags=True),
        lambda xp: fpsim.fma(xp.asarray(h), 0.5, xp.asarray(h[::-1]), "fp16", "up"),
        lambda xp: fpsim.matmul(xp.asarray(a), xp.asarray(b), accum="fp16", stats=True),
        lambda xp: fpsim.matmul(xp.asarray(a), b, accum="bf16", order="pairwise",
                                rounding="stochastic", seed=2, out="fp8_e5m2"),
        lambda xp: fpsim.matmul(xp.asarray(a), xp.asarray(b), model=fpsim.hw.H100, c=1.0,
                                stats=True),
        lambda xp: fpsim.sum(xp.asarray(a), axis=1, accum="fp16", c=xp.asarray(np.ones(24))),
        lambda xp: fpsim.dot(xp.asarray(a[0, 0]), xp.asarray(b[:, 0]), accum="bf16", c=1.0),
        # out=: in place, into another array, into a strided one (through a temporary)
        lambda xp: (lambda y: fpsim.round(y, "fp16", "up", out=y))(xp.asarray(x.copy())),
        lambda xp: fpsim.round(xp.asarray(x), "bf16", out=xp.empty(x.shape, np.float32)),
        lambda xp: fpsim.round(xp.asarray(x), "fp8_e5m2",
                               out=xp.zeros(2 * x.size, np.float64)[::2]),
    ]


def check_public(report, rng) -> None:
    for index, call in enumerate(public_calls(rng)):
        with fpsim.backend("numpy"):
            want = call(np)
        for xp in (np, fake_cupy):
            with fpsim.backend("cupy"):
                got = call(xp)
            parts = zip(got if isinstance(got, tuple) else (got,),
                        want if isinstance(want, tuple) else (want,), strict=True)
            for g, w in parts:
                what = f"public call {index} ({xp.__name__} arrays)"
                if isinstance(w, fpsim.AccumulationStats):
                    report.equal(what + ": stats", g, w)
                    continue
                kind = type(w) if xp is np or np.ndim(w) == 0 else fake_cupy.ndarray
                report.equal(what + ": array type", type(g), kind)
                report.same_bits(what + ": values", fake_cupy.asnumpy(g), np.asarray(w))


def check_bench(report) -> None:
    """``fpsim bench --backend cupy``'s measurement runs (its figures mean nothing here)."""
    from fpsim import bench

    rows = bench.run(n=64, repeats=1, backend="cupy", xp=fake_cupy)
    report.equal("bench rows", len(rows), 2 + 7 * len(bench.ROUND_FORMATS)
                 + len(bench.OUT_FORMATS) * len(bench.OUT_MODES) + 3 * len(bench.ARITH_FORMATS))
    report.check("bench figures", all(r[3] > 0 and r[4] > 0 for r in rows), str(rows[:3]))


def plant(bug: str) -> None:
    """Replace a loop of cuda_loops by a copy with a launch-bounds bug."""
    name = PLANTED_IN[bug]
    old, new = PLANTS[bug]
    source = inspect.getsource(getattr(cuda_loops, name))
    assert old in source, f"the planted bug no longer applies to {name}"
    namespace = dict(vars(cuda_loops))
    exec(compile(source.replace(old, new), f"<planted {bug}>", "exec"), namespace)
    setattr(cuda_loops, name, namespace[name])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--values", type=int, default=96)
    parser.add_argument("--plant", choices=sorted(PLANTS))
    parser.add_argument("--seed", type=int, default=20261122)
    parser.add_argument("--only", help="run only the checks whose names contain this")
    parser.add_argument("--first", action="store_true", help="stop at the first difference")
    parser.add_argument("--cover", action="store_true",
                        help="each format and mode once, the four settings cycling")
    args = parser.parse_args(argv)
    if os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":
        print("set NUMBA_ENABLE_CUDASIM=1 (this runs the CUDA kernels in the simulator)")
        return 2
    warnings.simplefilter("ignore")  # the simulator's NumPy scalars warn on wrapping
    if args.plant:
        plant(args.plant)
    from fpsim.backends import cupy_backend

    gpu, ref = cupy_backend.Backend(), numpy_backend.Backend()
    assert gpu.simulator
    rng = np.random.default_rng(args.seed)
    report = Report(first=args.first)
    checks = [
        ("elementwise", lambda: check_elementwise(gpu, ref, report, args.values, rng,
                                                  args.cover)),
        ("variants", lambda: check_variants(gpu, ref, report, max(4, args.values // 2), rng)),
        ("first_unrepresentable", lambda: check_first_unrepresentable(gpu, ref, report, rng)),
        ("accumulate", lambda: check_accumulate(gpu, ref, report, rng)),
        ("accumulate_blocks", lambda: check_blocks(gpu, ref, report, rng)),
        ("public API", lambda: check_public(report, rng)),
        ("bench", lambda: check_bench(report)),
    ]
    for name, run in checks:
        if args.only and args.only not in name:
            continue
        start, before, failed = time.perf_counter(), report.cases, len(report.failures)
        try:
            run()
        except FirstDifference:
            pass
        print(f"{name}: {report.cases - before} comparisons, "
              f"{len(report.failures) - failed} differ ({time.perf_counter() - start:.1f} s)")
        if report.first and report.failures:
            break
    for line in report.failures[:12]:
        print("DIFFERS", line)
    print(f"{report.cases} comparisons, {len(report.failures)} differ")
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
