"""fpsim.quantize gives the same bits on every backend: the Numba loops (fpsim.backends.
numba_quantize: the generic loop, and the loops specialised to a scheme with float32 input
on the binary32 carrier) against the NumPy path, and the cupy backend in Numba's CUDA
simulator (tests/quantize_simulator.py, in a subprocess); and the encodings against
ml_dtypes'."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from test_quantize import hard_blocks

import fpsim
from fpsim.backends import numba_quantize
from fpsim.kernels.spec import make_spec
from fpsim.quantize import SCALE_RULES, SCHEMES

HERE = Path(__file__).resolve().parent
MX = [name for name, s in SCHEMES.items() if s.kind == "mx"]
# _scaled: each element times its block's scale, which the Numba loops write as they
# quantize and the NumPy path computes from the values and scales (fpsim.dequantize's).
FIELDS = ("bits", "flags", "scale_bits", "scales", "values", "_scaled")


def same_quantized(got, want) -> None:
    """Every array of two Quantized equal encoding for encoding (NaN payloads included)."""
    for field in FIELDS:
        a, b = getattr(got, field), getattr(want, field)
        assert a.dtype == b.dtype and a.shape == b.shape, field
        if a.dtype.kind == "f":
            a, b = a.view(np.int64), b.view(np.int64)
        assert np.array_equal(a, b), (field, np.flatnonzero(a != b)[:5])
    extra = np.float64([got.tensor_scale or 0.0, got.amax])
    assert np.array_equal(extra.view(np.int64),
                          np.float64([want.tensor_scale or 0.0, want.amax]).view(np.int64))


def float32_blocks(rng: np.random.Generator) -> np.ndarray:
    """Float32 rows of 64: ordinary values, zeros, binary32 subnormals, and blocks whose
    amax is so far above their smallest elements that those scale below binary32's
    normals (the binary32 carrier's replacement, ``to_binary32``)."""
    rows = [rng.standard_normal(64), np.zeros(64), rng.standard_normal(64) * 2.0**-140]
    far = rng.uniform(-1, 1, 64) * 2.0**-120
    far[[0, 40]] = [2.0**100, -(2.0**90)]
    far[[1, 41]] = [2.0**-149, -(2.0**-148)]
    rows.append(far)
    special = rng.standard_normal(64)
    special[[3, 33]] = [np.nan, -np.inf]
    rows.append(special)
    return np.array(rows, dtype=np.float32)


def both(x, scheme, **options):
    with fpsim.backend("numpy"):
        want = fpsim.quantize(x, scheme, **options)
    with fpsim.backend("numba"):
        got = fpsim.quantize(x, scheme, **options)
    return got, want


@pytest.mark.parametrize("scheme", [*MX, "nvfp4"])
def test_the_numba_loop_gives_the_numpy_paths_bits(scheme):
    rng = np.random.default_rng(sum(map(ord, scheme)))
    rules = list(SCALE_RULES) if scheme in MX else ["transformer_engine"]
    with np.errstate(over="ignore"):
        inputs = [hard_blocks(rng), float32_blocks(rng)]
    for x in inputs:
        for rule in rules:
            for mode in fpsim.ROUNDING_MODES:
                seed = 3 if mode == "stochastic" else None
                same_quantized(*both(x, scheme, scale_rule=rule, rounding=mode, seed=seed))
        same_quantized(*both(x, scheme, rounding="stochastic", seed=4, random_bits=3,
                             subnormals=False))
        same_quantized(*both(x.T, scheme, axis=0, rounding="stochastic", seed=5))
    cube = rng.standard_normal((3, 40, 2)).astype(np.float32)  # a middle axis, padded
    same_quantized(*both(cube, scheme, axis=1, pad=True, rounding="stochastic", seed=6))
    same_quantized(*both(np.zeros((0, 64)), scheme))


@pytest.mark.parametrize("scheme, rule, mode", [
    ("mxfp8_e4m3", "ocp", "nearest_even"),  # fpsim bench's rows
    ("nvfp4", "transformer_engine", "nearest_even"),
    ("mxfp4_e2m1", "transformer_engine", "up"),  # tiny elements: the carrier's replacement
])
def test_the_loops_specialised_to_float32_input_give_the_same_bits(monkeypatch, scheme,
                                                                   rule, mode):
    monkeypatch.setattr(numba_quantize, "SPECIALISE_FROM", 1)
    x = float32_blocks(np.random.default_rng(9))
    assert numba_quantize.kernel_name(x) == "binary32"
    same_quantized(*both(x, scheme, scale_rule=rule, rounding=mode))
    same_quantized(*both(x.T, scheme, axis=0, scale_rule=rule, rounding=mode))
    # Rows ending in a padded block, whose padding the loop does not round.
    same_quantized(*both(x[:, :-5], scheme, scale_rule=rule, rounding=mode, pad=True))


@pytest.mark.parametrize("scheme, rule, mode", [
    ("mxfp8_e4m3", "transformer_engine", "nearest_even"),  # the MXFP8 recipe's
    ("mxfp6_e3m2", "ocp", "nearest_even"),  # elements beyond the largest value: saturated
    ("mxfp4_e2m1", "ocp", "stochastic"),
    ("nvfp4", "transformer_engine", "stochastic"),
])
def test_the_loops_a_training_run_repeats_give_the_same_bits(scheme, rule, mode):
    """``quantize_repeated`` (a training step's calls): on the Numba backend, serial loops
    compiled for the call's parameters at any size."""
    from fpsim.quantize.quantized import quantize_repeated

    rng = np.random.default_rng(12)
    with np.errstate(over="ignore"):
        x = np.concatenate([hard_blocks(rng), float32_blocks(rng)])
    seed = 7 if mode == "stochastic" else None
    for args, options in (((x,), {}), ((x.T,), {"axis": 0}),
                          ((x[:, :-5],), {"pad": True}),
                          ((rng.standard_normal((3, 40, 2)),), {"axis": 1, "pad": True})):
        with fpsim.backend("numpy"):
            want = fpsim.quantize(*args, scheme, scale_rule=rule, rounding=mode, seed=seed,
                                  **options)
        with fpsim.backend("numba"):
            got = quantize_repeated(*args, scheme, scale_rule=rule, rounding=mode, seed=seed,
                                    **options)
        same_quantized(got, want)
        assert np.array_equal(fpsim.dequantize(got).view(np.int64),
                              fpsim.dequantize(want).view(np.int64))
        # Without flags (a step nobody observes): the same quantization, no flags.
        for name in ("numpy", "numba"):
            with fpsim.backend(name):
                bare = quantize_repeated(*args, scheme, flags=False, scale_rule=rule,
                                         rounding=mode, seed=seed, **options)
            assert bare.flags is None
            same_quantized(replace(bare, flags=want.flags), want)
            assert np.array_equal(fpsim.dequantize(bare).view(np.int64),
                                  fpsim.dequantize(want).view(np.int64))
    if mode == "nearest_even":  # without flags, the loop rounds by nearest_even_encoded
        spec = make_spec(SCHEMES[scheme].element, mode, True, True, None)
        assert any(("NEAREST", True) in key and ("SPEC", spec) in key
                   for key in numba_quantize._LOOPS)
    with pytest.raises(ValueError, match="computed none"):
        bare.stats()
    with pytest.raises(TypeError, match="unexpected arguments: rounding_mode"):
        quantize_repeated(x, scheme, rounding_mode="up")
    with pytest.raises(ValueError, match="flags"):
        quantize_repeated(x, scheme, flags="no")


def test_a_training_steps_loops_keep_binary32_terms_only_when_each_is_one():
    """A hot call keeps its elements times scales as binary32 when every one is a binary32
    value, and its product hands them to BLAS as they are: the same bits as NumPy's path.
    A block whose terms leave binary32's range keeps none (binary64, computed on demand);
    at the edge of its range, all."""
    from fpsim.quantize.quantized import quantize_repeated

    rng = np.random.default_rng(5)
    a = rng.standard_normal((6, 64))
    b = rng.standard_normal((64, 5))
    huge = a.copy()
    huge[2, :32] *= 1e300  # its scale 2**994: elements times it beyond binary32
    # Scale 2**119 (amax 2**127, the OCP rule): the largest term, 448 * 2**119, is a
    # binary32 value; at 2**120 the block's amax is 2**128, beyond binary32.
    edge, over = a.copy(), a.copy()
    edge[3, :32] *= 2.0**127 / np.abs(edge[3, :32]).max()
    over[3, :32] = edge[3, :32] * 2.0
    for x, binary32 in ((a, True), (huge, False), (edge, True), (over, False)):
        with fpsim.backend("numba"):
            qa = quantize_repeated(x, "mxfp8_e4m3")
            qb = quantize_repeated(b, "mxfp8_e4m3", axis=0)
        with fpsim.backend("numpy"):
            want_a = fpsim.quantize(x, "mxfp8_e4m3")
            want_b = fpsim.quantize(b, "mxfp8_e4m3", axis=0)
        assert ("_scaled32" in qa.__dict__) is binary32
        if binary32:
            assert qa.__dict__["_scaled32"].dtype == np.float32
        assert np.array_equal(fpsim.dequantize(qa).view(np.int64),
                              fpsim.dequantize(want_a).view(np.int64))
        with np.errstate(over="ignore", invalid="ignore"):
            got = fpsim.matmul(qa, qb, order="any")
            want = fpsim.matmul(want_a, want_b, order="any")
        assert got.dtype == want.dtype == np.float64
        assert np.array_equal(got.view(np.int64), want.view(np.int64))


def test_the_loops_elements_times_scales_are_read_only_and_dequantize_copies():
    q = fpsim.quantize(np.random.default_rng(3).standard_normal((2, 64)), "mxfp8_e4m3")
    held = q._scaled
    with pytest.raises(ValueError, match="read-only"):
        held[0, 0] = 1.0
    out = fpsim.dequantize(q)
    out[0, 0] = 5.0  # the caller's own array
    assert held[0, 0] != 5.0 and fpsim.dequantize(q)[0, 0] == held[0, 0]


ML = {"fp8_e4m3": ml_dtypes.float8_e4m3fn, "fp8_e5m2": ml_dtypes.float8_e5m2,
      "fp6_e2m3": ml_dtypes.float6_e2m3fn, "fp6_e3m2": ml_dtypes.float6_e3m2fn,
      "fp4_e2m1": ml_dtypes.float4_e2m1fn, "e8m0": ml_dtypes.float8_e8m0fnu}


@pytest.mark.parametrize("scheme", list(SCHEMES))
def test_encodings_are_ml_dtypes_and_to_bits(scheme):
    """The loops' and the NumPy path's encodings (``kernels.blockscale.encode``) are the
    values' encodings: ml_dtypes' where it has the format, fpsim.to_bits otherwise."""
    sch = SCHEMES[scheme]
    x = np.random.default_rng(11).standard_normal((32, 256)) * np.logspace(-9, 9, 256)
    x[3, 3] = np.nan
    q = fpsim.quantize(x, scheme, pad=True)
    for bits, values, fmt in ((q.bits, q.values, sch.element),
                              (q.scale_bits, q.scales, sch.scale_format)):
        assert bits.dtype == fmt.bits_dtype
        nan = np.isnan(values)
        assert np.array_equal(bits[~nan], fpsim.to_bits(values[~nan], fmt))
        assert np.all(bits[nan] == fpsim.to_bits(np.nan, fmt)) if nan.any() else True
        if fmt.name in ML and fmt.nan:
            theirs = values.astype(ML[fmt.name]).view(np.uint8)
            assert np.array_equal(bits[~nan], theirs[~nan])
        elif fmt.name in ML:  # no NaN in the format: none among the elements
            assert not nan.any()
            assert np.array_equal(bits, values.astype(ML[fmt.name]).view(np.uint8))


@pytest.mark.skipif(importlib.util.find_spec("numba_cuda") is None,
                    reason="numba-cuda is not installed (it comes with the test and gpu extras)")
def test_the_cupy_backend_in_the_simulator_gives_the_numpy_backends_bits():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    done = subprocess.run([sys.executable, str(HERE / "quantize_simulator.py")], env=env,
                          capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert " 0 differ" in done.stdout


def test_fpsim_bench_quantize_measures_beside_ml_dtypes_casts():
    from fpsim import bench

    rows = bench.run(n=96, repeats=1, backend="numba", only=bench.QUANTIZE_ROWS)
    names = [(r[0], r[1]) for r in rows]
    assert names[0][0] == "np.copyto"
    assert ("ml_dtypes astype", "fp8_e4m3") in names and ("ml_dtypes astype", "fp4_e2m1") in names
    assert ("quantize mxfp8_e4m3", "fp8_e4m3") in names and ("quantize nvfp4", "fp4_e2m1") in names
    assert all(r[0].startswith(bench.QUANTIZE_ROWS) and r[3] > 0 and r[4] > 0 for r in rows)
