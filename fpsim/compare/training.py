"""The training suite of ``fpsim compare``: one model trained N steps on a GPU twice, from
one seed and one stream of batches, natively (CuPy's float16 arithmetic and cuBLAS, fp32
master weights, dynamic loss scaling: ``native_fp16``) and emulated with the GPU's own
models (``mixed,model=<the GPU's block-FMA preset>``), compared step by step.

Per step: the share of bit-identical parameters, their largest and median distance in
ulp (of the parameters' format), and the two losses. At the first step where the runs
part, that step's forward and backward are replayed from its (identical) starting
weights under both policies, and the two autograd graphs are walked node by node to the
operations whose output differs while their inputs do not. Each is named: a product
(``PRODUCT``: the block model or cuBLAS's split-K; the split-K slicings of
``fpsim.compare.gpu`` are tried on it), a reduction (``REDUCTION``: CuPy's order of
additions), a transcendental function (``TRANSCENDENTAL``) or other elementwise
arithmetic (``ELEMENTWISE``, the optimizer's update among it).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import fpsim
from fpsim import _device
from fpsim.autograd.tensor import Tensor
from fpsim.compare.cases import Record
from fpsim.compare.metrics import Comparison, compare_bits, share, ulp_text
from fpsim.formats import Format, as_format

NATIVE = "native_fp16"
"""The native policy: fp16 compute on CuPy's float16 and cuBLAS, fp32 master weights."""
DEFAULT_STEPS = 20
"""Training steps per model, by default."""

PRODUCT = "product: split-K or block model"
REDUCTION = "reduction order"
TRANSCENDENTAL = "transcendental functions"
ELEMENTWISE = "elementwise rounding"
KINDS = (PRODUCT, REDUCTION, TRANSCENDENTAL, ELEMENTWISE)
"""The sources of difference an operation is classified into."""

PRODUCT_OPS = frozenset({"matmul", "conv2d"})
# Their forward sums (CuPy's order in native). In backward, sum, mean and the losses
# broadcast their gradient (elementwise); softmax and the norms sum again.
REDUCTION_OPS = frozenset({"sum", "mean", "softmax", "log_softmax", "cross_entropy",
                           "mse_loss", "batch_norm", "layer_norm"})
BACKWARD_REDUCTION_OPS = frozenset({"softmax", "log_softmax", "cross_entropy",
                                    "batch_norm", "layer_norm"})
TRANSCENDENTAL_OPS = frozenset({"exp", "log", "tanh", "sigmoid"})
# Reductions that evaluate exp (and log) too: the walk does not tell the two apart.
EXPONENTIAL_REDUCTIONS = frozenset({"softmax", "log_softmax", "cross_entropy"})
BOTH = "it evaluates exp (and log) as well as sums: reduction order or transcendental " \
    "functions, not told apart"
PHASES = ("forward", "backward", "update")


def classify(op: str, phase: str = "forward", summed: bool = False) -> str:
    """The source of difference an operation stands for: one of ``KINDS``.

    Parameters
    ----------
    op : str
        The operation's name, as its autograd node has it (``Tensor.op``).
    phase : {"forward", "backward", "update"}, default "forward"
        Where the difference arose: the operation's output, the gradient its backward
        sent to an input, or the optimizer's update.
    summed : bool, default False
        In backward: the gradient was summed over broadcast axes (a bias's gradient).

    Returns
    -------
    str

    Raises
    ------
    ValueError
        For an unknown phase.

    Examples
    --------
    >>> classify("matmul"), classify("exp"), classify("add", "backward", summed=True)
    ('product: split-K or block model', 'transcendental functions', 'reduction order')
    >>> classify("mse_loss"), classify("mse_loss", "backward")
    ('reduction order', 'elementwise rounding')
    """
    if phase not in PHASES:
        raise ValueError(f"unknown phase {phase!r}; known phases: {', '.join(PHASES)}")
    if phase == "update":
        return ELEMENTWISE
    if op in PRODUCT_OPS:
        return PRODUCT
    if phase == "backward":
        return REDUCTION if summed or op in BACKWARD_REDUCTION_OPS else ELEMENTWISE
    if op in REDUCTION_OPS:
        return REDUCTION
    if op in TRANSCENDENTAL_OPS:
        return TRANSCENDENTAL
    return ELEMENTWISE


def host(x: Any) -> np.ndarray:
    """``x`` (a NumPy or CuPy array) on the host, as float64."""
    return np.asarray(_device.transfer(x, "cpu"), dtype=np.float64)


def compare_values(native: Any, emulated: Any, fmt: Format | str) -> Comparison | None:
    """The comparison of two arrays of values of ``fmt`` (on either device), or None
    when they are empty.

    Examples
    --------
    >>> import numpy as np
    >>> compare_values(np.float16([1.0, 2.0]), np.array([1.0, 2.0]), "fp16").identical
    1.0
    """
    fmt = as_format(fmt)
    a, b = host(native), host(emulated)
    if a.shape != b.shape:
        raise ValueError(f"shapes differ: {a.shape} and {b.shape}")
    if a.size == 0:
        return None
    return compare_bits(fpsim.to_bits(b, fmt), fpsim.to_bits(a, fmt), fmt)


def _wider(fmt: Format, data: Any) -> Format:
    """``fmt``, or the format of ``data``'s dtype where that is wider (native NumPy
    arithmetic labels a float32 product of fp16 inputs fp16 until a later cast)."""
    kinds = {np.dtype(np.float16): "fp16", np.dtype(np.float32): "fp32"}
    own = kinds.get(np.dtype(data.dtype))
    return as_format(own) if own and as_format(own).precision > fmt.precision else fmt


def _identical(c: Comparison | None) -> bool:
    return c is None or c.identical == 1.0


@dataclass(frozen=True)
class StepComparison:
    """One step of the two runs: the parameters after it, and the losses of it.

    Parameters
    ----------
    step : int
        The step, from 1.
    identical : float
        The share of bit-identical parameter elements (all parameters together).
    max_ulp, median_ulp : float
        The largest and the median distance, in ulp of the parameters' format.
    loss_native, loss_emulated : float
        The two runs' losses.
    scale_native, scale_emulated : float
        The loss scales the step ran with.
    """

    step: int
    identical: float
    max_ulp: float
    median_ulp: float
    loss_native: float
    loss_emulated: float
    scale_native: float
    scale_emulated: float

    @property
    def loss_difference(self) -> float:
        """The emulated loss minus the native one."""
        return self.loss_emulated - self.loss_native

    @property
    def weights_part(self) -> bool:
        """Whether some parameter differs after this step."""
        return self.identical != 1.0

    @property
    def losses_part(self) -> bool:
        """Whether the two losses differ (bit for bit; two NaNs are alike)."""
        a, b = np.float64(self.loss_native), np.float64(self.loss_emulated)
        return not (a.view(np.int64) == b.view(np.int64) or (np.isnan(a) and np.isnan(b)))

    def as_dict(self) -> dict[str, Any]:
        """The step as results.json holds it."""
        return dict(dataclasses.asdict(self), loss_difference=self.loss_difference)


def compare_step(step: int, native: Sequence[Any], emulated: Sequence[Any],
                 fmt: Format | str, losses: tuple[float, float],
                 scales: tuple[float, float] = (1.0, 1.0)) -> StepComparison:
    """Compare the two runs' parameters after one step.

    Parameters
    ----------
    step : int
        The step, from 1.
    native, emulated : sequence of arrays
        The parameters of each run, in the same order and shapes (NumPy or CuPy).
    fmt : Format or str
        The parameters' format.
    losses : (float, float)
        The native and the emulated loss.
    scales : (float, float), default (1, 1)
        The native and the emulated loss scale.

    Returns
    -------
    StepComparison

    Raises
    ------
    ValueError
        If the runs' parameters differ in number or shape, or there are none.

    Examples
    --------
    >>> import numpy as np
    >>> a = [np.float32([1.0, 2.0]), np.float32([3.0])]
    >>> b = [np.array([1.0, 2.0]), np.array([np.nextafter(np.float32(3), np.float32(4))])]
    >>> c = compare_step(1, a, b, "fp32", (0.5, 0.5))
    >>> round(c.identical, 3), c.max_ulp, c.weights_part, c.losses_part
    (0.667, 1.0, True, False)
    """
    if len(native) != len(emulated) or not native:
        raise ValueError(f"the runs have {len(native)} and {len(emulated)} parameters")
    a = [host(p) for p in native]
    b = [host(p) for p in emulated]
    for x, y in zip(a, b, strict=True):
        if x.shape != y.shape:
            raise ValueError(f"parameter shapes differ: {x.shape} and {y.shape}")
    c = compare_values(np.concatenate([x.ravel() for x in a]),
                       np.concatenate([y.ravel() for y in b]), fmt)
    if c is None:
        raise ValueError("the parameters are empty")
    return StepComparison(step, c.identical, c.max_ulp, c.median_ulp, float(losses[0]),
                          float(losses[1]), float(scales[0]), float(scales[1]))


def first_part(steps: Sequence[StepComparison], what: str = "weights") -> int | None:
    """The first step whose weights (``what="weights"``) or losses (``"losses"``) part,
    or None.

    Examples
    --------
    >>> s = [StepComparison(1, 1.0, 0, 0, .5, .5, 1, 1), StepComparison(2, .9, 3, 0, .4, .4, 1, 1)]
    >>> first_part(s), first_part(s, "losses")
    (2, None)
    """
    if what not in ("weights", "losses"):
        raise ValueError(f"what is 'weights' or 'losses', got {what!r}")
    for s in steps:
        if (s.weights_part if what == "weights" else s.losses_part):
            return s.step
    return None


@dataclass(frozen=True)
class Source:
    """An operation whose output differed between the runs while its inputs did not.

    Parameters
    ----------
    phase : {"forward", "backward", "update"}
        The operation's output, the gradient its backward gave an input, or the update.
    op : str
        The operation (the autograd node's ``op``; "optimizer" for the update).
    kind : str
        One of ``KINDS`` (``classify``).
    shape : tuple of int
        The shape of what differed.
    differ : int
        How many of its elements differ.
    max_ulp : float
        Their largest distance, in ulp of its format.
    note : str, default ""
        What else was found (for a product: whether a split-K slicing explains it).
    step : int, default 0
        The training step replayed to find it (0: none).
    """

    phase: str
    op: str
    kind: str
    shape: tuple[int, ...]
    differ: int
    max_ulp: float
    note: str = ""
    step: int = 0

    def __str__(self) -> str:
        text = (f"{self.kind}: {self.op} ({self.phase}, {self.differ} of "
                f"{int(np.prod(self.shape))} differ, max {self.max_ulp:g} ulp)")
        return f"{text}; {self.note}" if self.note else text

    def as_dict(self) -> dict[str, Any]:
        """The source as results.json holds it."""
        return dict(dataclasses.asdict(self), shape=list(self.shape))


def _source(phase: str, op: str, kind: str, c: Comparison, shape: tuple[int, ...],
            note: str = "") -> Source:
    return Source(phase, op, kind, tuple(shape), c.size - round(c.identical * c.size),
                  c.max_ulp, note)


def explain_product(a: Any, b: Any, native: Any, preset: Any,
                    fmt: Format | str = "fp16") -> str:
    """Whether the GPU's block model, in one pass or with a split-K slicing, gives the
    native product ``native`` of ``a @ b`` (2-D, fp16 values): a sentence.

    The slicings are those ``fpsim.compare.gpu`` tries (``split_lengths``), each with
    the block model of fp16 inputs and fp32 compute, its fp32 result rounded to ``fmt``,
    the format of ``native``'s values (fp16: cuBLAS's fp16 GEMM; fp32 for NumPy's
    float32 product).

    Examples
    --------
    >>> import numpy as np
    >>> import fpsim
    >>> a, b = np.ones((2, 4)), np.ones((4, 2))
    >>> explain_product(a, b, np.float16(a @ b), fpsim.hw.H100)
    'H100 block FMA in one pass: 100% identical (K = 4: too short to split)'
    """
    from fpsim.compare.gpu import gemm_model, split_lengths

    out = as_format(fmt)
    a, b, hw = host(a), host(b), host(native)
    if a.ndim != 2 or b.ndim != 2:
        return "not analysed: a batched product"
    model = gemm_model("fp16", "fp32", preset)
    assert model is not None  # fp32 compute always has a model

    def identical(m: Any) -> float:
        values = fpsim.round(fpsim.matmul(a, b, model=m), out)
        return compare_bits(fpsim.to_bits(values, out), fpsim.to_bits(hw, out), out).identical

    one = identical(model)
    text = f"{model.name} block FMA in one pass: {share(one)} identical"
    lengths = split_lengths(a.shape[1])
    if not lengths:
        return f"{text} (K = {a.shape[1]}: too short to split)"
    best = max((identical(model.with_split_k(n)), -n) for n in lengths)
    text += (f"; the best split-K slicing (slices of {-best[1]}, of {len(lengths)} tried): "
             f"{share(best[0])}")
    if best[0] == 1.0 and one < 1.0:
        return text + ": split-K explains it"
    if best[0] < 1.0 and one < 1.0:
        return text + ": no slicing tried explains it"
    return text


def _nodes(loss: Tensor) -> tuple[list[Tensor], dict[int, int], list[Tensor]]:
    """The graph of ``loss`` without its re-typing casts (a cast to the format its input
    already has: NumPy's native arithmetic re-types a float32 product labelled fp16),
    each tensor's place in it (a re-typing cast: its input's place), and the tensor
    whose values each place holds (the last re-typing cast of it, else itself)."""
    nodes: list[Tensor] = []
    place: dict[int, int] = {}
    values: list[Tensor] = []
    for t in loss.graph():
        if t.op == "cast" and len(t._parents) == 1 and t._parents[0].format == t.format:
            place[id(t)] = place[id(t._parents[0])]
            values[place[id(t)]] = t
            continue
        place[id(t)] = len(nodes)
        nodes.append(t)
        values.append(t)
    return nodes, place, values


def _contributions(node: Tensor, parent: int, place: dict[int, int]
                   ) -> list[tuple[Any, bool]]:
    """What ``node``'s backward sends to the input at place ``parent``: (array, whether it
    is a broadcast gradient, summed before it reaches the input), one per time the input
    appears among the node's inputs."""
    assert node._backward is not None and node.grad is not None
    grads = node._backward(node.grad)
    out = []
    for k, p in enumerate(node._parents):
        if place[id(p)] != parent or grads[k] is None:
            continue
        g = grads[k][0] if isinstance(grads[k], tuple) else grads[k]
        out.append((g, tuple(g.shape) != tuple(p.shape)))
    return out


def walk(native: Tensor, emulated: Tensor, preset: Any = None) -> list[Source]:
    """The operations where two runs of one model part, from their losses after backward.

    Walks both autograd graphs in step: forward, each operation whose output differs
    while its inputs do not; backward (from the loss), each tensor whose gradient
    differs while the operations it feeds have identical inputs and gradients: the one
    of them whose backward sent a different gradient (recomputed), or the accumulation
    of the gradients. Products are checked against ``preset``'s
    block model and its split-K slicings (``explain_product``) when it is given. A cast
    to the format its input already has (native arithmetic re-typing a product) is
    passed over.

    Parameters
    ----------
    native, emulated : Tensor
        The two runs' losses, after ``backward``, of graphs of one structure.
    preset : fpsim.hw.BlockFMA, optional
        The GPU's block-FMA preset, for the products.

    Returns
    -------
    list of Source
        Forward first, in the graph's order, then backward from the loss; empty when
        every output and gradient is identical.

    Raises
    ------
    ValueError
        If the two graphs differ in their operations or shapes.

    Examples
    --------
    >>> import fpsim
    >>> from fpsim.nn import functional as F
    >>> def run(x):
    ...     w = fpsim.tensor([[0.5], [0.25]], requires_grad=True)
    ...     loss = F.tanh(F.matmul(fpsim.tensor(x), w)).sum()
    ...     loss.backward()
    ...     return loss
    >>> walk(run([[1.0, 2.0]]), run([[1.0, 2.0]]))
    []
    >>> [s.kind for s in walk(run([[1.0, 2.0]]), run([[1.0, 2.5]]))]
    Traceback (most recent call last):
    ...
    ValueError: the inputs differ: leaf of shape (1, 2)
    """
    (gn, place_n, vn), (ge, place_e, ve) = _nodes(native), _nodes(emulated)
    shape_n = [(t.op, tuple(t.shape)) for t in gn]
    shape_e = [(t.op, tuple(t.shape)) for t in ge]
    if shape_n != shape_e:
        raise ValueError(f"the two graphs differ: {len(gn)} nodes "
                         f"({' '.join(op for op, _ in shape_n)}) against {len(ge)} "
                         f"({' '.join(op for op, _ in shape_e)})")
    parents = [[place_n[id(p)] for p in t._parents] for t in gn]
    consumers: list[list[int]] = [[] for _ in gn]
    for i, ps in enumerate(parents):
        for j in dict.fromkeys(ps):
            consumers[j].append(i)
    fmts = [_wider(t.format, n.data) for n, t in zip(vn, ve, strict=True)]
    fwd = [compare_values(a.data, b.data, f) for a, b, f in zip(vn, ve, fmts, strict=True)]
    for t, cmp in zip(gn, fwd, strict=True):
        if t.op == "leaf" and not _identical(cmp):
            raise ValueError(f"the inputs differ: leaf of shape {tuple(t.shape)}")
    sources = []
    for i, t in enumerate(gn):
        cmp = fwd[i]
        if cmp is None or _identical(cmp) or not all(_identical(fwd[j]) for j in parents[i]):
            continue
        note = BOTH if t.op in EXPONENTIAL_REDUCTIONS else ""
        if t.op == "matmul" and preset is not None:
            a, b = (vn[j].data for j in parents[i])
            note = explain_product(a, b, vn[i].data, preset, fmts[i])
        sources.append(_source("forward", t.op, classify(t.op), cmp, t.shape, note))

    grads: list[Comparison | None | bool] = []
    for tn, te, f in zip(gn, ge, fmts, strict=True):
        grads.append(True if tn.grad is None and te.grad is None else
                     False if tn.grad is None or te.grad is None else
                     compare_values(tn.grad, te.grad, f))

    def same_grad(k: int) -> bool:
        g = grads[k]
        return g is True or (not isinstance(g, bool) and _identical(g))

    for i in reversed(range(len(gn))):
        if same_grad(i) or not consumers[i]:
            continue
        if not all(same_grad(c) and all(_identical(fwd[j]) for j in parents[c])
                   for c in consumers[i]):
            continue  # a consequence of a difference upstream of it
        g = grads[i]
        if isinstance(g, bool) or g is None:  # a gradient on one side only
            sources.append(Source("backward", gn[i].op, ELEMENTWISE, tuple(gn[i].shape),
                                  int(np.prod(gn[i].shape)), float("inf"),
                                  "a gradient on one side only"))
            continue
        found = False
        for c in consumers[i]:
            mine = _contributions(gn[c], i, place_n)
            theirs = _contributions(ge[c], i, place_e)
            for (a, summed), (b, _) in zip(mine, theirs, strict=True):
                raw = compare_values(a, b, "fp64")
                if _identical(raw) and not summed:
                    continue
                if _identical(raw):  # the terms agree; their sum over the batch does not
                    kind, op = REDUCTION, f"{gn[c].op} (its gradient summed over broadcast axes)"
                else:
                    kind, op = classify(gn[c].op, "backward", summed), gn[c].op
                note = BOTH if gn[c].op in EXPONENTIAL_REDUCTIONS and not summed else ""
                if gn[c].op == "matmul" and preset is not None and not summed:
                    x, y = (vn[j].data for j in parents[c])
                    left, right = (gn[c].grad, y.swapaxes(-1, -2)) \
                        if parents[c].index(i) == 0 else (x.swapaxes(-1, -2), gn[c].grad)
                    note = explain_product(left, right, a, preset, _wider(fmts[i], a))
                sources.append(_source("backward", op, kind, g, gn[i].shape, note))
                found = True
        if not found:
            sources.append(_source("backward", f"{gn[i].op} (its gradients added and "
                                   "rounded)", ELEMENTWISE, g, gn[i].shape))
    return sources


ON_NATIVE = "on native's own inputs"


def census(native: Tensor, policy: Any, preset: Any = None) -> list[Source]:
    """Each product, gradient summed over broadcast axes and transcendental function of a
    native step's graph run again by the emulation on native's own inputs (on the host):
    those whose result differs from native's.

    Where ``walk`` names the operations where two runs first part, this names every
    operation of those kinds that would part on its own, also behind a difference
    upstream (a bias's gradient sum behind a differing softmax). Products are 2-D
    ``matmul`` forward and backward (``explain_product`` notes the split-K slicings);
    the sums, those ``reduce_broadcast`` does in backward; the functions, tanh, exp and
    log.

    Parameters
    ----------
    native : Tensor
        The native run's loss, after ``backward``.
    policy : Policy or str
        The emulated policy.
    preset : fpsim.hw.BlockFMA, optional
        The GPU's block-FMA preset, for the products' notes.

    Returns
    -------
    list of Source
        In the graph's order, forward before backward; each note says it was found
        on native's own inputs.

    Examples
    --------
    >>> import numpy as np
    >>> import fpsim
    >>> from fpsim.nn import functional as F
    >>> w = fpsim.tensor(np.linspace(-1, 1, 6).reshape(3, 2), requires_grad=True)
    >>> with fpsim.precision.parse("native_fp16"):
    ...     loss = F.tanh(F.matmul(fpsim.tensor(np.ones((2, 3)) / 3), w)).sum()
    ...     loss.backward()
    >>> census(loss, "mixed")
    []
    """
    from fpsim.autograd.tensor import reduce_broadcast
    from fpsim.precision import numerics
    from fpsim.precision.policy import as_policy

    p = as_policy(policy)
    nodes, place, values = _nodes(native)
    found: list[Source] = []

    def check(phase: str, op: str, kind: str, mine: Any, theirs: Any, fmt: Format,
              note: str = "") -> None:
        c = compare_values(mine, theirs, _wider(fmt, mine))
        if c is not None and not _identical(c):
            text = f"{ON_NATIVE}; {note}" if note else ON_NATIVE
            found.append(_source(phase, op, kind, c, tuple(np.shape(mine)), text))

    def product(a: np.ndarray, b: np.ndarray, out: Any, phase: str) -> None:
        if a.ndim != 2 or b.ndim != 2:
            return
        # As the engine uses it: in the compute format (NumPy's native float32 product
        # is rounded there later; cuBLAS's fp16 GEMM is there already).
        out = np.asarray(fpsim.round(host(out), p.compute), dtype=np.float64)
        emulated = numerics.matmul(a, b, p)
        c = compare_values(out, emulated, p.compute)
        if c is not None and not _identical(c):
            note = explain_product(a, b, out, preset, p.compute) if preset is not None else ""
            check(phase, "matmul", PRODUCT, out, emulated, p.compute, note)

    backward: list[tuple[Tensor, list[Any]]] = []
    for i, t in enumerate(nodes):
        inputs = [host(values[place[id(q)]].data) for q in t._parents]
        if t.op == "matmul":
            product(inputs[0], inputs[1], values[i].data, "forward")
        elif t.op in numerics.ELEMENTARY:  # as the emulation evaluates them (sigmoid's
            # formula is the engine's own and is not re-evaluated here)
            with np.errstate(all="ignore"):
                emulated = numerics.round(numerics.elementary(t.op, inputs[0], p), t.format, p)
            check("forward", t.op, TRANSCENDENTAL, values[i].data, emulated, t.format)
        if t._backward is not None and t.grad is not None:
            backward.append((t, inputs))
    for t, inputs in reversed(backward):
        assert t._backward is not None and t.grad is not None  # as collected
        grads = t._backward(t.grad)
        for k, q in enumerate(t._parents):
            g = grads[k][0] if isinstance(grads[k], tuple) else grads[k]
            if g is None or not q.requires_grad:
                continue
            if tuple(g.shape) != tuple(q.shape):
                mine = numerics.round(reduce_broadcast(g, tuple(q.shape), t._policy)[0],
                                      q.format, t._policy)
                theirs = numerics.round(reduce_broadcast(host(g), tuple(q.shape), p)[0],
                                        q.format, p)
                check("backward", f"{t.op} (its gradient summed over broadcast axes)",
                      REDUCTION, mine, theirs, q.format)
            elif t.op == "matmul":
                g_in = host(t.grad)
                a, b = inputs
                if k == 0:
                    product(g_in, b.swapaxes(-1, -2), g, "backward")
                else:
                    product(a.swapaxes(-1, -2), g_in, g, "backward")
    return found


# -- the models ------------------------------------------------------------------------

Batch = tuple[Any, Any]
LossFn = Callable[[Any, Batch], Tensor]


@dataclass(frozen=True)
class TrainingModel:
    """A model of the suite: ``build(seed)`` gives the model, its optimizer and the
    host batches of ``steps`` steps; ``loss(model, batch)`` its loss.

    Parameters
    ----------
    name : str
        The model's name in the tables.
    description : str
        What it is, in words.
    modelled : bool
        Whether every operation of its training step is one fpsim models as the GPU
        computes it (the aim: bit-identical runs).
    build : callable
        ``build(seed, steps)``: (model, optimizer, list of host batches).
    loss : callable
        ``loss(model, batch)``: the loss Tensor.
    """

    name: str
    description: str
    modelled: bool
    build: Callable[[int, int], tuple[Any, Any, list[Batch]]]
    loss: LossFn


def _digits_task(seed: int, steps: int, hidden: int | None, batch: int | None
                 ) -> tuple[Any, Any, list[Batch]]:
    from fpsim.reproduce.tasks import TASKS

    task = TASKS["digits_mlp"]
    sizes = {k: v for k, v in (("hidden", hidden), ("batch_size", batch)) if v}
    task = dataclasses.replace(task, hyperparameters={**task.hyperparameters, **sizes})
    model, opt = task.build(seed)
    stream = task.batches(seed)
    return model, opt, [next(stream) for _ in range(steps)]


def _cross_entropy(model: Any, batch: Batch) -> Tensor:
    from fpsim.nn import functional as F

    return F.cross_entropy(model(batch[0]), batch[1])


def _mse(model: Any, batch: Batch) -> Tensor:
    from fpsim.nn import functional as F

    return F.mse_loss(model(batch[0]), batch[1])


OUTPUTS = 16  # the modelled models' outputs: batch x 16 terms, a power of two


def _relu_mlp(seed: int, hidden: int, inputs: int, tanh: bool = False) -> tuple[Any, Any]:
    from fpsim import nn, optim

    nn.manual_seed(seed)
    model = nn.Sequential(nn.Linear(inputs, hidden, bias=False),
                          nn.Tanh() if tanh else nn.ReLU(),
                          nn.Linear(hidden, OUTPUTS, bias=False))
    # lr and momentum binary32 values: native multiplies the fp32 momentum buffer by
    # float32(lr) and float32(momentum), emulation by the binary64 numbers.
    return model, optim.SGD(model.parameters(), lr=2.0**-5, momentum=0.5)


def _fp16_values(x: np.ndarray) -> np.ndarray:
    """Inputs as fp16 values: the cast to fp16 is exact on both sides."""
    return np.asarray(fpsim.round(x, "fp16"), dtype=np.float64)


def _digits_modelled(seed: int, steps: int, hidden: int | None, batch: int | None,
                     tanh: bool = False) -> tuple[Any, Any, list[Batch]]:
    from fpsim.reproduce.tasks import TASKS

    size = batch or 32
    model, opt = _relu_mlp(seed, hidden or 64, 64, tanh)
    stream = dataclasses.replace(
        TASKS["digits_mlp"], hyperparameters=dict(TASKS["digits_mlp"].hyperparameters,
                                                  batch_size=size)).batches(seed)
    out = []
    for _ in range(steps):
        x, y = next(stream)
        out.append((_fp16_values(x), np.eye(OUTPUTS)[y]))  # one-hot targets
    return model, opt, out


def _teacher_long_k(seed: int, steps: int, hidden: int | None, batch: int | None
                    ) -> tuple[Any, Any, list[Batch]]:
    size, width = batch or 4096, 64
    model, opt = _relu_mlp(seed, hidden or 64, width)
    rng = np.random.default_rng(seed)
    teacher = rng.standard_normal((width, OUTPUTS)) / 8
    out = []
    for _ in range(steps):
        x = _fp16_values(rng.standard_normal((size, width)))
        out.append((x, x @ teacher))
    return model, opt, out


def models(hidden: int | None = None, batch: int | None = None) -> list[TrainingModel]:
    """The suite's models; ``hidden`` and ``batch`` replace their sizes (for small runs).

    Examples
    --------
    >>> [m.name for m in models()]
    ['digits_mlp', 'digits_relu_mse', 'digits_tanh_mse', 'teacher_relu_mse_long_k']
    """
    def sized(make: Callable[..., Any]) -> Callable[[int, int], Any]:
        return lambda seed, steps: make(seed, steps, hidden, batch)

    return [
        TrainingModel("digits_mlp", "the digits MLP of fpsim reproduce (64-64-10, biases, "
                      "ReLU, cross_entropy, SGD momentum 0.9)", False,
                      sized(_digits_task), _cross_entropy),
        TrainingModel("digits_relu_mse", "the digits MLP without biases, mse_loss against "
                      "one-hot targets (16 outputs), inputs fp16 values, SGD lr 2^-5, "
                      "momentum 0.5",
                      True, sized(_digits_modelled), _mse),
        TrainingModel("digits_tanh_mse", "digits_relu_mse with tanh for ReLU: CuPy's "
                      "float16 tanh evaluates tanhf and rounds, and its backward, "
                      "g * (1 - y * y), rounds each operation to float16", False,
                      sized(functools.partial(_digits_modelled, tanh=True)), _mse),
        TrainingModel("teacher_relu_mse_long_k", "the same MLP on a linear teacher's "
                      f"Gaussian data, batches of {batch or 4096}: weight gradients with "
                      "K = the batch", True, sized(_teacher_long_k), _mse),
    ]


# -- the comparison --------------------------------------------------------------------

@dataclass(frozen=True)
class TrainingRun:
    """One model trained natively and emulated, compared step by step.

    Parameters
    ----------
    model : str
        The model's name.
    description : str
        What it is.
    modelled : bool
        Whether every operation is one fpsim models.
    native, emulated : str
        The two policies.
    steps : tuple of StepComparison
        Every step.
    sources : tuple of Source
        At the first step whose loss parts and the first whose weights part (while the
        weights before it are identical): the operations where the runs part; empty
        when they never do.
    replayed : tuple of int
        Those steps.
    final : Comparison, optional
        The parameters after the last step, compared (``Record``'s histogram).
    params : Format, default fp32
        The parameters' format.
    failed : str, default ""
        Where and why the search for sources failed ("" when it did not): the step
        metrics stand without it.
    seconds : float, default 0
        The wall time of both runs, their comparison and the search for sources.
    """

    model: str
    description: str
    modelled: bool
    native: str
    emulated: str
    steps: tuple[StepComparison, ...]
    sources: tuple[Source, ...] = ()
    replayed: tuple[int, ...] = ()
    final: Comparison | None = None
    params: Format = field(default_factory=lambda: as_format("fp32"))
    failed: str = ""
    seconds: float = 0.0

    @property
    def verdict(self) -> str:
        """"identical over N steps", or where and how far the runs parted."""

        n = len(self.steps)
        weights, losses = first_part(self.steps), first_part(self.steps, "losses")
        if weights is None and losses is None:
            return f"identical over {n} step{'s' * (n != 1)}"
        if weights is None:
            text = (f"weights identical over {n} step{'s' * (n != 1)}, losses part at "
                    f"step {losses}")
        else:
            last = self.steps[-1]
            text = (f"weights part at step {weights}, losses "
                    + ("identical" if losses is None else f"part at step {losses}")
                    + f"; after step {n}: {share(last.identical)} identical, max "
                    f"{last.max_ulp:g} ulp")
        if self.sources:
            text += f"; first source: {self.sources[0].kind} ({self.sources[0].op})"
        if self.failed:
            text += f"; the search for sources failed at {self.failed}"
        return text

    def record(self) -> Record:
        """The final weights' comparison, as a ``Record`` of the compare tables."""
        results = {self.emulated: self.final} if self.final is not None else {}
        return Record(f"training {self.model}", f"{self.native} on the GPU, "
                      f"{len(self.steps)} steps: the weights after the last step",
                      self.emulated, self.params.name, results,
                      "" if results else "no steps")

    def as_dict(self) -> dict[str, Any]:
        """The run as results.json holds it."""
        return dict(model=self.model, description=self.description, modelled=self.modelled,
                    native=self.native, emulated=self.emulated, verdict=self.verdict,
                    first_weights_part=first_part(self.steps),
                    first_loss_part=first_part(self.steps, "losses"),
                    replayed=list(self.replayed), failed=self.failed or None,
                    seconds=self.seconds,
                    sources=[s.as_dict() for s in self.sources],
                    steps=[s.as_dict() for s in self.steps])


def emulated_policy(preset: Any) -> str:
    """The emulated policy of a GPU's block-FMA ``preset``: ``mixed,model=<its name>``.

    Examples
    --------
    >>> import fpsim
    >>> emulated_policy(fpsim.hw.H100)
    'mixed,model=H100'
    """
    return f"mixed,model={preset.name}"


def _on_device(batch: Batch, device: str) -> Batch:
    x, y = batch
    return _device.transfer(np.asarray(x), device), _device.transfer(np.asarray(y), device)


def train_and_compare(spec: TrainingModel, preset: Any, steps: int = DEFAULT_STEPS,
                      seed: int = 0, device: str = "cuda") -> TrainingRun:
    """Train ``spec``'s model ``steps`` steps natively and emulated on ``device`` and
    compare them after every step; find the sources of difference where they part.

    Parameters
    ----------
    spec : TrainingModel
        The model (``models()``).
    preset : fpsim.hw.BlockFMA
        The GPU's block-FMA preset (``fpsim.compare.gpu.preset_for``).
    steps : int, default 20
        Training steps.
    seed : int, default 0
        The initialisation's and the batches' seed.
    device : {"cuda", "cpu"}, default "cuda"
        Where both run (on "cpu", native is NumPy's float16, not the GPU's).

    Returns
    -------
    TrainingRun
    """
    from fpsim.training import Trainer

    start = time.perf_counter()
    policies = {"native": NATIVE, "emulated": emulated_policy(preset)}
    runs: dict[str, tuple[Any, Any, list[Any]]] = {}
    batches: list[Batch] = []
    for label, policy in policies.items():
        model, opt, batches = spec.build(seed, steps)
        model.to(device)
        trainer = Trainer(model, opt, policy, loss_scale="dynamic")
        runs[label] = (model, trainer, opt.params)
    fmt = runs["native"][1].policy.params
    results: list[StepComparison] = []
    sources: list[Source] = []
    replayed: list[int] = []
    losses_parted = weights_parted = False
    final = None
    failed = ""
    for step, batch in enumerate(batches, start=1):
        here = _on_device(batch, device)
        before = [] if weights_parted else [host(p.data) for p in runs["native"][2]]
        reports = {label: trainer.step(lambda m=model, b=here: spec.loss(m, b))
                   for label, (model, trainer, _) in runs.items()}
        native_p, emulated_p = runs["native"][2], runs["emulated"][2]
        result = compare_step(step, [p.data for p in native_p], [p.data for p in emulated_p],
                              fmt, (reports["native"].loss, reports["emulated"].loss),
                              (reports["native"].loss_scale, reports["emulated"].loss_scale))
        results.append(result)
        # The first step whose loss parts and the first whose weights part, each replayed
        # while the weights before it are still identical.
        new = (result.losses_part and not losses_parted) or \
            (result.weights_part and not weights_parted)
        if new and not weights_parted and not failed:
            try:
                found = replay(runs, spec, here, before, result.scale_native, preset,
                               result.weights_part)
            except Exception as exc:  # the metrics stand without it: say why, go on
                failed = f"step {step}: {type(exc).__name__}: {exc}"
            else:
                sources += [dataclasses.replace(s, step=step) for s in found]
                replayed.append(step)
        losses_parted |= result.losses_part
        weights_parted |= result.weights_part
        final = compare_values(np.concatenate([host(p.data).ravel() for p in native_p]),
                               np.concatenate([host(p.data).ravel() for p in emulated_p]),
                               fmt)
    return TrainingRun(spec.name, spec.description, spec.modelled, policies["native"],
                       policies["emulated"], tuple(results), tuple(sources), tuple(replayed),
                       final, fmt, failed, time.perf_counter() - start)


def replay(runs: dict[str, tuple[Any, Any, list[Any]]], spec: TrainingModel, batch: Batch,
           before: list[np.ndarray], scale: float, preset: Any,
           weights_part: bool) -> list[Source]:
    """A step's forward and backward again, both runs from the weights ``before`` it
    (identical), and ``walk`` over the two graphs; the update named when the walk finds
    nothing and the weights part. The runs' weights are left as they were."""
    kept = {label: [(p.data, p.grad) for p in params] for label, (_, _, params) in runs.items()}
    losses = {}
    try:
        for label, (model, trainer, params) in runs.items():
            for p, values in zip(params, before, strict=True):
                p.data = _device.transfer(np.asarray(values, dtype=p.data.dtype), p.device)
            with trainer.policy:
                loss = spec.loss(model, batch)
                for p in params:
                    p.grad = None
                loss.backward(scale)
            losses[label] = loss
        found = walk(losses["native"], losses["emulated"], preset)
        found += census(losses["native"], runs["emulated"][1].policy, preset)
        fmts = [p.format for p in runs["emulated"][2]]
        same = all(a.grad is None and b.grad is None or
                   a.grad is not None and b.grad is not None and
                   _identical(compare_values(a.grad, b.grad, f))
                   for a, b, f in zip(runs["native"][2], runs["emulated"][2], fmts,
                                      strict=True))
    finally:
        for label, (_, _, params) in runs.items():
            for p, (data, grad) in zip(params, kept[label], strict=True):
                p.data, p.grad = data, grad
    if weights_part and same:
        found.append(Source("update", "optimizer", ELEMENTWISE, (), 0, 0.0,
                            "identical gradients, different weights: the optimizer's "
                            "arithmetic"))
    return found


def run(steps: int = DEFAULT_STEPS, seed: int = 0, *, out: str | Path | None = None,
        hidden: int | None = None, batch: int | None = None,
        only: Sequence[str] | None = None,
        progress: Callable[[TrainingRun], object] | None = None) -> list[TrainingRun]:
    """The training suite on the GPU: every model of ``models(hidden, batch)`` (or those
    named in ``only``) trained ``steps`` steps natively and emulated, and compared.

    Parameters
    ----------
    steps : int, default 20
        Training steps per model.
    seed : int, default 0
        The initialisation's and the batches' seed.
    out : str or Path, optional
        Where to write results.json, results.md and ulp_histograms.png (again after
        each model).
    hidden, batch : int, optional
        Replace the models' hidden width and batch size (small runs).
    only : sequence of str, optional
        The names of the models to run (all by default).
    progress : callable, optional
        Called with each run as it ends.

    Returns
    -------
    list of TrainingRun

    Raises
    ------
    fpsim.compare.gpu.NoGPU
        Where there is no usable GPU for device "cuda" (the message says what is
        missing); nothing is written.
    """
    from fpsim._machine import machine, versions
    from fpsim.compare import report

    preset = find_preset()
    header: dict[str, Any] = dict(
        suite="training", size=steps, seed=seed, date=time.strftime("%Y-%m-%d"),
        machine=f"{machine()}; {machine(gpu=True)}", versions=versions(gpu=True),
        steps=steps, preset=preset.name)
    runs: list[TrainingRun] = []
    for spec in models(hidden, batch):
        if only and spec.name not in only:
            continue
        runs.append(train_and_compare(spec, preset, steps, seed))
        if out is not None:  # after each model: a later one's failure keeps the earlier
            report.write([r.record() for r in runs], header, Path(out), training_markdown(runs),
                         {"training": [r.as_dict() for r in runs]})
        if progress is not None:
            progress(runs[-1])
    return runs


def missing() -> str | None:
    """What the training suite lacks here (fpsim's device "cuda"), or None."""
    from fpsim.backends import gpu_missing

    return gpu_missing()


def find_preset() -> Any:
    """The block-FMA preset of the GPU fpsim runs on (``gpu.preset_for``); ``NoGPU``
    where there is none."""
    from fpsim.compare.gpu import NoGPU, preset_for

    why = missing()
    if why is not None:
        raise NoGPU(f"no usable GPU for the training suite: {why}")
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    return preset_for(name, (int(props["major"]), int(props["minor"])))


def _step(n: int | None) -> str:
    return "never" if n is None else str(n)


def training_markdown(runs: Sequence[TrainingRun]) -> str:
    """The training suite's tables: a row per model, then per model the sources of
    difference where its runs part and a row per step."""
    lines = ["## Training: native against emulated, step by step", "",
             "| model | every operation modelled | steps | weights part at step | "
             "losses part at step | identical after the last step | max ulp | median ulp | "
             "first source |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for r in runs:
        last = r.steps[-1]
        first = f"{r.sources[0].kind} ({r.sources[0].op}, {r.sources[0].phase})" \
            if r.sources else ""
        lines.append(f"| {r.model} | {'yes' if r.modelled else 'no'} | {len(r.steps)} | "
                     f"{_step(first_part(r.steps))} | {_step(first_part(r.steps, 'losses'))} | "
                     f"{share(last.identical)} | {ulp_text(last.max_ulp)} | "
                     f"{ulp_text(last.median_ulp)} | {first} |")
    for r in runs:
        lines += ["", f"### {r.model}", "", f"{r.description[:1].upper()}"
                  f"{r.description[1:]}. Native: `{r.native}`; "
                  f"emulated: `{r.emulated}`; dynamic loss scaling; the parameters compared "
                  f"in {r.params.name}. Verdict: {r.verdict}. Wall time {r.seconds:.1f} s "
                  "(both runs, the comparisons and the search for sources).", ""]
        if r.failed:
            lines += [f"The search for sources failed at {r.failed}.", ""]
        for step in r.replayed:
            found = [s for s in r.sources if s.step == step]
            walked = [s for s in found if not s.note.startswith(ON_NATIVE)]
            alone = [s for s in found if s.note.startswith(ON_NATIVE)]
            lines += [f"Where the runs part at step {step} (replayed from its identical "
                      "starting weights):", ""]
            lines += [f"- {s}" for s in walked] or ["- no operation: the graphs agree"]
            lines += ["", "Each product, gradient summed over broadcast axes, tanh, exp "
                      "and log of that step's native graph, run by the emulation "
                      f"{ON_NATIVE}:", ""]
            lines += [f"- {s}" for s in alone] or ["- every one gives native's bits"]
            lines.append("")
        lines += ["| step | identical | max ulp | median ulp | loss native | loss emulated | "
                  "difference | scale native | scale emulated |",
                  "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for s in r.steps:
            lines.append(f"| {s.step} | {share(s.identical)} | {ulp_text(s.max_ulp)} | "
                         f"{ulp_text(s.median_ulp)} | {s.loss_native:.9g} | "
                         f"{s.loss_emulated:.9g} | "
                         f"{s.loss_difference:.3g} | {s.scale_native:g} | "
                         f"{s.scale_emulated:g} |")
    return "\n".join(lines) + "\n"
"""What each histogram's bars count (its y-axis label): the elements of the case's run."""
