"""The GPU suite: CuPy's native half precision, CUDA's conversions, ``cupy.sum``,
cuBLAS products and single tensor-core instructions (``fpsim.compare.mma``), against
fpsim (computed on the CPU).

It uses CuPy's own types and libraries, not fpsim's GPU backend. Everything it asks
of the GPU goes through a ``Device``: its array module (``xp``: CuPy) for the
elementwise arithmetic, ``astype`` and ``sum``, and four methods for what NumPy's API
lacks (binary16 fma, bf16 and fp8 conversions, cublasGemmEx). The tests run the same
suite with NumPy arrays standing in for CuPy's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import numpy as np

import fpsim
from fpsim._optional import MissingDependency, cuda_driver_missing, require
from fpsim.compare.cases import Case, Record, skipped
from fpsim.compare.inputs import around, binary16_operands, halves
from fpsim.compare.metrics import compare_bits

# cuBLAS and CUDA enumerations (cublas_api.h, library_types.h).
CUDA_R_32F, CUDA_R_16F, CUDA_R_16BF = 0, 2, 14
COMPUTE = {"fp16": 64, "fp32": 68, "tf32": 77}  # CUBLAS_COMPUTE_16F, _32F, _32F_FAST_TF32
CUBLAS_OP_N, CUBLAS_GEMM_DEFAULT, CUBLAS_POINTER_MODE_HOST = 0, -1, 0
# The alignment floor with fp16 output: MMA-Sim 2.1.1's fp16 e_zero (_mma_e_zero_for_fp16);
# the H100's -21 is the hardware's (docs/hardware/mma/mma_probes.md, 2026-11-25).
FP16_FLOOR = {"V100": -19, "T4": -20, "A100": -20, "L40": -20, "H100": -21, "B200": -21,
              "RTX5090": -21}
# The fp8 preset of each GPU with fp8 tensor cores (fp32 output; the H100's with fp16
# output too): the H100's is wgmma's, as the probe of 2026-11-25 found.
FP8 = {"L40": fpsim.hw.L40_FP8, "H100": fpsim.hw.H100_FP8, "B200": fpsim.hw.B200_FP8,
       "RTX5090": fpsim.hw.RTX5090_FP8}
FP8_F16 = {"H100": fpsim.hw.H100_FP8_F16}

KERNELS = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>

extern "C" __global__ void fma16(const __half* a, const __half* b, const __half* c,
                                 __half* out, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)blockDim.x * gridDim.x)
        out[i] = __hfma(a[i], b[i], c[i]);
}

extern "C" __global__ void to_bf16(const float* x, unsigned short* out, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)blockDim.x * gridDim.x)
        out[i] = __bfloat16_as_ushort(__float2bfloat16_rn(x[i]));
}

extern "C" __global__ void to_fp8(const float* x, unsigned char* out, int saturate,
                                  int e5m2, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)blockDim.x * gridDim.x)
        out[i] = __nv_cvt_float_to_fp8(x[i], saturate ? __NV_SATFINITE : __NV_NOSAT,
                                       e5m2 ? __NV_E5M2 : __NV_E4M3);
}
"""


def preset_for(name: str, capability: tuple[int, int]) -> fpsim.hw.BlockFMA:
    """The block-FMA preset of a GPU, by its name, else by its compute capability."""
    upper = name.upper()
    for key, model in (("H100", fpsim.hw.H100), ("H200", fpsim.hw.H100),
                       ("B200", fpsim.hw.B200), ("B100", fpsim.hw.B200),
                       ("V100", fpsim.hw.V100)):
        if key in upper:
            return model
    major = capability[0]
    return {7: fpsim.hw.V100, 8: fpsim.hw.A100, 9: fpsim.hw.H100}.get(
        major, fpsim.hw.B200 if major >= 10 else fpsim.hw.V100)


class CupyDevice:
    """The GPU as CuPy reaches it."""

    def __init__(self) -> None:
        import cupy

        self.xp = cupy
        props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
        name = props["name"]
        self.name = name.decode() if isinstance(name, bytes) else str(name)
        self.capability = (int(props["major"]), int(props["minor"]))
        self.preset = preset_for(self.name, self.capability)
        self._module = cupy.RawModule(code=KERNELS, options=("--std=c++17",))

    def to_host(self, x: Any) -> np.ndarray:
        host: np.ndarray = self.xp.asnumpy(x).astype(np.float64)
        return host

    def _launch(self, kernel: str, n: int, *args: Any) -> None:
        """Run ``kernel`` over ``n`` elements: ``args``, then ``n`` as its last parameter."""
        threads = 256
        blocks = max(1, min(-(-n // threads), 4096))
        self._module.get_function(kernel)((blocks,), (threads,), (*args, np.int64(n)))

    def fma16(self, a: Any, b: Any, c: Any) -> np.ndarray:
        xp = self.xp
        a, b, c = (xp.asarray(v, dtype=xp.float16) for v in (a, b, c))
        out = xp.empty_like(a)
        self._launch("fma16", a.size, a, b, c, out)
        return self.to_host(out)

    def cast(self, x: Any, fmt: str, saturate: bool) -> np.ndarray:
        """float32 ``x`` converted by CUDA to bf16 (``__float2bfloat16_rn``) or fp8
        (``__nv_cvt_float_to_fp8``); the values, in float64."""
        xp = self.xp
        x = xp.ascontiguousarray(xp.asarray(x, dtype=xp.float32))
        if fmt == "bf16":
            out = xp.empty(x.shape, dtype=xp.uint16)
            self._launch("to_bf16", x.size, x, out)
        else:
            out = xp.empty(x.shape, dtype=xp.uint8)
            self._launch("to_fp8", x.size, x, out, np.int32(saturate),
                         np.int32(fmt == "fp8_e5m2"))
        return np.asarray(fpsim.from_bits(xp.asnumpy(out), fmt), dtype=np.float64)

    def gemm(self, a: np.ndarray, b: np.ndarray, inputs: str, compute: str) -> np.ndarray:
        """A @ B (row-major, values of ``inputs``) by cublasGemmEx with ``compute``
        ("fp32", "fp16" or "tf32" on float32 inputs); the output is binary16 for fp16
        compute, binary32 otherwise."""
        from cupy.cuda import cublas, device

        xp = self.xp
        m, k_len = a.shape
        n = b.shape[1]
        if inputs == "bf16":
            dev_a, dev_b = (xp.asarray(fpsim.to_bits(v, "bf16")) for v in (a, b))
            dtype = CUDA_R_16BF
        elif inputs == "fp16":
            dev_a, dev_b = (xp.asarray(v, dtype=xp.float16) for v in (a, b))
            dtype = CUDA_R_16F
        else:
            dev_a, dev_b = (xp.asarray(v, dtype=xp.float32) for v in (a, b))
            dtype = CUDA_R_32F
        half = compute == "fp16"
        c = xp.zeros((m, n), dtype=xp.float16 if half else xp.float32)
        scalar = np.float16 if half else np.float32
        alpha, beta = np.array(1, dtype=scalar), np.array(0, dtype=scalar)
        handle = device.get_cublas_handle()
        mode = cublas.getPointerMode(handle)
        cublas.setPointerMode(handle, CUBLAS_POINTER_MODE_HOST)
        try:
            # Row-major C = A B is column-major C^T = B^T A^T.
            cublas.gemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k_len,
                          alpha.ctypes.data, dev_b.data.ptr, dtype, n,
                          dev_a.data.ptr, dtype, k_len, beta.ctypes.data,
                          c.data.ptr, CUDA_R_16F if half else CUDA_R_32F, n,
                          COMPUTE[compute], CUBLAS_GEMM_DEFAULT)
        finally:
            cublas.setPointerMode(handle, mode)
        return self.to_host(c)


class NoGPU(RuntimeError):
    """There is no usable GPU for the GPU suite; the message says what is missing.

    Examples
    --------
    >>> issubclass(NoGPU, RuntimeError)
    True
    """


PURPOSE = "the GPU suite (fpsim compare --suite gpu)"


def find_device() -> CupyDevice:
    """The GPU through CuPy: ``NoGPU`` where there is none (saying what is missing),
    ``MissingDependency`` where CuPy is not installed."""
    missing = cuda_driver_missing()
    if missing is not None:
        raise NoGPU(f"no usable GPU: {missing}")
    cupy = require("cupy", PURPOSE)
    try:
        count = cupy.cuda.runtime.getDeviceCount()
        if count < 1:
            raise NoGPU("no usable GPU: the NVIDIA driver loads but CuPy finds no device")
        return CupyDevice()
    except NoGPU:
        raise
    except Exception as exc:  # too old a driver, NVRTC missing, ...: CuPy says which
        raise NoGPU(f"no usable GPU: {type(exc).__name__}: {exc}") from None


def device_or_reason() -> tuple[CupyDevice | None, str]:
    """A ``CupyDevice``, or why there is none (what ``find_device`` would raise)."""
    try:
        return find_device(), ""
    except (NoGPU, MissingDependency) as exc:
        return None, str(exc)


def wide_halves(rng: np.random.Generator, shape: int | tuple[int, ...]) -> np.ndarray:
    """``inputs.halves`` as float64: the emulations' results keep binary64's dtype."""
    return halves(rng, shape).astype(np.float64)


def elementwise(dev: Any, rng: np.random.Generator, size: int) -> Iterator[Case]:
    xp = dev.xp
    ops = (("add", 2, lambda a, b: a + b), ("mul", 2, lambda a, b: a * b),
           ("div", 2, lambda a, b: a / b), ("sqrt", 1, xp.sqrt))
    for name, arity, op in ops:
        args = binary16_operands(rng, size, arity)
        with np.errstate(all="ignore"):  # a NumPy stand-in warns where a GPU does not
            hardware = dev.to_host(op(*(xp.asarray(v) for v in args)))
        yield Case(f"gpu fp16 {name}", f"CuPy float16 {name} on {dev.name}",
                   f"fpsim.{name}(..., 'fp16')", "fp16", hardware,
                   {"fp16 nearest_even": getattr(fpsim, name)(*args, "fp16")})
    a, b, c = binary16_operands(rng, size, 3)
    yield Case("gpu fp16 fma", f"CUDA __hfma on {dev.name}", "fpsim.fma(a, b, c, 'fp16')",
               "fp16", dev.fma16(a, b, c), {"fp16 nearest_even": fpsim.fma(a, b, c, "fp16")})


def conversions(dev: Any, rng: np.random.Generator, size: int) -> Iterator[Case]:
    xp = dev.xp
    x = around(rng, "fp16", size, np.float32)
    with np.errstate(all="ignore"):
        hardware = dev.to_host(xp.asarray(x).astype(xp.float16))
    yield Case("gpu cast float32->fp16", f"CuPy float32.astype(float16) on {dev.name}",
               "fpsim.round(x, 'fp16')", "fp16", hardware,
               {"nearest_even": fpsim.round(x, "fp16")})
    for fmt, saturations in (("bf16", (False,)), ("fp8_e4m3", (False, True)),
                             ("fp8_e5m2", (False, True))):
        x = around(rng, fmt, size, np.float32)
        for saturate in saturations:
            how = "__float2bfloat16_rn" if fmt == "bf16" else \
                f"__nv_cvt_float_to_fp8 ({'__NV_SATFINITE' if saturate else '__NV_NOSAT'})"
            yield Case(f"gpu cast float32->{fmt}{' saturating' if saturate else ''}",
                       f"CUDA {how} on {dev.name}",
                       f"fpsim.round(x, '{fmt}'{', saturate=True' if saturate else ''})",
                       fmt, dev.cast(x, fmt, saturate),
                       {"nearest_even": fpsim.round(x, fmt, saturate=saturate)})


def reductions(dev: Any, rng: np.random.Generator, size: int) -> Iterator[Case]:
    xp = dev.xp
    n = 1000
    x = wide_halves(rng, (max(1, size // n), n))
    dx = xp.asarray(x.astype(np.float16))
    yield Case("gpu fp16 sum", f"cupy.sum of float16 arrays on {dev.name}, {n} terms a row",
               "fpsim.sum(x, axis=1, ...)", "fp16", dev.to_host(xp.sum(dx, axis=1)), {
                   "pairwise fp32, then fp16": fpsim.sum(x, axis=1, accum="fp32",
                                                         order="pairwise", out="fp16"),
                   "sequential fp32, then fp16": fpsim.sum(x, axis=1, accum="fp32",
                                                           out="fp16"),
                   "pairwise fp16": fpsim.sum(x, axis=1, accum="fp16", order="pairwise"),
                   "sequential fp16": fpsim.sum(x, axis=1, accum="fp16"),
               })
    yield Case("gpu fp16 sum, dtype=float32",
               f"cupy.sum(float16, dtype=float32) on {dev.name}, {n} terms a row",
               "fpsim.sum(x, axis=1, accum='fp32', ...)", "fp32",
               dev.to_host(xp.sum(dx, axis=1, dtype=xp.float32)), {
                   "pairwise fp32": fpsim.sum(x, axis=1, accum="fp32", order="pairwise"),
                   "sequential fp32": fpsim.sum(x, axis=1, accum="fp32"),
               })


def gemm_inputs(rng: np.random.Generator, shape_a: tuple[int, ...], shape_b: tuple[int, ...],
                inputs: str) -> tuple[np.ndarray, ...]:
    """Values of ``inputs`` (full binary32 values for fp32, which TF32 mode rounds)."""
    if inputs == "fp32":
        return tuple(rng.standard_normal(s).astype(np.float32).astype(np.float64)
                     for s in (shape_a, shape_b))
    return tuple(np.asarray(fpsim.round(wide_halves(rng, s), inputs), dtype=np.float64)
                 for s in (shape_a, shape_b))


def gemm_model(inputs: str, compute: str, preset: fpsim.hw.BlockFMA) -> fpsim.hw.BlockFMA | None:
    """The block-FMA model of a tensor-core GEMM with ``inputs`` and ``compute`` on the GPU
    of ``preset`` (None: the GPU has no such tensor cores).

    fp16 compute: fp16 output, rounded to nearest even, with the GPU's fp16-output floor
    (``FP16_FLOOR``; on the H100 ``fpsim.hw.H100_F16``). fp8 inputs (``"fp8_e4m3"``,
    ``"fp8_e5m2"``): the GPU's fp8 preset (``FP8``, ``FP8_F16`` for fp16 compute; on the
    H100 ``H100_FP8``, wgmma's rule).

    Examples
    --------
    >>> import fpsim
    >>> from fpsim.compare.gpu import gemm_model
    >>> gemm_model("fp16", "fp16", fpsim.hw.H100).exp_floor
    -21
    >>> gemm_model("fp8_e5m2", "fp32", fpsim.hw.H100).name
    'H100_FP8/fp8_e5m2'
    >>> gemm_model("fp8_e4m3", "fp32", fpsim.hw.A100) is None
    True
    """
    base = preset.name.split("/")[0]
    if inputs.startswith("fp8"):
        fp8 = (FP8_F16 if compute == "fp16" else FP8).get(base)
        return fp8 if fp8 is None or inputs == fp8.input else fp8.with_input(inputs)
    if compute == "fp16":
        return dataclasses.replace(preset.with_input("fp16"), output="fp16",
                                   output_rounding="nearest_even",
                                   exp_floor=FP16_FLOOR.get(base, preset.exp_floor))
    if compute == "tf32":  # fpsim.hw's TF32 preset of the GPU (none: no TF32 tensor cores)
        return fpsim.hw.TF32.get(base)
    return preset.with_input(inputs) if inputs != preset.input else preset


def product_candidates(a: np.ndarray, b: np.ndarray, inputs: str, compute: str,
                       model: fpsim.hw.BlockFMA) -> tuple[str, dict[str, np.ndarray]]:
    """fpsim's candidate emulations of a GEMM, and the output format."""
    block = gemm_model(inputs, compute, model)
    if compute == "fp16":
        assert block is not None
        return "fp16", {
            f"{block.name} block FMA, fp16 output": fpsim.matmul(a, b, model=block),
            "sequential fp16": fpsim.matmul(a, b, accum="fp16"),
            "pairwise fp16": fpsim.matmul(a, b, accum="fp16", order="pairwise"),
        }
    if compute == "tf32":
        candidates = {}
        if block is not None:
            for rounding in ("nearest_even", "nearest_away", "toward_zero"):
                ta, tb = (fpsim.round(v, "tf32", rounding) for v in (a, b))
                candidates[f"inputs to tf32 {rounding}, {block.name} block FMA"] = \
                    fpsim.matmul(ta, tb, model=block)
        ta, tb = (fpsim.round(v, "tf32") for v in (a, b))
        candidates["inputs to tf32 nearest_even, sequential fp32"] = fpsim.matmul(ta, tb)
        return "fp32", candidates
    assert block is not None
    return "fp32", {
        f"{block.name} block FMA": fpsim.matmul(a, b, model=block),
        "sequential fp32": fpsim.matmul(a, b, accum="fp32"),
        "pairwise fp32": fpsim.matmul(a, b, accum="fp32", order="pairwise"),
    }


# Split-K slicings tried: K cut into 2..MAX_SLICES slices of equal length, rounded up to
# whole tiles of TILES products (the slicings cuBLAS chose on an H100, docs/hardware.md).
TILES, MAX_SLICES = (32, 64), 64


def split_lengths(k_len: int) -> list[int]:
    """The split-K slice lengths tried for ``k_len`` products, shortest first."""
    lengths = set()
    for tile in TILES:
        tiles = -(-k_len // tile)
        for slices in range(2, MAX_SLICES + 1):
            length = tile * -(-tiles // slices)
            if length < k_len:
                lengths.add(length)
    return sorted(lengths)


def best_split(a: np.ndarray, b: np.ndarray, inputs: str, compute: str,
               preset: fpsim.hw.BlockFMA, hardware: np.ndarray
               ) -> tuple[str, np.ndarray] | None:
    """The split-K slicing of the block-FMA model closest to ``hardware`` (the most
    bit-identical elements) among the slice lengths tried, as (label, values); None
    where K is too short to split or there is no model."""
    model = gemm_model(inputs, compute, preset)
    lengths = split_lengths(a.shape[-1])
    if model is None or not lengths:
        return None
    if compute == "tf32":
        a, b = (np.asarray(fpsim.round(v, "tf32"), dtype=np.float64) for v in (a, b))
    fmt = "fp16" if compute == "fp16" else "fp32"
    hardware_bits = fpsim.to_bits(hardware, fmt)
    best: tuple[float, int, np.ndarray] | None = None
    for length in lengths:
        values = np.asarray(fpsim.matmul(a, b, model=model.with_split_k(length)), np.float64)
        share = compare_bits(fpsim.to_bits(values, fmt), hardware_bits, fmt).identical
        if best is None or share > best[0]:
            best = (share, length, values)
    assert best is not None
    label = (f"{'inputs to tf32 nearest_even, ' if compute == 'tf32' else ''}"
             f"{model.name} block FMA split-K {best[1]} (the best of {len(lengths)} "
             "slicings into 2-64 slices)")
    return label, best[2]


def products(dev: Any, rng: np.random.Generator, size: int) -> Iterator[Case | Record]:
    side = max(16, min(256, int(np.sqrt(size / 16))))
    shapes = ((side, side, side, "one K pass"), (16, max(4096, 16 * side), 16,
                                                  "long K, few outputs: cuBLAS may split K"))
    for m, k_len, n, what in shapes:
        for inputs, compute in (("fp16", "fp32"), ("bf16", "fp32"), ("fp16", "fp16"),
                                ("fp32", "tf32")):
            if inputs in ("bf16", "fp32") and dev.capability < (8, 0):
                yield skipped(f"gpu gemm {inputs} in, {compute} compute", dev.name,
                              "bf16 and tf32 tensor cores start with compute capability 8.0")
                continue
            a, b = gemm_inputs(rng, (m, k_len), (k_len, n), inputs)
            fmt, candidates = product_candidates(a, b, inputs, compute, dev.preset)
            hardware = dev.gemm(a, b, inputs, compute)
            split = best_split(a, b, inputs, compute, dev.preset, hardware)
            if split is not None:
                candidates[split[0]] = split[1]
            yield Case(f"gpu gemm {inputs} in, {compute} compute, {m}x{k_len}x{n}",
                       f"cublasGemmEx on {dev.name} ({what})",
                       f"fpsim.matmul (preset {dev.preset.name})", fmt, hardware, candidates)
    a = wide_halves(rng, (side, side))
    b = wide_halves(rng, (side, side))
    xp = dev.xp
    hardware = dev.to_host(xp.matmul(xp.asarray(a, dtype=xp.float16),
                                     xp.asarray(b, dtype=xp.float16)))
    fmt, candidates = product_candidates(a, b, "fp16", "fp32", dev.preset)
    yield Case(f"gpu cupy.matmul fp16, {side}x{side}x{side}",
               f"cupy.matmul of float16 on {dev.name} (fp16 output)",
               f"fpsim.matmul (preset {dev.preset.name}), then fp16", "fp16", hardware,
               {f"{model}, then fp16": fpsim.round(v, "fp16")
                for model, v in candidates.items()})


# The instruction probes (fpsim.compare.mma) follow these in the suite (fpsim.compare.run).
SUITE = (elementwise, conversions, reductions, products)


def cases(size: int, seed: int, device: Any) -> Iterator[Case | Record]:
    """Every case of the GPU suite on ``device`` (a ``CupyDevice``, or a stand-in)."""
    rng = np.random.default_rng(seed)
    for family in SUITE:
        yield from family(device, rng, size)
