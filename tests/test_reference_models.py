"""Whole-model gradients under the fp64 policy against an independent NumPy reference.

The reference models below are written from their definitions (PyTorch semantics) in
plain NumPy, without fpsim, in a form that accepts complex arrays. Their gradients come
from complex-step differentiation, d f / d p_j = Im f(p + i h e_j) / h with h = 1e-30,
which has no subtractive cancellation and is accurate to machine precision; fpsim's
back-propagated gradients must agree to 1e-10 relative (max |a - b| / max |b| per
parameter).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import fpsim
import fpsim.nn.functional as F
from fpsim import nn

STEP = 1e-30
TOLERANCE = 1e-10


pytestmark = pytest.mark.usefixtures("fp64_policy")


# --- the reference: plain NumPy, complex-safe ------------------------------------------------


def ref_linear(x, w, b=None):
    y = x @ w.T
    return y if b is None else y + b


def ref_relu(x):
    return np.where(np.real(x) > 0, x, 0)


def ref_sigmoid(x):
    return 1 / (1 + np.exp(-x))


def ref_conv2d(x, w, b, stride: int, padding: int):
    """Cross-correlation (N, C, H, W) * (O, C, KH, KW) by a sum over kernel offsets."""
    n, _, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    oh = (h + 2 * padding - kh) // stride + 1
    ow = (wd + 2 * padding - kw) // stride + 1
    out = np.zeros((n, o, oh, ow), dtype=np.result_type(x, w, b))
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i: i + stride * (oh - 1) + 1: stride,
                       j: j + stride * (ow - 1) + 1: stride]
            out = out + np.einsum("nchw,oc->nohw", patch, w[:, :, i, j])
    return out + b[None, :, None, None]


def ref_cross_entropy(logits, targets):
    """Mean over rows of -log_softmax(logits)[row, target]."""
    z = logits - np.max(np.real(logits), axis=1, keepdims=True)
    logp = z - np.log(np.sum(np.exp(z), axis=1, keepdims=True))
    return -np.mean(logp[np.arange(len(targets)), targets])


def ref_lstm(x, params: dict, prefix: str, num_layers: int, hidden: int):
    """x (T, B, I) -> output (T, B, H); zero initial state; gates i, f, g, o."""
    steps, batch, _ = x.shape
    for layer in range(num_layers):
        w_ih, w_hh, b_ih, b_hh = (params[f"{prefix}{name}_l{layer}"]
                                  for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"))
        h = np.zeros((batch, hidden), dtype=x.dtype)
        c = np.zeros((batch, hidden), dtype=x.dtype)
        outputs = []
        for t in range(steps):
            gates = x[t] @ w_ih.T + b_ih + h @ w_hh.T + b_hh
            i = ref_sigmoid(gates[:, :hidden])
            f = ref_sigmoid(gates[:, hidden: 2 * hidden])
            g = np.tanh(gates[:, 2 * hidden: 3 * hidden])
            o = ref_sigmoid(gates[:, 3 * hidden:])
            c = f * c + i * g
            h = o * np.tanh(c)
            outputs.append(h)
        x = np.stack(outputs)
    return x


def complex_step_gradients(loss: Callable[[dict], complex], values: dict) -> dict:
    """d loss / d values[name] for every entry, one complex evaluation per element."""
    base = {name: np.asarray(v, dtype=np.complex128) for name, v in values.items()}
    grads = {}
    for name, v in base.items():
        grad = np.zeros(v.shape)
        for idx in np.ndindex(*v.shape):
            perturbed = v.copy()
            perturbed[idx] += 1j * STEP
            grad[idx] = np.imag(loss({**base, name: perturbed})) / STEP
        grads[name] = grad
    return grads


def relative_errors(got: dict, expected: dict) -> dict:
    assert set(got) == set(expected)
    errors = {}
    for name, b in expected.items():
        a = got[name]
        assert a is not None, f"{name}: no gradient"
        assert a.shape == b.shape, f"{name}: {a.shape} vs {b.shape}"
        scale = np.max(np.abs(b))
        assert scale > 0, f"{name}: reference gradient is identically zero"
        errors[name] = float(np.max(np.abs(a - b)) / scale)
    return errors


def compare(model_loss: Callable[[], fpsim.Tensor], leaves: dict,
            ref_loss: Callable[[dict], complex]) -> dict:
    """Back-propagate fpsim's loss, complex-step the reference, and compare (returns the
    relative error per leaf)."""
    for t in leaves.values():
        t.grad = None
    loss = model_loss()
    loss.backward()
    got = {name: t.grad for name, t in leaves.items()}
    values = {name: t.data.copy() for name, t in leaves.items()}
    ref_value = ref_loss({k: v.astype(np.complex128) for k, v in values.items()})
    assert abs(np.imag(ref_value)) == 0
    np.testing.assert_allclose(loss.item(), np.real(ref_value), rtol=1e-13)
    errors = relative_errors(got, complex_step_gradients(ref_loss, values))
    worst = max(errors, key=errors.get)
    assert errors[worst] <= TOLERANCE, f"{worst}: relative error {errors[worst]:.3e}; {errors}"
    return errors


# --- (a) MLP ---------------------------------------------------------------------------------


def mlp_case():
    nn.manual_seed(101)
    model = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 3))
    rng = np.random.default_rng(1)
    x = fpsim.tensor(rng.standard_normal((5, 4)), requires_grad=True)
    targets = np.array([0, 2, 1, 2, 0])
    leaves = {"x": x, **dict(model.named_parameters())}

    def model_loss():
        return F.cross_entropy(model(x), targets)

    def ref_loss(p):
        h = np.tanh(ref_linear(p["x"], p["layers.0.weight"], p["layers.0.bias"]))
        return ref_cross_entropy(ref_linear(h, p["layers.2.weight"], p["layers.2.bias"]),
                                 targets)

    return model_loss, leaves, ref_loss


# --- (b) CNN ---------------------------------------------------------------------------------


def cnn_case():
    nn.manual_seed(202)
    model = nn.Sequential(
        nn.Conv2d(1, 2, 3, stride=1, padding=1), nn.ReLU(),
        nn.Conv2d(2, 2, 3, stride=2), nn.Flatten(), nn.Linear(2 * 3 * 3, 3),
    )
    rng = np.random.default_rng(2)
    x = fpsim.tensor(rng.standard_normal((3, 1, 8, 8)), requires_grad=True)
    targets = np.array([1, 0, 2])
    leaves = {"x": x, **dict(model.named_parameters())}

    def model_loss():
        return F.cross_entropy(model(x), targets)

    def ref_loss(p):
        h = ref_relu(ref_conv2d(p["x"], p["layers.0.weight"], p["layers.0.bias"], 1, 1))
        h = ref_conv2d(h, p["layers.2.weight"], p["layers.2.bias"], 2, 0)
        h = h.reshape(h.shape[0], -1)
        return ref_cross_entropy(ref_linear(h, p["layers.4.weight"], p["layers.4.bias"]),
                                 targets)

    return model_loss, leaves, ref_loss


# --- (c) LSTM language model -----------------------------------------------------------------


def lstm_lm_case(num_layers: int):
    vocab, embed, hidden, steps, batch = 5, 3, 3, 4, 2
    nn.manual_seed(303 + num_layers)
    embedding = nn.Embedding(vocab, embed)
    lstm = nn.LSTM(embed, hidden, num_layers=num_layers)
    head = nn.Linear(hidden, vocab)
    rng = np.random.default_rng(3)
    tokens = rng.integers(0, vocab, size=(steps + 1, batch))
    tokens[1, 1] = tokens[0, 0]  # at least one repeated id
    ids, targets = tokens[:-1], tokens[1:].reshape(-1)
    leaves = {}
    for prefix, module in (("embedding.", embedding), ("lstm.", lstm), ("head.", head)):
        leaves.update({prefix + name: p for name, p in module.named_parameters()})

    def model_loss():
        out, _ = lstm(embedding(ids))
        logits = head(out.reshape(steps * batch, hidden))
        return F.cross_entropy(logits, targets)

    def ref_loss(p):
        x = p["embedding.weight"][ids]
        out = ref_lstm(x, p, "lstm.", num_layers, hidden)
        logits = ref_linear(out.reshape(steps * batch, hidden), p["head.weight"], p["head.bias"])
        return ref_cross_entropy(logits, targets)

    return model_loss, leaves, ref_loss


CASES = {
    "mlp": mlp_case,
    "cnn": cnn_case,
    "lstm_lm_1_layer": lambda: lstm_lm_case(1),
    "lstm_lm_2_layers": lambda: lstm_lm_case(2),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_model_gradients_match_complex_step_reference(name):
    model_loss, leaves, ref_loss = CASES[name]()
    errors = compare(model_loss, leaves, ref_loss)
    assert len(errors) == len(leaves)


def test_parameter_counts_stay_small():
    sizes = {}
    for name, case in CASES.items():
        _, leaves, _ = case()
        sizes[name] = sum(t.size for t in leaves.values())
    assert max(sizes.values()) <= 400, sizes
    assert sizes["lstm_lm_2_layers"] > sizes["lstm_lm_1_layer"]


# --- the reference checks itself -------------------------------------------------------------


def test_complex_step_matches_closed_forms():
    x = np.array([0.3, -1.2, 2.0])
    grads = complex_step_gradients(lambda p: np.sum(np.tanh(p["x"]) * ref_sigmoid(p["x"])),
                                   {"x": x})
    s = 1 / (1 + np.exp(-x))
    expected = (1 - np.tanh(x) ** 2) * s + np.tanh(x) * s * (1 - s)
    np.testing.assert_allclose(grads["x"], expected, rtol=1e-15, atol=1e-16)


def test_reference_cross_entropy_gradient_is_softmax_minus_onehot():
    logits = np.array([[0.5, -1.0, 2.0], [3.0, 0.1, -0.4]])
    targets = np.array([2, 1])
    grads = complex_step_gradients(lambda p: ref_cross_entropy(p["z"], targets), {"z": logits})
    prob = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    prob[np.arange(2), targets] -= 1
    np.testing.assert_allclose(grads["z"], prob / 2, rtol=1e-14, atol=1e-16)


def test_reference_conv2d_matches_direct_loops():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 2, 7, 6))
    w = rng.standard_normal((3, 2, 3, 2))
    b = rng.standard_normal(3)
    stride, padding = 2, 1
    got = ref_conv2d(x, w, b, stride, padding)
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    expected = np.zeros(got.shape)
    for n, o, r, c in np.ndindex(*got.shape):
        window = xp[n, :, r * stride: r * stride + 3, c * stride: c * stride + 2]
        expected[n, o, r, c] = np.sum(window * w[o]) + b[o]
    np.testing.assert_allclose(got, expected, rtol=1e-14, atol=1e-14)
    assert got.shape == (2, 3, 4, 4)
