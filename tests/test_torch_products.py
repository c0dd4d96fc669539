"""fpsim.torch.matmul and linear: fpsim.matmul in the forward and in both backward
products (with the forward's settings or their own), checked against fpsim.matmul on the
same NumPy data; gradcheck in float64 on float32 values."""

import pytest

torch = pytest.importorskip("torch")

import numpy as np  # noqa: E402
from torch_cuda import skip_without_cuda  # noqa: E402

import fpsim  # noqa: E402
import fpsim.torch  # noqa: E402

SETTINGS = [
    {},
    {"accum": "fp16"},
    {"accum": "bf16", "rounding": "toward_zero", "order": "pairwise"},
    {"accum": "fp16", "products": "rounded", "out": "fp16"},
    {"accum": "e5m6", "rounding": "stochastic", "seed": 3, "random_bits": 9},
    {"model": fpsim.hw.H100},
    {"model": fpsim.hw.V100},
]


def operands(shape_a, shape_b, seed=0):
    # fp16 values (float32 arrays): the block-FMA models take values of their input format.
    rng = np.random.default_rng(seed)
    a = fpsim.round(rng.standard_normal(shape_a) * 2.0 ** rng.integers(-8, 8, shape_a), "fp16",
                    dtype=np.float16).astype(np.float32)
    b = fpsim.round(rng.standard_normal(shape_b), "fp16", dtype=np.float16).astype(np.float32)
    return a, b


@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: ",".join(map(str, s.values())))
@pytest.mark.parametrize("shapes", [((5, 40), (40, 3)), ((2, 4, 24), (2, 24, 6))])
def test_forward_and_both_backward_products_are_fpsim_matmul(settings, shapes):
    a, b = operands(*shapes)
    g = operands(shapes[0][:-1] + (shapes[1][-1],), (1,), seed=1)[0]
    ta, tb = torch.from_numpy(a).requires_grad_(), torch.from_numpy(b).requires_grad_()
    y = fpsim.torch.matmul(ta, tb, **settings)
    np.testing.assert_array_equal(y.detach().numpy(), fpsim.matmul(a, b, **settings))
    y.backward(torch.from_numpy(g))
    np.testing.assert_array_equal(ta.grad.numpy(),
                                  fpsim.matmul(g, np.swapaxes(b, -1, -2), **settings))
    np.testing.assert_array_equal(tb.grad.numpy(),
                                  fpsim.matmul(np.swapaxes(a, -1, -2), g, **settings))


def test_the_backward_takes_its_own_settings():
    a, b = operands((6, 30), (30, 4))
    g = operands((6, 4), (1,), seed=2)[0]
    ta, tb = torch.from_numpy(a).requires_grad_(), torch.from_numpy(b).requires_grad_()
    own = {"accum": "bf16", "order": "pairwise"}
    y = fpsim.torch.matmul(ta, tb, model=fpsim.hw.H100, backward=own)
    np.testing.assert_array_equal(y.detach().numpy(), fpsim.matmul(a, b, model=fpsim.hw.H100))
    y.backward(torch.from_numpy(g))
    np.testing.assert_array_equal(ta.grad.numpy(), fpsim.matmul(g, b.T, **own))
    np.testing.assert_array_equal(tb.grad.numpy(), fpsim.matmul(a.T, g, **own))
    # and the forward's settings are not what the backward used here:
    assert not np.array_equal(ta.grad.numpy(), fpsim.matmul(g, b.T, model=fpsim.hw.H100))


def test_linear_is_x_weight_t_with_the_bias_as_accumulator():
    x, w = operands((3, 5, 20), (7, 20), seed=4)
    bias = np.random.default_rng(5).standard_normal(7).astype(np.float32)
    bias = fpsim.round(bias, "fp16")
    g = operands((3, 5, 7), (1,), seed=6)[0]
    tx, tw, tbias = (torch.from_numpy(v).requires_grad_() for v in (x, w, bias))
    s = {"accum": "fp16", "rounding": "nearest_away"}
    y = fpsim.torch.linear(tx, tw, tbias, **s)
    assert y.shape == (3, 5, 7)
    rows = x.reshape(15, 20)
    np.testing.assert_array_equal(y.detach().numpy().reshape(15, 7),
                                  fpsim.matmul(rows, w.T, c=bias, **s))
    y.backward(torch.from_numpy(g))
    g2 = g.reshape(15, 7)
    np.testing.assert_array_equal(tx.grad.numpy().reshape(15, 20), fpsim.matmul(g2, w, **s))
    np.testing.assert_array_equal(tw.grad.numpy(), fpsim.matmul(g2.T, rows, **s))
    # the bias's gradient: the rows of g summed in order, each addition rounded to fp16
    np.testing.assert_array_equal(tbias.grad.numpy(),
                                  fpsim.matmul(np.ones((1, 15), np.float32), g2, **s)[0])
    total = np.float16(0)
    for v in g2[:, 0]:
        total = fpsim.add(total, v, "fp16", "nearest_away")
    assert float(tbias.grad[0]) == float(total)


@pytest.mark.parametrize("settings", SETTINGS[:3], ids=lambda s: ",".join(map(str, s.values())))
def test_bmm_is_fpsim_matmul_of_each_batch(settings):
    a, b = operands((3, 4, 24), (3, 24, 5), seed=7)
    g = operands((3, 4, 5), (1,), seed=8)[0]
    ta, tb = torch.from_numpy(a).requires_grad_(), torch.from_numpy(b).requires_grad_()
    y = fpsim.torch.bmm(ta, tb, **settings)
    y.backward(torch.from_numpy(g))
    for i in range(3):  # batch by batch, as 2-D products
        np.testing.assert_array_equal(y[i].detach().numpy(), fpsim.matmul(a[i], b[i], **settings))
        np.testing.assert_array_equal(ta.grad[i].numpy(), fpsim.matmul(g[i], b[i].T, **settings))
        np.testing.assert_array_equal(tb.grad[i].numpy(), fpsim.matmul(a[i].T, g[i], **settings))
    with pytest.raises(ValueError, match="bmm takes"):
        fpsim.torch.bmm(torch.ones(2, 3), torch.ones(3, 2))
    with pytest.raises(ValueError, match="bmm takes"):
        fpsim.torch.bmm(torch.ones(2, 2, 3), torch.ones(3, 3, 2))


def test_a_full_c_gets_the_gradient_as_it_came():
    a, b = operands((3, 8), (8, 2))
    c = torch.zeros(3, 2, requires_grad=True)
    g = torch.arange(6.0).reshape(3, 2)
    fpsim.torch.matmul(torch.from_numpy(a), torch.from_numpy(b), c=c).backward(g)
    assert torch.equal(c.grad, g)


def test_gradcheck_in_float64_on_float32_values():
    # fpsim.matmul takes float32 values: operands on a grid of 2**-6, perturbed by 2**-6
    # (still float32 values), and sums exact in fp32: the finite differences are exact.
    rng = np.random.default_rng(8)
    a = torch.from_numpy(rng.integers(-64, 64, (3, 5)) / 64.0).requires_grad_()
    b = torch.from_numpy(rng.integers(-64, 64, (5, 2)) / 64.0).requires_grad_()
    c = torch.from_numpy(rng.integers(-64, 64, (2,)) / 64.0).requires_grad_()
    for settings in ({}, {"order": "pairwise"}, {"model": fpsim.hw.H100}):
        assert torch.autograd.gradcheck(
            lambda x, y, z, s=settings: fpsim.torch.matmul(x, y, c=z, **s), (a, b, c),
            eps=2.0**-6, atol=0.0, rtol=0.0)
    x = torch.from_numpy(rng.integers(-64, 64, (2, 3, 5)) / 64.0).requires_grad_()
    assert torch.autograd.gradcheck(
        lambda x, w, z: fpsim.torch.linear(x, w, z), (x, b.detach().t().clone()
                                                      .requires_grad_(), c),
        eps=2.0**-6, atol=0.0, rtol=0.0)


def test_narrow_dtypes_come_back_in_their_dtype():
    a, b = operands((4, 16), (16, 3))
    for dtype in (torch.float16, torch.bfloat16):
        ta, tb = torch.from_numpy(a).to(dtype), torch.from_numpy(b).to(dtype)
        y = fpsim.torch.matmul(ta, tb, accum="fp16")
        want = fpsim.matmul(ta.float().numpy(), tb.float().numpy(), accum="fp16")
        assert y.dtype == dtype
        assert torch.equal(y, torch.from_numpy(want).to(dtype))


def test_hostile_input():
    a = torch.ones(2, 3)
    with pytest.raises(TypeError, match="a must be a torch.Tensor"):
        fpsim.torch.matmul([[1.0]], a)
    with pytest.raises(TypeError, match="b must be a torch.Tensor"):
        fpsim.torch.matmul(a, np.ones((3, 2)))
    with pytest.raises(TypeError, match="floating-point"):
        fpsim.torch.matmul(a, torch.ones(3, 2, dtype=torch.int64))
    with pytest.raises(ValueError, match="one dtype and device"):
        fpsim.torch.matmul(a, torch.ones(3, 2, dtype=torch.float64))
    with pytest.raises(ValueError, match="batch dimensions"):
        fpsim.torch.matmul(torch.ones(2, 2, 3), torch.ones(3, 2))
    with pytest.raises(ValueError, match="c has shape"):
        fpsim.torch.matmul(a, torch.ones(3, 2), c=torch.ones(3))
    with pytest.raises(ValueError, match="unknown format"):
        fpsim.torch.matmul(a, torch.ones(3, 2), accum="fp99")
    with pytest.raises(ValueError):  # fpsim.matmul: a model fixes the accumulator
        fpsim.torch.matmul(a, torch.ones(3, 2), model=fpsim.hw.H100, accum="fp16")
    with pytest.raises(ValueError, match="backward: unknown settings"):
        fpsim.torch.matmul(a, torch.ones(3, 2), backward={"acum": "fp16"})
    with pytest.raises(TypeError, match="unexpected keyword arguments \\['acum'\\]"):
        fpsim.torch.matmul(a, torch.ones(3, 2), acum="fp16")
    with pytest.raises(TypeError, match="backward must be None"):
        fpsim.torch.matmul(a, torch.ones(3, 2), backward="fp16")
    with pytest.raises(ValueError, match="float32"):  # float64 values that are not float32's
        fpsim.torch.matmul(torch.full((1, 1), 0.1, dtype=torch.float64),
                           torch.ones(1, 1, dtype=torch.float64))
    with pytest.raises(ValueError, match="do not fit"):
        fpsim.torch.linear(torch.ones(2, 3), torch.ones(4, 5))
    assert fpsim.torch.matmul(torch.ones(0, 3), torch.ones(3, 2)).shape == (0, 2)
    t = torch.ones(4, 3).t()  # non-contiguous operands are read as they are
    assert torch.equal(fpsim.torch.matmul(t, torch.ones(4, 2)), torch.full((3, 2), 4.0))


@pytest.mark.gpu
def test_cuda_tensors_give_the_cpus_bits():
    skip_without_cuda()
    a, b = operands((8, 64), (64, 5))
    g = torch.from_numpy(operands((8, 5), (1,), seed=1)[0])
    for settings in ({"accum": "fp16"}, {"model": fpsim.hw.H100}):
        grads = []
        for device in ("cpu", "cuda"):
            ta = torch.from_numpy(a).to(device).requires_grad_()
            tb = torch.from_numpy(b).to(device).requires_grad_()
            y = fpsim.torch.matmul(ta, tb, **settings)
            y.backward(g.to(device))
            grads.append((y.detach().cpu(), ta.grad.cpu(), tb.grad.cpu()))
        for cpu, gpu in zip(*grads, strict=True):
            assert torch.equal(cpu, gpu)


def test_a_model_takes_the_gradient_a_round_after_it_gives():
    a, b = operands((4, 32), (32, 3))
    ta, tb = torch.from_numpy(a).requires_grad_(), torch.from_numpy(b).requires_grad_()
    weights = torch.from_numpy(np.random.default_rng(9).standard_normal((4, 3))).float()
    product = fpsim.torch.matmul(ta, tb, model=fpsim.hw.H100)
    with pytest.raises(ValueError, match="not a value of the model's input format fp16"):
        (product * weights).sum().backward()  # the gradient: float32, not fp16 values
    ta.grad = tb.grad = None
    y = fpsim.torch.Round("fp16", backward="fp16")(fpsim.torch.matmul(ta, tb,
                                                                      model=fpsim.hw.H100))
    (y * weights).sum().backward()
    g = fpsim.round(weights.numpy(), "fp16")
    np.testing.assert_array_equal(ta.grad.numpy(), fpsim.matmul(g, b.T, model=fpsim.hw.H100))
