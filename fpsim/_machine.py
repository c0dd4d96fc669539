"""What a measurement ran on: the CPU or GPU, and the libraries' versions."""

from __future__ import annotations

import platform
import sys


def machine(gpu: bool = False) -> str:
    """What the figures were measured on: the CPU's model and flags, or the GPU's name."""
    if gpu:
        import cupy

        props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
        name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
        return (f"GPU: {name}, compute capability {props['major']}.{props['minor']}, "
                f"CUDA runtime {cupy.cuda.runtime.runtimeGetVersion()}, driver "
                f"{cupy.cuda.runtime.driverGetVersion()}, CuPy {cupy.__version__}")
    try:
        with open("/proc/cpuinfo") as f:
            return cpu(f.read())
    except OSError:
        return cpu("")


# The vector features a figure depends on, as /proc/cpuinfo names them (x86, then ARM).
FLAGS = ("avx2", "f16c", "fma", "avx512f", "avx512_fp16", "avx512_bf16", "neon", "asimd")


def cpu(cpuinfo: str) -> str:
    """The line ``CPU: model; flags`` from the text of /proc/cpuinfo (first processor)."""
    info: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            info.setdefault(key.strip(), value.strip())
    model = info.get("model name") or platform.processor() or platform.machine()
    present = set(info.get("flags", info.get("Features", "")).split())
    return f"CPU: {model}; {' '.join(f for f in FLAGS if f in present)}".rstrip("; ")


def compiled_for() -> str:
    """What Numba compiles fpsim's CPU kernels for: the CPU name and any feature changes
    (``NUMBA_CPU_NAME``, ``NUMBA_CPU_FEATURES``; the host's by default), and the binary16
    arithmetic that target offers (``backends.numba_half``)."""
    import numba

    from fpsim.backends import numba_half

    name = numba.config.CPU_NAME or "host"  # type: ignore[attr-defined]  # set at run time
    features = numba.config.CPU_FEATURES  # type: ignore[attr-defined]
    target = name if features is None else f"{name} {features or '(no features)'}"
    return f"Numba target: {target}; binary16 arithmetic: {numba_half.compiled_for() or 'none'}"


def versions(gpu: bool = False) -> dict[str, str]:
    """Versions of Python, fpsim and the libraries whose arithmetic is compared or used."""
    from importlib import metadata

    import numpy as np

    import fpsim

    found = {"python": sys.version.split()[0], "fpsim": fpsim.__version__, "numpy": np.__version__}
    gpu_dists = ("cupy-cuda13x", "numba-cuda") if gpu else ()
    for dist in ("numba", "llvmlite", "ml_dtypes", *gpu_dists):
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    try:
        from threadpoolctl import threadpool_info

        np.ones((2, 2)) @ np.ones((2, 2))  # loads the BLAS
        blas = [lib for lib in threadpool_info() if lib.get("user_api") == "blas"]
        # Other packages may load a BLAS of their own: NumPy's is the one np.matmul calls.
        blas.sort(key=lambda lib: "numpy" not in str(lib.get("filepath", "")))
        if blas:
            lib = blas[0]
            found["blas"] = (f"{lib.get('internal_api')} {lib.get('version')} "
                             f"({lib.get('architecture')}, {lib.get('num_threads')} threads)")
    except ImportError:
        pass
    return found
