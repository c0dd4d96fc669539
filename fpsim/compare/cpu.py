"""The CPU suite: hardware arithmetic reachable from any machine, against fpsim.

NumPy's float16 arithmetic and casts, ml_dtypes' casts, the CPU's own binary16
accumulation (``backends/numba_half.py``), NumPy's float16 ``sum`` and ``dot``, and
float32 BLAS. ``docs/hardware.md`` says what each case computes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

import fpsim
from fpsim.compare.cases import Case, Record, skipped
from fpsim.compare.inputs import around, binary16_operands, halves

NUMPY_HALF = ("NumPy float16 {op}: the operands widened to binary32, the binary32 result "
              "rounded to binary16")


def elementwise_cases(rng: np.random.Generator, size: int) -> Iterator[Case]:
    ops = (("add", 2, np.add), ("sub", 2, np.subtract), ("mul", 2, np.multiply),
           ("div", 2, np.divide), ("sqrt", 1, np.sqrt))
    for name, arity, ufunc in ops:
        args = binary16_operands(rng, size, arity)
        with np.errstate(all="ignore"):
            hardware = ufunc(*args)
        emulated = getattr(fpsim, name)(*args, "fp16")
        yield Case(f"numpy fp16 {name}", NUMPY_HALF.format(op=name),
                   f"fpsim.{name}(..., 'fp16')", "fp16", hardware,
                   {"fp16 nearest_even": emulated})


def cast_cases(rng: np.random.Generator, size: int) -> Iterator[Case]:
    for source in (np.float32, np.float64):
        x = around(rng, "fp16", size, source)
        with np.errstate(all="ignore"):
            hardware = x.astype(np.float16)
        candidates = {"fp16 nearest_even": fpsim.round(x, "fp16")}
        if source is np.float64:
            # A conversion through binary32 rounds twice: the candidate that would match
            # if NumPy converted that way.
            candidates["via binary32 (double rounding)"] = fpsim.round(
                fpsim.round(x, "fp32"), "fp16")
        name = np.dtype(source).name
        yield Case(f"numpy cast {name}->fp16", f"NumPy {name}.astype(float16)",
                   "fpsim.round(x, 'fp16')", "fp16", hardware, candidates)
    import ml_dtypes

    targets = (("bf16", ml_dtypes.bfloat16), ("fp8_e4m3", ml_dtypes.float8_e4m3fn),
               ("fp8_e5m2", ml_dtypes.float8_e5m2))
    for fmt, dtype in targets:
        x = around(rng, fmt, size, np.float32)
        top = fpsim.format(fmt).max
        for saturate in (False, True):
            with np.errstate(all="ignore"):
                given = np.clip(x, -top, top) if saturate else x
                hardware = given.astype(dtype)
            how = "after np.clip to +-max (a saturating cast)" if saturate else ""
            yield Case(
                f"ml_dtypes cast float32->{fmt}{' saturating' if saturate else ''}",
                f"ml_dtypes float32.astype({dtype.__name__}) {how}".strip(),
                f"fpsim.round(x, '{fmt}'{', saturate=True' if saturate else ''})", fmt,
                hardware, {"nearest_even": fpsim.round(x, fmt, saturate=saturate)})


def half_hardware_cases(rng: np.random.Generator, size: int) -> Iterator[Case | Record]:
    """The CPU's own binary16 accumulation (AVX512-FP16 FMA, or binary32 + F16C)."""
    from fpsim.backends import numba_half

    kind = numba_half.compiled_for()
    what = "the CPU's binary16 accumulation (numba_half)"
    if kind is None:
        yield skipped("cpu fp16 fma", what, "this CPU offers no half-precision arithmetic")
        return
    how = {"native": "AVX512-FP16 fused multiply-add (vfmadd, binary16)",
           "f16c": "binary32 arithmetic made round-to-odd, then the F16C conversion"}[kind]
    half = numba_half.HalfAccumulation(kind, "compare")
    rows = max(1, size // 64)
    for k_len, name, emulation in ((1, "cpu fp16 fma", "fpsim.fma(a, b, c, 'fp16')"),
                                   (64, "cpu fp16 accumulation loop",
                                    "fpsim.matmul(A, B, c=C, accum='fp16')")):
        a = halves(rng, (rows, k_len)).astype(np.float64)
        b = halves(rng, (rows, k_len, 1)).astype(np.float64)
        c = halves(rng, (rows, 1)).astype(np.float64)
        out = np.empty((rows, 1))
        left = half.accumulate(a, b, c, out, rounded=False, parallel=False)
        if left is None:
            yield skipped(name, how, "the CPU's binary16 path refused these inputs here")
            continue
        keep = np.setdiff1d(np.arange(rows), left)  # rows not finite go to the software loops
        with fpsim.backend("numpy"):
            emulated = fpsim.matmul(a[:, None, :], b, c=c[:, :, None], accum="fp16")
        yield Case(name, f"{how}, {k_len} product(s) a row", emulation, "fp16",
                   out[keep, 0], {"fp16 sequential": emulated[keep, 0, 0]})


def numpy_pairwise(x: np.ndarray, accum: str) -> np.ndarray:
    """Each row of ``x`` summed as NumPy's pairwise_sum does (loops_utils.h.src): below 8
    terms one by one from -0; up to 128 terms in 8 interleaved accumulators combined as
    ((r0+r1)+(r2+r3))+((r4+r5)+(r6+r7)), then the rest one by one; above that the two
    halves (the first a multiple of 8 terms) summed apart and added. Every addition in
    ``accum``."""

    def add(p: np.ndarray, q: np.ndarray) -> np.ndarray:
        return np.asarray(fpsim.add(p, q, accum), dtype=np.float64)

    def pairwise(cols: np.ndarray) -> np.ndarray:
        n = cols.shape[1]
        if n < 8:
            total = np.full(cols.shape[0], -0.0)
            for i in range(n):
                total = add(total, cols[:, i])
            return total
        if n <= 128:
            r = [cols[:, j] for j in range(8)]
            i = 8
            while i < n - n % 8:
                r = [add(r[j], cols[:, i + j]) for j in range(8)]
                i += 8
            total = add(add(add(r[0], r[1]), add(r[2], r[3])),
                        add(add(r[4], r[5]), add(r[6], r[7])))
            for j in range(i, n):
                total = add(total, cols[:, j])
            return total
        half = n // 2 - (n // 2) % 8
        return add(pairwise(cols[:, :half]), pairwise(cols[:, half:]))

    return pairwise(np.asarray(x, dtype=np.float64))


def reduction_cases(rng: np.random.Generator, size: int) -> Iterator[Case]:
    n = 1000
    x = halves(rng, (max(1, size // n), n))
    with np.errstate(all="ignore"):
        hardware = np.sum(x, axis=1)
    candidates = {
        "NumPy's pairwise order in fp32, then fp16": fpsim.round(
            fpsim.add(0.0, numpy_pairwise(x, "fp32"), "fp32"), "fp16"),
        "sequential fp32, then fp16": fpsim.sum(x, axis=1, accum="fp32", out="fp16"),
        "pairwise fp32, then fp16": fpsim.sum(x, axis=1, accum="fp32", order="pairwise",
                                              out="fp16"),
        "sequential fp16": fpsim.sum(x, axis=1, accum="fp16"),
        "pairwise fp16": fpsim.sum(x, axis=1, accum="fp16", order="pairwise"),
    }
    yield Case("numpy fp16 sum", f"np.sum of float16 arrays, {n} terms a row",
               "fpsim.sum(x, axis=1, ...)", "fp16", hardware, candidates)
    # The same reduction on binary32 data, where the orders of addition show.
    x = (rng.standard_normal(x.shape) * np.exp2(rng.integers(-12, 12, x.shape)))
    x = x.astype(np.float32)
    yield Case("numpy fp32 sum", f"np.sum of float32 arrays, {n} terms a row",
               "fpsim.sum(x, axis=1, accum='fp32', ...)", "fp32", np.sum(x, axis=1), {
                   "NumPy's pairwise order": fpsim.add(0.0, numpy_pairwise(x, "fp32"), "fp32"),
                   "pairwise": fpsim.sum(x, axis=1, accum="fp32", order="pairwise"),
                   "sequential": fpsim.sum(x, axis=1, accum="fp32"),
               })
    k_len = 256
    rows = max(1, size // (k_len * 16))
    a, b = halves(rng, (rows, k_len)), halves(rng, (k_len, 16))
    with np.errstate(all="ignore"):
        hardware = np.dot(a, b)
    candidates = {
        "sequential fp32 from +0, then fp16": fpsim.matmul(a, b, accum="fp32", out="fp16"),
        "pairwise fp32, then fp16": fpsim.matmul(a, b, accum="fp32", order="pairwise",
                                                 out="fp16"),
        "sequential fp16": fpsim.matmul(a, b, accum="fp16"),
    }
    yield Case("numpy fp16 dot", f"np.dot of float16 matrices, {k_len} terms an element",
               "fpsim.matmul(a, b, ...)", "fp16", hardware, candidates)


def blas_cases(rng: np.random.Generator, size: int) -> Iterator[Case]:
    m = n = max(8, int(np.sqrt(size / 16)))
    k_len = 1024
    a = rng.standard_normal((m, k_len)).astype(np.float32)
    b = rng.standard_normal((k_len, n)).astype(np.float32)
    hardware = a @ b
    candidates = {
        "sequential fp32, fused (exact products)": fpsim.matmul(a, b, accum="fp32"),
        "sequential fp32, products rounded": fpsim.matmul(a, b, accum="fp32",
                                                          products="rounded"),
        "pairwise fp32": fpsim.matmul(a, b, accum="fp32", order="pairwise"),
    }
    from fpsim._machine import versions

    yield Case("blas sgemm", f"float32 np.matmul ({versions().get('blas', 'BLAS')}), "
               f"{m}x{k_len}x{n}", "fpsim.matmul(a, b, accum='fp32', ...)", "fp32",
               hardware, candidates)


Family = Callable[[np.random.Generator, int], Iterator[Case | Record]]
SUITE: tuple[Family, ...] = (elementwise_cases, cast_cases, half_hardware_cases,
                          reduction_cases, blas_cases)


def cases(size: int, seed: int) -> Iterator[Case | Record]:
    """Every case of the CPU suite; ``size``: elements per elementwise case."""
    rng = np.random.default_rng(seed)
    for family in SUITE:
        yield from family(rng, size)
