"""fpsim.torch.round and Round: the forward is fpsim's exact rounding (bf16 and fp16 as
torch's own conversions, bit for bit; every other mode as fpsim.round on the same NumPy
data), the backward straight through or rounded as fpsim.round rounds torch's gradient."""

import pytest

torch = pytest.importorskip("torch")

import warnings  # noqa: E402

import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from torch.autograd.gradcheck import GradcheckError  # noqa: E402
from torch_cuda import skip_without_cuda  # noqa: E402

import fpsim  # noqa: E402
import fpsim.torch  # noqa: E402
import fpsim.torch.rounding as rounding_module  # noqa: E402
from fpsim.torch import Round, Rounding  # noqa: E402

NATIVE = {"bf16": torch.bfloat16, "fp16": torch.float16}
F32_EDGES = np.array([
    0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007FFFFF, 0x00800000, 0x33000000,
    0x33000001, 0x337FFFFF, 0x387FC000, 0x387FE000, 0x38800000, 0x3F801000, 0x3F803000,
    0x3F808000, 0x3F818000, 0x3F800FFF, 0x477FEFFF, 0x477FF000, 0x477FF001, 0x47800000,
    0x7F7F7FFF, 0x7F7F8000, 0x7F7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000,
    0x7F800001, 0x7FFFFFFF, 0xFF812345, 0x00008000, 0x00010000, 0x80018000,
], dtype=np.uint32).view(np.float32)


def same_bits(got, want):
    """Equal encodings, NaN for NaN: fpsim's quiet NaN (0x7fc00000) and torch's NaNs
    (whose bits depend on the conversion path taken: sign and payload vary) are both NaN."""
    assert got.dtype == want.dtype and got.shape == want.shape
    nan = torch.isnan(want)
    assert torch.equal(torch.isnan(got), nan)
    ints = {2: torch.int16, 4: torch.int32, 8: torch.int64}[got.element_size()]
    assert torch.equal(got[~nan].view(ints), want[~nan].view(ints))


def fp16_patterns_as_float32():
    return torch.from_numpy(np.arange(2**16, dtype=np.uint16).view(np.float16)
                            .astype(np.float32))


@pytest.mark.parametrize("fmt", ["bf16", "fp16"])
def test_every_fp16_pattern_and_float32_edge_is_torchs_conversion(fmt):
    for t in (fp16_patterns_as_float32(), torch.from_numpy(F32_EDGES.copy())):
        same_bits(fpsim.torch.round(t, fmt), t.to(NATIVE[fmt]).to(torch.float32))


@pytest.mark.parametrize("fmt", ["bf16", "fp16"])
def test_float32_ties_and_halfway_points_are_torchs_conversion(fmt):
    # Every float32 exactly halfway between neighbours of the format (and one ulp either
    # side), across the exponent range: torch's conversions round ties to even.
    shift = 16 if fmt == "bf16" else 13
    rng = np.random.default_rng(34)
    top = rng.integers(0, 2**(32 - shift), 20000, dtype=np.uint64)
    bits = (top << np.uint64(shift)) | np.uint64(1 << (shift - 1))
    bits = np.concatenate([bits, bits - 1, bits + 1]).astype(np.uint32)
    t = torch.from_numpy(bits.view(np.float32))
    same_bits(fpsim.torch.round(t, fmt), t.to(NATIVE[fmt]).to(torch.float32))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(width=32, allow_nan=True, allow_infinity=True, allow_subnormal=True),
                min_size=1, max_size=40))
def test_hypothesis_float32_is_torchs_conversion(values):
    t = torch.tensor(values, dtype=torch.float32)
    for fmt, dtype in NATIVE.items():
        same_bits(fpsim.torch.round(t, fmt), t.to(dtype).to(torch.float32))


def test_narrow_inputs_round_as_torchs_conversions_exhaustively():
    # float16 to bf16 (65504 rounds up to 65536: inf in float16, as torch's cast gives),
    # bfloat16 to fp16, each over all 2**16 encodings.
    patterns = torch.from_numpy(np.arange(2**16, dtype=np.uint16).view(np.int16))
    half, brain = patterns.view(torch.float16), patterns.view(torch.bfloat16)
    same_bits(fpsim.torch.round(half, "bf16"), half.to(torch.bfloat16).to(torch.float16))
    same_bits(fpsim.torch.round(brain, "fp16"), brain.to(torch.float16).to(torch.bfloat16))
    same_bits(fpsim.torch.round(half, "fp16"), half)


MODES = ["nearest_even", "nearest_away", "toward_zero", "up", "down", "odd"]


@pytest.mark.parametrize("fmt", ["fp8_e4m3", "fp8_e5m2", "fp4_e2m1", "tf32", "e6m9", "bf16"])
@pytest.mark.parametrize("mode", MODES)
def test_every_mode_agrees_with_fpsim_round_on_the_same_numpy_data(fmt, mode):
    rng = np.random.default_rng(7)
    data = np.concatenate([(rng.standard_normal(500) * 10.0 ** rng.integers(-12, 6, 500))
                           .astype(np.float32), F32_EDGES])
    for kwargs in ({}, {"saturate": True}, {"subnormals": False}):
        got = fpsim.torch.round(torch.from_numpy(data), fmt, mode, **kwargs)
        want = torch.from_numpy(fpsim.round(data, fmt, mode, **kwargs))
        same_bits(got, want)


def test_stochastic_rounding_with_a_seed_is_fpsim_rounds():
    rng = np.random.default_rng(1)
    data = rng.standard_normal(4000).astype(np.float32)
    t = torch.from_numpy(data)
    for bits in (None, 5):
        got = fpsim.torch.round(t, "bf16", "stochastic", seed=11, random_bits=bits)
        want = fpsim.round(data, "bf16", "stochastic", seed=11, random_bits=bits)
        same_bits(got, torch.from_numpy(want))
    other = fpsim.torch.round(t, "bf16", "stochastic", seed=12)
    assert not torch.equal(other, fpsim.torch.round(t, "bf16", "stochastic", seed=11))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_other_input_dtypes_agree_with_fpsim_round(dtype):
    rng = np.random.default_rng(3)
    t = torch.from_numpy(rng.standard_normal(3000) * 100.0).to(dtype)
    wide = t.double().numpy()
    for fmt, mode in (("fp8_e4m3", "nearest_even"), ("fp8_e5m2", "toward_zero"),
                      ("fp4_e2m1", "up"), ("e5m4", "odd")):
        got = fpsim.torch.round(t, fmt, mode)
        assert got.dtype == dtype
        want = torch.from_numpy(fpsim.round(wide, fmt, mode)).to(dtype)  # exact: fewer bits
        same_bits(got, want)


def test_float64_input_and_formats_wider_than_binary32():
    t = torch.tensor([1 / 3, 1e-310, 1e300, -2.5], dtype=torch.float64)
    same_bits(fpsim.torch.round(t, "e11m40"), torch.from_numpy(
        fpsim.round(t.numpy(), "e11m40")))
    t32 = torch.tensor([1 / 3, 3e38], dtype=torch.float32)  # a format wider than float32's
    same_bits(fpsim.torch.round(t32, "fp64"), t32)


def test_the_hot_path_reads_and_writes_the_tensors_memory(monkeypatch):
    seen = {}
    real = rounding_module.fpsim_round

    def spy(x, fmt, rounding, **kwargs):
        seen["x"], seen["out"] = x.ctypes.data, kwargs["out"].ctypes.data
        return real(x, fmt, rounding, **kwargs)

    monkeypatch.setattr(rounding_module, "fpsim_round", spy)
    for dtype in (torch.float32, torch.float64):
        t = torch.randn(64, 32, dtype=dtype)
        y = fpsim.torch.round(t, "bf16")
        assert seen["x"] == t.data_ptr() and seen["out"] == y.data_ptr()
        assert y.data_ptr() != t.data_ptr()  # a new tensor: the input is left as it was


def test_shapes_strides_and_the_input_left_alone():
    base = torch.randn(5, 7)
    t = base.t()  # not contiguous: read as it is (fpsim copies it once), result contiguous
    y = fpsim.torch.round(t, "fp8_e4m3")
    assert y.shape == t.shape and y.is_contiguous()
    same_bits(y, torch.from_numpy(fpsim.round(t.contiguous().numpy(), "fp8_e4m3")))
    assert torch.equal(base.t(), t)
    zero_d = fpsim.torch.round(torch.tensor(0.1), "fp16")
    assert zero_d.shape == () and zero_d.item() == 0.0999755859375
    empty = fpsim.torch.round(torch.zeros(0, 4), "fp16")
    assert empty.shape == (0, 4) and empty.dtype == torch.float32
    expanded = torch.tensor([0.1]).expand(3)  # stride 0
    assert fpsim.torch.round(expanded, "fp16").tolist() == [0.0999755859375] * 3


def test_flags_are_fpsims():
    data = np.array([0.5, 0.1, 1e5, 1e-9, np.inf, np.nan], dtype=np.float32)
    values, flags = fpsim.torch.round(torch.from_numpy(data), "fp16", flags=True)
    want_values, want_flags = fpsim.round(data, "fp16", flags=True)
    same_bits(values, torch.from_numpy(want_values))
    assert flags.dtype == torch.uint8 and flags.tolist() == want_flags.tolist()


def test_the_module_keeps_its_last_flags_and_counts():
    layer = Round("fp8_e4m3", saturate=True, backward="fp8_e5m2", capture_flags=True)
    x = torch.tensor([0.5, 0.3, 1000.0, 1e-6], requires_grad=True)
    y = layer(x)
    _, want = fpsim.round(x.detach().numpy(), "fp8_e4m3", saturate=True, flags=True)
    assert layer.capture.flags.tolist() == want.tolist()
    assert layer.capture.counts() == {"inexact": 3, "underflow": 1, "overflow": 1}
    (y * torch.tensor([1.0, 0.3, 1e6, 1e-9])).sum().backward()
    _, grad_want = fpsim.round(np.array([1.0, 0.3, 1e6, 1e-9], dtype=np.float32),
                               "fp8_e5m2", flags=True)
    assert layer.capture.grad_flags.tolist() == grad_want.tolist()
    assert layer.capture.counts(grad=True) == {"inexact": 3, "underflow": 1, "overflow": 1}
    assert "fp8_e4m3" in repr(layer) and "fp8_e5m2" in repr(layer)
    assert Round("fp16").capture is None


def test_straight_through_passes_the_gradient_unchanged():
    x = torch.tensor([0.1, 1e-9, 1e6, -3.0], requires_grad=True)
    g = torch.tensor([0.1, 2.0, -1e-30, 7.0])
    fpsim.torch.round(x, "fp16").backward(g)
    assert torch.equal(x.grad, g)


@pytest.mark.parametrize("backward", [
    "bf16", Rounding("fp8_e5m2", "toward_zero"), Rounding("fp16", saturate=True),
    Rounding("bf16", "stochastic", seed=5), Rounding("fp8_e4m3", "stochastic", seed=9,
                                                     random_bits=3),
])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_rounded_gradient_is_fpsim_round_of_torchs_gradient(backward, dtype):
    rng = np.random.default_rng(5)
    w = torch.from_numpy(rng.standard_normal((6, 5))).to(dtype)
    a = torch.from_numpy(rng.standard_normal((5, 4))).to(dtype).requires_grad_()
    (torch.tanh(w @ fpsim.torch.round(a, "fp16", backward=backward)) ** 2).sum().backward()
    # torch's own gradient of the same expression, without the rounding in between:
    b = fpsim.torch.round(a.detach(), "fp16").requires_grad_()
    (torch.tanh(w @ b) ** 2).sum().backward()
    r = backward if isinstance(backward, Rounding) else Rounding(backward)
    want = fpsim.round(b.grad.numpy(), r.fmt, r.rounding, subnormals=r.subnormals,
                       saturate=r.saturate, seed=r.seed, random_bits=r.random_bits)
    same_bits(a.grad, torch.from_numpy(want))


def test_gradcheck_straight_through_and_exact_formats():
    x = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    # Rounding to binary64 is exact on float64: the function is the identity, and the
    # straight-through and the binary64-rounded gradients are its derivative.
    assert torch.autograd.gradcheck(lambda t: fpsim.torch.round(t, "fp64") ** 3, (x,))
    assert torch.autograd.gradcheck(
        lambda t: torch.sin(fpsim.torch.round(t, "fp64", backward="fp64")), (x,))
    assert torch.autograd.gradcheck(lambda t: Round("fp64", "up", backward=Rounding(
        "fp64", "stochastic", seed=3))(t) * t, (x,))
    # A gradient rounded to binary32 is within gradcheck's tolerance of the derivative.
    assert torch.autograd.gradcheck(
        lambda t: torch.exp(fpsim.torch.round(t, "fp64", backward="fp32")), (x,))


def test_a_coarse_forward_is_not_the_identity_for_gradcheck():
    # The straight-through estimator is not the derivative of a step function: gradcheck
    # sees the difference (a check that gradcheck above can fail).
    x = torch.tensor([0.3, 1.7], dtype=torch.float64, requires_grad=True)
    with pytest.raises(GradcheckError):
        torch.autograd.gradcheck(lambda t: fpsim.torch.round(t, "fp8_e4m3"), (x,))


@pytest.mark.parametrize("bad", [[0.1, 0.2], np.array([0.1]), 0.5, "0.1"])
def test_round_takes_tensors_only(bad):
    with pytest.raises(TypeError, match="must be a torch.Tensor"):
        fpsim.torch.round(bad, "fp16")
    with pytest.raises(TypeError, match="must be a torch.Tensor"):
        Round("fp16")(bad)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int8, torch.bool, torch.complex64])
def test_round_refuses_integer_bool_and_complex_tensors(dtype):
    with pytest.raises(TypeError, match="floating-point tensor"):
        fpsim.torch.round(torch.ones(3, dtype=dtype), "fp16")


def test_non_float_tensors_cannot_require_grad():
    # torch itself refuses them, before fpsim.torch sees them.
    with pytest.raises(RuntimeError, match="floating point"):
        torch.ones(2, dtype=torch.int32, requires_grad=True)


def test_unknown_formats_modes_and_options_are_fpsims_errors():
    t = torch.ones(2)
    with pytest.raises(ValueError, match="unknown format"):
        fpsim.torch.round(t, "fp17")
    with pytest.raises(ValueError, match="unknown rounding mode 'sideways'"):
        fpsim.torch.round(t, "fp16", "sideways")
    with pytest.raises(ValueError, match="seed"):
        fpsim.torch.round(t, "fp16", "stochastic", seed=-1)
    with pytest.raises(ValueError, match="random_bits"):
        fpsim.torch.round(t, "fp16", "stochastic", random_bits=0)
    with pytest.raises(ValueError, match="unknown format"):
        fpsim.torch.round(t, "fp16", backward="fp99")
    with pytest.raises(TypeError, match="backward must be None"):
        fpsim.torch.round(t, "fp16", backward=16)
    with pytest.raises(ValueError, match="unknown rounding mode"):
        Round("fp16", "nearest")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(UserWarning, match="seed does nothing"):
            fpsim.torch.round(t, "fp16", seed=1)
    with pytest.raises(ValueError, match="unknown rounding mode"):
        fpsim.torch.round(torch.zeros(0), "fp16", "sideways")  # checked on empty tensors too


def test_bfloat16_goes_through_ml_dtypes_on_the_cpu():
    t = torch.tensor([1.0, 3.140625, -0.0], dtype=torch.bfloat16)
    a = fpsim.torch.to_array(t)
    assert a.dtype == ml_dtypes.bfloat16 and a.ctypes.data == t.data_ptr()
    y = fpsim.torch.round(t, "fp8_e5m2")
    same_bits(y, torch.tensor([1.0, 3.0, -0.0], dtype=torch.bfloat16))


@pytest.mark.gpu
def test_cuda_tensors_give_the_cpus_bits():
    skip_without_cuda()
    rng = np.random.default_rng(2)
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        t = torch.from_numpy(rng.standard_normal(5000) * 1e3).to(dtype)
        for fmt, mode in (("bf16", "nearest_even"), ("fp8_e4m3", "stochastic"),
                          ("fp16", "odd")):
            seed = 4 if mode == "stochastic" else None
            cpu = fpsim.torch.round(t, fmt, mode, seed=seed)
            x = t.cuda().requires_grad_()
            gpu = fpsim.torch.round(x, fmt, mode, seed=seed, backward=Rounding(fmt, mode,
                                                                                seed=seed))
            assert gpu.device == x.device and gpu.dtype == dtype
            same_bits(gpu.cpu(), cpu)
            gpu.backward(x.detach() * 0.1)
            same_bits(x.grad.cpu(), fpsim.torch.round(t * 0.1, fmt, mode, seed=seed))
