"""Rounding float32 to binary16 by the CPU's own conversion (fpsim.backends.numba_half).

The Numba backend hands ``round(float32, "fp16")`` to nearest-even, toward_zero, up
and down, with subnormals and without flags or saturation, to the float32-to-binary16
conversion (F16C's ``vcvtps2ph``, AVX512-FP16's, or aarch64's): nearest-even itself,
the directed modes as its result or that result's neighbour. Its results are checked
against the exact rational reference on every binary16 value, midpoint and neighbour,
and against the NumPy reference backend on random binary32 encodings of every class;
its probes are checked against the exact reference too. FPSIM_EXHAUSTIVE_FLOAT32=1 also rounds all
2**32 binary32 encodings (minutes).
"""

import os

import numpy as np
import pytest
from reference import ref_round
from test_carrier import assert_same, float32_inputs

import fpsim
from fpsim.backends import backend, get_backend, numba_backend, numba_half

HERE = numba_half.compiled_for()
needs_half = pytest.mark.skipif(HERE is None, reason="no binary16 conversion for Numba here")
MODES = list(numba_half.ROUND_PROBES)


def offered(mode: str) -> None:
    if HERE is None or mode not in numba_half.HalfAccumulation(HERE, "test").modes():
        pytest.skip(f"the CPU's conversion does not round {mode} here")


def large(x: np.ndarray) -> np.ndarray:
    """``x`` repeated to the length from which the conversion is used."""
    return np.resize(x, max(x.size, numba_backend.HALF_ROUND_FROM))


@pytest.fixture
def taken(monkeypatch):
    """Records, call by call, whether the conversion computed the result."""
    calls = []
    real = numba_half.HalfAccumulation.round

    def spy(self, x, out, mode="nearest_even"):
        calls.append(real(self, x, out, mode))
        return calls[-1]

    monkeypatch.setattr(numba_half.HalfAccumulation, "round", spy)
    return calls


@pytest.mark.parametrize("mode", MODES)
def test_the_probes_are_ieee_binary16_rounding(mode):
    """Each probe's expected result is the exact reference's, not the hardware's."""
    for x, want in numba_half.ROUND_PROBES[mode]:
        value = float(np.uint32(x).view(np.float32))
        rounded, _ = ref_round(value, "fp16", mode)
        assert np.float32(rounded).view(np.uint32) == want, f"{mode} {x:#x}"


@pytest.mark.parametrize("mode", MODES)
def test_every_binary16_value_midpoint_and_neighbour_against_the_exact_reference(taken, mode):
    offered(mode)
    h = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    v = h[np.isfinite(h)].astype(np.float32)
    with np.errstate(all="ignore"):
        up = np.nextafter(v.astype(np.float16), np.float16(np.inf)).astype(np.float32)
        mid = np.where(np.isfinite(up), (v.astype(np.float64) + up) / 2, 65520.0)
    mid = mid.astype(np.float32)  # every binary16 midpoint is a binary32 value
    x = np.concatenate([
        v, mid, np.nextafter(mid, np.float32(np.inf)), np.nextafter(mid, np.float32(-np.inf)),
        np.float32([np.inf, -np.inf, 1e-45, -1e-45, 3.4028235e38, 2.0**-25, 2.0**-26]),
    ])
    with backend("numba"):
        got = fpsim.round(x, "fp16", mode)
    want = np.float32([ref_round(float(value), "fp16", mode)[0] for value in x])
    assert taken == [True]
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("mode", MODES)
def test_random_encodings_against_the_numpy_backend(taken, mode):
    offered(mode)
    x = float32_inputs("fp16", np.random.default_rng(5), n=200_000)
    with backend("numba"):
        got = fpsim.round(x, "fp16", mode)
    with backend("numpy"):
        want = fpsim.round(x, "fp16", mode)
    assert taken == [True]
    assert_same(got, want, f"fp16 {mode}")  # NaN for NaN: payloads are free


@needs_half
def test_only_what_the_conversion_computes_exactly_takes_it(taken):
    x = large(np.linspace(-70000, 70000, 5001, dtype=np.float32))
    with backend("numba"):
        fpsim.round(x, "fp16")  # taken
        fpsim.round(x[:100], "fp16")  # too short to be worth the probes
        fpsim.round(x, "fp16", flags=True)  # flags: the software rounding owns them
        fpsim.round(x, "fp16", saturate=True)
        fpsim.round(x, "fp16", subnormals=False)
        for mode in ("nearest_away", "odd", "stochastic"):  # no instruction rounds so
            fpsim.round(x, "fp16", mode)
        fpsim.round(x.astype(np.float64), "fp16")  # float64 in and out
        fpsim.round(x, "bf16")
        name = get_backend().kernel_name
        spec = fpsim.kernels.spec.make_spec(fpsim.format("fp16"), "nearest_even", True, False,
                                            None)
        assert name("round_value", x.dtype, x.dtype, spec, size=x.size) == HERE
        assert name("round_value", x.dtype, x.dtype, spec, flags=True) == "binary32"
    assert taken == [True]


@needs_half
def test_a_refused_environment_falls_back_to_the_software_rounding(monkeypatch, taken):
    wrong = list(numba_half.ROUND_PROBES["nearest_even"])
    wrong[0] = (wrong[0][0], 0x3F802000)  # as if ties went up
    monkeypatch.setitem(numba_half.ROUND_PROBES, "nearest_even", tuple(wrong))
    x = large(np.float32([1 + 2.0**-11, 2.0**-25, 65520.0]))
    with backend("numba"):
        got = fpsim.round(x, "fp16")
    assert taken == [False]
    assert np.array_equal(got[:3], np.float32([1.0, 0.0, np.inf]))


@pytest.mark.parametrize("mode", ["nearest_even", "up"])
def test_large_arrays_round_in_parallel_and_agree(mode):
    offered(mode)
    x = np.resize(float32_inputs("fp16", np.random.default_rng(9)),
                  numba_half.PARALLEL_CONVERSION * 4)
    with backend("numba"):
        got = fpsim.round(x, "fp16", mode)
    with backend("numpy"):
        want = fpsim.round(x, "fp16", mode)
    assert_same(got, want, "parallel")


@pytest.mark.parametrize("target", [("x86-64", "", None), ("haswell", "+avx2", "f16c"),
                                    ("sapphirerapids", "+avx2", "native"),
                                    ("skylake-avx512", "-f16c", None)])
def test_the_compiled_arithmetic_is_asked_of_llvm(monkeypatch, target):
    """A CPU name implies its features (as Numba passes them to LLVM)."""
    if numba_half.platform.machine().lower() not in ("x86_64", "amd64"):
        pytest.skip("x86 target names")
    cpu, features, kind = target
    monkeypatch.setattr(numba_half.numba.config, "CPU_NAME", cpu)
    monkeypatch.setattr(numba_half.numba.config, "CPU_FEATURES", features)
    assert numba_half.compiled_for() == kind


@pytest.mark.skipif(os.environ.get("FPSIM_EXHAUSTIVE_FLOAT32") != "1",
                    reason="all 2**32 binary32 inputs take minutes: FPSIM_EXHAUSTIVE_FLOAT32=1")
@pytest.mark.parametrize("mode", MODES)
def test_every_binary32_encoding(taken, mode):
    """The conversion against the software rounding of the same values in float64."""
    offered(mode)
    step = 1 << 26
    for start in range(0, 1 << 32, step):
        x32 = np.arange(start, start + step, dtype=np.uint64).astype(np.uint32).view(np.float32)
        with backend("numba"):
            got = fpsim.round(x32, "fp16", mode)
            want = np.asarray(fpsim.round(x32.astype(np.float64), "fp16", mode), np.float32)
        nan = np.isnan(want)
        assert np.array_equal(np.isnan(got), nan)
        same = got.view(np.uint32) == want.view(np.uint32)
        assert same[~nan].all(), f"first at {x32.view(np.uint32)[~same & ~nan][:3]}"
    assert all(taken)


@needs_half
def test_the_benchmark_names_the_conversion_and_the_target(monkeypatch):
    from fpsim._machine import compiled_for
    from fpsim.bench import run

    rows = run(n=numba_backend.HALF_ROUND_FROM, repeats=1, backend="numba")
    kernels = {(r[0], r[1]): r[2] for r in rows}
    assert kernels["round nearest_even", "fp16"] == HERE
    assert kernels["round nearest_away", "fp16"] == kernels["round nearest_even", "bf16"] == (
        "binary32")
    assert compiled_for() == f"Numba target: host; binary16 arithmetic: {HERE}"
    monkeypatch.setattr(numba_half.numba.config, "CPU_NAME", "x86-64")
    monkeypatch.setattr(numba_half.numba.config, "CPU_FEATURES", "")
    if numba_half.platform.machine().lower() in ("x86_64", "amd64"):
        assert compiled_for() == "Numba target: x86-64 (no features); binary16 arithmetic: none"


@needs_half
@pytest.mark.parametrize("parallel", [False, True])
@pytest.mark.parametrize("bits", [False, True])
@pytest.mark.parametrize("mode", MODES)
def test_the_probes_run_through_the_loop_a_call_runs(mode, parallel, bits):
    offered(mode)
    with backend("numba"):
        half = get_backend().half
        assert half.round_sound(mode, parallel, bits)
        wrong = list(numba_half.ROUND_PROBES[mode])
        wrong[0] = (wrong[0][0], wrong[0][1] ^ 0x2000)  # the next binary16 value
        numba_half.ROUND_PROBES[mode], saved = tuple(wrong), numba_half.ROUND_PROBES[mode]
        try:
            assert not half.round_sound(mode, parallel, bits)
        finally:
            numba_half.ROUND_PROBES[mode] = saved


@needs_half
def test_a_large_call_loads_only_the_loop_it_runs():
    """The probes use the call's own loop: a first large call loads one compiled loop."""
    with backend("numba"):
        half = numba_half.HalfAccumulation(get_backend().half.kind, get_backend().half.digest)
        x = np.resize(np.float32([1 + 2.0**-11, 3.0]), numba_half.PARALLEL_CONVERSION)
        out = np.empty_like(x)
        assert half.round(x, out, "toward_zero")
        assert list(half._loops) == [("round", "toward_zero", True, False)]
        assert out[0] == 1.0 and out[1] == 3.0
