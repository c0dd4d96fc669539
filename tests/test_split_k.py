"""Split-K block-FMA products (BlockFMA.split_k) against cuBLAS on an H100 and the exact
reference.

tests/data/h100_cublas.npz holds cublasGemmEx results recorded on an NVIDIA H100
(cuBLAS 13.1; tests/data/record_cublas.py). The slice lengths below were found on other
inputs (a diagnostic run of `fpsim compare`'s cases on the same GPU), so each case here
checks them on inputs they were not fitted to.
"""

import json
from pathlib import Path

import numpy as np
import pytest
from accumulation_reference import ref_block_fma
from reference import ref_add, same_bits

import fpsim
from fpsim.compare.gpu import gemm_model

DATA = Path(__file__).parent / "data" / "h100_cublas.npz"
H100 = fpsim.hw.H100

# case -> the split-K slice length cuBLAS used (None: one pass over K)
SLICES = {
    "fp16_fp32_64x256x64": None,
    "bf16_fp32_16x2048x16": None,
    "fp16_fp32_16x4096x16": 1408,
    "bf16_fp32_16x8192x16": 1408,
    "fp16_fp16_16x256x16": 64,
    "fp16_fp16_16x1024x16": 64,
    "fp32_tf32_16x256x16": 32,
    "fp32_tf32_16x1024x16": 64,
}


def recorded(name):
    data = np.load(DATA)
    inputs, compute, _ = name.split("_")
    a, b = data[name + "_a"], data[name + "_b"]
    if inputs == "bf16":
        a, b = fpsim.from_bits(a, "bf16"), fpsim.from_bits(b, "bf16")
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    model = gemm_model(inputs, compute, H100)  # fpsim compare's model of that GEMM
    if compute == "tf32":  # inputs rounded to TF32
        a, b = (np.asarray(fpsim.round(x, "tf32"), np.float64) for x in (a, b))
    return a, b, data[name + "_hw"].astype(np.float64), model


def test_the_recordings_say_where_they_come_from():
    about = json.loads(str(np.load(DATA)["about"]))
    assert about["gpu"].startswith("NVIDIA H100") and about["capability"] == [9, 0]
    assert sorted(about["cases"]) == sorted(SLICES)


@pytest.mark.parametrize("name", list(SLICES))
def test_cublas_on_the_h100_is_the_block_fma_preset_split_k(name, backend_name):
    a, b, hardware, model = recorded(name)
    length = SLICES[name]
    got = fpsim.matmul(a, b, model=model.with_split_k(length))
    assert same_bits(np.asarray(got, np.float64), hardware).all(), name
    if length is not None:  # the slicing is what makes it match
        one_pass = np.asarray(fpsim.matmul(a, b, model=model), np.float64)
        assert not same_bits(one_pass, hardware).all()


def halves(rng, shape, lo=-20, hi=6):
    """Binary16 values with exponents over lo..hi, zeros and both signs."""
    x = rng.standard_normal(shape) * 2.0 ** rng.integers(lo, hi, shape)
    x[rng.random(shape) < 0.1] = 0.0
    return np.asarray(fpsim.round(x, "fp16"), np.float64)


TOY = fpsim.hw.BlockFMA("toy", block=3, frac_bits=8, exp_floor=None, output="fp16")


@pytest.mark.parametrize("model", [H100, TOY], ids=lambda m: m.name)
@pytest.mark.parametrize("length", [1, 2, 5, 16, 37])
def test_split_k_against_the_reference(model, length, backend_name):
    """Each slice's block product by the reference, the slices added in k order, each
    addition rounded to the output format to nearest (exact rational reference)."""
    rng = np.random.default_rng(length)
    a, b = halves(rng, (2, 3, 40)), halves(rng, (40, 4))
    got = fpsim.matmul(a, b, model=model.with_split_k(length))
    expected = None
    for lo in range(0, 40, length):
        part = ref_block_fma(a[..., lo:lo + length], b[lo:lo + length], model_params=model,
                             in_fmt=model.input)
        expected = part if expected is None else np.vectorize(
            lambda x, y: ref_add(x, y, model.output)[0])(expected, part)
    assert same_bits(np.asarray(got, np.float64), expected).all()


def test_a_slice_as_long_as_k_is_one_pass():
    rng = np.random.default_rng(0)
    a, b, c = halves(rng, (3, 24)), halves(rng, (24, 5)), halves(rng, (3, 5))
    one_pass = fpsim.matmul(a, b, model=H100, c=c)
    for length in (24, 25, 2**40):
        assert same_bits(fpsim.matmul(a, b, model=H100.with_split_k(length), c=c),
                         one_pass).all()
    assert fpsim.matmul(np.zeros((2, 0)), np.zeros((0, 3)),
                        model=H100.with_split_k(4)).tolist() == [[0.0] * 3] * 2


@pytest.mark.parametrize("bad", [0, -3, True, 2.5, "8", 2**70, float("nan")])
def test_a_bad_slice_length_is_refused(bad):
    with pytest.raises(ValueError, match="split_k"):
        H100.with_split_k(bad)


def test_what_split_k_does_not_model_is_refused():
    a, b = np.ones((2, 8)), np.ones((8, 2))
    split = H100.with_split_k(4)
    with pytest.raises(ValueError, match="c cannot be given with a split-K model"):
        fpsim.matmul(a, b, model=split, c=1.0)
    with pytest.raises(ValueError, match="stats cannot be given with a split-K model"):
        fpsim.matmul(a, b, model=split, stats=True)


def test_with_split_k_names_the_model():
    assert H100.with_split_k(1408).name == "H100 split-K 1408"
    assert H100.with_split_k(1408).with_split_k(64).name == "H100 split-K 64"
    assert H100.with_split_k(64).with_split_k(None) == H100
    assert H100.with_input("bf16").with_split_k(8).split_k == 8
