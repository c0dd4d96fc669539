"""The cupy backend's tiled products (fpsim.backends.cuda_tiles), checked without a GPU.

- Simulator: the kernels run in Numba's CUDA simulator (a subprocess: NUMBA_ENABLE_CUDASIM
  must be set before numba.cuda is imported; this file is also that subprocess's script)
  and must give the exact reference's values (tests/accumulation_reference.py) and the
  generic loop's bits (the NumPy backend's: NaN as its canonical NaN) on shapes that are
  not whole tiles, K = 1, several groups of B, signed zeros, subnormal sums and products,
  overflow, infinities and NaN; and return None (``out`` untouched) wherever they do not
  apply. A planted bug (the padding of the last k tile added as terms) must be caught.
- Offline compile: each kernel built for compute capability 9.0 with contraction off:
  plain ``mul.rn``/``add.rn`` (binary32), ``fma.rn.f16`` or separate ``mul.rn.f16`` and
  ``add.rn.f16`` (binary16), no local memory (the register blocking stays in registers);
  where ptxas and nvdisasm are found, no fused binary32 operation in the machine code. A
  control compiled with contraction left on must be caught. A passing report is kept under
  the digest of what decides it (as tests/cuda_compile_check.py does).
- GPU (marked ``gpu``): the tiled kernels against the generic loop on CuPy arrays.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from conftest import needs_numba_cuda

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# The padding bug: every tile's full depth added, past K.
PLANT = ("range(ZERO, min(uBK, k_len - k0))", "range(ZERO, uBK)")
CANONICAL_NAN = 0x7FF8000000000000


# -- the subprocess ---------------------------------------------------------------------


def halves(rng, shape, scale=1.0):
    """Random binary16 values (as float64) near ``scale``."""
    return (rng.standard_normal(shape) * scale).astype(np.float16).astype(np.float64)


def cases(rng):
    """(name, accumulator, rounded, A, B, C, tiles or None) for the value checks."""
    from fpsim.backends.cuda_tiles import DEVICE_TILES, Tiles

    out = []
    for accum, rounded in (("fp32", False), ("fp16", False), ("fp16", True)):
        tag = f"{accum}{'-rounded' if rounded else ''}"
        # Not whole tiles (8 x 8 x 4): two row, column and k tiles, each a part.
        out.append((f"ragged {tag}", accum, rounded, halves(rng, (9, 5)),
                    halves(rng, (1, 5, 11)), halves(rng, (9, 11)), None))
        out.append((f"K=1 {tag}", accum, rounded, halves(rng, (3, 1)),
                    halves(rng, (1, 1, 2)), halves(rng, (3, 2)), None))
        out.append((f"groups {tag}", accum, rounded, halves(rng, (6, 6)),
                    halves(rng, (3, 6, 3)), halves(rng, (6, 3)), None))
        # Signed zeros, K = 5 (a part tile): row 0's products are all -0 (-0 + -0 stays
        # -0), row 1's all +0 (-0 + +0 is +0), row 2 mixes them; c = -0 throughout.
        a = rng.choice([0.0, -0.0], (4, 5))
        a[0], a[1] = -0.0, 0.0
        b = rng.choice([1.0, 2.0, 0.5], (1, 5, 7))
        out.append((f"signed zeros {tag}", accum, rounded, a, b, np.full((4, 7), -0.0), None))
        # Infinities and NaN: inf * 0, inf - inf, NaN in every operand.
        a, b, c = halves(rng, (4, 3)), halves(rng, (1, 3, 5)), halves(rng, (4, 5))
        a[0, 1], a[1, 0], b[0, 2, 1], b[0, 1, 3] = np.inf, -np.inf, 0.0, np.nan
        c[2, 2], c[3, 0], c[3, 4] = np.inf, -np.inf, np.nan
        out.append((f"inf and nan {tag}", accum, rounded, a, b, c, None))
    # The device's tiles (256 threads: slow in the simulator, so once): K = 17 is one
    # whole k tile and one of a single step.
    out.append(("device tiles fp32", "fp32", False, halves(rng, (3, 17)),
                halves(rng, (1, 17, 5)), halves(rng, (3, 5)), DEVICE_TILES["binary32"]))
    out.append(("ragged fp32-rounded", "fp32", True, halves(rng, (9, 5)),
                halves(rng, (1, 5, 11)), halves(rng, (9, 11)), None))
    # fp16: products and sums in the subnormal range (below 2**-14), 2**-25 a tie between
    # 0 and the least subnormal 2**-24.
    for rounded in (False, True):
        out.append((f"subnormals fp16{'-rounded' if rounded else ''}", "fp16", rounded,
                    rng.choice([2.0**-12, -(2.0**-12), 2.0**-13, 3 * 2.0**-13, 2.0**-7], (4, 6)),
                    rng.choice([2.0**-12, 2.0**-13, -(2.0**-13), 2.0**-5], (1, 6, 5)),
                    rng.choice([2.0**-24, -(2.0**-24), 3 * 2.0**-24, 0.0], (4, 5)), None))
        # Overflow: 256 * 256 and sums past 65520 (the binary16 overflow threshold).
        big = np.array([256.0, -256.0, 255.875, 16.0, 65504.0, 1.0])
        out.append((f"overflow fp16{'-rounded' if rounded else ''}", "fp16", rounded,
                    rng.choice(big[:4], (4, 5)), rng.choice(big[:4], (1, 5, 3)),
                    rng.choice(big[3:], (4, 3)), None))
    # fp32: products near 2**-124 whose sums are binary32 subnormals, and near 2**126 whose
    # sums overflow; 12-bit factors (the most binary32's test takes).
    f = 1 + 2.0**-11
    small = np.array([2.0**-62, -(2.0**-62) * f, 2.0**-62 * f, 2.0**-61])
    out.append(("subnormal sums fp32", "fp32", False, rng.choice(small, (4, 6)),
                rng.choice(small, (1, 6, 5)), np.zeros((4, 5)), None))
    # 8 products of 2.25 * 2**124 make 2**128: infinity (and -infinity from column 0).
    large = np.array([2.0**62 * 1.5, 2.0**62 * 1.5, 2.0**62 * f])
    b = rng.choice(large, (1, 8, 4))
    b[0, :, 0] *= -1
    out.append(("overflow fp32", "fp32", False, rng.choice(large, (3, 8)), b,
                np.zeros((3, 4)), None))
    twelve = (rng.integers(2048, 4096, (3, 4)) * 2.0**-11) * rng.choice([1, -1], (3, 4))
    out.append(("12-bit and bfloat16-like factors fp32", "fp32", False, twelve * 2.0**40,
                halves(rng, (1, 4, 3)) * 2.0**-30,
                rng.standard_normal((3, 3)).astype(np.float32).astype(np.float64), None))
    out.append(("tiles of 4 x 4 x 2 fp16", "fp16", False, halves(rng, (5, 5)),
                halves(rng, (1, 5, 6)), halves(rng, (5, 6)), Tiles(4, 4, 2, 2, 2)))
    # Two pairs of columns per thread (as on the device), an odd N: the last pair is half out.
    for rounded in (False, True):
        out.append((f"pairs per thread fp16{'-rounded' if rounded else ''}", "fp16", rounded,
                    halves(rng, (9, 6)), halves(rng, (1, 6, 19)), halves(rng, (9, 19)),
                    Tiles(8, 16, 4, 2, 4)))
    return out


def refusals(rng):
    """(name, spec, options, A, B, C) on which ``accumulate`` must return None."""
    import fpsim
    from fpsim.backends.cuda_tiles import BINARY16_SPEC, BINARY32_SPEC
    from fpsim.kernels.spec import make_spec

    a, b, c = halves(rng, (3, 4)), halves(rng, (1, 4, 2)), halves(rng, (3, 2))
    plain = dict(key=None, order="sequential", rounded=False, has_c=True, want_stats=False)
    out = [
        ("stats", BINARY32_SPEC, dict(plain, want_stats=True), a, b, c),
        ("stochastic", BINARY16_SPEC, dict(plain, key=12345), a, b, c),
        ("pairwise", BINARY32_SPEC, dict(plain, order="pairwise"), a, b, c),
        ("K=0", BINARY32_SPEC, plain, a[:, :0], b[:, :0], c),
    ]
    for fmt, mode, sub, sat in (("fp32", "toward_zero", True, False),
                                ("fp16", "nearest_even", False, False),
                                ("fp16", "nearest_even", True, True),
                                ("bf16", "nearest_even", True, False)):
        spec = make_spec(fpsim.format(fmt), mode, sub, sat, None)
        out.append((f"spec {fmt} {mode} subnormals={sub} saturate={sat}", spec, plain, a, b, c))
    bad = [("0.1 in A", 0.1, "A"), ("2**-25 in B", 2.0**-25, "B"), ("65536 in C", 65536.0, "C")]
    for what, value, where in bad:
        x = {"A": a.copy(), "B": b.copy(), "C": c.copy()}
        x[where].flat[-1] = value
        out.append((f"binary16: {what}", BINARY16_SPEC, plain, x["A"], x["B"], x["C"]))
    bad = [("13 bits in A", 1 + 2.0**-12, "A"), ("2**-63 in B", 2.0**-63, "B"),
           ("2**63 in A", 2.0**63, "A"), ("0.1 in C", 0.1, "C"),
           ("a float32 subnormal in B", 2.0**-140, "B")]
    for what, value, where in bad:
        x = {"A": a.copy(), "B": b.copy(), "C": c.copy()}
        x[where].flat[0] = value
        out.append((f"binary32: {what}", BINARY32_SPEC, plain, x["A"], x["B"], x["C"]))
    return out


def simulate(plant: bool) -> int:
    """Run every case in this process (the simulator's); print one JSON line per case. With
    ``plant``, the padding bug first, and only the cases it must fail (signed zeros)."""
    import warnings

    warnings.simplefilter("ignore")  # numpy's overflow warnings in the simulated arithmetic
    sys.path.insert(0, str(HERE))
    from accumulation_reference import ref_matmul

    import fpsim
    from fpsim.backends import cuda_tiles, cupy_backend, numpy_backend
    from fpsim.kernels.spec import make_spec

    assert cuda_tiles.SIMULATOR, "run with NUMBA_ENABLE_CUDASIM=1"
    if plant:
        import inspect
        import textwrap

        source = textwrap.dedent(inspect.getsource(cuda_tiles.tiled))
        assert PLANT[0] in source
        scope: dict = {}
        exec(compile(source.replace(*PLANT), cuda_tiles.__file__, "exec"), scope)
        cuda_tiles.tiled = scope["tiled"]
    gpu, generic = cupy_backend.Backend(), numpy_backend.Backend()
    rng = np.random.default_rng(35)
    for name, accum, rounded, A, B, C, tiles in cases(rng):
        if plant and not name.startswith("signed zeros"):
            continue
        spec = make_spec(fpsim.format(accum), "nearest_even", True, False, None)
        groups, k_len, n = B.shape
        out = np.full(C.shape, 1234.5)
        options = dict(key=None, order="sequential", rounded=rounded, has_c=True,
                       want_stats=False)
        counts = cuda_tiles.accumulate(gpu, A, B, C, out, spec, tiles=tiles, **options)
        want = np.empty(C.shape)
        generic.accumulate(A, B, C, want, spec, **options)
        m = A.shape[0] // groups
        exact = ref_matmul(A.reshape(groups, m, k_len), B, C.reshape(groups, m, n),
                           accum=accum, products="rounded" if rounded else "exact")
        exact = exact.reshape(C.shape)
        nan = np.isnan(exact)
        problems = []
        if counts is None or list(counts) != [0] * 5:
            problems.append(f"counts {counts}")
        elif not np.array_equal(out.view(np.int64), want.view(np.int64)):
            where = np.argwhere(out.view(np.int64) != want.view(np.int64))[:3].tolist()
            problems.append(f"differs from the generic loop at {where}")
        if not (np.array_equal(np.isnan(out), nan) and np.array_equal(
                out[~nan].view(np.int64), exact[~nan].view(np.int64))):
            problems.append("differs from the exact reference")
        if np.any(out[nan].view(np.int64) != CANONICAL_NAN):
            problems.append("a NaN that is not the canonical NaN")
        print(json.dumps({"case": name, "problems": problems,
                          "specials": int(nan.sum() + np.isinf(exact).sum()),
                          "negative_zeros": int(np.sum((exact == 0) & np.signbit(exact))),
                          "subnormal": int(np.sum((exact != 0) & (abs(exact) < spec.minnorm)))}))
    for name, spec, options, A, B, C in [] if plant else refusals(rng):
        out = np.full(C.shape, 1234.5)
        got = cuda_tiles.accumulate(gpu, A, B, C, out, spec, **options)
        problems = [] if got is None and np.all(out == 1234.5) else [f"not refused: {got}"]
        print(json.dumps({"case": f"refuses {name}", "problems": problems}))
    if not plant:  # the GPU benchmark's own logic, on fake_cupy's arrays (tiny sizes)
        import fake_cupy

        sys.modules["cupy"] = fake_cupy
        from fpsim.bench import run_matmul_gpu

        for line in run_matmul_gpu(8, repeats=1, generic_n=4, check_shape=(2, 3, 5, 4)):
            print(f"BENCH {line}")
    print(json.dumps({"cases": len(cases(rng)), "refusals": len(refusals(rng))}))
    return 0


@functools.cache
def _simulated(plant: bool) -> tuple[list[dict], str, list[str]]:
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    args = [sys.executable, __file__, "--simulate"] + (["--plant"] if plant else [])
    result = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600,
                            cwd=ROOT)
    rows = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    bench = [line[6:] for line in result.stdout.splitlines() if line.startswith("BENCH ")]
    return rows, result.stdout[-3000:] + result.stderr[-3000:], bench


pytestmark = pytest.mark.xdist_group("cuda_tiles")  # each subprocess runs once, on one worker


@needs_numba_cuda
def test_tiled_kernels_give_the_generic_loops_bits_in_the_simulator():
    rows, log, _ = _simulated(False)
    values = [r for r in rows if not r.get("case", "refuses").startswith("refuses")]
    assert rows and len(values) == rows[-1]["cases"], log
    bad = {r["case"]: r["problems"] for r in values if r["problems"]}
    assert not bad, bad
    # The special cases hold what they are named for.
    by_name = {r["case"]: r for r in values}
    assert by_name["signed zeros fp16"]["negative_zeros"] > 0
    assert by_name["signed zeros fp32"]["negative_zeros"] > 0
    assert by_name["signed zeros fp16-rounded"]["negative_zeros"] > 0
    for name in ("subnormals fp16", "subnormals fp16-rounded", "subnormal sums fp32"):
        assert by_name[name]["subnormal"] > 0, name
    for name in ("inf and nan fp32", "inf and nan fp16-rounded", "overflow fp16",
                 "overflow fp16-rounded", "overflow fp32"):
        assert by_name[name]["specials"] > 0, name


@needs_numba_cuda
def test_tiled_kernels_refuse_what_they_cannot_compute():
    rows, log, _ = _simulated(False)
    refused = [r for r in rows if r.get("case", "").startswith("refuses")]
    assert rows and len(refused) == rows[-1]["refusals"], log
    bad = {r["case"]: r["problems"] for r in refused if r["problems"]}
    assert not bad, bad


@needs_numba_cuda
def test_the_benchmark_checks_bits_and_reports_every_kernel():
    """``python3 -m fpsim bench matmul --backend cupy`` (run on fake_cupy in the simulator
    here): the bits of each kernel against the generic loop, then one timing line each."""
    rows, log, lines = _simulated(False)
    assert lines and lines[0].startswith("GPU: "), log
    assert sum("identical to the generic loop" in line for line in lines) == 8, lines
    assert not any("DIFFERS" in line for line in lines), lines
    for label in ("binary32 (the tiled kernel)", "binary16_fma (the whole call)",
                  "binary16_rounded (the tiled kernel)", "generic loop, binary16",
                  "H100 block FMA (tiled kernel", "generic loop (with stats), H100 block FMA",
                  "cuBLAS SGEMM"):
        assert any(line.startswith(label) for line in lines), (label, lines)


@needs_numba_cuda
def test_a_planted_padding_bug_is_caught():
    rows, log, _ = _simulated(True)
    caught = [r["case"] for r in rows if r.get("problems")]
    assert "signed zeros fp32" in caught and "signed zeros fp16" in caught, log


# -- the offline compile check -------------------------------------------------------------


def compile_report() -> int:
    """Compile every tiled kernel for compute capability 9.0 and print one JSON line each."""
    sys.path.insert(0, str(HERE))
    import cuda_compile_check as check
    from numba import cuda
    from numba.cuda.typing.typeof import typeof

    from fpsim.backends import cuda_tiles
    from fpsim.backends.cuda_contraction import no_contraction

    tools = (check.find_tool("ptxas"), check.find_tool("nvdisasm"))
    tools = None if None in tools else tools
    u = np.uint64(1)
    for name in (*cuda_tiles.KERNELS, "control"):
        kernel = "binary32" if name == "control" else name
        prepare, tiled = cuda_tiles.kernel(kernel, cuda_tiles.DEVICE_TILES[kernel])
        v = np.zeros(2, np.float32 if kernel == "binary32" else np.uint16)
        signature = (typeof(v),) * 3 + (typeof(np.zeros(2)), typeof(u), typeof(u), typeof(u))
        bounds = tiled.targetoptions.get("launch_bounds")
        if name == "control":  # contraction left on
            ptx, _ = cuda.compile_ptx(tiled.py_func, signature, cc=(9, 0),
                                      launch_bounds=bounds)
        else:
            with no_contraction():
                ptx, _ = cuda.compile_ptx(tiled.py_func, signature, cc=(9, 0),
                                          launch_bounds=bounds)
        row = {name: len(re.findall(rf"^\s*{re.escape(name)}\b", ptx, re.M)) for name in (
            "fma.rn.f32", "mul.rn.f32", "add.rn.f32", "fma.rn.f16", "mul.rn.f16", "add.rn.f16",
            "fma.rn.f16x2", "mul.rn.f16x2", "add.rn.f16x2")}
        row.update(kernel=name, local=len(re.findall(r"\.local\b", ptx)),
                   loose=len(re.findall(r"^\s*(add|sub|mul|fma)(\.ftz)?\.f(16|32|64)\b",
                                        ptx, re.M)),
                   ftz=len(re.findall(r"\.ftz\b", ptx)), maxntid=".maxntid" in ptx)
        if tools:
            row["sass"] = check.sass_fma(ptx, (9, 0), tools)
            row["fused_f16"] = fused_half_operations(ptx, tools)
        if name in ("binary32", "binary16_fma"):  # the input conversion and check
            v64 = np.zeros(2)
            with no_contraction():
                ptx, _ = cuda.compile_ptx(prepare.py_func, (typeof(v64),) * 3 + (typeof(v),) * 3
                                          + (typeof(np.zeros(1, np.int64)),), cc=(9, 0))
            row["prepare_fma"] = len(re.findall(r"^\s*fma\.", ptx, re.M))
        print(json.dumps(row))
    return 0


def fused_half_operations(ptx: str, tools: tuple[str, str]) -> int:
    """The binary16 FMA instructions (HFMA2) of the machine code that fuse a product with a
    sum: ptxas writes a binary16 add as a*1 + b and a multiply as a*b + (-0) (both exact
    rewrites: one rounding of the same value), and nothing else is allowed outside the
    ``fma.rn.f16x2`` of exact products."""
    ptxas, nvdisasm = tools
    with tempfile.TemporaryDirectory() as tmp:
        src, cubin = Path(tmp, "k.ptx"), Path(tmp, "k.cubin")
        src.write_text(ptx)
        subprocess.run([ptxas, "-arch=sm_90", str(src), "-o", str(cubin)], check=True,
                       capture_output=True)
        sass = subprocess.run([nvdisasm, str(cubin)], check=True, capture_output=True,
                              text=True).stdout
    fused = [line for line in sass.splitlines() if re.search(r"\bHFMA2\b", line)
             and ", 1, 1, " not in line and not line.rstrip(" ;").endswith("-RZ")]
    return len(fused)


def _compile_digest() -> str:
    from importlib.metadata import version

    h = hashlib.sha256()
    for path in (ROOT / "fpsim/backends/cuda_tiles.py",
                 ROOT / "fpsim/backends/cuda_contraction.py", Path(__file__),
                 HERE / "cuda_compile_check.py"):
        h.update(path.read_bytes())
    h.update(f"{sys.version} {np.__version__} {version('numba-cuda')}".encode())
    return h.hexdigest()[:32]


@functools.cache
def _compiled() -> tuple[list[dict], str]:
    kept = Path(tempfile.gettempdir()) / "fpsim-cuda-tiles-compile" / f"{_compile_digest()}.txt"
    if kept.is_file():
        text = kept.read_text()
        return [json.loads(line) for line in text.splitlines()], "(kept report)"
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    result = subprocess.run([sys.executable, __file__, "--compile"], env=env,
                            capture_output=True, text=True, timeout=600, cwd=ROOT)
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    if result.returncode == 0 and len(lines) == 4:
        kept.parent.mkdir(parents=True, exist_ok=True)
        partial = kept.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text("\n".join(lines) + "\n")
        partial.replace(kept)
    return [json.loads(line) for line in lines], result.stdout[-2000:] + result.stderr[-3000:]


@needs_numba_cuda
def test_tiled_kernels_compile_for_the_h100_without_contraction():
    rows, log = _compiled()
    by_kernel = {r["kernel"]: r for r in rows}
    assert set(by_kernel) == {"binary32", "binary16_fma", "binary16_rounded", "control"}, log
    # Per step of k: one instruction per binary32 output of a thread (8 x 8), or per pair of
    # its binary16 outputs (8 x 16); no scalar binary16 arithmetic.
    steps = 8 * 8
    expected = {
        "binary32": dict(mul32=steps, add32=steps, fma16=0, mul16=0, add16=0),
        "binary16_fma": dict(mul32=0, add32=0, fma16=steps, mul16=0, add16=0),
        "binary16_rounded": dict(mul32=0, add32=0, fma16=0, mul16=steps, add16=steps),
    }
    for name, want in expected.items():
        row = by_kernel[name]
        got = dict(mul32=row["mul.rn.f32"], add32=row["add.rn.f32"], fma16=row["fma.rn.f16x2"],
                   mul16=row["mul.rn.f16x2"], add16=row["add.rn.f16x2"])
        assert got == want, (name, row)
        assert row["fma.rn.f16"] == row["mul.rn.f16"] == row["add.rn.f16"] == 0, row
        assert row["fma.rn.f32"] == 0 and row["loose"] == 0 and row["ftz"] == 0, row
        assert row["local"] == 0, f"{name}: the register blocking spilled to local memory"
        assert row["maxntid"], f"{name}: no launch bounds"
        if "sass" in row:
            assert row["sass"].get("FFMA", 0) == 0 and row["sass"].get("DFMA", 0) == 0, row
            if name == "binary16_rounded":
                assert row["fused_f16"] == 0, row
            if name == "binary16_fma":  # the control of that count: these are all fused
                assert row["fused_f16"] == 64, row
        assert row.get("prepare_fma", 0) == 0, row


@needs_numba_cuda
def test_the_compile_check_catches_contraction_left_on():
    rows, log = _compiled()
    control = [r for r in rows if r["kernel"] == "control"]
    assert control and control[0]["fma.rn.f32"] > 0, log


@needs_numba_cuda
def test_tile_shapes_that_cannot_be_loaded_evenly_are_refused():
    from fpsim.backends.cuda_tiles import DEVICE_TILES, Tiles, namespace, tile_constants

    for name, tiles in DEVICE_TILES.items():
        constants = tile_constants(tiles, 1 if name == "binary32" else 2)
        assert constants["THREADS"] == 256 and constants["TM"] * constants["TN"] == 64
    with pytest.raises(ValueError, match="whole threads' tiles"):
        tile_constants(Tiles(128, 128, 16, 7, 8))
    with pytest.raises(ValueError, match="lanes of 2 columns"):
        tile_constants(Tiles(8, 12, 4, 2, 3), 2)
    with pytest.raises(ValueError, match="cannot load the tiles evenly"):
        tile_constants(Tiles(128, 128, 3, 8, 8))
    with pytest.raises(ValueError, match="unknown tiled kernel 'binary8'"):
        namespace("binary8", Tiles(8, 8, 4, 2, 2))


@needs_numba_cuda
def test_docstring_examples():
    import doctest

    from fpsim.backends import cuda_tiles

    result = doctest.testmod(cuda_tiles, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


# -- on a GPU ------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("accum,rounded", [("fp32", False), ("fp32", True), ("fp16", False),
                                           ("fp16", True)])
def test_tiled_kernels_match_the_generic_loop_on_the_gpu(accum, rounded):
    from conftest import gpu_missing

    if gpu_missing():
        pytest.skip("no GPU for the cupy backend (fpsim.backends.gpu_missing() says why)")
    import cupy

    from fpsim.backends import backend as using
    from fpsim.backends import cuda_tiles, get_backend

    rng = np.random.default_rng(7)
    groups, m, k_len, n = 2, 150, 301, 260
    A, B, C = halves(rng, (groups * m, k_len)), halves(rng, (groups, k_len, n)), halves(
        rng, (groups * m, n), 4.0)
    A[3, 5], A[7, 0], B[1, 4, 9], C[0, 0], C[5, 5] = np.inf, -0.0, 0.0, np.nan, -0.0
    A[8, 7], B[0, 7, 3] = 4.0, 30000.0  # a product beyond binary16's range
    spec = cuda_tiles.BINARY32_SPEC if accum == "fp32" else cuda_tiles.BINARY16_SPEC
    with using("cupy"):
        gpu = get_backend()
        for host in (False, True):
            a, b, c = (x if host else cupy.asarray(x) for x in (A, B, C))
            out = np.empty(C.shape) if host else cupy.empty(C.shape)
            counts = cuda_tiles.accumulate(gpu, a, b, c, out, spec, key=None,
                                           order="sequential", rounded=rounded, has_c=True,
                                           want_stats=False)
            assert counts is not None and not counts.any()
            want = cupy.empty(C.shape)
            cuda_tiles.generic_sequential(gpu, cupy.asarray(A), cupy.asarray(B),
                                          cupy.asarray(C), want, spec, rounded)
            got = out if host else cupy.asnumpy(out)
            assert np.array_equal(got.view(np.int64), cupy.asnumpy(want).view(np.int64))


def main(argv: list[str]) -> int:
    if "--simulate" in argv:
        return simulate("--plant" in argv)
    if "--compile" in argv:
        return compile_report()
    raise SystemExit("usage: test_cuda_tiles.py --simulate [--plant] | --compile")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
