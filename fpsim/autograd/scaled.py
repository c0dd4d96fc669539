"""Products of a scaling recipe: ``linear`` and ``conv2d`` whose forward and backward
products quantize their operands per the policy's recipe (``fpsim.precision.recipes``).

Forward ``Y = X W^T`` takes X rowwise (``act``) and W rowwise (``weight``); the data
gradient ``dX = dY W`` takes dY rowwise (``grad``) and W columnwise; the weight gradient
``dW = dY^T X`` takes dY and X columnwise (after the recipe's Hadamard transform, if any)
and rounds its result per ``wgrad``. Weights are quantized from their own values (the
master copy) once per step. ``docs/training.md`` ("FP8 and FP4 recipes") states the rules.

On device ``"cuda"`` every step runs on the device, by the ``cupy`` backend's kernels
(``fpsim.quantize`` of CuPy arrays); each quantization reads its amax back to the host
(a delayed scaling's history, NVFP4's tensor scale). A block-scaled instruction as the
recipe's ``gemm`` (``fpsim.hw.BLOCK_SCALED``) is computed on the host only: refused on the
device.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from fpsim import _device
from fpsim.accumulation.conv import check, correlate, input_gradient
from fpsim.autograd.cast import compute, same_device
from fpsim.autograd.tensor import Tensor, as_tensor
from fpsim.precision import numerics, scaling

if TYPE_CHECKING:
    from fpsim.autograd.tensor import TensorLike
    from fpsim.precision.policy import Policy
    from fpsim.precision.recipes import Recipe, Scaling
    from fpsim.precision.scaling import Operand

    Pair = tuple[int, int]


def active(policy: Policy, weight: object) -> Recipe | None:
    """The recipe that quantizes a product of ``weight`` under ``policy``: None without a
    recipe, or for a layer the recipe keeps in higher precision."""
    r = policy.recipe
    if r is None or scaling.kept(r, weight):
        return None
    return r


class Gemms:
    """One layer's quantized products under a recipe: its operands and their products."""

    def __init__(self, policy: Policy, recipe: Recipe, weight: Tensor) -> None:
        self.p, self.r, self.w = policy, recipe, weight

    def operand(self, rows: Any, category: str, key: str = "") -> Operand:
        """``rows`` (rows by K, values of the compute format) quantized per ``category``."""
        s: Scaling | None = getattr(self.r, category)
        if s is None:
            return scaling.plain(rows, self.p.compute)
        return scaling.quantize(_device.array_module(rows).ascontiguousarray(rows), s, self.p,
                                self.w, category, key)

    def columns(self, held: Operand, rows: Any, category: str) -> Operand:
        """The columnwise operand of a tensor quantized rowwise as ``held`` (``rows``: its
        transpose): the same quantization transposed when one scale covers the tensor,
        else quantized along the other axis."""
        if held.per_tensor and not self.r.rht:
            return scaling.transposed(held)
        if self.r.rht:
            rows = self.hadamard(rows)
            return self.operand(rows, category, "/rht")
        return self.operand(rows, category)

    def hadamard(self, rows: Any) -> Any:
        """The recipe's random Hadamard transform along K (the weight gradient's tokens)."""
        from fpsim.quantize import hadamard_transform

        k = rows.shape[-1]
        if k % self.r.rht:
            raise ValueError(f"rht={self.r.rht}: the weight gradient's reduction axis has {k} "
                             f"elements, not a multiple of the transform's {self.r.rht} (it "
                             "is not padded)")
        with _device.kernels(rows):
            return hadamard_transform(rows, seed=self.r.rht_seed, size=self.r.rht, axis=-1)

    def weight(self, matrix: Any, orientation: str) -> Operand:
        """The weight's operand (``matrix``: rows by K), quantized once per step; without
        a scaling, rounded to the compute format (as any product's operand)."""
        if self.r.weight is None:
            return scaling.plain(numerics.round(matrix, self.p.compute, self.p),
                                 self.p.compute)
        return scaling.weight_operand(self.w, matrix, self.r.weight, self.p, orientation,
                                      self.p.compute)

    def product(self, a: Operand, b: Operand, pair: tuple[str, str]) -> Any:
        """``A @ B^T`` (binary32 values, or the accumulator's)."""
        return scaling.product(a, b, self.p, self.r, pair)

    def output(self, values: Any) -> Any:
        """A product's result in the compute format."""
        return numerics.round(values, self.p.compute, self.p)

    def weight_gradient(self, values: Any) -> Any:
        """The weight gradient as the ``wgrad`` category stores it: rounded to its format
        (the compute format without one), or quantized and dequantized by its scaling."""
        s = self.r.wgrad
        if s is None:
            return self.output(values)
        shape = values.shape
        op = scaling.quantize(values.reshape(shape[0], -1), s, self.p, self.w, "wgrad")
        if op.quantized is not None:
            from fpsim.quantize import dequantize

            return dequantize(op.quantized).reshape(shape)
        return _dequantized(op).reshape(shape)


def _dequantized(op: Operand) -> Any:
    """Elements times their binary32 decode scales (exact in binary64)."""
    return op.values * scaling.each_scale(op)


def _weight(weight: TensorLike, recipe: Recipe) -> Tensor:
    """The weight as a Tensor; a delayed scaling's history lives with it, so it must be one
    kept from step to step (a layer's Parameter)."""
    delayed = any(s is not None and s.kind == "delayed"
                  for s in (recipe.act, recipe.weight, recipe.grad, recipe.wgrad))
    if delayed and not isinstance(weight, Tensor):
        scaling.states(weight)  # the error that says so
    return as_tensor(weight)


def linear(x: TensorLike, weight: TensorLike, policy: Policy, recipe: Recipe) -> Tensor:
    """``x @ weight.T`` (no bias) with its three products quantized per ``recipe``."""
    w = _weight(weight, recipe)
    x = compute(x, policy)
    x, w = same_device("linear", x, w)
    if x.ndim < 1 or w.ndim != 2 or x.shape[-1] != w.shape[1]:
        raise ValueError(f"linear needs x (..., {w.shape[-1] if w.ndim else '?'}) and weight "
                         f"(out, in), got {x.shape} and {w.shape}")
    gemms = Gemms(policy, recipe, w)
    k, n = w.shape[1], w.shape[0]
    x2 = x.data.reshape(-1, k)
    qx = gemms.operand(x2, "act")
    qw = gemms.weight(w.data, "row")
    y = gemms.output(gemms.product(qx, qw, ("act", "weight"))).reshape(x.shape[:-1] + (n,))

    def backward(g: np.ndarray) -> Any:
        g2 = g.reshape(-1, n)
        qg = gemms.operand(g2, "grad")
        gx = gw = None
        if x.requires_grad:
            dx = gemms.product(qg, gemms.weight(w.data.T, "column"), ("grad", "weight"))
            gx = (gemms.output(dx).reshape(x.shape), policy.compute)
        if w.requires_grad:
            dw = gemms.product(gemms.columns(qg, g2.T, "grad"), gemms.columns(qx, x2.T, "act"),
                               ("grad", "act"))
            gw = gemms.weight_gradient(dw)
        return gx, gw

    return Tensor.node(y, policy.compute, (x, w), backward, policy, "matmul")


def conv2d(x: TensorLike, weight: TensorLike, stride: int | Pair, padding: int | Pair,
           policy: Policy, recipe: Recipe) -> Tensor:
    """2-D cross-correlation (no bias), NCHW, with its three products (as im2col
    matrices) quantized per ``recipe``."""
    w = _weight(weight, recipe)
    x = compute(x, policy)
    x, w = same_device("conv2d", x, w)
    stride, padding = check(x.data, w.data, stride, padding)
    gemms = Gemms(policy, recipe, w)
    o = w.shape[0]
    held: dict[str, Operand] = {}

    def forward(cols: Any, kernels: Any) -> Any:  # (N, OH*OW, K) and (K, O)
        held["act"] = gemms.operand(cols.reshape(-1, cols.shape[-1]), "act")
        y = gemms.product(held["act"], gemms.weight(kernels.T, "row"), ("act", "weight"))
        return gemms.output(y).reshape(cols.shape[:-1] + (kernels.shape[1],))

    y, cols = correlate(x.data, w.data, stride, padding, forward)

    def backward(g: np.ndarray) -> Any:
        gx: Any = None
        gw: Any = None
        g2 = np.ascontiguousarray(g.transpose(0, 2, 3, 1)).reshape(-1, o)  # (M, O)
        if w.requires_grad:
            x2 = cols.reshape(-1, cols.shape[-1])
            qg = gemms.operand(g2, "grad")
            dw = gemms.product(gemms.columns(qg, g2.T, "grad"),
                               gemms.columns(held["act"], x2.T, "act"), ("grad", "act"))
            gw = gemms.weight_gradient(dw.reshape(w.shape))
        if x.requires_grad:
            gx = (_input_gradient(g, w.data, x.shape, stride, padding, gemms), policy.compute)
        return gx, gw

    return Tensor.node(y, policy.compute, (x, w), backward, policy, "conv2d")


def _input_gradient(g: np.ndarray, w: np.ndarray, x_shape: tuple[int, ...], stride: Pair,
                    padding: Pair, gemms: Gemms) -> np.ndarray:
    """d(conv)/dx as ``fpsim.accumulation.conv.input_gradient`` forms it (the full
    correlation of the stride-dilated gradient with the flipped kernel), its product
    quantized (grad by weight)."""

    def product(patches: Any, kernels: Any) -> Any:  # (N, H*W, O*KH*KW), (O*KH*KW, C)
        dx = gemms.product(gemms.operand(patches.reshape(-1, patches.shape[-1]), "grad"),
                           gemms.weight(kernels.T, "flipped"), ("grad", "weight"))
        return gemms.output(dx).reshape(patches.shape[:-1] + (kernels.shape[1],))

    gx: np.ndarray = input_gradient(g, w, x_shape, stride, padding, product)
    return gx
