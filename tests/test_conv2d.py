"""conv2d is matmul on an independent im2col: K runs over (c, kh, kw) in C order."""

import numpy as np
import pytest
from accumulation_reference import ref_block_fma, ref_im2col, ref_matmul
from reference import as_fmt
from reference import assert_same_bits as check

import fpsim
import fpsim.hw

CASES = [
    # x shape (N, C, H, W), w shape (O, C, KH, KW), stride, padding
    ((1, 1, 3, 3), (1, 1, 1, 1), 1, 0),
    ((1, 1, 4, 4), (1, 1, 3, 3), 1, 0),
    ((2, 2, 5, 4), (3, 2, 3, 2), 1, 1),
    ((1, 3, 5, 5), (2, 3, 3, 3), 2, 1),
    ((2, 1, 6, 5), (2, 1, 2, 3), (2, 1), (0, 2)),
    ((1, 2, 3, 3), (1, 2, 3, 3), 1, 2),
]
SETTINGS = [
    dict(accum="fp32", rounding="nearest_even", order="sequential"),
    dict(accum="fp16", rounding="nearest_even", order="pairwise"),
    dict(accum="bf16", rounding="toward_zero", order="sequential", products="rounded"),
    dict(accum="fp8_e5m2", rounding="odd", order="pairwise"),
    dict(accum="fp16", rounding="up", order="sequential", subnormals=False),
    dict(accum="fp8_e4m3", rounding="down", order="sequential", saturate=True),
]


def _fp16(rng, shape):
    """fp16 values with moderate exponents, some zeros and negative zeros."""
    v = rng.integers(-64, 65, shape) * np.exp2(rng.integers(-8, 2, shape))
    v[rng.random(shape) < 0.1] = -0.0
    return v.astype(np.float64)


def _via_matmul(x, w, stride, padding, fn, **opts):
    wm, cols, shape = ref_im2col(x, w, stride, padding)
    return np.asarray(fn(wm[None], cols, **opts)).reshape(shape)


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("setting", range(len(SETTINGS)))
def test_conv2d_is_matmul_of_im2col(case, setting, backend_name):
    xs, ws, stride, padding = CASES[case]
    opts = SETTINGS[setting]
    rng = np.random.default_rng(case * 10 + setting)
    x, w = _fp16(rng, xs), _fp16(rng, ws)
    got = fpsim.conv2d(x, w, stride=stride, padding=padding, **opts)
    check(got, _via_matmul(x, w, stride, padding, fpsim.matmul, **opts), f"matmul {opts}")
    ref = _via_matmul(x, w, stride, padding, lambda a, b, **o: ref_matmul(a, b, **o), **opts)
    check(got, ref, f"reference {opts}")


def test_conv2d_matches_direct_loop(backend_name):
    """Independent of im2col: a direct convolution loop, fp32 accumulation of small integers."""
    rng = np.random.default_rng(1)
    x = rng.integers(-4, 5, (2, 3, 5, 6)).astype(np.float64)
    w = rng.integers(-4, 5, (4, 3, 3, 2)).astype(np.float64)
    s, p = (2, 1), (1, 0)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (0, 0)))
    oh, ow = (5 + 2 - 3) // 2 + 1, (6 - 2) // 1 + 1
    exp = np.zeros((2, 4, oh, ow))
    for i in range(oh):
        for j in range(ow):
            patch = xp[:, :, i * s[0] : i * s[0] + 3, j * s[1] : j * s[1] + 2]
            exp[:, :, i, j] = np.einsum("nchw,ochw->no", patch, w)
    check(fpsim.conv2d(x, w, stride=s, padding=p, accum="fp32"), exp, "direct loop")


def test_conv2d_stochastic_same_seed(backend_name):
    rng = np.random.default_rng(2)
    x, w = _fp16(rng, (1, 2, 4, 4)), _fp16(rng, (2, 2, 2, 2))
    opts = dict(accum="fp8_e5m2", rounding="stochastic", seed=3)
    r1 = fpsim.conv2d(x, w, **opts)
    r2 = fpsim.conv2d(x, w, **opts)
    check(r1, r2, "same seed")


@pytest.mark.parametrize("name", ["V100", "A100", "H100"])
def test_conv2d_block_fma_model(name, backend_name):
    """conv2d with model=: the block-FMA model on the im2col products."""
    rng = np.random.default_rng(4)
    x, w = _fp16(rng, (1, 3, 4, 4)), _fp16(rng, (2, 3, 3, 3))
    m = getattr(fpsim.hw, name)
    got = fpsim.conv2d(x, w, padding=1, model=m)
    inp = getattr(m, "inputs", None) or m.input
    params = dict(
        block=m.block,
        frac_bits=m.frac_bits,
        exp_floor=m.exp_floor,
        inputs=inp,
        output=as_fmt(m.output),
        output_rounding=m.output_rounding,
    )
    ref = _via_matmul(x, w, 1, 1, lambda a, b: ref_block_fma(a, b, None, params))
    check(got, ref, f"model {name}")


def test_conv2d_shape_errors(backend_name):
    x, w = np.ones((1, 2, 4, 4)), np.ones((3, 2, 3, 3))
    with pytest.raises(ValueError):
        fpsim.conv2d(np.ones((2, 4, 4)), w)  # x not 4-D
    with pytest.raises(ValueError):
        fpsim.conv2d(x, np.ones((3, 2, 3)))  # w not 4-D
    with pytest.raises(ValueError):
        fpsim.conv2d(x, np.ones((3, 1, 3, 3)))  # channels differ
    with pytest.raises(ValueError):
        fpsim.conv2d(x, np.ones((3, 2, 5, 5)))  # kernel larger than the input
    with pytest.raises(ValueError):
        fpsim.conv2d(np.full((1, 2, 4, 4), 0.1), w)  # not float32 values
    assert np.shape(fpsim.conv2d(x, w, padding=1)) == (1, 3, 4, 4)
