"""fpsim.torch.emulate: a torch model under an fpsim policy. Checked against plain torch
(the fp32 policy trains bit for bit as torch does), against fpsim.nn running the same
model under the same policy (forward values and every gradient, bit for bit), and
against fpsim.matmul / fpsim.round on the same data."""

import contextlib

import pytest

torch = pytest.importorskip("torch")

import numpy as np  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch_cuda import assert_same_bits, grid, skip_without_cuda, torch_arithmetic  # noqa: E402

import fpsim  # noqa: E402
import fpsim.torch  # noqa: E402
from fpsim import nn  # noqa: E402


def mlp():
    return torch.nn.Sequential(torch.nn.Linear(12, 16), torch.nn.ReLU(), torch.nn.Linear(16, 5))


def cnn():
    return torch.nn.Sequential(torch.nn.Conv2d(2, 4, 3, stride=2, padding=1), torch.nn.ReLU(),
                               torch.nn.Flatten(), torch.nn.Linear(4 * 3 * 3, 5))


def data(kind, n=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    shape = (n, 12) if kind == "mlp" else (n, 2, 6, 6)
    return torch.randn(shape, generator=g), torch.randint(0, 5, (n,), generator=g)


@pytest.mark.parametrize("kind", ["mlp", "cnn"])
def test_the_fp32_policy_trains_bit_for_bit_as_plain_torch(kind):
    torch.manual_seed(1)
    plain = mlp() if kind == "mlp" else cnn()
    torch.manual_seed(1)
    emulated = mlp() if kind == "mlp" else cnn()
    emulation = fpsim.torch.emulate(emulated, "fp32")
    optimizers = [torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
                  for m in (plain, emulated)]
    for step in range(4):
        x, y = data(kind, seed=step)
        for model, opt in zip((plain, emulated), optimizers, strict=True):
            opt.zero_grad()
            with emulation if model is emulated else torch.enable_grad():
                loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
        for a, b in zip(plain.parameters(), emulated.parameters(), strict=True):
            assert torch.equal(a, b)


def _fpsim_copy(model, kind):
    """The same model in fpsim.nn, with the torch model's weights."""
    if kind == "mlp":
        copy = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 5))
    else:
        copy = nn.Sequential(nn.Conv2d(2, 4, 3, stride=2, padding=1), nn.ReLU(), nn.Flatten(),
                             nn.Linear(4 * 3 * 3, 5))
    for mine, theirs in zip(copy.parameters(), model.parameters(), strict=True):
        mine.data = theirs.detach().double().numpy().copy()
    return copy


def _fp16_grid(rng, shape, low=-8):
    # fp16 values on a coarse grid: the sums torch makes on its own (a bias's gradient over
    # the batch) are exact in fp32, as fpsim's are.
    return (rng.integers(-64, 65, shape) * 2.0 ** rng.integers(low, low + 3, shape)).astype(
        np.float32)


POLICIES = ["mixed,order=sequential", "mixed,accum=fp16,order=sequential",
            "bf16,order=pairwise,accum_rounding=toward_zero", "mixed,model=H100",
            "mixed,params=fp16,order=sequential", "compute=fp8_e5m2,accum=bf16,order=pairwise"]


@pytest.mark.parametrize("kind", ["mlp", "cnn"])
@pytest.mark.parametrize("policy", POLICIES)
def test_forward_and_gradients_equal_fpsim_nn_under_the_same_policy(kind, policy):
    torch.manual_seed(2)
    model = mlp() if kind == "mlp" else cnn()
    rng = np.random.default_rng(3)
    with torch.no_grad():  # weights on a grid too: the fp32 products stay exact
        for p in model.parameters():
            p.copy_(torch.from_numpy(_fp16_grid(rng, tuple(p.shape))))
    reference = _fpsim_copy(model, kind)
    fpsim.torch.emulate(model, policy)
    x = torch.from_numpy(_fp16_grid(rng, (4, 12) if kind == "mlp" else (4, 2, 6, 6), -4))
    x.requires_grad_()
    y = model(x)
    g = _fp16_grid(rng, tuple(y.shape), -6)
    y.backward(torch.from_numpy(g))
    p = fpsim.precision.parse(policy)
    with p:
        reference.to(p)
        fx = fpsim.tensor(x.detach().double().numpy(), requires_grad=True)
        fy = reference(fx)
        fy.backward(g.astype(np.float64))
    np.testing.assert_array_equal(y.detach().double().numpy(), fy.data)
    np.testing.assert_array_equal(x.grad.double().numpy(), fx.grad)
    for mine, theirs in zip(model.parameters(), reference.parameters(), strict=True):
        np.testing.assert_array_equal(mine.detach().double().numpy(), theirs.data)
        np.testing.assert_array_equal(mine.grad.double().numpy(), theirs.grad)


def test_a_forwards_matmul_broadcast_and_bmm_are_emulated_products():
    class Attention(torch.nn.Module):
        def forward(self, q, k, v):
            scores = q @ k.transpose(-1, -2)  # (B, T, T)
            mixed = torch.bmm(scores, v)
            return torch.matmul(mixed, torch.ones(v.shape[-1]))  # a vector: (B, T)

    rng = np.random.default_rng(4)
    q, k, v = (rng.standard_normal((2, 3, 24)).astype(np.float32) for _ in range(3))
    model = Attention()
    fpsim.torch.emulate(model, "mixed,accum=fp16,order=sequential")
    got = model(*(torch.from_numpy(t) for t in (q, k, v)))
    s = {"accum": "fp16", "order": "sequential"}

    def fp16(a):
        return fpsim.round(a, "fp16").astype(np.float32)

    scores = fp16(fpsim.matmul(fp16(q), fp16(k).swapaxes(-1, -2), **s))
    mixed = fp16(fpsim.matmul(scores, fp16(v), **s))
    want = fp16(fpsim.matmul(mixed, np.ones((24, 1), np.float32), **s))[..., 0]
    np.testing.assert_array_equal(got.detach().numpy(), want)


def test_activations_gradients_and_overrides_round_as_the_policy_says():
    torch.manual_seed(5)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 4),
                                torch.nn.Softmax(dim=-1))
    seen = {}
    for i, layer in enumerate(model):
        layer.register_forward_hook(lambda m, a, out, i=i: seen.__setitem__(i, out))
    emulation = fpsim.torch.emulate(model, "bf16,softmax.compute=fp16")
    x = torch.randn(3, 6, requires_grad=True)
    model(x).sum().backward()
    for i, fmt in ((0, "bf16"), (1, "bf16"), (2, "bf16"), (3, "fp16")):
        out = seen[i].detach()
        assert torch.equal(out, fpsim.torch.round(out, fmt)), (i, fmt)
    assert not torch.equal(seen[1], fpsim.torch.round(seen[1], "fp8_e4m3"))
    for param in model.parameters():  # params=fp32: the gradients of bf16 casts
        assert torch.equal(param.grad, fpsim.torch.round(param.grad, "bf16"))
    emulation.remove()
    y = model(x)
    assert not torch.equal(y, fpsim.torch.round(y, "fp16"))  # removed: plain float32


def test_in_place_results_are_rounded_in_place():
    class Residual(torch.nn.Module):
        def forward(self, x):
            y = x * 3.0
            y += 0.1
            return torch.relu_(y)

    model = Residual()
    fpsim.torch.emulate(model, "mixed")
    got = model(torch.tensor([0.3, -1.0, 1e-3]))
    x16 = fpsim.round(np.array([0.3, -1.0, 1e-3]), "fp16")
    want = np.maximum(fpsim.round(fpsim.round(x16 * 3.0, "fp16") + 0.1, "fp16"), 0)
    np.testing.assert_array_equal(got.numpy(), want.astype(np.float32))


def test_comparisons_see_their_inputs_as_they_are():
    class Threshold(torch.nn.Module):
        def forward(self, x):
            return (x > 1.0001).float(), x * 1.0

    mask, scaled = Threshold()(torch.tensor([1.0002]))
    fpsim.torch.emulate(model := Threshold(), "mixed")
    got_mask, got = model(torch.tensor([1.0002]))
    assert torch.equal(got_mask, mask)  # not compared in fp16, where 1.0002 is 1.0
    assert got.item() == 1.0  # but computed in fp16


def test_stochastic_policies_replay_with_their_seed():
    def run(seed):
        torch.manual_seed(6)
        model = mlp()
        fpsim.torch.emulate(model, f"mixed,rounding=stochastic,accum_rounding=stochastic,"
                                   f"accum=bf16,seed={seed}")
        x, _ = data("mlp", seed=7)
        y = model(x)
        y.sum().backward()
        return [y.detach(), *(p.grad for p in model.parameters())]

    first, again, other = run(1), run(1), run(2)
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    assert not all(torch.equal(a, b) for a, b in zip(first, other, strict=True))


def test_torchs_own_binary32_products_keep_subnormals():
    # The fp32 accumulator in any order is torch's own product: IEEE binary32 with
    # subnormals (no flush to zero). Exact sums: every order gives fpsim.matmul's bits.
    a = torch.tensor([[2.0**-70, 2.0**-71, -(2.0**-72)]])
    b = torch.tensor([[2.0**-60], [2.0**-60], [2.0**-60]])
    model = torch.nn.Linear(3, 1, bias=False)
    with torch.no_grad():
        model.weight.copy_(b.t())
    fpsim.torch.emulate(model, "fp32")
    got = model(a)
    assert got.item() != 0.0
    np.testing.assert_array_equal(got.detach().numpy(),
                                  fpsim.matmul(a.numpy(), b.numpy(), order="pairwise"))
    conv = torch.nn.Conv2d(1, 1, 1, bias=False)
    with torch.no_grad():
        conv.weight.fill_(2.0**-100)
    fpsim.torch.emulate(conv, "fp32")
    assert conv(torch.full((1, 1, 2, 2), 2.0**-30)).flatten().tolist() == [2.0**-130] * 4


def test_string_padding_and_what_fpsim_conv2d_does_not_take():
    conv = torch.nn.Conv2d(1, 2, 3, padding="same")
    fpsim.torch.emulate(conv, "mixed,accum=fp16,order=sequential")
    assert conv(torch.randn(1, 1, 5, 5)).shape == (1, 2, 5, 5)
    grouped = torch.nn.Conv2d(2, 2, 3, groups=2)
    fpsim.torch.emulate(grouped, "mixed,accum=fp16,order=sequential")
    with pytest.raises(NotImplementedError, match="groups=2"):
        grouped(torch.randn(1, 2, 5, 5))
    grouped_fp32 = torch.nn.Conv2d(2, 2, 3, groups=2)
    fpsim.torch.emulate(grouped_fp32, "mixed")  # fp32, any order: torch's own product
    assert grouped_fp32(torch.randn(1, 2, 5, 5)).shape == (1, 2, 3, 3)


def test_hostile_input():
    with pytest.raises(TypeError, match="torch.nn.Module"):
        fpsim.torch.emulate(lambda x: x, "mixed")
    with pytest.raises(ValueError, match="unknown policy preset 'mixd'"):
        fpsim.torch.emulate(mlp(), "mixd")
    with pytest.raises(ValueError, match="is native"):
        fpsim.torch.emulate(mlp(), "native_fp16")
    with pytest.raises(ValueError, match="parameter 0.weight is torch.float16"):
        fpsim.torch.emulate(mlp().half(), "mixed")
    with pytest.raises(ValueError, match="wider than the parameters' torch.float32"):
        fpsim.torch.emulate(mlp(), "fp64")
    model = mlp()
    emulation = fpsim.torch.emulate(model, "mixed")
    with pytest.raises(ValueError, match="emulated already"):
        fpsim.torch.emulate(model, "bf16")
    emulation.remove()
    fpsim.torch.emulate(model, "bf16")  # once removed, another policy may go on
    double = mlp().double()
    fpsim.torch.emulate(double, "fp64")
    assert double(torch.ones(1, 12, dtype=torch.float64)).dtype == torch.float64
    with pytest.raises(ValueError, match="out="):
        with fpsim.torch.emulate(torch.nn.Identity(), "mixed"):
            torch.matmul(torch.ones(2, 2), torch.ones(2, 2), out=torch.empty(2, 2))


CUDA_POLICIES = ["mixed", "mixed,accum=fp16,order=sequential"]


def _forward_and_backward(device, kind, policy):
    """The MLP's or the CNN's output under ``policy`` on ``device``, from weights, input and
    output gradient on grids (tests/torch_cuda.py), and its gradients: the output, the
    input's gradient, and each parameter and its gradient, on the CPU."""
    torch.manual_seed(2)
    model = mlp() if kind == "mlp" else cnn()
    rng = np.random.default_rng(8)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.from_numpy(grid(rng, tuple(p.shape), -4)))
    model.to(device)
    fpsim.torch.emulate(model, policy)
    x = torch.from_numpy(grid(rng, (4, 12) if kind == "mlp" else (4, 2, 6, 6), -3))
    x = x.to(device).requires_grad_()
    y = model(x)
    y.backward(torch.from_numpy(grid(rng, tuple(y.shape), -6)).to(device))
    params = list(model.parameters())
    return [t.detach().cpu() for t in (y, x.grad, *params, *(p.grad for p in params))]


@pytest.mark.parametrize("kind", ["mlp", "cnn"])
@pytest.mark.parametrize("policy", CUDA_POLICIES)
def test_the_cuda_comparisons_premise_torchs_arithmetic_is_order_free(kind, policy):
    """What torch computes itself in the runs test_cuda_models_give_the_cpus_bits compares
    (the bias's add and its gradient's sum over the batch; under "mixed", torch's own
    binary32 products) gives the same bits in any order on any device: checked on the CPU
    by tests/torch_cuda.py's TorchArithmetic."""
    with torch_arithmetic() as audit:
        _forward_and_backward("cpu", kind, policy)
    assert audit.problems == [] and audit.checked > 0


def test_the_premise_check_finds_arithmetic_that_depends_on_the_device():
    """TorchArithmetic refuses what could give other bits on another device: inexact sums
    (random data), sums of terms all -0, ReLU of -0, a + alpha * b and division whose
    operand is not a power of two, and operations it does not know."""
    rng = np.random.default_rng(0)
    a, b = (torch.from_numpy(rng.standard_normal(shape).astype(np.float32))
            for shape in ((3, 40), (40, 2)))
    cases = {
        "inexact": lambda: a @ b,
        "all -0": lambda: torch.zeros(2, 3) @ -torch.ones(3, 1),
        "relu of -0": lambda: torch.relu(torch.tensor([-0.0, 1.0])),
        "alpha": lambda: torch.ones(2).add_(torch.ones(2), alpha=0.1),
        "div": lambda: torch.ones(2) / 3.0,
        "unknown": lambda: torch.exp(torch.ones(2)),
        "conv, inexact": lambda: F.conv2d(a[:2].reshape(1, 2, 4, 10),
                                          a[2, :18].reshape(1, 2, 3, 3)),
    }
    for name, run in cases.items():
        with torch_arithmetic() as audit:
            run()
        assert len(audit.problems) == 1, name
    with torch_arithmetic() as audit:  # exact, and one +0 term among -0 ones: +0 anyway
        torch.tensor([[0.0, 0.0]]) @ torch.tensor([[-1.0], [1.0]])
        torch.tensor([0.5, 0.25, -0.125]).sum()
        torch.relu(torch.tensor([0.0, -1.0]))
    assert audit.problems == [] and audit.checked == 3


@contextlib.contextmanager
def _torchs_tf32_defaults():
    """torch's defaults, pinned: cuDNN may use TF32 (so emulate computes an fp32
    convolution in any order with fpsim.conv2d, cuBLAS's binary32 GEMM: no cuDNN
    algorithm of its own, Winograd or FFT, whose sums are not the convolution's), CUDA
    matmul may not (so an fp32 matmul in any order is torch's binary32 product)."""
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = True, False
    try:
        yield
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["mlp", "cnn"])
@pytest.mark.parametrize("policy", CUDA_POLICIES)
def test_cuda_models_give_the_cpus_bits(kind, policy):
    """An emulated MLP and CNN on "cuda" give the CPU's bits: the output, the input's
    gradient and every parameter's gradient, each bit (-0 apart from +0).

    Each value is either fpsim's (the roundings to fp16; the fp16-accumulated products
    on the cupy backend; under "mixed" the CNN's convolution and its gradients too,
    fpsim.conv2d in any order: cuBLAS's binary32 GEMM, as _torchs_tf32_defaults says) or
    torch's own: the bias's addition (one binary32 rounding), ReLU and its backward (no
    rounding), the bias gradient's sum over the batch, and under "mixed" the linear
    layers' binary32 products (cuBLAS against the CPU's BLAS, and on the CPU torch's
    convolution). The data lie on grids on which every one of these sums is exact in
    every order and none adds up terms that are all -0 (whose sign would be the
    implementation's): test_the_cuda_comparisons_premise_torchs_arithmetic_is_order_free
    checks that on the CPU run, whose values the CUDA run must reproduce step by step."""
    skip_without_cuda()
    cpu = _forward_and_backward("cpu", kind, policy)
    with _torchs_tf32_defaults():
        gpu = _forward_and_backward("cuda", kind, policy)
    for want, got in zip(cpu, gpu, strict=True):
        assert_same_bits(got, want)
