"""The cupy backend's tiled block-FMA kernel (fpsim.backends.cuda_blockfma_tiles), checked
without a GPU.

- Simulator: the kernel runs in Numba's CUDA simulator (a subprocess: NUMBA_ENABLE_CUDASIM
  must be set before numba.cuda is imported; this file is also that subprocess's script)
  and must give, bit for bit, the NumPy backend's values (``kernels.blockfma`` as the CPU
  runs it) and the cupy backend's generic loop's (``cuda_loops.accumulate_blocks``, in the
  simulator), for the H100 preset and every other model it covers, on ragged shapes (M, N
  not whole tiles; K not a whole block: 1, 15, 17, 37), several groups of B, zeros of both
  signs, fp16 and fp32 subnormals, exact cancellation, sums that the truncation changes,
  the exponent floor, overflow to infinity (bf16 inputs), a signed-zero model; and return
  None (``out`` untouched) wherever it does not apply (stats, infinities, NaN, values not
  of the format, models it does not cover). Through ``fpsim.matmul(model=...)`` with the
  cupy backend the tiled kernel must run where it applies and the generic loop elsewhere,
  with the same bits. A planted bug (the exponent floor left out) must be caught.
- Offline compile (tests/cuda_compile_check.py compiles it too): no contraction, no
  ``.ftz``, no local memory, launch bounds; and the inner loop's machine code as counted
  in docs/performance.md (where ptxas and nvdisasm are found).
- GPU (marked ``gpu``): the tiled kernel against the generic loop on CuPy arrays.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import needs_numba_cuda

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# The exponent floor left out of c's exponent (the alignment exponent of a block).
PLANT = ("return max(e, I32(FLOOR)) if HAS_FLOOR else e", "return e")

pytestmark = pytest.mark.xdist_group("cuda_blockfma_tiles")  # each subprocess runs once


# -- the subprocess ---------------------------------------------------------------------


def values(rng, shape, fmt="fp16", lo=-24, hi=16, zeros=0.1):
    """Random values of ``fmt`` (as float64): exponents lo..hi-1 (subnormals below the
    format's emin), both signs, a share of zeros of both signs."""
    import fpsim

    e = rng.integers(lo, hi, size=shape)
    v = np.ldexp(rng.uniform(1, 2, size=shape), e) * rng.choice([-1.0, 1.0], size=shape)
    v[rng.random(shape) < zeros / 2] = 0.0
    v[rng.random(shape) < zeros / 2] = -0.0
    return np.asarray(fpsim.round(v, fmt, "toward_zero"), dtype=np.float64)


def accumulators(rng, shape, lo=-149, hi=40):
    """Random binary32 values: normal, subnormal (below 2**-126), zeros of both signs."""
    import fpsim

    c = np.ldexp(rng.uniform(1, 2, shape), rng.integers(lo, hi, shape))
    c *= rng.choice([-1.0, 1.0], shape)
    c[rng.random(shape) < 0.1] = 0.0
    c[rng.random(shape) < 0.05] = -0.0
    return np.asarray(fpsim.round(c, "fp32", "toward_zero"), dtype=np.float64)


def cases(rng):
    """(name, model, A, B, C, tiles shape or None): the value checks."""
    import fpsim
    from fpsim.backends.cuda_blockfma_tiles import DEVICE_TILES

    h100 = fpsim.hw.H100
    out = []
    # Ragged: 9 x 11 outputs on 8 x 8 tiles; K = 37 is two whole blocks and one of 5.
    for k_len in (1, 15, 17, 37):
        out.append((f"H100 ragged K={k_len}", h100, values(rng, (9, k_len)),
                    values(rng, (1, k_len, 11)), accumulators(rng, (9, 11)), None))
    out.append(("H100 groups", h100, values(rng, (6, 20)), values(rng, (3, 20, 5)),
                accumulators(rng, (6, 5)), None))
    # Exact cancellation (row 1: c = -a*b gives +0), zero products (row 0: A all zeros, c
    # passes through; row 2: -0 products and c = -0 give +0), products far apart in a block
    # (row 4: one product at 2**30 and fifteen the truncation cuts to a few bits or none).
    a, b = values(rng, (6, 16)), values(rng, (1, 16, 7))
    c = accumulators(rng, (6, 7))
    b[0, 0] = 2.0**15
    a[0] = 0.0
    a[1], a[1, 0] = 0.0, 1.0
    c[1] = -b[0, 0]
    c[2], a[2] = -0.0, -0.0
    a[4], a[4, 0] = 2.0**-10, 2.0**15
    out.append(("H100 cancellation, zeros, truncation", h100, a, b, c, None))
    # fp16 subnormal inputs only; binary32 subnormal c, which rows of zeros pass through.
    a = values(rng, (5, 18), lo=-24, hi=-14)
    a[3:] = 0.0
    out.append(("H100 subnormals", h100, a, values(rng, (1, 18, 6), lo=-24, hi=-14),
                accumulators(rng, (5, 6), lo=-149, hi=-126), None))
    # The device's tiles (256 threads: slow in the simulator, so once, small).
    out.append(("H100 device tiles", h100, values(rng, (3, 17)), values(rng, (1, 17, 5)),
                accumulators(rng, (3, 5)), DEVICE_TILES))
    out.append(("H100 tiles 8 x 16, 2 x 4 a thread", h100, values(rng, (9, 20)),
                values(rng, (1, 20, 19)), accumulators(rng, (9, 19)), (8, 16, 2, 4)))
    # bf16 inputs: products from 2**-252 to 2**254; the exponent floor (-133) cuts a
    # product of 2**-160 that a block without it would keep (row 0); overflow to +-inf
    # (rows 1, 2); a negative sum cut to zero, +0 (row 3: -2**-149 + 2**-150).
    def tiny_sums(model):
        a = values(rng, (5, 16), "bf16", -126, 128)
        b = values(rng, (1, 16, 4), "bf16", -126, 128)
        c = accumulators(rng, (5, 4))
        a[0], b[0, :, 0], c[0, 0] = 0.0, 0.0, 0.0
        a[0, :2], b[0, :2, 0] = [2.0**-70, -(2.0**-80)], [2.0**-70, 2.0**-80]
        a[1, :3], b[0, :3, 1] = 2.0**127, 2.0**100  # +inf
        a[2, :3] = -(2.0**127)  # -inf
        a[3], a[3, 0], b[0, 0, 2], c[3, 2] = 0.0, 2.0**-75, 2.0**-75, -(2.0**-149)
        return model, a, b, c

    out.append(("H100/bf16 floor and overflow", *tiny_sums(fpsim.hw.H100_BF16), None))
    # Other blocks, floors and inputs: V100 (4, no floor), A100 (8, -132), tf32 (8).
    out.append(("V100", fpsim.hw.V100, values(rng, (7, 10)), values(rng, (1, 10, 6)),
                accumulators(rng, (7, 6)), None))
    out.append(("A100", fpsim.hw.A100, values(rng, (8, 19)), values(rng, (2, 19, 6)),
                accumulators(rng, (8, 6)), None))
    out.append(("H100/tf32", fpsim.hw.H100_TF32, values(rng, (5, 12), "tf32", -40, 40),
                values(rng, (1, 12, 6), "tf32", -40, 40), accumulators(rng, (5, 6)), None))
    # A signed-zero model: the negative sum of row 3 cut to zero keeps its sign.
    signed = fpsim.hw.BlockFMA("signed", block=16, frac_bits=25, exp_floor=-133,
                               input="bf16", zero_sign="signed")
    out.append(("signed zero", *tiny_sums(signed), None))
    return out


def out_spec_of(model):
    from fpsim.formats import as_format
    from fpsim.kernels.spec import make_spec

    return make_spec(as_format(model.block_output or model.output), model.output_rounding,
                     True, model.overflow == "saturate", None)


def refusals(rng):
    """(name, model, out_spec or None, A, B, C, want_stats) on which ``accumulate`` must
    return None."""
    import fpsim
    from fpsim.kernels.spec import make_spec

    h100 = fpsim.hw.H100
    a, b, c = values(rng, (3, 20)), values(rng, (1, 20, 4)), accumulators(rng, (3, 4))
    out = [("stats", h100, None, a, b, c, True), ("K=0", h100, None, a[:, :0], b[:, :0], c,
                                                    False)]
    for what, where, value in (("inf in A", "A", np.inf), ("NaN in B", "B", np.nan),
                               ("-inf in c", "C", -np.inf), ("NaN in c", "C", np.nan),
                               ("0.1 in A", "A", 0.1), ("2**-25 in B", "B", 2.0**-25),
                               ("0.1 in c", "C", 0.1)):
        x = {"A": a.copy(), "B": b.copy(), "C": c.copy()}
        x[where].flat[-1] = value
        out.append((what, h100, None, x["A"], x["B"], x["C"], False))
    for model in (fpsim.hw.H100_FP8, fpsim.hw.H100_F16, fpsim.hw.PRESETS["MI300"],
                  fpsim.hw.BlockFMA("saturating", block=16, frac_bits=25, exp_floor=-133,
                                    overflow="saturate"),
                  fpsim.hw.BlockFMA("nearest", block=16, frac_bits=25, exp_floor=-133,
                                    output_rounding="nearest_even"),
                  fpsim.hw.BlockFMA("block 32", block=32, frac_bits=25, exp_floor=-133)):
        fin = model.input
        x, y = values(rng, (3, 8), fin, -6, 6), values(rng, (1, 8, 4), fin, -6, 6)
        out.append((f"model {model.name}", model, None, x, y, np.zeros((3, 4)), False))
    fp32_nearest = make_spec(fpsim.format("fp32"), "nearest_even", True, False, None)
    out.append(("out_spec nearest_even", h100, fp32_nearest, a, b, c, False))
    return out


def same_bits(x, y) -> bool:
    return bool(np.array_equal(np.asarray(x).view(np.int64), np.asarray(y).view(np.int64)))


def simulate(plant: bool) -> int:
    """Run every case in this process (the simulator's); print one JSON line per case. With
    ``plant``, the floor bug first, and only the case it must fail."""
    import warnings

    warnings.simplefilter("ignore")  # numpy's overflow warnings in the simulated arithmetic
    import fpsim
    from fpsim.backends import cuda_blockfma_tiles as tiles
    from fpsim.backends import cuda_loops, cupy_backend, numpy_backend

    assert tiles.SIMULATOR, "run with NUMBA_ENABLE_CUDASIM=1"
    if plant:
        import inspect
        import textwrap

        source = textwrap.dedent(inspect.getsource(tiles.c_exponent32))
        assert PLANT[0] in source
        scope: dict = {}
        exec(compile(source.replace(*PLANT), tiles.__file__, "exec"), scope)
        tiles.c_exponent32 = scope["c_exponent32"]
    gpu, ref = cupy_backend.Backend(), numpy_backend.Backend()
    rng = np.random.default_rng(35)
    for name, model, A, B, C, shape in cases(rng):
        if plant and "floor" not in name:
            continue
        hw, out_spec = model.params(), out_spec_of(model)
        out = np.full(C.shape, 1234.5)
        counts = tiles.accumulate(gpu, A, B, C, out, hw, out_spec, model.block, False, shape)
        want = np.full(C.shape, 4321.5)
        ref.accumulate_blocks(A, B, C, want, hw, out_spec, model.block, False)
        generic = np.full(C.shape, 2468.5)
        if not plant:  # the cupy backend's generic loop (slow in the simulator)
            gpu.accumulation(cuda_loops.accumulate_blocks, A, B, C, generic, hw, out_spec,
                             model.block, A.shape[0] // B.shape[0], False)
        problems = []
        if counts is None or list(counts) != [0] * 5:
            problems.append(f"counts {counts}")
        elif not same_bits(out, want):
            where = np.argwhere(out.view(np.int64) != want.view(np.int64))[:3].tolist()
            problems.append(f"differs from the NumPy backend at {where}: "
                            f"{[(out[tuple(w)], want[tuple(w)]) for w in where]}")
        if not plant and not same_bits(generic, want):
            problems.append("the generic loop differs from the NumPy backend")
        # What the case holds: truncation at work (the block's result is not the exact sum
        # cut once), signed zeros, subnormal and infinite results.
        per = A.shape[0] // B.shape[0]
        exact = np.asarray(fpsim.round(np.asarray(
            [[math.fsum([C[r, j], *(A[r] * B[r // per][:, j])]) for j in range(B.shape[2])]
             for r in range(A.shape[0])]), "fp32", "toward_zero"), dtype=np.float64)
        print(json.dumps({
            "case": name, "problems": problems,
            "cut": int(np.sum(want.view(np.int64) != exact.view(np.int64))),
            "positive_zeros": int(np.sum((want == 0) & ~np.signbit(want))),
            "negative_zeros": int(np.sum((want == 0) & np.signbit(want))),
            "subnormal": int(np.sum((want != 0) & (abs(want) < 2.0**-126))),
            "infinite": int(np.sum(np.isinf(want)))}))
    for name, model, out_spec, A, B, C, stats in [] if plant else refusals(rng):
        out = np.full(C.shape, 1234.5)
        got = tiles.accumulate(gpu, A, B, C, out, model.params(),
                               out_spec or out_spec_of(model), model.block, stats)
        problems = [] if got is None and np.all(out == 1234.5) else [f"not refused: {got}"]
        print(json.dumps({"case": f"refuses {name}", "problems": problems}))
    if not plant:
        public_calls(rng)
    print(json.dumps({"cases": len(cases(rng)), "refusals": len(refusals(rng))}))
    return 0


def public_calls(rng) -> None:
    """``fpsim.matmul(model=...)`` on the cupy backend (host arrays): the tiled kernel where
    it applies, the generic loop elsewhere (an infinity, stats), the NumPy backend's bits."""
    import fpsim
    from fpsim.backends import cuda_blockfma_tiles as tiles

    ran = []
    original = tiles.accumulate

    def recording(*args, **kwargs):
        result = original(*args, **kwargs)
        ran.append(result is not None)
        return result

    tiles.accumulate = recording
    a, b = values(rng, (2, 5, 24)), values(rng, (24, 9))
    c = accumulators(rng, (2, 5, 9))
    a_inf = a.copy()
    a_inf[1, 2, 3] = np.inf
    calls = [("matmul H100", dict(a=a, b=b, c=c), True),
             ("matmul H100 with an infinity", dict(a=a_inf, b=b, c=c), False),
             ("matmul H100 split-K 10", dict(a=a, b=b, model=fpsim.hw.H100.with_split_k(10)),
              True),
             ("matmul H100 stats", dict(a=a, b=b, stats=True), False)]
    for name, kwargs, tiled in calls:
        kwargs.setdefault("model", fpsim.hw.H100)
        del ran[:]
        results = []
        options = {k: v for k, v in kwargs.items() if k not in ("a", "b")}
        for backend in ("cupy", "numpy"):
            with fpsim.backend(backend):
                results.append(fpsim.matmul(kwargs["a"], kwargs["b"], **options))
        used = bool(ran) and all(ran)
        if isinstance(results[0], tuple):
            same = same_bits(results[0][0], results[1][0]) and results[0][1] == results[1][1]
        else:
            same = same_bits(results[0], results[1])
        problems = ([] if same else ["differs from the NumPy backend"]) + (
            [] if used == tiled else [f"tiled kernel used: {ran}, expected {tiled}"])
        print(json.dumps({"case": f"public {name}", "problems": problems}))
    tiles.accumulate = original


@functools.cache
def _simulated(plant: bool) -> tuple[list[dict], str]:
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    args = [sys.executable, __file__, "--simulate"] + (["--plant"] if plant else [])
    result = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600,
                            cwd=ROOT)
    rows = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    return rows, result.stdout[-3000:] + result.stderr[-3000:]


@needs_numba_cuda
def test_the_tiled_kernel_gives_the_block_fmas_bits_in_the_simulator():
    rows, log = _simulated(False)
    values_ = [r for r in rows if "cut" in r]
    assert rows and len(values_) == rows[-1]["cases"], log
    bad = {r["case"]: r["problems"] for r in values_ if r["problems"]}
    assert not bad, bad
    by_name = {r["case"]: r for r in values_}
    # The cases hold what they are named for.
    assert sum(r["cut"] for r in values_ if r["case"].startswith("H100 ragged")) > 0
    special = by_name["H100 cancellation, zeros, truncation"]
    assert special["cut"] > 0 and special["positive_zeros"] >= 2 * 7, special
    assert by_name["H100 subnormals"]["subnormal"] > 0
    floor = by_name["H100/bf16 floor and overflow"]
    assert floor["infinite"] >= 2 and floor["positive_zeros"] >= 1, floor
    assert by_name["signed zero"]["negative_zeros"] > 0


@needs_numba_cuda
def test_the_tiled_kernel_refuses_what_it_does_not_compute():
    rows, log = _simulated(False)
    refused = [r for r in rows if r.get("case", "").startswith("refuses")]
    assert rows and len(refused) == rows[-1]["refusals"], log
    bad = {r["case"]: r["problems"] for r in refused if r["problems"]}
    assert not bad, bad


@needs_numba_cuda
def test_matmul_runs_the_tiled_kernel_where_it_applies():
    rows, log = _simulated(False)
    public = [r for r in rows if r.get("case", "").startswith("public")]
    assert len(public) == 4, log
    bad = {r["case"]: r["problems"] for r in public if r["problems"]}
    assert not bad, bad


@needs_numba_cuda
def test_a_planted_floor_bug_is_caught():
    rows, log = _simulated(True)
    caught = [r["case"] for r in rows if r.get("problems")]
    assert caught == ["H100/bf16 floor and overflow"], log


# -- the machine code of the inner loops ------------------------------------------------

# Pipes (sm_90), as docs/hardware/gpu/blockfma-roofline-2026-11-28.txt counts them.
PIPES = [(r"^(IMAD|IMUL)", "fma (IMAD)"), (r"^(FADD|FMUL|FFMA)", "fma (FP32)"),
         (r"^(IADD3|LOP3|SHF|SEL|FSEL|ISETP|LEA|PLOP3|P2R|R2P|IMNMX|VIMNMX|VIADD|IABS|PRMT|"
          r"MOV|CS2R|S2R|FSETP|BMSK|SGXT)", "alu"),
         (r"^(DADD|DMUL|DFMA|DSETP)", "fp64"),
         (r"^(I2F|F2I|F2F|FRND|MUFU|FLO|POPC|BREV)", "xu (conversions)"),
         (r"^(LDG|STG|LDS|STS|LDC|REDG|ATOM|BAR)", "lsu / memory"),
         (r"^(U|S2UR)", "uniform datapath"),
         (r"^(BRA|BSSY|BSYNC|EXIT|NOP|CALL|RET|WARPSYNC)", "control")]


def pipe(instruction: str) -> str:
    op = re.sub(r"^@!?U?P[0-9T]\s+", "", instruction).split()[0]
    for pattern, name in PIPES:
        if re.match(pattern, op):
            return name
    raise ValueError(f"unclassified: {instruction}")


def count_report() -> int:
    """The tiled kernel for the H100 preset on the device's tiles, compiled as
    tests/cuda_compile_check.py compiles it and assembled by ptxas for sm_90: its
    instructions a product by pipe (one JSON line). The kernel loop over k holds two
    inner loops (a step of k each: step 1's exponents, step 2's terms, ``TM * TN``
    products an iteration, ``BLOCK`` iterations a tile) and the rest once a tile (loads,
    c, rounding: ``BLOCK * TM * TN`` products); none of them branches inside."""
    import tempfile

    sys.path.insert(0, str(HERE))
    import cuda_compile_check as check

    import fpsim
    from fpsim.backends.cuda_blockfma_tiles import tiles_for

    tools = (check.find_tool("ptxas"), check.find_tool("nvdisasm"))
    if None in tools:
        print(json.dumps({"skipped": f"ptxas={tools[0]} nvdisasm={tools[1]}"}))
        return 0
    ptx, _ = check.compile_one("blockfma_tiles", "tiled", "float64", (9, 0), True, "tiles")
    with tempfile.TemporaryDirectory() as tmp:
        src, cubin = Path(tmp, "k.ptx"), Path(tmp, "k.cubin")
        src.write_text(ptx)
        info = subprocess.run([tools[0], "-arch=sm_90", "-v", str(src), "-o", str(cubin)],
                              check=True, capture_output=True, text=True).stderr
        sass = subprocess.run([tools[1], "-c", str(cubin)], check=True, capture_output=True,
                              text=True).stdout
    items: list[tuple[str, str]] = []
    for line in sass.splitlines():
        label = re.match(r"^(\.L_x_\d+):", line)
        ins = re.match(r"^\s*/\*[0-9a-f]+\*/\s+(.*?)\s*;\s*$", line)
        if label:
            items.append(("label", label.group(1)))
        elif ins:
            items.append(("ins", ins.group(1)))
    where = {name: i for i, (kind, name) in enumerate(items) if kind == "label"}
    loops = []
    for i, (kind, text) in enumerate(items):
        target = re.search(r"BRA `\((\.L_x_\d+)\)", text) if kind == "ins" else None
        if target and where.get(target.group(1), i) < i:
            loops.append((where[target.group(1)], i))
    outer = max(loops, key=lambda span: span[1] - span[0])
    inner = sorted(span for span in loops if outer[0] < span[0] and span[1] < outer[1])

    def body(lo: int, hi: int, skip: list) -> list[str]:
        return [items[i][1] for i in range(lo + 1, hi + 1) if items[i][0] == "ins"
                and not any(a <= i <= b for a, b in skip)]

    tiles = tiles_for(fpsim.hw.H100.block)
    per_step = tiles.thread_rows * tiles.thread_cols
    parts = {"step 1": (body(*inner[0], []), per_step),
             "step 2": (body(*inner[1], []), per_step),
             "once a tile": (body(*outer, inner), per_step * tiles.depth)}
    row: dict = {"inner_loops": len(inner), "registers": int(re.search(
        r"Used (\d+) registers", info).group(1)), "spills": "0 bytes spill" not in info}
    total: dict[str, float] = {}
    for name, (instructions, products) in parts.items():
        pipes: dict[str, int] = {}
        for instruction in instructions:
            pipes[pipe(instruction)] = pipes.get(pipe(instruction), 0) + 1
            total[pipe(instruction)] = total.get(pipe(instruction), 0) + 1 / products
        row[name] = dict(instructions=len(instructions), products=products, pipes=pipes,
                         branches=sum(" BRA " in f" {i}" for i in instructions))
    row["per_product"] = {k: round(v, 2) for k, v in sorted(total.items())}
    row["issued_per_product"] = round(sum(total.values()), 2)
    print(json.dumps(row))
    return 0


@needs_numba_cuda
def test_the_inner_loops_stay_within_the_rooflines_budget():
    """docs/performance.md: 5% of SGEMM needs at most 13.9 ALU-pipe and 27.8 issued
    instructions a product; the counts there are this test's."""
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    result = subprocess.run([sys.executable, __file__, "--count"], env=env,
                            capture_output=True, text=True, timeout=600, cwd=ROOT)
    rows = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert rows, result.stdout[-2000:] + result.stderr[-3000:]
    row = rows[0]
    if "skipped" in row:
        pytest.skip(row["skipped"])
    assert row["inner_loops"] == 2 and not row["spills"], row
    # One backward branch a loop, none inside: the counts are those of every tile.
    assert [row[p]["branches"] for p in ("step 1", "step 2", "once a tile")] == [1, 1, 1], row
    assert row["per_product"]["alu"] <= 13.9 and row["issued_per_product"] <= 27.8, row


def test_the_covered_presets():
    import fpsim
    from fpsim.backends.cuda_blockfma_tiles import OUT_SPEC, covers

    covered = sorted(name for name, m in fpsim.hw.PRESETS.items()
                     if out_spec_of(m)._replace(rbits=OUT_SPEC.rbits) == OUT_SPEC
                     and covers(m.params(), out_spec_of(m), m.block) is not None)
    assert covered == ["A100", "A100/bf16", "B200", "B200/bf16", "H100", "H100/bf16", "L40",
                       "L40/bf16", "RTX5090", "RTX5090/bf16", "T4", "V100"], covered
    tf32 = fpsim.hw.H100_TF32
    assert covers(tf32.params(), out_spec_of(tf32), tf32.block) is not None
    # Split-K slices run on it too (each slice is a call of its own).
    split = fpsim.hw.H100.with_split_k(1408)
    assert covers(split.params(), out_spec_of(split), split.block) is not None


@needs_numba_cuda
def test_docstring_examples():
    import doctest

    from fpsim.backends import cuda_blockfma_tiles

    result = doctest.testmod(cuda_blockfma_tiles, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


# -- on a GPU ------------------------------------------------------------------------------


@pytest.mark.gpu
def test_the_tiled_kernel_matches_the_generic_loop_on_the_gpu():
    from conftest import gpu_missing

    if gpu_missing():
        pytest.skip("no GPU for the cupy backend (fpsim.backends.gpu_missing() says why)")
    import cupy

    import fpsim
    from fpsim.backends import backend as using
    from fpsim.backends import cuda_blockfma_tiles as tiles
    from fpsim.backends import cuda_loops, get_backend

    rng = np.random.default_rng(7)
    groups, m, k_len, n = 2, 150, 301, 260
    A, B = values(rng, (groups * m, k_len)), values(rng, (groups, k_len, n))
    C = accumulators(rng, (groups * m, n))
    hw, out_spec = fpsim.hw.H100.params(), tiles.OUT_SPEC
    with using("cupy"):
        gpu = get_backend()
        for host in (False, True):
            a, b, c = (x if host else cupy.asarray(x) for x in (A, B, C))
            out = np.empty(C.shape) if host else cupy.empty(C.shape)
            counts = tiles.accumulate(gpu, a, b, c, out, hw, out_spec, 16, False)
            assert counts is not None and not counts.any()
            want = cupy.empty(C.shape)
            gpu.accumulation(cuda_loops.accumulate_blocks, cupy.asarray(A), cupy.asarray(B),
                             cupy.asarray(C), want, hw, out_spec, 16, m, False)
            got = out if host else cupy.asnumpy(out)
            assert same_bits(got, cupy.asnumpy(want))


def main(argv: list[str]) -> int:
    if "--simulate" in argv:
        return simulate("--plant" in argv)
    if "--count" in argv:
        return count_report()
    raise SystemExit("usage: test_cuda_blockfma_tiles.py --simulate [--plant] | --count")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
