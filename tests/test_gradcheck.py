"""Gradients of every differentiable operation and layer against central differences (fp64).

Each check builds a scalar ``(op(...) * R).sum()`` with a fixed random weight array ``R``
(so that every output element matters), back-propagates, and compares the gradient of
every input (and every layer parameter) with central finite differences taken by
perturbing the leaves' data in place. Everything runs under the ``fp64`` policy, where
the engine computes in plain binary64 with no rounding.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import fpsim
import fpsim.nn.functional as F
from fpsim import nn

RTOL = 1e-6
ATOL = 1e-8


pytestmark = pytest.mark.usefixtures("fp64_policy")


# --- helpers -----------------------------------------------------------------------------


def leaf(array) -> fpsim.Tensor:
    """A float64 leaf that requires grad (a private copy, safe to perturb in place)."""
    return fpsim.tensor(np.array(array, dtype=np.float64), requires_grad=True)


def rand(shape, seed: int, low: float = -1.0, high: float = 1.0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(low, high, shape)


def away_from_zero(shape, seed: int, low: float = 0.2, high: float = 1.5) -> np.ndarray:
    """Values with |v| in [low, high] and random signs (away from kinks and poles)."""
    rng = np.random.default_rng(seed)
    return rng.uniform(low, high, shape) * rng.choice([-1.0, 1.0], shape)


def check_gradients(build: Callable[[], fpsim.Tensor], leaves, seed: int = 0) -> None:
    """Compare the gradient of ``sum(build() * R)`` w.r.t. each leaf with central differences.

    ``build`` must read the leaves' current ``.data`` (it is called again for every
    perturbation); ``leaves`` are Tensors or Parameters with ``requires_grad``.
    """
    leaves = list(leaves)
    assert leaves, "nothing to check"
    out = build()
    weights = fpsim.tensor(np.random.default_rng(1000 + seed).standard_normal(out.shape))

    def objective() -> fpsim.Tensor:
        return (build() * weights).sum()

    for t in leaves:
        t.grad = None
    objective().backward()
    analytic = []
    for i, t in enumerate(leaves):
        assert t.grad is not None, f"leaf {i} {t.shape} received no gradient"
        assert t.grad.shape == t.shape, f"leaf {i}: grad {t.grad.shape} vs data {t.shape}"
        analytic.append(np.array(t.grad, dtype=np.float64))

    with fpsim.no_grad():
        for i, (t, grad) in enumerate(zip(leaves, analytic, strict=True)):
            numeric = np.zeros(t.shape)
            for idx in np.ndindex(*t.shape):
                x0 = float(t.data[idx])
                h = 1e-6 * max(1.0, abs(x0))
                t.data[idx] = x0 + h
                up = objective().item()
                t.data[idx] = x0 - h
                down = objective().item()
                t.data[idx] = x0
                numeric[idx] = (up - down) / (2 * h)
            np.testing.assert_allclose(grad, numeric, rtol=RTOL, atol=ATOL,
                                       err_msg=f"gradient of leaf {i} (shape {t.shape})")


# --- operations ----------------------------------------------------------------------------

OPS: dict[str, Callable[[], tuple[Callable[[], fpsim.Tensor], list]]] = {}


def op_case(name: str):
    def register(fn):
        assert name not in OPS, name
        OPS[name] = fn
        return fn

    return register


def _binary(op, shape_a, shape_b, b_values=None):
    a = leaf(rand(shape_a, 1))
    b = leaf(rand(shape_b, 2) if b_values is None else b_values(shape_b, 2))
    return (lambda: op(a, b)), [a, b]


for _name, _op, _b in [("add", F.add, None), ("sub", F.sub, None), ("mul", F.mul, None),
                       ("div", F.div, away_from_zero)]:
    for _tag, _sa, _sb in [("same", (3, 4), (3, 4)), ("row", (3, 4), (4,)),
                           ("col", (3, 4), (3, 1)), ("lead", (4,), (3, 4)),
                           ("outer", (3, 1), (1, 4))]:
        if _name == "div" and _tag == "lead":
            continue  # covered with the denominator broadcast instead, below
        op_case(f"{_name}_{_tag}")(
            lambda op=_op, sa=_sa, sb=_sb, bv=_b: _binary(op, sa, sb, bv))


@op_case("div_numerator_broadcast")
def _():
    a = leaf(rand((4,), 1))
    b = leaf(away_from_zero((3, 4), 2))
    return (lambda: F.div(a, b)), [a, b]


@op_case("mul_same_tensor")
def _():
    a = leaf(rand((3, 4), 1))
    return (lambda: F.mul(a, a)), [a]


@op_case("operators_with_constants")
def _():
    a = leaf(away_from_zero((3, 4), 1))
    b = leaf(away_from_zero((4,), 2))
    return (lambda: (2.0 - a) * b / 3.0 + 1.5 / a - (-b) + a ** 2 + 0.5 * b - a / b), [a, b]


@op_case("neg")
def _():
    a = leaf(rand((3, 4), 1))
    return (lambda: F.neg(a)), [a]


for _k in (3.0, 2.0, 0.5, -1.5):
    @op_case(f"pow_{_k}")
    def _(k=_k):
        values = rand((3, 4), 1, 0.3, 2.0) if k != int(k) else away_from_zero((3, 4), 1)
        a = leaf(values)
        return (lambda: F.pow(a, k)), [a]


@op_case("relu")
def _():
    a = leaf(away_from_zero((3, 4), 1, 0.1, 2.0))
    return (lambda: F.relu(a)), [a]


@op_case("tanh")
def _():
    a = leaf(rand((3, 4), 1, -2.5, 2.5))
    return (lambda: F.tanh(a)), [a]


@op_case("sigmoid")
def _():
    a = leaf(rand((3, 4), 1, -4.0, 4.0))  # both branches of the stable formula
    return (lambda: F.sigmoid(a)), [a]


@op_case("exp")
def _():
    a = leaf(rand((3, 4), 1, -2.0, 2.0))
    return (lambda: F.exp(a)), [a]


@op_case("log")
def _():
    a = leaf(rand((3, 4), 1, 0.2, 3.0))
    return (lambda: F.log(a)), [a]


@op_case("dropout_rng")
def _():
    a = leaf(rand((4, 5), 1))
    return (lambda: F.dropout(a, 0.4, True, rng=np.random.default_rng(7))), [a]


@op_case("dropout_manual_seed")
def _():
    a = leaf(rand((4, 5), 1))

    def build():
        nn.manual_seed(11)
        return F.dropout(a, 0.3)

    return build, [a]


@op_case("dropout_eval")
def _():
    a = leaf(rand((4, 5), 1))
    return (lambda: F.dropout(a, 0.5, training=False)), [a]


for _tag, _sa, _sb in [("2d", (3, 4), (4, 5)), ("batched_shared_b", (2, 3, 4), (4, 5)),
                       ("shared_a", (3, 4), (2, 4, 5)), ("batched", (2, 3, 4), (2, 4, 5)),
                       ("batch_broadcast", (2, 1, 3, 4), (3, 4, 2)),
                       ("size1_batch", (2, 3, 4), (1, 4, 5))]:
    op_case(f"matmul_{_tag}")(lambda sa=_sa, sb=_sb: _binary(F.matmul, sa, sb))


@op_case("matmul_operator")
def _():
    a, b = leaf(rand((2, 3, 4), 1)), leaf(rand((4, 5), 2))
    return (lambda: a @ b), [a, b]


@op_case("linear_bias")
def _():
    x, w, b = leaf(rand((3, 4), 1)), leaf(rand((5, 4), 2)), leaf(rand((5,), 3))
    return (lambda: F.linear(x, w, b)), [x, w, b]


@op_case("linear_no_bias_batched")
def _():
    x, w = leaf(rand((2, 3, 4), 1)), leaf(rand((5, 4), 2))
    return (lambda: F.linear(x, w)), [x, w]


def _conv(x_shape, w_shape, stride, padding, bias=True):
    x, w = leaf(rand(x_shape, 1)), leaf(rand(w_shape, 2))
    if not bias:
        return (lambda: F.conv2d(x, w, None, stride, padding)), [x, w]
    b = leaf(rand((w_shape[0],), 3))
    return (lambda: F.conv2d(x, w, b, stride, padding)), [x, w, b]


for _tag, _args in [
    ("stride2_pad1_odd", ((2, 2, 7, 6), (3, 2, 3, 3), 2, 1)),
    ("stride1_pad0", ((1, 2, 5, 5), (2, 2, 3, 3), 1, 0)),
    ("stride3_pad2_rect_kernel", ((1, 1, 8, 7), (2, 1, 2, 3), 3, 2)),
    ("mixed_stride_padding", ((2, 1, 6, 7), (2, 1, 3, 2), (2, 1), (0, 1))),
    ("stride2_no_bias", ((1, 2, 6, 5), (2, 2, 3, 3), 2, 0, False)),
    ("kernel_1x1_stride2", ((1, 2, 5, 4), (3, 2, 1, 1), 2, 0)),
]:
    op_case(f"conv2d_{_tag}")(lambda args=_args: _conv(*args))


for _tag, _kw in [("all", {}), ("axis1", {"axis": 1}), ("axes02_keepdims",
                                                        {"axis": (0, 2), "keepdims": True}),
                  ("neg_axis", {"axis": -1})]:
    for _name, _op in [("sum", F.sum), ("mean", F.mean)]:
        @op_case(f"{_name}_{_tag}")
        def _(op=_op, kw=_kw):
            a = leaf(rand((2, 3, 4), 1))
            return (lambda: op(a, **kw)), [a]


for _name, _op in [("softmax", F.softmax), ("log_softmax", F.log_softmax)]:
    for _axis in (-1, 0, 1):
        @op_case(f"{_name}_axis{_axis}")
        def _(op=_op, axis=_axis):
            a = leaf(rand((3, 4, 2), 1, -2.0, 2.0))
            return (lambda: op(a, axis=axis)), [a]


for _reduction in ("mean", "sum"):
    @op_case(f"cross_entropy_{_reduction}")
    def _(reduction=_reduction):
        logits = leaf(rand((6, 4), 1, -2.0, 2.0))
        targets = np.array([0, 3, 3, 1, 0, 2])
        return (lambda: F.cross_entropy(logits, targets, reduction)), [logits]

    @op_case(f"mse_loss_{_reduction}")
    def _(reduction=_reduction):
        pred = leaf(rand((3, 4), 1))
        target = rand((3, 4), 2)
        return (lambda: F.mse_loss(pred, target, reduction)), [pred]


@op_case("reshape")
def _():
    a = leaf(rand((2, 3, 4), 1))
    return (lambda: F.reshape(a, (4, -1))), [a]


@op_case("reshape_method_varargs")
def _():
    a = leaf(rand((2, 6), 1))
    return (lambda: a.reshape(3, 2, 2)), [a]


@op_case("transpose_reverse")
def _():
    a = leaf(rand((2, 3, 4), 1))
    return (lambda: F.transpose(a)), [a]


@op_case("transpose_axes")
def _():
    a = leaf(rand((2, 3, 4), 1))
    return (lambda: F.transpose(a, (1, 2, 0))), [a]


for _tag, _index in [
    ("repeated_rows", np.array([0, 2, 0, 1, 2, 2])),
    ("repeated_columns", (slice(None), np.array([1, 1, 3, 0, 1]))),
    ("repeated_pairs", (np.array([0, 2, 0, 0]), np.array([1, 3, 1, 1]))),
    ("repeated_2d_index_array", np.array([[0, 1], [1, 1]])),
    ("slices", (slice(1, None), slice(None, None, 2))),
    ("negative_step", (slice(None, None, -1), slice(3, 0, -2))),
    ("integer_and_ellipsis", (Ellipsis, 2)),
    ("boolean_mask", np.array([True, False, True])),
]:
    @op_case(f"getitem_{_tag}")
    def _(index=_index):
        a = leaf(rand((3, 4), 1))
        return (lambda: F.getitem(a, index)), [a]


@op_case("getitem_operator_repeated")
def _():
    a = leaf(rand((3, 4), 1))
    idx = np.array([2, 2, 0])
    return (lambda: a[idx]), [a]


@op_case("cat_axis1")
def _():
    a, b, c = leaf(rand((2, 3), 1)), leaf(rand((2, 1), 2)), leaf(rand((2, 2), 3))
    return (lambda: F.cat([a, b, c], axis=1)), [a, b, c]


@op_case("cat_axis0_same_tensor_twice")
def _():
    a, b = leaf(rand((2, 3), 1)), leaf(rand((1, 3), 2))
    return (lambda: F.cat([a, b, a], axis=0)), [a, b]


@op_case("stack_axis1")
def _():
    a, b, c = leaf(rand((2, 3), 1)), leaf(rand((2, 3), 2)), leaf(rand((2, 3), 3))
    return (lambda: F.stack([a, b, c], axis=1)), [a, b, c]


@op_case("stack_axis0")
def _():
    a, b = leaf(rand((2, 3), 1)), leaf(rand((2, 3), 2))
    return (lambda: F.stack([a, b], axis=0)), [a, b]


@op_case("stack_last_axis")
def _():
    a, b = leaf(rand((2, 3), 1)), leaf(rand((2, 3), 2))
    return (lambda: F.stack([a, b], axis=-1)), [a, b]


@op_case("embedding_repeated_ids")
def _():
    w = leaf(rand((5, 3), 1))
    ids = np.array([[0, 2, 2], [4, 0, 2]])
    return (lambda: F.embedding(ids, w)), [w]


def _batch_norm_case(shape, training, affine=True):
    channels = shape[1]
    x = leaf(rand(shape, 1, -2.0, 2.0))
    leaves = [x]
    weight = bias = None
    if affine:
        weight, bias = leaf(rand((channels,), 2, 0.5, 1.5)), leaf(rand((channels,), 3))
        leaves += [weight, bias]
    running_mean = rand((channels,), 4)
    running_var = rand((channels,), 5, 0.5, 2.0)

    def build():
        return F.batch_norm(x, running_mean.copy(), running_var.copy(), weight, bias,
                            training=training)

    return build, leaves


for _tag, _shape in [("2d", (5, 3)), ("3d", (3, 2, 4)), ("4d", (2, 3, 3, 2))]:
    for _training in (True, False):
        op_case(f"batch_norm_{_tag}_{'train' if _training else 'eval'}")(
            lambda s=_shape, t=_training: _batch_norm_case(s, t))


@op_case("batch_norm_train_no_affine_no_running_stats")
def _():
    x = leaf(rand((4, 3), 1, -2.0, 2.0))
    return (lambda: F.batch_norm(x, None, None, None, None, True)), [x]


@op_case("layer_norm_last_axis")
def _():
    x, w, b = leaf(rand((3, 4), 1, -2.0, 2.0)), leaf(rand((4,), 2, 0.5, 1.5)), leaf(rand((4,), 3))
    return (lambda: F.layer_norm(x, 4, w, b)), [x, w, b]


@op_case("layer_norm_two_axes")
def _():
    x = leaf(rand((2, 3, 4), 1, -2.0, 2.0))
    w, b = leaf(rand((3, 4), 2, 0.5, 1.5)), leaf(rand((3, 4), 3))
    return (lambda: F.layer_norm(x, (3, 4), w, b)), [x, w, b]


@op_case("layer_norm_no_affine")
def _():
    x = leaf(rand((3, 5), 1, -2.0, 2.0))
    return (lambda: F.layer_norm(x, 5)), [x]


@op_case("composite_graph_shared_intermediate")
def _():
    a, b = leaf(rand((3, 4), 1)), leaf(rand((4, 2), 2))
    def build():
        h = F.tanh(a @ b)
        return F.cat([h * h, F.sigmoid(h) + h, F.exp(h).sum(axis=1, keepdims=True)], axis=1)
    return build, [a, b]


OPS_REQUIRED = {
    "add", "sub", "mul", "div", "neg", "pow", "relu", "tanh", "sigmoid", "exp", "log",
    "dropout", "matmul", "linear", "conv2d", "sum", "mean", "softmax", "log_softmax",
    "cross_entropy", "mse_loss", "reshape", "transpose", "getitem", "cat", "stack",
    "embedding", "batch_norm", "layer_norm",
}


def test_every_functional_operation_is_covered():
    covered = {name for name in OPS_REQUIRED
               if any(c == name or c.startswith(name + "_") for c in OPS)}
    assert covered == OPS_REQUIRED, sorted(OPS_REQUIRED - covered)
    assert OPS_REQUIRED <= set(F.__all__)


@pytest.mark.parametrize("name", sorted(OPS))
def test_operation_gradient(name):
    build, leaves = OPS[name]()
    check_gradients(build, leaves)


def test_dropout_masks_are_nontrivial_and_reproducible():
    a = leaf(rand((4, 5), 1))
    first = F.dropout(a, 0.4, True, rng=np.random.default_rng(7)).data
    again = F.dropout(a, 0.4, True, rng=np.random.default_rng(7)).data
    np.testing.assert_array_equal(first, again)
    zero = first == 0
    assert zero.any() and not zero.all()
    np.testing.assert_allclose(first[~zero], a.data[~zero] / 0.6, rtol=1e-15)


# --- layers --------------------------------------------------------------------------------

LAYERS: dict[str, Callable[[], tuple[Callable[[], fpsim.Tensor], list]]] = {}


def layer_case(name: str):
    def register(fn):
        assert name not in LAYERS, name
        LAYERS[name] = fn
        return fn

    return register


def _module_case(module: nn.Module, x_shape, seed: int = 1, low=-1.0, high=1.0):
    x = leaf(rand(x_shape, seed, low, high))
    return (lambda: module(x)), [x, *module.parameters()]


def _randomize(module: nn.Module, seed: int) -> None:
    """Replace parameters' values (e.g. the ones and zeros of normalization layers)."""
    rng = np.random.default_rng(seed)
    for p in module.parameters():
        p.data = rng.uniform(0.5, 1.5, p.shape)


@layer_case("Linear")
def _():
    nn.manual_seed(1)
    return _module_case(nn.Linear(4, 3), (2, 4))


@layer_case("Linear_no_bias_3d_input")
def _():
    nn.manual_seed(1)
    return _module_case(nn.Linear(4, 3, bias=False), (2, 2, 4))


@layer_case("Conv2d_stride2_pad1")
def _():
    nn.manual_seed(2)
    return _module_case(nn.Conv2d(2, 3, 3, stride=2, padding=1), (2, 2, 7, 6))


@layer_case("Conv2d_rect_kernel_no_bias")
def _():
    nn.manual_seed(2)
    return _module_case(nn.Conv2d(1, 2, (2, 3), stride=(1, 2), padding=(1, 0), bias=False),
                        (1, 1, 5, 6))


@layer_case("Embedding")
def _():
    nn.manual_seed(3)
    layer = nn.Embedding(5, 3)
    ids = np.array([[1, 1, 4], [0, 1, 4]])
    return (lambda: layer(ids)), layer.parameters()


def _lstm_case(num_layers: int, with_state: bool):
    nn.manual_seed(4)
    steps, batch, inputs, hidden = 3, 2, 3, 3
    lstm = nn.LSTM(inputs, hidden, num_layers=num_layers)
    x = leaf(rand((steps, batch, inputs), 1))
    leaves = [x, *lstm.parameters()]
    state = None
    if with_state:
        state = (leaf(rand((num_layers, batch, hidden), 2)),
                 leaf(rand((num_layers, batch, hidden), 3)))
        leaves += list(state)

    def build():
        out, (h_n, c_n) = lstm(x, state)
        return F.cat([out.reshape(-1), h_n.reshape(-1), c_n.reshape(-1)], axis=0)

    return build, leaves


@layer_case("LSTM_2_layers_initial_state")
def _():
    return _lstm_case(2, True)


@layer_case("LSTM_1_layer_zero_state")
def _():
    return _lstm_case(1, False)


def _batch_norm_layer(layer, x_shape, training: bool):
    _randomize(layer, 5)
    if not training:
        # Non-trivial running statistics from a few training steps, then frozen.
        with fpsim.no_grad():
            for k in range(3):
                layer(fpsim.tensor(rand(x_shape, 10 + k, -2.0, 3.0)))
        layer.eval()
    return _module_case(layer, x_shape, low=-2.0, high=2.0)


for _tag, _cls, _shape in [("BatchNorm1d", nn.BatchNorm1d, (5, 3)),
                           ("BatchNorm1d_3d", nn.BatchNorm1d, (3, 3, 2)),
                           ("BatchNorm2d", nn.BatchNorm2d, (2, 3, 3, 2))]:
    for _training in (True, False):
        layer_case(f"{_tag}_{'train' if _training else 'eval'}")(
            lambda c=_cls, s=_shape, t=_training: _batch_norm_layer(c(s[1]), s, t))


@layer_case("LayerNorm")
def _():
    layer = nn.LayerNorm((3, 4))
    _randomize(layer, 6)
    return _module_case(layer, (2, 3, 4), low=-2.0, high=2.0)


@layer_case("Dropout_train")
def _():
    layer = nn.Dropout(0.4)
    x = leaf(rand((4, 5), 1))

    def build():
        nn.manual_seed(21)
        return layer(x)

    return build, [x]


@layer_case("Dropout_eval")
def _():
    return _module_case(nn.Dropout(0.4).eval(), (4, 5))


@layer_case("ReLU")
def _():
    x = leaf(away_from_zero((3, 4), 1, 0.1, 2.0))
    layer = nn.ReLU()
    return (lambda: layer(x)), [x]


@layer_case("Tanh")
def _():
    return _module_case(nn.Tanh(), (3, 4), low=-2.0, high=2.0)


@layer_case("Sigmoid")
def _():
    return _module_case(nn.Sigmoid(), (3, 4), low=-4.0, high=4.0)


@layer_case("Flatten")
def _():
    return _module_case(nn.Flatten(), (2, 3, 2, 2))


@layer_case("Sequential")
def _():
    nn.manual_seed(7)
    model = nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 3), nn.Sigmoid())
    return _module_case(model, (3, 4))


LAYERS_REQUIRED = {"Linear", "Conv2d", "Embedding", "LSTM", "BatchNorm1d", "BatchNorm2d",
                   "LayerNorm", "Dropout", "ReLU", "Tanh", "Sigmoid", "Flatten", "Sequential"}


def test_every_layer_is_covered():
    covered = {name for name in LAYERS_REQUIRED
               if any(c == name or c.startswith(name + "_") for c in LAYERS)}
    assert covered == LAYERS_REQUIRED, sorted(LAYERS_REQUIRED - covered)


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_layer_gradient(name):
    build, leaves = LAYERS[name]()
    check_gradients(build, leaves)


def test_lstm_leaves_include_every_parameter():
    build, leaves = _lstm_case(2, True)
    names = {n for n, _ in nn.LSTM(3, 3, num_layers=2).named_parameters()}
    assert names == {f"{w}_l{k}" for w in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
                     for k in (0, 1)}
    assert len(leaves) == 1 + 8 + 2


@pytest.mark.parametrize("shape", [(1, 3), (1, 2, 1), (1, 2, 1, 1)])
def test_batch_norm_refuses_one_value_per_channel_in_training(shape):
    """As PyTorch: batch statistics of one value are undefined (it returned zeros)."""
    x = fpsim.tensor(np.arange(np.prod(shape), dtype=np.float64).reshape(shape))
    with pytest.raises(ValueError, match="more than 1 value per channel when training"):
        F.batch_norm(x, training=True)
    layer = nn.BatchNorm1d(shape[1]) if len(shape) < 4 else nn.BatchNorm2d(shape[1])
    with pytest.raises(ValueError, match="more than 1 value per channel when training"):
        layer(x)
    assert layer.eval()(x).shape == shape  # the running statistics serve one value
    assert F.batch_norm(fpsim.tensor(np.ones((1, 3, 2))), training=True).shape == (1, 3, 2)


def test_relu_passes_no_gradient_where_its_input_is_not_positive():
    # As torch's threshold_backward: 0 there, whatever the gradient (inf * 0 is not NaN).
    x = fpsim.tensor([-1.0, 0.0, 2.0, -3.0, 4.0], requires_grad=True)
    F.relu(x).backward(np.array([np.inf, np.nan, 5.0, -np.inf, np.inf]))
    assert x.grad.tolist() == [0.0, 0.0, 5.0, 0.0, np.inf]
    assert not np.signbit(x.grad).any()
