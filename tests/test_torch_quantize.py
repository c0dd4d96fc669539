"""fpsim.torch.quantize: fpsim.quantize then fpsim.dequantize on the tensor's data, in its
dtype, with the gradient straight through."""

import pytest

torch = pytest.importorskip("torch")

import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
from torch_cuda import skip_without_cuda  # noqa: E402

import fpsim  # noqa: E402
import fpsim.torch  # noqa: E402
from fpsim.quantize import SCHEMES  # noqa: E402

NAMES = ["mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp4_e2m1", "nvfp4", "fp8_block1x128",
           "per_tensor", "per_row"]


def data(shape, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 4, shape)


@pytest.mark.parametrize("scheme", NAMES)
def test_the_forward_is_fpsims_quantize_and_dequantize(scheme):
    x = data((4, 256)).astype(np.float32)
    got = fpsim.torch.quantize(torch.from_numpy(x), scheme)
    want = fpsim.dequantize(fpsim.quantize(x, scheme)).astype(np.float32)
    assert got.dtype == torch.float32
    np.testing.assert_array_equal(got.numpy(), want)


def test_options_reach_fpsim_quantize():
    x = data((3, 40), seed=1)
    t = torch.from_numpy(x)  # float64
    got = fpsim.torch.quantize(t, "mxfp4_e2m1", 0, scale_rule="ceil", rounding="stochastic",
                               seed=4, random_bits=6, pad=True, subnormals=False)
    want = fpsim.dequantize(fpsim.quantize(x, "mxfp4_e2m1", 0, scale_rule="ceil",
                                           rounding="stochastic", seed=4, random_bits=6,
                                           pad=True, subnormals=False))
    assert got.dtype == torch.float64
    np.testing.assert_array_equal(got.numpy(), want)


@pytest.mark.parametrize("dtype, npdtype", [(torch.float16, np.float16),
                                            (torch.bfloat16, ml_dtypes.bfloat16)])
def test_narrow_dtypes_hold_the_mx_values_exactly(dtype, npdtype):
    x = data((2, 64), seed=2).astype(npdtype)
    t = torch.from_numpy(x.astype(np.float32)).to(dtype)
    got = fpsim.torch.quantize(t, "mxfp8_e4m3")
    want = fpsim.dequantize(fpsim.quantize(x, "mxfp8_e4m3"))
    assert got.dtype == dtype
    np.testing.assert_array_equal(got.double().numpy(), want)  # exact: no rounding to dtype


def test_the_gradient_passes_straight_through():
    t = torch.from_numpy(data((2, 32), seed=3)).requires_grad_()
    g = torch.from_numpy(data((2, 32), seed=4))
    fpsim.torch.quantize(t, "mxfp8_e5m2").backward(g)
    assert torch.equal(t.grad, g)


@pytest.mark.parametrize("backward", ["mxfp8_e5m2", SCHEMES["nvfp4"]])
def test_a_backward_scheme_quantizes_the_gradient(backward):
    t = torch.from_numpy(data((2, 64), seed=5)).requires_grad_()
    g = data((2, 64), seed=6)
    fpsim.torch.quantize(t, "mxfp8_e4m3", backward=backward).backward(torch.from_numpy(g))
    np.testing.assert_array_equal(t.grad.numpy(), fpsim.dequantize(fpsim.quantize(g, backward)))


def test_a_backward_format_or_rounding_rounds_the_gradient():
    g = data((3, 32), seed=7).astype(np.float32)
    for backward, want in (("bf16", fpsim.round(g, "bf16")),
                           (fpsim.torch.Rounding("fp8_e4m3", "stochastic", seed=2),
                            fpsim.round(g, "fp8_e4m3", "stochastic", seed=2))):
        t = torch.zeros((3, 32), requires_grad=True)
        fpsim.torch.quantize(t, "mxfp4_e2m1", backward=backward).backward(torch.from_numpy(g))
        np.testing.assert_array_equal(t.grad.numpy(), want.astype(np.float32))
    t = torch.zeros((1, 40), dtype=torch.float64, requires_grad=True)  # padded, along axis 0
    g = data((1, 40), seed=8)
    fpsim.torch.quantize(t, "mxfp8_e4m3", 0, pad=True, backward="mxfp6_e3m2").backward(
        torch.from_numpy(g))
    np.testing.assert_array_equal(
        t.grad.numpy(), fpsim.dequantize(fpsim.quantize(g, "mxfp6_e3m2", 0, pad=True)))
    for bad in (3, 1.5, ["mxfp8_e4m3"]):
        with pytest.raises(TypeError, match="backward"):
            fpsim.torch.quantize(torch.zeros((1, 32)), "mxfp8_e4m3", backward=bad)
    with pytest.raises(ValueError, match="unknown"):
        fpsim.torch.quantize(torch.zeros((1, 32)), "mxfp8_e4m3", backward="mxfp9")


def test_hostile_input():
    with pytest.raises(TypeError, match="must be a torch.Tensor"):
        fpsim.torch.quantize(np.zeros((1, 32)), "mxfp8_e4m3")
    with pytest.raises(TypeError, match="floating-point tensor"):
        fpsim.torch.quantize(torch.zeros((1, 32), dtype=torch.int32), "mxfp8_e4m3")
    with pytest.raises(ValueError, match="unknown"):
        fpsim.torch.quantize(torch.zeros((1, 32)), "mxfp9")
    with pytest.raises(ValueError, match="multiple"):
        fpsim.torch.quantize(torch.zeros((1, 33)), "mxfp8_e4m3")
    assert fpsim.torch.quantize(torch.zeros((0, 32)), "mxfp8_e4m3").shape == (0, 32)
    with pytest.raises(ValueError):  # numpy's AxisError: a 0-d tensor has no axis
        fpsim.torch.quantize(torch.tensor(1.0), "mxfp8_e4m3")
    with pytest.raises(ValueError, match="device meta"):
        fpsim.torch.quantize(torch.zeros((1, 32), device="meta"), "mxfp8_e4m3")


@pytest.mark.gpu
def test_cuda_tensors_give_the_cpus_bits():
    skip_without_cuda()
    x = data((8, 256), seed=5)
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        t = torch.from_numpy(x).to(dtype)
        for scheme, options in (("mxfp8_e4m3", {}), ("mxfp4_e2m1", {"scale_rule": "ceil"}),
                                ("nvfp4", {}), ("fp8_block1x128", {"axis": 0, "pad": True}),
                                ("mxfp6_e3m2", {"rounding": "stochastic", "seed": 3,
                                                "random_bits": 8})):
            cpu = fpsim.torch.quantize(t, scheme, **options)
            on = t.cuda().requires_grad_()
            gpu = fpsim.torch.quantize(on, scheme, **options)
            assert gpu.device == on.device and gpu.dtype == dtype, (scheme, dtype)
            assert torch.equal(gpu.cpu().view(torch.uint8), cpu.view(torch.uint8)), \
                (scheme, dtype)
            gpu.sum().backward()
            assert bool((on.grad == 1).all())
