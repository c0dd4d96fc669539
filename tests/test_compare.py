"""fpsim compare: the verdicts on planted cases, the CPU suite at a small size, the GPU
suite's logic with NumPy arrays standing in for CuPy's, the command line."""

import json
import subprocess
import sys

import numpy as np
import pytest

import fpsim
from fpsim.backends import numba_backend
from fpsim.compare import Case, evaluate, run
from fpsim.compare import gpu as gpu_suite
from fpsim.compare.cpu import numpy_pairwise
from fpsim.compare.report import bin_labels, markdown
from fpsim.compare.run import DEFAULT_SIZE


def halves(n, seed=0):
    rng = np.random.default_rng(seed)
    return np.asarray(fpsim.round(rng.standard_normal(n) * 8, "fp16"), dtype=np.float64)


def next_up(x, fmt):
    bits = fpsim.to_bits(x, fmt)
    return fpsim.from_bits(bits + 1, fmt)  # positive x: one encoding up is one ulp up


def test_an_identical_case_reports_100_percent():
    x = halves(1000)
    record = evaluate(Case("same", "hw", "emu", "fp16", x, {"model": x.copy()}))
    c = record.results["model"]
    assert (c.identical, c.max_ulp, c.median_ulp) == (1.0, 0.0, 0.0)
    assert c.histogram[0] == 1000 and sum(c.histogram) == 1000
    assert record.verdict == "identical" and record.best == "model"


def test_a_planted_one_ulp_error_is_reported_exactly():
    x = np.asarray(fpsim.round(np.abs(halves(1000)) + 1.0, "fp16"), dtype=np.float64)
    hardware = x.copy()
    hardware[417] = next_up(x[417], "fp16")
    record = evaluate(Case("planted", "hw", "emu", "fp16", hardware, {"model": x}))
    c = record.results["model"]
    assert c.identical == 999 / 1000 and c.max_ulp == 1.0 and c.median_ulp == 0.0
    assert c.histogram[:3] == (999, 1, 0)
    assert record.verdict == "differs: 1 of 1000, max 1 ulp"


def test_nan_against_a_number_and_nans_as_a_class():
    x = halves(10)
    hardware = x.copy()
    hardware[3] = np.nan
    record = evaluate(Case("nan", "hw", "emu", "fp16", hardware, {"model": x}))
    assert record.verdict == "differs: 1 of 10, max a NaN against a number"
    assert record.results["model"].histogram[-1] == 1
    # Any NaN matches any NaN: NaN encodings (the sign, the payload) are not compared.
    y = np.full(4, np.nan)
    assert evaluate(Case("nans", "hw", "emu", "fp8_e4m3", -y, {"m": y})).verdict == "identical"


def test_the_best_candidate_is_the_closest():
    x = np.asarray(fpsim.round(np.abs(halves(100)) + 1.0, "fp16"), dtype=np.float64)
    worse = x.copy()
    worse[:10] = next_up(next_up(x[:10], "fp16"), "fp16")
    better = x.copy()
    better[:10] = next_up(x[:10], "fp16")
    exact = x.copy()
    record = evaluate(Case("c", "hw", "emu", "fp16", x, {"worse": worse, "better": better}))
    assert record.best == "better"
    record = evaluate(Case("c", "hw", "emu", "fp16", x,
                           {"worse": worse, "exact": exact, "better": better}))
    assert record.best == "exact" and record.verdict == "identical"


def test_a_candidate_of_another_shape_is_refused():
    with pytest.raises(ValueError, match="shape"):
        evaluate(Case("c", "hw", "emu", "fp16", halves(4), {"m": halves(5)}))


def test_numpy_pairwise_follows_numpys_float32_sum():
    """The emulated order of NumPy's pairwise_sum, on float32 data where orders differ."""
    rng = np.random.default_rng(3)
    for n in (1, 7, 8, 9, 100, 128, 129, 1000, 5000):
        x = (rng.standard_normal((20, n)) * np.exp2(rng.integers(-20, 20, (20, n))))
        x = x.astype(np.float32)
        want = np.sum(x, axis=1)
        got = fpsim.add(0.0, numpy_pairwise(x, "fp32"), "fp32")
        assert np.array_equal(np.asarray(got, np.float32).view(np.uint32),
                              want.view(np.uint32)), n


@pytest.fixture(scope="module")
def cpu_records():
    return run("cpu", size=4096, seed=1)


def test_the_cpu_suite_finds_numpy_and_ml_dtypes_bit_identical(cpu_records):
    names = {r.name for r in cpu_records}
    for op in ("add", "sub", "mul", "div", "sqrt"):
        assert f"numpy fp16 {op}" in names
    assert {"numpy fp16 sum", "numpy fp16 dot", "blas sgemm"} <= names
    for r in cpu_records:
        if r.name == "blas sgemm" or r.skipped:
            continue
        assert r.verdict == "identical", (r.name, r.verdict)
    sums = {r.name: r for r in cpu_records}["numpy fp16 sum"]
    assert sums.best == "NumPy's pairwise order in fp32, then fp16"
    sums32 = {r.name: r for r in cpu_records}["numpy fp32 sum"]
    assert sums32.best == "NumPy's pairwise order" and sums32.verdict == "identical"
    assert sums32.results["pairwise"].identical < 0.9  # the orders do differ on this data
    dot = {r.name: r for r in cpu_records}["numpy fp16 dot"]
    assert dot.best == "sequential fp32 from +0, then fp16"


def test_the_cpu_suites_report(cpu_records, tmp_path):
    header = dict(suite="cpu", size=4096, seed=1, machine="m", versions={"numpy": "x"})
    text = markdown(cpu_records, header)
    assert "| numpy fp16 add |" in text and "| blas sgemm |" in text
    assert len(bin_labels()) == len(cpu_records[0].results["fp16 nearest_even"].histogram)


class NumpyStandIn:
    """NumPy arrays where the GPU suite has CuPy's: NumPy's float16 arithmetic, ml_dtypes'
    casts and NumPy's float32 products play the GPU's part."""

    name = "NumPy stand-in"
    capability = (9, 0)
    preset = fpsim.hw.H100
    xp = np

    def to_host(self, x):
        return np.asarray(x, dtype=np.float64)

    def fma16(self, a, b, c):
        # a*b is exact in binary64; + c and the cast round twice only in rare cases.
        with np.errstate(all="ignore"):
            return (a.astype(np.float64) * b + c).astype(np.float16).astype(np.float64)

    def cast(self, x, fmt, saturate):
        import ml_dtypes

        dtype = {"bf16": ml_dtypes.bfloat16, "fp8_e4m3": ml_dtypes.float8_e4m3fn,
                 "fp8_e5m2": ml_dtypes.float8_e5m2}[fmt]
        top = fpsim.format(fmt).max
        with np.errstate(all="ignore"):
            return (np.clip(x, -top, top) if saturate else x).astype(dtype).astype(np.float64)

    def gemm(self, a, b, inputs, compute):
        product = a.astype(np.float32) @ b.astype(np.float32)
        return product.astype(np.float16 if compute == "fp16" else np.float32).astype(float)


def test_the_gpu_suite_runs_on_a_stand_in(monkeypatch):
    # Serial generic loops only: the parallel ones and those compiled for a format (from
    # 2**20 steps) are other tests' subject; compiling them took half this test's time.
    monkeypatch.setattr(numba_backend, "SPECIALISE_FROM", 1 << 40)
    monkeypatch.setattr(numba_backend, "PARALLEL_FROM", 1 << 40)
    with fpsim.backend("numba"):  # the NumPy backend takes minutes for the split-K search
        records = [evaluate(c) if isinstance(c, Case) else c
                   for c in gpu_suite.cases(2048, 0, device=NumpyStandIn())]
    by_name = {r.name: r for r in records}
    for op in ("add", "mul", "div", "sqrt"):
        assert by_name[f"gpu fp16 {op}"].verdict == "identical"
    for name in ("gpu cast float32->fp16", "gpu cast float32->bf16",
                 "gpu cast float32->fp8_e4m3", "gpu cast float32->fp8_e4m3 saturating",
                 "gpu cast float32->fp8_e5m2 saturating"):
        assert by_name[name].verdict == "identical", name
    gemms = [r for r in records if r.name.startswith("gpu gemm")]
    assert len(gemms) == 8 and all(len(r.results) >= 2 for r in gemms)
    assert any("H100 block FMA" in m for r in gemms for m in r.results)
    assert any("tf32" in m for r in gemms for m in r.results)
    assert any("split-K" in m for r in gemms for m in r.results)
    assert by_name["gpu fp16 sum, dtype=float32"].format == "fp32"
    for r in records:
        assert r.verdict == "identical" or r.verdict.startswith("differs: "), r


def test_every_gpu_kernel_takes_its_length_last():
    """``CupyDevice._launch`` passes the element count after the other arguments, so each
    kernel must declare ``long long n`` last. The fp8 cast once declared it third: its
    flags were read as the length and 99.6% of its results differed on the H100."""
    import re

    kernels = re.findall(r'extern "C" __global__ void (\w+)\(([^)]*)\)', gpu_suite.KERNELS)
    assert {name for name, _ in kernels} == {"fma16", "to_bf16", "to_fp8"}
    for name, params in kernels:
        assert params.split(",")[-1].split() == ["long", "long", "n"], (name, params)


@pytest.mark.parametrize("inputs, compute", [("fp16", "fp32"), ("fp16", "fp16"),
                                             ("fp32", "tf32")])
def test_the_split_k_search_finds_a_planted_slicing(inputs, compute):
    """Hardware made of the preset split into slices of 96: the search names 96 and
    matches every element; the one-pass preset does not."""
    rng = np.random.default_rng(3)
    a, b = gpu_suite.gemm_inputs(rng, (4, 1000), (1000, 3), inputs)
    model = gpu_suite.gemm_model(inputs, compute, fpsim.hw.H100)
    ta, tb = (fpsim.round(v, "tf32") for v in (a, b)) if compute == "tf32" else (a, b)
    planted = np.asarray(fpsim.matmul(ta, tb, model=model.with_split_k(96)), np.float64)
    label, values = gpu_suite.best_split(a, b, inputs, compute, fpsim.hw.H100, planted)
    assert "split-K 96 (the best of 11 slicings into 2-64 slices)" in label, label
    assert np.array_equal(values.view(np.int64), planted.view(np.int64))
    one_pass = np.asarray(fpsim.matmul(ta, tb, model=model), np.float64)
    assert not np.array_equal(one_pass, planted)
    assert gpu_suite.best_split(a[:, :32], b[:32], inputs, compute, fpsim.hw.H100,
                                planted) is None


def test_the_gpu_preset_follows_the_gpu():
    assert gpu_suite.preset_for("NVIDIA H100 80GB HBM3", (9, 0)) is fpsim.hw.H100
    assert gpu_suite.preset_for("NVIDIA H200", (9, 0)) is fpsim.hw.H100
    assert gpu_suite.preset_for("NVIDIA A100-SXM4-40GB", (8, 0)) is fpsim.hw.A100
    assert gpu_suite.preset_for("Tesla V100-SXM2-16GB", (7, 0)) is fpsim.hw.V100
    assert gpu_suite.preset_for("NVIDIA B200", (10, 0)) is fpsim.hw.B200
    assert gpu_suite.preset_for("NVIDIA L40S", (8, 9)) is fpsim.hw.A100


@pytest.fixture
def no_gpu():
    """Skip where this machine has a usable GPU; else why it has none."""
    device, why = gpu_suite.device_or_reason()
    if device is not None:
        pytest.skip("this machine has a GPU")
    return why


def test_without_a_gpu_the_gpu_suite_is_an_error_and_writes_nothing(no_gpu, tmp_path):
    with pytest.raises((gpu_suite.NoGPU, ImportError)) as info:
        run("gpu", size=64, out=tmp_path / "out")
    assert str(info.value) == no_gpu and "\n" not in no_gpu
    assert no_gpu.startswith("no usable GPU: ") or "pip install 'fpsim[gpu]'" in no_gpu
    assert not (tmp_path / "out").exists()


def test_without_a_gpu_the_suite_all_says_the_gpu_part_did_not_run(no_gpu, tmp_path, capsys):
    """In the records, results.json and results.md, and on the command's stderr and stdout
    (one run of the CPU suite serves both: it takes most of this test's time)."""
    from fpsim.compare.command import main

    assert main(["--suite", "all", "--size", "64", "--out", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert captured.err.endswith(f"fpsim compare: the GPU suite did not run: {no_gpu}\n")
    last = captured.out.splitlines()[-1]
    assert last.startswith("gpu suite ") and last.endswith(f"  skipped: {no_gpu}")
    document = json.loads((tmp_path / "results.json").read_text())
    names = [r["name"] for r in document["records"]]
    assert names[-1] == "gpu suite" and not any(n.startswith("gpu") for n in names[:-1])
    said = f"the GPU suite did not run: {no_gpu}"
    assert document["not_run"] == said
    assert f"**The GPU suite did not run: {no_gpu}.**" in (tmp_path / "results.md").read_text()


class FakeRuntime:
    """CuPy's ``cuda.runtime`` where a driver loads: ``getDeviceCount`` gives ``count``
    or raises what CuPy raises."""

    def __init__(self, count):
        self.count = count

    def getDeviceCount(self):  # noqa: N802 - CuPy's name
        if isinstance(self.count, Exception):
            raise self.count
        return self.count


def fake_cupy(count):
    import types

    cupy = types.ModuleType("cupy")
    cupy.cuda = types.SimpleNamespace(runtime=FakeRuntime(count))
    return cupy


class CUDARuntimeError(RuntimeError):
    pass


@pytest.mark.parametrize("cupy, driver, message", [
    # No driver: there is no GPU, whatever CuPy would say (it says InsufficientDriver).
    (fake_cupy(CUDARuntimeError("cudaErrorInsufficientDriver")), "no NVIDIA driver (x)",
     "no usable GPU: no NVIDIA driver (x)"),
    (None, "no NVIDIA driver (x)", "no usable GPU: no NVIDIA driver (x)"),
    # A driver: what is missing is CuPy, a device, or what CuPy says.
    (None, None, "the GPU suite (fpsim compare --suite gpu) needs cupy, which is not "
                 "installed: pip install 'fpsim[gpu]'"),
    (fake_cupy(0), None, "no usable GPU: the NVIDIA driver loads but CuPy finds no device"),
    (fake_cupy(CUDARuntimeError("cudaErrorInsufficientDriver: CUDA driver version is "
                                "insufficient for CUDA runtime version")), None,
     "no usable GPU: CUDARuntimeError: cudaErrorInsufficientDriver: CUDA driver version is "
     "insufficient for CUDA runtime version"),
])
def test_the_gpu_suite_says_what_is_missing(monkeypatch, tmp_path, cupy, driver, message):
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setattr(gpu_suite, "cuda_driver_missing", lambda: driver)
    assert gpu_suite.device_or_reason() == (None, message)
    error = ImportError if cupy is None and driver is None else gpu_suite.NoGPU
    with pytest.raises(error) as info:
        run("gpu", size=64, out=tmp_path / "out")
    assert str(info.value) == message
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("kwargs, match", [
    (dict(suite="tpu"), "unknown suite 'tpu'"),
    (dict(size=10), "size must be an integer >= 64"),
    (dict(size=True), "size must be an integer"),
    (dict(size=2.5e6), "size must be an integer"),
    (dict(seed=-1), "seed must be an integer >= 0"),
])
def test_bad_arguments_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        run(**kwargs)


def cli(*args):
    return subprocess.run([sys.executable, "-m", "fpsim", "compare", *args],
                          capture_output=True, text=True)


def test_the_command_writes_its_outputs_and_ends_with_verdicts(tmp_path):
    out = tmp_path / "cmp"
    result = cli("--size", "1024", "--out", str(out), "--seed", "3")
    assert result.returncode == 0, result.stderr
    # Results (the paths written, the verdicts) on stdout; progress on stderr, as reproduce's.
    lines = result.stdout.strip().splitlines()
    assert lines[0] == (f"wrote {out / 'results.json'}, {out / 'results.md'}, "
                        f"{out / 'ulp_histograms.png'}") and lines[1] == ""
    assert len(lines) == 2 + 19
    assert lines[-1].startswith("blas sgemm") and lines[-2].startswith("numpy fp16 dot")
    assert all(("identical" in line or "differs: " in line) for line in lines[2:])
    progress = result.stderr.strip().splitlines()
    assert progress[0] == "fpsim compare --suite cpu, size 1024, seed 3"
    assert progress[1] == "  numpy fp16 add: identical" and len(progress) == 1 + 19
    document = json.loads((out / "results.json").read_text())
    assert document["size"] == 1024 and document["machine"].startswith("CPU")
    assert "numpy" in document["versions"] and len(document["records"]) == 19
    assert (out / "results.md").read_text().count("| numpy fp16") >= 7
    assert (out / "ulp_histograms.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("args, message", [
    (["--suite", "tpu"], "invalid choice"),
    (["--size", "abc"], "invalid int value"),
    (["--size", "8"], "--size must be at least 64"),
    (["--seed", "-2"], "--seed must be non-negative"),
])
def test_the_command_refuses_bad_arguments(args, message):
    result = cli(*args)
    assert result.returncode == 2 and message in result.stderr


def test_without_a_gpu_the_command_refuses_the_gpu_suite_in_one_line(no_gpu, tmp_path):
    out = tmp_path / "cmp"
    result = cli("--suite", "gpu", "--out", str(out))
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == f"fpsim compare: error: {no_gpu}\n"
    assert not out.exists()




def test_the_histograms_are_readable():
    """Tick labels of 8 points or more, each panel's y-axis saying what it counts, and no
    panel's text (title, tick labels, axis labels) over another's or off the figure."""
    from fpsim.compare.report import histogram_figure

    x = halves(50)
    long_best = ("inputs to tf32 nearest_even, H100/tf32 block FMA split-K 96 (the best of 11 "
                 "slicings into 2-64 slices)")
    records = [evaluate(Case(f"gpu gemm fp32 in, tf32 compute, 16x4096x16 #{i}", "hw", "emu",
                             "fp16", x, {long_best if i % 2 else "m": x.copy()}))
               for i in range(19)]
    records.insert(3, gpu_suite.skipped("gpu suite", "hw", "no GPU"))
    fig = histogram_figure(records)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    panels = [ax for ax in fig.axes if ax.axison]
    assert len(panels) == 19
    boxes = []
    for ax in panels:
        assert ax.get_ylabel() == "number of elements"
        ticks = ax.get_xticklabels() + ax.get_yticklabels()
        assert len(ax.get_xticklabels()) == len(bin_labels())
        assert min(t.get_fontsize() for t in ticks) >= 8
        box = ax.get_tightbbox(renderer)
        assert fig.bbox.x0 <= box.x0 and box.x1 <= fig.bbox.x1
        assert fig.bbox.y0 <= box.y0 and box.y1 <= fig.bbox.y1
        boxes.append(box)
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            assert not a.overlaps(b), (a, b)


def test_the_command_refuses_a_file_as_out(tmp_path):
    target = tmp_path / "file"
    target.write_text("x")
    result = cli("--out", str(target), "--size", "64")
    assert result.returncode == 2 and "is not a folder" in result.stderr


def test_the_default_size_is_what_the_docs_quote():
    assert DEFAULT_SIZE == 1 << 20
