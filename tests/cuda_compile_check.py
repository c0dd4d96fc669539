"""Compile every CUDA kernel of the cupy backend offline and prove there is no contraction.

Builds each kernel for a compute capability (default 9.0, the H100) with
``numba.cuda.compile_ptx``, which needs numba-cuda and NVIDIA's NVVM but no GPU, and
checks the PTX: no ``fma`` instruction (but a hardware loop's own binary16/bfloat16
``fma.rn``, which is fpsim's fma), and an explicit ``.rn`` on every f16/bf16/f32/f64
add, sub and mul (ptxas never fuses those). Where ``ptxas`` and ``nvdisasm`` are found
(PATH, or the nvidia-* wheels) it also assembles each kernel and checks the machine
code: no DFMA/FFMA beyond those of the correctly rounded square root, division and
reciprocal (``sqrt.rn.f64``, ``div.rn.f64``, ``div.rn.f32``, ``rcp.rn.f32``: ptxas
expands each with fused operations of its own; the transcendental kernels divide, and
the block-scaling kernels divide in binary32).

Flags, stochastic rounding and the operand check are arguments of each kernel, so
one compilation holds every variant of it; both float64 and float32 arrays are built,
and the lean kernels (``LEAN``): the rounding on the binary32 encoding, loops
specialised to a format and mode, and the hardware loops (``cuda_hardware``); the
block-scaling kernels on whole device arrays (``ARRAY``: ``cuda_arrays``, fpsim.quantize
on the GPU); and the tiled block-FMA kernel for the H100 preset (``BLOCKFMA_TILES``:
``cuda_blockfma_tiles``).

    python tests/cuda_compile_check.py [--cc 9.0] [--jobs 2] [--cache DIR] [--representative]

With ``--cache DIR`` a passing run's report is kept in DIR under a digest of everything
that decides it: fpsim's source, this script, the compute capability, and the versions
of Python, NumPy, Numba, numba-cuda, llvmlite, NVVM, ptxas and nvdisasm. The same
inputs give the same PTX and machine code, so a run whose digest has passed before
prints that report again (its first line says so) instead of compiling; any change
compiles everything again, and a failing run is never kept.

A control goes with every run: ``a*b + c`` compiled with contraction left on, which
both checks (the PTX's and, where ptxas and nvdisasm are found, the machine code's) must
catch, and inside ``no_contraction()``, which they must pass. Prints a line per kernel
and one for the control; exit status 1 if a kernel fails or the control is not caught,
3 if numba-cuda is missing.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

ARITH = re.compile(r"^\s*(add|sub|mul)((?:\.[a-z0-9]+)*)\.(f32|f64|f16|bf16)\b", re.M)
FMA = re.compile(r"^\s*fma\.", re.M)
FTZ = re.compile(r"^\s*[a-z0-9]+(?:\.[a-z0-9]+)*\.ftz\b.*$", re.M)
# The one fused operation a hardware loop may hold: binary16/bfloat16 fma.rn, which is
# fpsim's fma itself (cuda_hardware), not a contraction.
HALF_FMA = re.compile(r"^\s*fma\.rn\.(f16|bf16)\s", re.M)
# The correctly rounded operations ptxas expands with fused operations of its own (none of
# them a contraction): each one's instruction in the PTX.
EXPANDED = {op: re.compile(rf"^\s*{op.replace('.', chr(92) + '.')}\b", re.M)
            for op in ("sqrt.rn.f64", "div.rn.f64", "rcp.rn.f32", "div.rn.f32")}
SASS_FMA = re.compile(r"\b([DFH]FMA)\b")


def variants() -> list[tuple[str, str, str]]:
    """(loop, kernel, dtype) for every kernel the backend compiles."""
    from fpsim.backends.protocol import KERNELS

    out = [("elementwise", k, d) for d in ("float64", "float32") for k in KERNELS]
    out += [("first_unrepresentable", "", d) for d in ("float64", "float32")]
    out += [(loop, "", "float64") for loop in
            ("accumulate_sequential", "accumulate_pairwise", "accumulate_blocks")]
    return out


# The lean elementwise kernels (cupy_backend): (loop, kernel, dtype, variant), a variant
# naming the carrier of the rounding and, with "+spec", a loop specialised to SPECIALISED.
LEAN = (("elementwise", "round_value", "float32", "binary32"),
        ("elementwise", "round_value", "float32", "binary32+spec"),
        ("elementwise", "round_value", "float64", "binary64+spec"),
        ("elementwise", "op_fma", "float32", "binary64+spec"),
        # Hardware loops (cuda_hardware), "hardware:format:mode".
        ("hardware_round", "round_value", "float32", "hardware:fp16:nearest_even"),
        ("hardware_round", "round_value", "float32", "hardware:bf16:down"),
        ("hardware_arithmetic", "op_fma", "float32", "hardware:fp16:nearest_even"),
        ("hardware_arithmetic", "op_add", "float32", "hardware:bf16:nearest_even"),
        ("hardware_arithmetic", "op_mul", "float32", "hardware:bf16:nearest_even"))
SPECIALISED = ("bf16", "stochastic")
# The block-scaling kernels on whole device arrays (cuda_arrays: cuda_loops.array_kernel
# calling the kernel with its parameters, Specs and Encodings among them), variant "array".
ARRAY = tuple(("array_kernel", k, "float64", "array") for k in (
    "mx_exponent", "mx_factors", "mx_scaled", "pow2_or_nan", "nvfp4_block_scales",
    "nvfp4_scaled", "current_scale", "scaled32", "blockwise_scale", "descaled32", "encode",
    "to_binary32", "to_binary64"))


# The tiled block-FMA kernel (cuda_blockfma_tiles) compiled for the H100 preset on the
# device's tiles: its input conversion ("prepare") and its loop ("tiled"), variant "tiles".
BLOCKFMA_TILES = (("blockfma_tiles", "prepare", "float64", "tiles"),
                  ("blockfma_tiles", "tiled", "float64", "tiles"))


def lean_variants() -> list[tuple[str, str, str, str]]:
    """(loop, kernel, dtype, variant) for every lean kernel, kernel on whole arrays and
    tiled block-FMA kernel the backend compiles."""
    return [*LEAN, *ARRAY, *BLOCKFMA_TILES]


def blockfma_tiles_loop(backend, kernel: str):
    """The tiled block-FMA kernel ``kernel`` ("prepare" or "tiled") as
    ``cuda_blockfma_tiles.accumulate`` builds it for ``fpsim.hw.H100`` on the device's tiles,
    and the signature of its launch."""
    from numba.cuda.typing.typeof import typeof

    import fpsim
    from fpsim.backends import cuda_blockfma_tiles as tiles

    folded = tiles.covers(fpsim.hw.H100.params(), tiles.OUT_SPEC, fpsim.hw.H100.block)
    prepare, tiled = tiles.kernel(folded, tiles.tiles_for(fpsim.hw.H100.block), backend.kernels)
    words, f32, u = np.zeros(2, np.uint32), np.zeros(2, np.float32), np.uint64(1)
    if kernel == "prepare":
        return prepare, tuple(typeof(x) for x in (np.zeros(2),) * 3 + (
            words, words, f32, np.zeros(1, np.int64)))
    return tiled, tuple(typeof(x) for x in (words, words, f32, np.zeros(2), u, u, u))


def array_args(kernel: str) -> tuple:
    """A call of block-scaling kernel ``kernel`` as fpsim.quantize makes it: its device
    arrays (as host arrays of their dtypes) and its parameters."""
    import fpsim
    from fpsim.kernels.blockscale import Encoding
    from fpsim.kernels.spec import make_spec
    from fpsim.quantize.mx import mx_parameters
    from fpsim.quantize.nvfp4 import nvfp4_parameters
    from fpsim.quantize.schemes import scheme

    f64, f32 = np.zeros(4), np.zeros(4, np.float32)
    spec = make_spec(fpsim.format("fp4_e2m1"), "nearest_even", True, False, None)
    mx = mx_parameters(scheme("mxfp8_e4m3"), "ocp", spec)
    nv = nvfp4_parameters(scheme("nvfp4"), 3.0, spec)
    return {
        "mx_exponent": (f64, mx.rule, mx.emax, mx.t, mx.inv_max, mx.low, mx.high, mx.fp32),
        "mx_factors": (np.zeros(4, np.int64),),
        "mx_scaled": (f64, f64, f64, np.zeros(4, np.bool_), 1e-300),
        "pow2_or_nan": (np.zeros(4, np.int64), np.zeros(4, np.bool_)),
        "nvfp4_block_scales": (f64, nv.multiplier, nv.global_decode, nv.e4m3),
        "nvfp4_scaled": (f32, f32),
        "current_scale": (f64, np.float32(448.0), True),
        "scaled32": (f32, f32),
        "blockwise_scale": (f64,),
        "descaled32": (f32, f32),
        "encode": (f64, Encoding.of(fpsim.format("fp8_e4m3"))),
        "to_binary32": (f64,),
        "to_binary64": (f32,),
    }[kernel]


# ``--representative``: one kernel of each kind of code the backend compiles, for a suite on
# a machine without a cache (CI): fma, the kernel contraction would change most (it holds
# the rounding); division, square root, and the transcendental kernels (tanh holds exp,
# log and divisions); each accumulation loop; the binary32 lanes specialised to a format;
# a hardware loop (its own fma.rn.f16 allowed); and a block-scaling kernel on whole arrays
# (a Spec among its parameters, two results); and the tiled block-FMA kernel (32-bit lanes,
# a model's constants folded, inline PTX). The
# control and the no_contraction() mechanism are the same for all (FPSIM_CUDA_COMPILE_ALL=1
# in tests/test_cuda_backend.py, or no flag here, compiles every kernel).
REPRESENTATIVE = {
    ("elementwise", "op_fma", "float64"), ("elementwise", "op_div", "float64"),
    ("elementwise", "op_sqrt", "float64"), ("elementwise", "op_tanh", "float64"),
    ("accumulate_sequential", "", "float64"), ("accumulate_pairwise", "", "float64"),
    ("accumulate_blocks", "", "float64"),
    ("elementwise", "round_value", "float32", "binary32+spec"),
    ("hardware_arithmetic", "op_fma", "float32", "hardware:fp16:nearest_even"),
    ("array_kernel", "nvfp4_block_scales", "float64", "array"),
    ("blockfma_tiles", "tiled", "float64", "tiles"),
}


def loop_spec(loop: str, kernel: str, dtype: str, variant: str = ""):
    """(the spec argument, the spec the loop is specialised to or None, its encoding, its
    hardware path or None)."""
    import fpsim
    from fpsim.backends import cupy_backend
    from fpsim.backends.cuda_hardware import Path
    from fpsim.kernels.spec import make_spec

    if variant.startswith("hardware:"):
        _, fmt, mode = variant.split(":")
        template, encoding, loop_arg, bound, hardware = cupy_backend.Backend.hardware_loop(
            Path(kernel, fmt, mode))
        assert template.__name__ == loop, (template, loop)
        return loop_arg, bound, encoding, hardware
    fmt, mode = SPECIALISED if variant.endswith("+spec") else ("fp16", "nearest_even")
    spec = make_spec(fpsim.format(fmt), mode, True, False, None)
    if not variant:
        return spec, None, "binary64", None
    encoding, loop_arg, bound = cupy_backend.software_loop(
        kernel, np.dtype(dtype), np.dtype(dtype), spec, kernel != "round_value",
        variant.endswith("+spec"))
    assert encoding == variant.split("+")[0], (encoding, variant)
    return loop_arg, bound, encoding, None


def sample_args(loop: str, kernel: str, dtype: str, variant: str = "") -> tuple:
    """Arguments of the types the backend passes (numba-cuda types them)."""
    import fpsim
    from fpsim.backends.schedule import pairwise_program
    from fpsim.kernels.spec import make_spec

    spec = loop_spec(loop, kernel, dtype, variant)[0]
    v = np.zeros(4, dtype=dtype)
    a, b, c = np.zeros((2, 3)), np.zeros((1, 3, 2)), np.zeros((2, 2))
    counts = np.zeros(5, dtype=np.int64)
    if loop in ("elementwise", "hardware_round", "hardware_arithmetic"):
        return (v, v, v, v.copy(), np.zeros(4, np.uint8), np.zeros(1, np.int64), np.uint64(0),
                spec, True, True, True)
    if loop == "first_unrepresentable":
        return v, np.zeros(1, np.int64), spec
    if loop == "accumulate_sequential":
        return a, b, c, c.copy(), counts, np.uint64(0), spec, 1, True, True, True
    if loop == "accumulate_pairwise":
        return a, b, c, c.copy(), counts, np.uint64(0), spec, 1, pairwise_program(3, True), \
            True, True
    out_spec = make_spec(fpsim.format("fp32"), "toward_zero", True, False, None)
    return a, b, c, c.copy(), counts, fpsim.hw.H100.params(), out_spec, 16, 1, True


def array_loop(backend, kernel: str):
    """``cuda_loops.array_kernel`` for ``kernel`` as cuda_arrays builds it (its Python
    function and launch options) and the signature of its launch."""
    from numba.cuda.typing.typeof import typeof

    from fpsim.backends.cuda_arrays import launch_arrays

    args = array_args(kernel)
    count = sum(isinstance(a, np.ndarray) for a in args)
    arrays, params = list(args[:count]), args[count:]
    kernels = backend.array_kernels()
    dtypes = kernels.result_dtypes(kernel, [a.dtype for a in arrays], params)
    loop = kernels.loop(kernel, count, len(dtypes), len(params))
    inputs, results = launch_arrays(arrays, [np.zeros(4, dt) for dt in dtypes], np)
    return loop, tuple(typeof(x) for x in (*inputs, *results, params))


def compile_one(loop: str, kernel: str, dtype: str, cc: tuple, contraction_off: bool = True,
                variant: str = ""):
    """PTX of one kernel, and the seconds it took."""
    from numba import cuda
    from numba.cuda.typing.typeof import typeof

    from fpsim.backends import cuda_loops, cupy_backend
    from fpsim.backends.cuda_contraction import no_contraction

    backend = cupy_backend.Backend()
    assert not backend.simulator, "the offline build needs the real numba-cuda, not the simulator"
    options = {}
    if variant == "array":
        dispatcher, signature = array_loop(backend, kernel)
        func = dispatcher.py_func
    elif variant == "tiles":
        dispatcher, signature = blockfma_tiles_loop(backend, kernel)
        func = dispatcher.py_func
        if dispatcher.targetoptions.get("launch_bounds"):
            options["launch_bounds"] = dispatcher.targetoptions["launch_bounds"]
    else:
        _, bound, encoding, hardware = loop_spec(loop, kernel, dtype, variant)
        func = backend.loop(getattr(cuda_loops, loop), kernel, bound, encoding,
                            hardware).py_func
        signature = tuple(typeof(x) for x in sample_args(loop, kernel, dtype, variant))
    start = time.perf_counter()
    if contraction_off:
        with no_contraction():
            ptx, _ = cuda.compile_ptx(func, signature, cc=cc, **options)
    else:
        ptx, _ = cuda.compile_ptx(func, signature, cc=cc, **options)
    return ptx, time.perf_counter() - start


def link_problems(loop: str, kernel: str, dtype: str, variant: str = "") -> list[str]:
    """The kernel as the backend launches it must be linked from this PTX: nvJitLink's
    link-time optimization contracts again (found on an H200: fpsim.backends.cuda_contraction)."""
    from fpsim.backends import cuda_loops, cupy_backend

    if variant == "array":
        loop_kernel = array_loop(cupy_backend.Backend(), kernel)[0]
    elif variant == "tiles":
        loop_kernel = blockfma_tiles_loop(cupy_backend.Backend(), kernel)[0]
    else:
        _, bound, encoding, hardware = loop_spec(loop, kernel, dtype, variant)
        loop_kernel = cupy_backend.Backend().loop(getattr(cuda_loops, loop), kernel, bound,
                                                  encoding, hardware)
    if loop_kernel.targetoptions.get("lto"):
        return ["linked by link-time optimization (nvJitLink), which contracts again"]
    return []


def ptx_problems(ptx: str, half_fma: bool = False) -> list[str]:
    """What may be contracted in ``ptx``; ``half_fma``: a hardware loop's own
    binary16/bfloat16 ``fma.rn`` is allowed (``HALF_FMA``)."""
    allowed = {m.start() for m in HALF_FMA.finditer(ptx)} if half_fma else set()
    problems = [f"fma instruction: {m.group(0).strip()}" for m in FMA.finditer(ptx)
                if m.start() not in allowed]
    # Subnormals are kept: nothing flushes them (CuPy's kernels do: -ftz=true).
    problems += [f"flushes subnormals: {m.group(0).strip()}" for m in FTZ.finditer(ptx)]
    for m in ARITH.finditer(ptx):
        if ".rn" not in m.group(2):
            problems.append(f"no explicit rounding (may be contracted): {m.group(0).strip()}")
    return problems


def find_tool(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for base in sys.path:
        for path in glob.glob(os.path.join(base, "nvidia", "*", "bin", name)):
            if os.access(path, os.X_OK):
                return path
    return None


def sass_fma(ptx: str, cc: tuple, tools: tuple[str, str]) -> dict[str, int]:
    """Counts of fused multiply-add instructions in the assembled kernel."""
    ptxas, nvdisasm = tools
    with tempfile.TemporaryDirectory() as tmp:
        src, cubin = Path(tmp, "k.ptx"), Path(tmp, "k.cubin")
        src.write_text(ptx)
        arch = f"sm_{cc[0]}{cc[1]}"
        subprocess.run([ptxas, f"-arch={arch}", str(src), "-o", str(cubin)], check=True,
                       capture_output=True, text=True)
        sass = subprocess.run([nvdisasm, str(cubin)], check=True, capture_output=True,
                              text=True).stdout
    counts: dict[str, int] = {}
    for m in SASS_FMA.finditer(sass):
        counts[m.group(1)] = counts.get(m.group(1), 0) + 1
    return counts


def control(cc: tuple, tools) -> tuple[list[str], list[str]]:
    """The checks' problems with ``a*b + c`` compiled with contraction left on, and inside
    ``no_contraction()``."""
    from numba import cuda
    from numba.cuda.typing.typeof import typeof

    from fpsim.backends.cuda_contraction import no_contraction

    def product_sum(x, y, z, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = x[i] * y[i] + z[i]

    signature = (typeof(np.zeros(2)),) * 4
    found = []
    for contraction_off in (False, True):
        with no_contraction() if contraction_off else contextlib.nullcontext():
            ptx, _ = cuda.compile_ptx(product_sum, signature, cc=cc)
        problems = ptx_problems(ptx)
        if tools:
            fused = sass_fma(ptx, cc, tools)
            problems += [f"{n} {op} in the machine code" for op, n in fused.items()]
        found.append(problems)
    return found[0], found[1]


def expansion_fma(cc: tuple, tools, op: str) -> dict[str, int]:
    """Fused operations ptxas uses for one correctly rounded ``op`` (a key of
    ``EXPANDED``)."""
    from numba import cuda
    from numba.cuda.typing.typeof import typeof

    from fpsim.backends.cuda_contraction import no_contraction

    def root(x, out):
        i = cuda.grid(1)
        if i < x.size:
            out[i] = math.sqrt(x[i])

    def quotient(x, out):
        i = cuda.grid(1)
        if i < x.size:
            out[i] = x[i] / out[i]

    def reciprocal(x, out):
        i = cuda.grid(1)
        if i < x.size:
            out[i] = np.float32(1.0) / x[i]

    kernel = {"sqrt": root, "div": quotient, "rcp": reciprocal}[op.split(".")[0]]
    v = np.zeros(2, np.float32 if op.endswith("f32") else np.float64)
    with no_contraction():
        ptx, _ = cuda.compile_ptx(kernel, (typeof(v), typeof(v)), cc=cc)
    assert len(EXPANDED[op].findall(ptx)) == 1, f"the reference kernel should hold one {op}"
    return sass_fma(ptx, cc, tools)


def check_variant(job) -> tuple[str, list[str], float]:
    loop, kernel, dtype, cc, tools, expansions, contraction_off, variant = job
    name = f"{loop}[{kernel or '-'}, {dtype}{', ' + variant if variant else ''}]"
    ptx, seconds = compile_one(loop, kernel, dtype, cc, contraction_off, variant)
    problems = ptx_problems(ptx, half_fma=variant.startswith("hardware:"))
    if contraction_off:
        problems += link_problems(loop, kernel, dtype, variant)
    if tools:
        fused = sass_fma(ptx, cc, tools)
        found = {op: len(pattern.findall(ptx)) for op, pattern in EXPANDED.items()}
        for kind, count in fused.items():
            allowed = sum(n * expansions[op].get(kind, 0) for op, n in found.items())
            if count > allowed:
                held = ", ".join(f"{n} {op}" for op, n in found.items() if n) or "none"
                problems.append(f"{count} {kind} in the machine code, {allowed} from the "
                                f"correctly rounded operations' expansions ({held})")
    return name, problems, seconds


def digest(cc: tuple, tools, scope: str = "all") -> str:
    """A digest of everything that decides this check's result (see the module's doc)."""
    import hashlib
    from importlib.metadata import version

    import numba
    from numba.cuda.cudadrv import nvvm

    h = hashlib.sha256()
    root = Path(__file__).resolve().parent.parent
    for path in sorted((root / "fpsim").rglob("*.py")) + [Path(__file__).resolve()]:
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    parts = [scope, str(cc), sys.version, np.__version__, numba.__version__,
             version("numba-cuda"), version("llvmlite"), str(nvvm.NVVM().get_version())]
    for tool in tools or ():
        parts.append(subprocess.run([tool, "--version"], capture_output=True,
                                    text=True).stdout)
    h.update("\0".join(parts).encode())
    return h.hexdigest()[:32]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cc", default="9.0")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--no-sass", action="store_true")
    parser.add_argument("--cache", default=None, help="keep a passing report here")
    parser.add_argument("--representative", action="store_true",
                        help="one kernel of each kind (REPRESENTATIVE), not every kernel")
    args = parser.parse_args(argv)
    scope = "representative" if args.representative else "all"
    cc = tuple(int(p) for p in args.cc.split("."))
    try:
        from numba import cuda  # noqa: F401
    except ImportError as exc:
        print(f"numba-cuda is not installed: {exc}")
        return 3
    tools = None if args.no_sass else (find_tool("ptxas"), find_tool("nvdisasm"))
    kept = Path(args.cache) / f"{digest(cc, tools, scope)}.txt" if args.cache else None
    if kept is not None and kept.is_file():
        print(f"the report of a passing run with the same digest ({kept}):")
        print(kept.read_text(), end="")
        return 0
    if kept is None:
        return check(cc, tools, args.jobs, scope=scope)
    with tempfile.TemporaryFile("w+") as report:
        status = check(cc, tools, args.jobs, report, scope)
        if status == 0:
            kept.parent.mkdir(parents=True, exist_ok=True)
            report.seek(0)
            partial = kept.with_suffix(f".{os.getpid()}.tmp")
            partial.write_text(report.read())
            partial.replace(kept)  # whole, or not at all
    return status


def check(cc: tuple, tools, jobs: int, report=None, scope: str = "all") -> int:
    """Compile every kernel (``scope="representative"``: those of ``REPRESENTATIVE``) and
    the control, printing (and writing to ``report``) a line each; 0 when every kernel
    passes and the control is caught."""
    def say(line: str) -> None:
        print(line)
        if report is not None:
            report.write(line + "\n")

    if tools and None in tools:
        say(f"machine-code check skipped: ptxas={tools[0]} nvdisasm={tools[1]}")
        tools = None
    expansions = {op: expansion_fma(cc, tools, op) if tools else {} for op in EXPANDED}
    if tools:
        say(f"machine code: {tools[0]}, {tools[1]}; "
            + ", ".join(f"one {op} uses {used}" for op, used in expansions.items()))
    left_on, turned_off = control(cc, tools)
    # Caught by each check: the PTX's (an fma), and the machine code's where it runs.
    caught = (any(p.startswith("fma instruction") for p in left_on)
              and (not tools or any("machine code" in p for p in left_on)) and not turned_off)
    say(f"control, a*b + c with contraction left on: {'caught' if caught else 'MISSED'} "
        f"({len(left_on)} problem(s)); inside no_contraction(): {len(turned_off)}")
    for p in (left_on + turned_off)[:4]:
        say(f"    {p}")
    chosen = [j for j in variants() if scope == "all" or j in REPRESENTATIVE]
    lean = [j for j in lean_variants() if scope == "all" or j in REPRESENTATIVE]
    work = [(*j, cc, tools, expansions, True, "") for j in chosen]
    work += [(*j[:3], cc, tools, expansions, True, j[3]) for j in lean]
    failed = 0
    with ProcessPoolExecutor(max_workers=max(1, jobs)) as pool:
        results = pool.map(check_variant, work)
        for name, problems, seconds in results:
            say(f"{name}: {len(problems)} problem(s), compiled in {seconds:.1f} s")
            for p in problems[:5]:
                say(f"    {p}")
            failed += bool(problems)
    say(f"{len(work)} kernels, {failed} with problems")
    return 1 if failed or not caught else 0


if __name__ == "__main__":
    sys.exit(main())
