"""Write h100_cublas.npz: cublasGemmEx results recorded on a GPU, with their inputs.

The reference for the block-FMA presets and their split-K slicing
(tests/test_split_k.py). Not run by the tests: it needs CuPy and an NVIDIA GPU. Each
case is one GEMM through ``fpsim.compare.gpu.CupyDevice.gemm`` (row-major ``A @ B``,
alpha 1, beta 0, ``CUBLAS_GEMM_DEFAULT``) on inputs drawn as the GPU suite of
``fpsim compare`` draws them. Recorded on an H100 with cuBLAS 13.1
(``python3 tests/data/record_cublas.py``).
"""

import json
from pathlib import Path

import numpy as np

import fpsim
from fpsim.compare import gpu

CASES = [
    # (inputs, compute, M, K, N)
    ("fp16", "fp32", 64, 256, 64),
    ("bf16", "fp32", 16, 2048, 16),
    ("fp16", "fp32", 16, 4096, 16),
    ("bf16", "fp32", 16, 8192, 16),
    ("fp16", "fp16", 16, 256, 16),
    ("fp16", "fp16", 16, 1024, 16),
    ("fp32", "tf32", 16, 256, 16),
    ("fp32", "tf32", 16, 1024, 16),
]


def stored(x: np.ndarray, inputs: str) -> np.ndarray:
    """The inputs compactly: binary16 as float16, bf16 as its bits, fp32 as float32."""
    if inputs == "fp16":
        return x.astype(np.float16)
    if inputs == "bf16":
        return fpsim.to_bits(x, "bf16")
    return x.astype(np.float32)


def main() -> None:
    from cupy.cuda import cublas, device, runtime

    dev = gpu.CupyDevice()
    arrays, names = {}, []
    for index, (inputs, compute, m, k, n) in enumerate(CASES):
        rng = np.random.default_rng(20261123 + index)
        a, b = gpu.gemm_inputs(rng, (m, k), (k, n), inputs)
        name = f"{inputs}_{compute}_{m}x{k}x{n}"
        arrays[name + "_a"], arrays[name + "_b"] = stored(a, inputs), stored(b, inputs)
        arrays[name + "_hw"] = dev.gemm(a, b, inputs, compute).astype(np.float32)
        names.append(name)
    about = {"gpu": dev.name, "capability": list(dev.capability),
             "cublas": cublas.getVersion(device.get_cublas_handle()),
             "cuda_runtime": runtime.runtimeGetVersion(), "driver": runtime.driverGetVersion(),
             "cases": names}
    arrays["about"] = np.array(json.dumps(about))
    np.savez_compressed(Path(__file__).with_name("h100_cublas.npz"), **arrays)
    print(about)


if __name__ == "__main__":
    main()
