"""fpsim.torch.conv2d: fpsim.conv2d forward; the backward's three products checked against
an exact reference (tests/accumulation_reference.ref_matmul) on terms laid out from the
definition of the convolution, in the documented order; against torch's own gradients
where every sum is exact; gradcheck in float64."""

import pytest

torch = pytest.importorskip("torch")

import numpy as np  # noqa: E402
from accumulation_reference import ref_matmul  # noqa: E402
from torch_cuda import skip_without_cuda  # noqa: E402

import fpsim  # noqa: E402
import fpsim.torch  # noqa: E402

# x (N, C, H, W), w (O, C, KH, KW), stride, padding: strides that leave rows over, padding
# wider than the kernel's reach, non-square kernels.
GEOMETRIES = [
    ((1, 2, 4, 4), (3, 2, 2, 2), (1, 1), (0, 0)),
    ((2, 2, 5, 6), (2, 2, 3, 2), (2, 1), (1, 0)),
    ((1, 1, 6, 5), (2, 1, 3, 3), (2, 3), (2, 1)),
]
SETTINGS = [
    {"accum": "fp16", "order": "sequential"},
    {"accum": "bf16", "rounding": "toward_zero", "order": "pairwise"},
    {"accum": "fp16", "products": "rounded", "rounding": "up"},
]


def fp16_values(rng, shape, low=-8, high=2):
    v = rng.integers(-64, 65, shape) * np.exp2(rng.integers(low, high, shape))
    return fpsim.round(v, "fp16").astype(np.float32)


def _padded(x, padding):
    n, c, h, w = x.shape
    out = np.zeros((n, c, h + 2 * padding[0], w + 2 * padding[1]))
    out[:, :, padding[0]:padding[0] + h, padding[1]:padding[1] + w] = x
    return out


def reference_gradients(x, w, g, stride, padding, settings):
    """(grad_x, grad_w, grad_bias) from the definition: y[n,o,i,j] = sum over (c, kh, kw)
    of w[o,c,kh,kw] * x[n,c,i*sh-ph+kh, j*sw-pw+kw] (zero outside x). Each gradient an
    exact reference sum of its terms, in the order docs/torch.md gives, zeros included."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    (sh, sw), (ph, pw) = stride, padding
    oh, ow = g.shape[2:]

    def g_at(b, k, r, s):  # the gradient of the output that row r, column s of x meets
        if r % sh or s % sw or not (0 <= r // sh < oh and 0 <= s // sw < ow):
            return 0.0
        return float(g[b, k, r // sh, s // sw])

    # d/dx: over (o, kh descending, kw descending), the flipped kernel's C order
    a_terms, b_terms = [], []
    for b in range(n):
        for ch in range(c):
            for i in range(h):
                for j in range(wd):
                    a_terms.append([g_at(b, k, i + ph - p, j + pw - q) for k in range(o)
                                    for p in reversed(range(kh)) for q in reversed(range(kw))])
                    b_terms.append([float(w[k, ch, p, q]) for k in range(o)
                                    for p in reversed(range(kh)) for q in reversed(range(kw))])
    gx = _sums(a_terms, b_terms, settings).reshape(x.shape)
    # d/dw: over (n, oh, ow) in C order
    xp = _padded(x, padding)
    a_terms, b_terms = [], []
    for k in range(o):
        for ch in range(c):
            for p in range(kh):
                for q in range(kw):
                    a_terms.append([float(g[b, k, i, j]) for b in range(n) for i in range(oh)
                                    for j in range(ow)])
                    b_terms.append([float(xp[b, ch, i * sh + p, j * sw + q]) for b in range(n)
                                    for i in range(oh) for j in range(ow)])
    gw = _sums(a_terms, b_terms, settings).reshape(w.shape)
    # d/dbias: over (n, oh, ow) in C order
    a_terms = [[1.0] * (n * oh * ow) for _ in range(o)]
    b_terms = [g[:, k].reshape(-1).tolist() for k in range(o)]
    gb = _sums(a_terms, b_terms, settings)
    return gx, gw, gb


def _sums(a_terms, b_terms, settings):
    """Each sum of products a_k * b_k, by the exact reference (one 1xK by Kx1 per sum)."""
    a = np.array(a_terms)[:, None, :]
    b = np.array(b_terms)[:, :, None]
    return ref_matmul(a, b, **settings).reshape(-1)


@pytest.mark.parametrize("geometry", GEOMETRIES, ids=str)
@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: ",".join(map(str, s.values())))
def test_forward_is_fpsim_conv2d_and_the_backward_sums_in_the_documented_order(geometry,
                                                                                settings):
    xs, ws, stride, padding = geometry
    rng = np.random.default_rng(len(str(geometry)) + len(settings))
    x, w = fp16_values(rng, xs), fp16_values(rng, ws)
    bias = fp16_values(rng, (ws[0],))
    tx, tw, tb = (torch.from_numpy(v).requires_grad_() for v in (x, w, bias))
    y = fpsim.torch.conv2d(tx, tw, tb, stride, padding, **settings)
    want = fpsim.conv2d(x, w, stride=stride, padding=padding, c=bias, **settings)
    np.testing.assert_array_equal(y.detach().numpy(), want)
    g = fp16_values(rng, y.shape, -4, 1)
    y.backward(torch.from_numpy(g))
    gx, gw, gb = reference_gradients(x, w, g, stride, padding, settings)
    np.testing.assert_array_equal(tx.grad.numpy(), gx.astype(np.float32))
    np.testing.assert_array_equal(tw.grad.numpy(), gw.astype(np.float32))
    np.testing.assert_array_equal(tb.grad.numpy(), gb.astype(np.float32))


def test_the_backward_takes_its_own_settings():
    xs, ws, stride, padding = GEOMETRIES[1]
    rng = np.random.default_rng(3)
    x, w = fp16_values(rng, xs), fp16_values(rng, ws)
    tx, tw = torch.from_numpy(x).requires_grad_(), torch.from_numpy(w).requires_grad_()
    own = {"accum": "bf16", "order": "pairwise"}
    y = fpsim.torch.conv2d(tx, tw, None, stride, padding, accum="fp16", backward=own)
    g = fp16_values(rng, y.shape, -4, 1)
    y.backward(torch.from_numpy(g))
    gx, gw, _ = reference_gradients(x, w, g, stride, padding, own)
    np.testing.assert_array_equal(tx.grad.numpy(), gx.astype(np.float32))
    np.testing.assert_array_equal(tw.grad.numpy(), gw.astype(np.float32))
    forward_settings, _, _ = reference_gradients(x, w, g, stride, padding, {"accum": "fp16"})
    assert not np.array_equal(tx.grad.numpy(), forward_settings.astype(np.float32))


@pytest.mark.parametrize("geometry", GEOMETRIES, ids=str)
def test_exact_sums_give_torchs_own_gradients(geometry):
    # Small integers: every sum exact in fp32, in any order; torch's conv2d is the oracle.
    xs, ws, stride, padding = geometry
    rng = np.random.default_rng(5)
    x, w = (torch.from_numpy(rng.integers(-8, 9, s).astype(np.float32)) for s in (xs, ws))
    bias = torch.from_numpy(rng.integers(-8, 9, ws[0]).astype(np.float32))
    mine = [t.clone().requires_grad_() for t in (x, w, bias)]
    theirs = [t.clone().requires_grad_() for t in (x, w, bias)]
    y = fpsim.torch.conv2d(*mine, stride, padding, order="pairwise")
    z = torch.nn.functional.conv2d(*theirs, stride=stride, padding=padding)
    assert torch.equal(y, z)
    g = torch.from_numpy(rng.integers(-8, 9, tuple(z.shape)).astype(np.float32))
    y.backward(g)
    z.backward(g)
    for m, t in zip(mine, theirs, strict=True):
        assert torch.equal(m.grad, t.grad)


def test_gradcheck_in_float64_on_float32_values():
    rng = np.random.default_rng(8)
    x = torch.from_numpy(rng.integers(-64, 64, (1, 2, 4, 3)) / 64.0).requires_grad_()
    w = torch.from_numpy(rng.integers(-64, 64, (2, 2, 2, 2)) / 64.0).requires_grad_()
    b = torch.from_numpy(rng.integers(-64, 64, (2,)) / 64.0).requires_grad_()
    for settings in ({}, {"order": "pairwise"}):
        assert torch.autograd.gradcheck(
            lambda x, w, b, s=settings: fpsim.torch.conv2d(x, w, b, 2, 1, **s), (x, w, b),
            eps=2.0**-6, atol=0.0, rtol=0.0)


def test_narrow_dtypes_come_back_in_their_dtype():
    rng = np.random.default_rng(2)
    x, w = fp16_values(rng, (1, 2, 4, 4)), fp16_values(rng, (2, 2, 3, 3))
    for dtype in (torch.float16, torch.bfloat16):
        tx, tw = torch.from_numpy(x).to(dtype), torch.from_numpy(w).to(dtype)
        y = fpsim.torch.conv2d(tx, tw, accum="fp16")
        want = fpsim.conv2d(tx.float().numpy(), tw.float().numpy(), accum="fp16")
        assert y.dtype == dtype and torch.equal(y, torch.from_numpy(want).to(dtype))


def test_hostile_input():
    x, w = torch.ones(1, 2, 4, 4), torch.ones(3, 2, 2, 2)
    with pytest.raises(TypeError, match="x must be a torch.Tensor"):
        fpsim.torch.conv2d(np.ones((1, 2, 4, 4)), w)
    with pytest.raises(TypeError, match="floating-point"):
        fpsim.torch.conv2d(x, w.long())
    with pytest.raises(ValueError, match="one dtype and device"):
        fpsim.torch.conv2d(x, w.double())
    with pytest.raises(ValueError, match="channels differ"):
        fpsim.torch.conv2d(x, torch.ones(3, 1, 2, 2))
    with pytest.raises(ValueError, match=r"conv2d needs x \(N, C, H, W\)"):
        fpsim.torch.conv2d(torch.ones(2, 4, 4), w)
    with pytest.raises(ValueError, match="larger than the padded input"):
        fpsim.torch.conv2d(torch.ones(1, 2, 1, 1), w)
    with pytest.raises(ValueError, match="stride"):
        fpsim.torch.conv2d(x, w, stride=0)
    with pytest.raises(ValueError, match="padding"):
        fpsim.torch.conv2d(x, w, padding=-1)
    with pytest.raises(ValueError, match="bias has shape"):
        fpsim.torch.conv2d(x, w, torch.ones(2))
    with pytest.raises(TypeError, match="unexpected keyword arguments \\['dilation'\\]"):
        fpsim.torch.conv2d(x, w, dilation=2)
    with pytest.raises(ValueError, match="unknown format"):
        fpsim.torch.conv2d(x, w, accum="fp99")
    assert fpsim.torch.conv2d(torch.ones(0, 2, 4, 4), w).shape == (0, 3, 3, 3)
    t = torch.ones(1, 4, 4, 2).permute(0, 3, 1, 2)  # non-contiguous: read as it is
    assert torch.equal(fpsim.torch.conv2d(t, w), torch.full((1, 3, 3, 3), 8.0))


@pytest.mark.gpu
def test_cuda_tensors_give_the_cpus_bits():
    skip_without_cuda()
    rng = np.random.default_rng(4)
    x, w = fp16_values(rng, (2, 2, 5, 5)), fp16_values(rng, (3, 2, 3, 3))
    results = []
    for device in ("cpu", "cuda"):
        tx = torch.from_numpy(x).to(device).requires_grad_()
        tw = torch.from_numpy(w).to(device).requires_grad_()
        y = fpsim.torch.conv2d(tx, tw, None, 2, 1, accum="fp16")
        y.backward(torch.ones_like(y))
        results.append([t.detach().cpu() for t in (y, tx.grad, tw.grad)])
    for cpu, gpu in zip(*results, strict=True):
        assert torch.equal(cpu, gpu)
