"""A precision policy on a torch model: ``emulate(model, policy)``.

The policy is fpsim's (``fpsim.precision.parse``: the same presets and keys as
``fpsim.Policy``) and means here what it means in ``fpsim.nn``:

- parameters are stored in ``params`` (rounded there when emulated, and their gradients
  after each backward);
- every torch function the model's forward calls on floating tensors (a
  ``TorchFunctionMode``: functional calls, tensor methods and operators alike) takes its
  floating tensor arguments in ``compute`` and its result is rounded to ``compute``
  (losses to ``output``); the gradient reaching each of those tensors is rounded to
  ``compute`` too;
- the dot products (``linear``, ``conv2d``, ``matmul``, ``mm``, ``bmm``, ``@``) accumulate in
  ``accum`` with ``accum_rounding`` in ``order`` (or ``model``'s block FMA), in the forward
  and in the backward (``fpsim.torch.products``). An fp32 accumulator in any order is
  torch's own binary32 product (as ``fpsim.matmul``'s ``order="any"`` is NumPy's BLAS);
- per-operation overrides (``"mixed,softmax.compute=fp32"``) apply to the torch function of
  that name.

Data movement (views, reshapes, indexing, concatenation, copies, dtype and device
changes) and comparisons are left as they are: they compute no new values. In-place
operations have their results rounded in place; the gradient through them is not
rounded there. What torch computes inside one function (the sum in a ``softmax``, the
statistics of a ``batch_norm``) is torch's own arithmetic in the tensor's dtype, not the
policy's ``reduce`` format: only the function's inputs and result are rounded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812 - torch's own name for it
from torch.overrides import TorchFunctionMode

from fpsim.formats import Format, as_format
from fpsim.precision.numerics import _seed, covers
from fpsim.precision.policy import FORMAT_FIELDS, OPERATIONS, Policy, as_policy
from fpsim.torch import products
from fpsim.torch.exchange import to_array
from fpsim.torch.rounding import RoundFunction, Rounding

if TYPE_CHECKING:
    from torch.utils.hooks import RemovableHandle

_apply = cast(Callable[[torch.Tensor, Rounding, "Rounding | None", None], torch.Tensor],
              RoundFunction.apply)

DTYPE_FORMATS = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32",
                 torch.float64: "fp64"}
"""The format of each floating dtype's values."""

MOVES = frozenset({
    "view", "view_as", "reshape", "reshape_as", "flatten", "unflatten", "transpose", "t",
    "permute", "movedim", "moveaxis", "swapaxes", "swapdims", "squeeze", "unsqueeze",
    "expand", "expand_as", "broadcast_to", "contiguous", "__getitem__", "__setitem__",
    "narrow", "select", "split", "split_with_sizes", "chunk", "unbind", "cat", "concat",
    "concatenate", "stack", "hstack", "vstack", "clone", "detach", "detach_", "to", "cpu",
    "cuda", "float", "double", "half", "bfloat16", "type", "type_as", "copy_", "zero_",
    "fill_", "requires_grad_", "__get__", "__set__", "size", "dim", "numel", "__len__",
    "__iter__", "__reversed__", "__format__", "__repr__", "tolist", "item", "numpy",
    "data_ptr", "stride", "storage_offset", "is_contiguous", "flip", "roll", "repeat", "tile",
    "gather", "index_select", "take", "masked_select",
    # comparisons and predicates: no new values, their inputs compared as they are
    "eq", "ne", "lt", "le", "gt", "ge", "__eq__", "__ne__", "__lt__", "__le__", "__gt__",
    "__ge__", "isnan", "isinf", "isfinite", "isclose", "allclose", "equal", "argmax",
    "argmin", "argsort",
})
"""Torch functions that move or compare values without computing new ones: left
unrounded."""

LOSSES = frozenset({
    "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div",
})
"""Torch functions whose result is a loss: stored in the policy's ``output`` format."""

# Normalisation functions: only these arguments are values (the running statistics are
# state the function updates in place, which a rounded copy would not receive).
_VALUE_ARGUMENTS = {"batch_norm": (0, 3, 4), "instance_norm": (0, 3, 4)}
_DOTS = {F.linear: "linear", F.conv2d: "conv2d", torch.matmul: "matmul",
         torch.Tensor.matmul: "matmul", torch.Tensor.__matmul__: "matmul",
         torch.Tensor.__rmatmul__: "rmatmul", torch.mm: "matmul", torch.Tensor.mm: "matmul",
         torch.bmm: "matmul", torch.Tensor.bmm: "matmul"}
_IN_PLACE_OPERATORS = frozenset({"__iadd__", "__isub__", "__imul__", "__itruediv__",
                                 "__idiv__", "__ipow__", "__ifloordiv__"})
_TAG = "_fpsim_format"  # on a tensor whose values are known to be of that format


def operation(name: str) -> str | None:
    """The ``fpsim.precision`` operation (an override's key) a torch function name stands
    for, or None.

    Examples
    --------
    >>> operation("__radd__"), operation("relu_"), operation("__truediv__"), operation("erf")
    ('add', 'relu', 'div', None)
    """
    base = name.strip("_")
    if name.startswith("__") and base[:1] in "ri" and base[1:] in OPERATIONS:
        base = base[1:]
    base = {"truediv": "div", "matmul": "matmul"}.get(base, base)
    return base if base in OPERATIONS else None


def _name(func: Any) -> str:
    return str(getattr(func, "__name__", "") or "")


def _in_place(name: str, kwargs: Mapping[str, Any]) -> bool:
    return ((name.endswith("_") and not name.endswith("__")) or name in _IN_PLACE_OPERATORS
            or kwargs.get("inplace") is True)


def _tensors(value: Any) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _tensors(v)


class _Mode(TorchFunctionMode):
    """The emulation's torch function mode: every call goes to ``Emulation.call``."""

    def __init__(self, emulation: Emulation) -> None:
        super().__init__()
        self.emulation = emulation

    def __torch_function__(self, func: Any, types: Any, args: Sequence[Any] = (),
                           kwargs: Mapping[str, Any] | None = None) -> Any:
        return self.emulation.call(func, tuple(args), dict(kwargs or {}))


class Emulation:
    """A torch model under an fpsim policy (``emulate`` makes it); a context manager.

    Its model's forward runs under the policy. ``with emulation:`` runs other code under
    it too (the loss, for example: a loss function's result is stored in ``output``).

    Attributes
    ----------
    model : torch.nn.Module
        The model.
    policy : Policy
        The policy.

    Examples
    --------
    >>> import torch
    >>> import fpsim.torch
    >>> layer = torch.nn.Linear(2, 1, bias=False)
    >>> with torch.no_grad():
    ...     layer.weight.copy_(torch.tensor([[1.0, 1.0]]))
    Parameter containing:
    tensor([[1., 1.]], requires_grad=True)
    >>> emulation = fpsim.torch.emulate(layer, "mixed,accum=fp16,order=sequential")
    >>> layer(torch.tensor([[1.0, 2.0**-11]])).tolist()  # 1 + 2**-11 rounds to 1 in fp16
    [[1.0]]
    >>> emulation.remove()
    >>> layer(torch.tensor([[1.0, 2.0**-11]])).tolist()
    [[1.00048828125]]
    """

    def __init__(self, model: torch.nn.Module, policy: Policy) -> None:
        self.model = model
        self.policy = policy
        self._depth = 0
        self._mode: _Mode | None = None
        self._roundings: dict[tuple[Format, str, bool], Rounding] = {}
        self._handles: list[RemovableHandle] = []
        # While a Trainer monitors a step: the activation gradients of the backward.
        self.activation_grads: list[torch.Tensor] | None = None

    # -- the mode ------------------------------------------------------------------------
    def __enter__(self) -> Emulation:
        if self._depth == 0:
            self._mode = _Mode(self)
            cast(Any, self._mode).__enter__()
        self._depth += 1
        return self

    def __exit__(self, *exc: object) -> None:
        self._depth -= 1
        if self._depth == 0 and self._mode is not None:
            mode, self._mode = self._mode, None
            cast(Any, mode).__exit__(None, None, None)

    def remove(self) -> None:
        """Take the policy off the model (its parameters keep their rounded values)."""
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        if getattr(self.model, "_fpsim_emulation", None) is self:
            del self.model._fpsim_emulation

    # -- rounding ------------------------------------------------------------------------
    def _rounding(self, fmt: Format, p: Policy) -> Rounding:
        """``fmt`` with the policy's mode (a fresh seed from its stream when stochastic)."""
        if p.rounding == "stochastic":
            return Rounding(fmt, p.rounding, subnormals=p.subnormals,
                            seed=_seed(p, p.rounding))
        key = (fmt, p.rounding, p.subnormals)
        if key not in self._roundings:
            self._roundings[key] = Rounding(fmt, p.rounding, subnormals=p.subnormals)
        return self._roundings[key]

    def rounds(self, t: torch.Tensor, fmt: Format, p: Policy) -> bool:
        """Whether rounding ``t`` to ``fmt`` under ``p`` can change it (not when its dtype's
        values are all values of ``fmt``)."""
        own = DTYPE_FORMATS.get(t.dtype)
        return own is None or not (p.subnormals and covers(fmt, as_format(own)))

    def round(self, t: torch.Tensor, fmt: Format, p: Policy, result: bool = False
              ) -> torch.Tensor:
        """``t`` rounded to ``fmt`` under ``p``, and the gradient reaching the rounded
        tensor rounded to ``fmt`` too; ``t`` itself when it holds values of ``fmt`` already
        (known by a tag on the tensors this emulation rounded)."""
        if not t.is_floating_point() or getattr(t, _TAG, None) == fmt:
            return t
        if not self.rounds(t, fmt, p):
            return t
        if result and self.activation_grads is not None and t.requires_grad:
            kept = self.activation_grads
            cast(Any, t).register_hook(lambda g: kept.append(g))  # the rounded gradient of a result
        rounded = _apply(t, self._rounding(fmt, p), self._rounding(fmt, p), None)
        setattr(rounded, _TAG, fmt)
        return rounded

    def _rounded(self, value: Any, fmt: Format, p: Policy) -> Any:
        """A function's result (a tensor, or a tuple or list of them) rounded."""
        if isinstance(value, torch.Tensor):
            return self.round(value, fmt, p, result=True)
        if isinstance(value, (tuple, list)) and any(isinstance(v, torch.Tensor)
                                                    for v in value):
            items = [self._rounded(v, fmt, p) for v in value]
            return type(value)(items) if not hasattr(value, "_fields") else type(value)(*items)
        return value

    def _in_place_round(self, t: torch.Tensor, fmt: Format, p: Policy) -> None:
        """Round ``t``'s values in its own memory (outside autograd: an in-place result)."""
        if t.is_floating_point() and self.rounds(t, fmt, p):
            values, _ = self._rounding(fmt, p).apply(t)
            to_array(t)[...] = to_array(values)
            setattr(t, _TAG, fmt)

    # -- the calls -----------------------------------------------------------------------
    def call(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """``func(*args, **kwargs)`` under the policy (what the mode runs for each call)."""
        name = _name(func)
        if func in _DOTS:
            return self._dot(_DOTS[func], func, args, kwargs)
        floating = [t for t in _tensors([*args, *kwargs.values()]) if t.is_floating_point()]
        if name in MOVES or not floating:
            result = func(*args, **kwargs)
            written = _in_place(name, kwargs) or name == "__setitem__"
            if name in MOVES and written and args and isinstance(
                    args[0], torch.Tensor) and hasattr(args[0], _TAG):
                delattr(args[0], _TAG)  # new values written into it
            return result
        op = operation(name)
        p = self.policy.for_op(op) if op is not None else self.policy
        fmt = p.output if name in LOSSES else p.compute
        if _in_place(name, kwargs):
            result = func(*args, **kwargs)
            if isinstance(result, torch.Tensor):
                self._in_place_round(result, fmt, p)
            return result
        values = _VALUE_ARGUMENTS.get(name)
        args = tuple(self._cast(a, p) if values is None or i in values else a
                     for i, a in enumerate(args))
        if values is None:
            kwargs = {k: self._cast(v, p) for k, v in kwargs.items()}
        return self._rounded(func(*args, **kwargs), fmt, p)

    def _cast(self, value: Any, p: Policy) -> Any:
        """An argument in the compute format (tensors, and tensors in lists and tuples)."""
        if isinstance(value, torch.Tensor):
            return self.round(value, p.compute, p)
        if isinstance(value, (list, tuple)) and any(isinstance(v, torch.Tensor) for v in value):
            return type(value)(self._cast(v, p) for v in value)
        return value

    def _dot(self, kind: str, func: Any, args: tuple[Any, ...],
             kwargs: dict[str, Any]) -> torch.Tensor:
        """A dot product under the policy: its operands in ``compute``, its products
        accumulated as the policy says, its result rounded to ``compute``; a bias added
        after, as ``fpsim.nn``'s ``add``."""
        p = self.policy.for_op("conv2d" if kind == "conv2d" else "matmul")
        if kwargs.get("out") is not None:
            raise ValueError(f"{_name(func)}(out=...) is not emulated: drop out=")
        names = {"linear": ("input", "weight", "bias"),
                 "conv2d": ("input", "weight", "bias", "stride", "padding", "dilation",
                            "groups")}.get(kind, ("input", "other"))
        given = dict(zip(names, args, strict=False))
        given.update({k: v for k, v in kwargs.items() if k != "out"})
        if "mat2" in given:
            given["other"] = given.pop("mat2")
        if kind == "rmatmul":  # other @ self
            given = {"input": given["other"], "other": given["input"]}
        x = self.round(given["input"], p.compute, p)
        w = self.round(given["weight" if kind in ("linear", "conv2d") else "other"],
                       p.compute, p)
        bias = given.get("bias")
        torch_products = self.torch_products(p, x, conv=kind == "conv2d")
        add = self.policy.for_op("add")
        # With nothing rounded between the products and the bias (fp32 throughout), the
        # bias is one more binary32 addition in torch's order: torch's own op adds it.
        inside = bias is not None and torch_products and not (
            self.rounds(x, p.compute, p) or self.rounds(x, add.compute, add))
        if kind == "conv2d":
            y = self._conv2d(x, w, bias if inside else None, given, p, torch_products)
        elif torch_products:
            y = F.linear(x, w, bias if inside else None) if kind == "linear" else torch.matmul(x, w)
        elif kind == "linear":
            rows = x.reshape(-1, x.shape[-1])
            y = products.matmul(rows, w.t(), **self.settings(p)).reshape(
                *x.shape[:-1], w.shape[0])
        else:
            y = _emulated_matmul(x, w, self.settings(p))
        y = self.round(y, p.compute, p, result=True)
        if bias is None or inside:
            return y
        b = self.round(bias, add.compute, add)
        if kind == "conv2d":
            b = b.reshape(1, -1, 1, 1)
        return self.round(y + b, add.compute, add, result=True)

    def _conv2d(self, x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None,
                given: Mapping[str, Any], p: Policy, torch_products: bool) -> torch.Tensor:
        stride, padding = given.get("stride", 1), given.get("padding", 0)
        dilation, groups = given.get("dilation", 1), given.get("groups", 1)
        if torch_products:
            return F.conv2d(x, w, bias, stride, padding, dilation, groups)
        if groups != 1 or dilation not in (1, (1, 1), [1, 1]):
            raise NotImplementedError(
                f"conv2d with groups={groups}, dilation={dilation} is emulated only with an fp32 "
                "accumulator in any order (torch's own product); fpsim.conv2d takes groups=1 "
                "and dilation=1")
        if isinstance(padding, str):
            padding = _string_padding(padding, w.shape[2:], stride)
        return products.conv2d(x, w, None, stride, padding, **self.settings(p))

    def torch_products(self, p: Policy, x: torch.Tensor, conv: bool) -> bool:
        """Whether torch's own product is the policy's: an accumulator of the tensors'
        dtype, nearest even, with subnormals and no block-FMA model, in any order (an fp64
        accumulator in every order, as ``fpsim.nn``'s, which is exact enough that fpsim
        sums it with NumPy's float64 product), where torch computes float32 products in
        IEEE binary32 (no TF32, no bf16 passes)."""
        own = DTYPE_FORMATS.get(x.dtype)
        if not (p.model is None and own in ("fp32", "fp64") and p.accum == as_format(own)
                and (p.order == "any" or own == "fp64")
                and p.accum_rounding == "nearest_even" and p.subnormals
                and (own == "fp64" or torch.get_float32_matmul_precision() == "highest")):
            return False
        if x.device.type == "cuda":
            return not (torch.backends.cudnn.allow_tf32 if conv
                        else torch.backends.cuda.matmul.allow_tf32)
        return True

    def settings(self, p: Policy) -> dict[str, Any]:
        """``fpsim.torch.products``' settings of the policy's dot products: its
        accumulator (or block-FMA model), mode, order and subnormals, and a seed from its
        stream for stochastic accumulation (the backward's products draw their own)."""
        model = p.hardware_model()
        if model is not None:
            return {"model": model}
        mine: dict[str, Any] = {"accum": p.accum, "rounding": p.accum_rounding,
                                "order": p.order, "subnormals": p.subnormals}
        if p.accum_rounding == "stochastic":
            mine["backward"] = {**mine, "seed": _seed(p, p.accum_rounding)}
            mine["seed"] = _seed(p, p.accum_rounding)
        return mine

    # -- parameters ----------------------------------------------------------------------
    def _grad_hook(self, param: torch.Tensor) -> None:
        """After a backward: the parameter's gradient rounded to ``params``."""
        if param.grad is not None:
            self._in_place_round(param.grad, self.policy.params, self.policy)


def _emulated_matmul(a: torch.Tensor, b: torch.Tensor,
                     settings: Mapping[str, Any]) -> torch.Tensor:
    """``torch.matmul``'s shapes (vectors, broadcast batches) on ``products.matmul``."""
    if a.dim() == 0 or b.dim() == 0:
        raise ValueError("matmul of a 0-d tensor: both operands need at least one dimension")
    x = a.unsqueeze(0) if a.dim() == 1 else a
    y = b.unsqueeze(-1) if b.dim() == 1 else b
    batch = np.broadcast_shapes(tuple(x.shape[:-2]), tuple(y.shape[:-2]))
    x = x.expand(*batch, *x.shape[-2:])
    y = y.expand(*batch, *y.shape[-2:])
    out = products.matmul(x, y, **settings)
    if b.dim() == 1:
        out = out.squeeze(-1)
    if a.dim() == 1:
        out = out.squeeze(-2 if b.dim() > 1 else -1)
    return out


def _string_padding(padding: str, kernel: Sequence[int], stride: Any) -> tuple[int, int]:
    """``"valid"`` or ``"same"`` as (top/bottom, left/right) zeros; ValueError where
    ``"same"`` would pad unevenly."""
    if padding == "valid":
        return (0, 0)
    if padding == "same" and all(k % 2 for k in kernel) and stride in (1, (1, 1), [1, 1]):
        return (kernel[0] // 2, kernel[1] // 2)
    raise ValueError(f"conv2d padding={padding!r} with a {tuple(kernel)} kernel: fpsim.conv2d "
                     "pads evenly; give the padding as numbers (or pad first)")


def emulate(model: torch.nn.Module, policy: Policy | str) -> Emulation:
    """Train or run a torch model under an fpsim precision policy.

    The parameters are rounded to ``policy.params`` now and their gradients after each
    backward; every floating value the model's forward computes (and its gradient) is
    rounded as the policy says, and its dot products (``Linear``, ``Conv2d``, ``matmul``,
    ``@``, ``bmm``) accumulate in the policy's accumulator (module docstring).

    Parameters
    ----------
    model : torch.nn.Module
        Its floating parameters float32 (or float64, for formats wider than binary32),
        on the CPU or a CUDA device (CUDA: the ``cupy`` backend).
    policy : Policy or str
        A policy, or its text: a preset (``"fp32"``, ``"mixed"``, ``"bf16"``, ``"fp16"``,
        ...) and ``key=value`` pairs, as ``fpsim.precision.parse`` reads them.
        ``"mixed,params=fp16"`` is the paper's ablation without master weights.

    Returns
    -------
    Emulation
        The handle: ``with emulation:`` runs other code (the loss) under the policy;
        ``remove()`` takes the policy off.

    Raises
    ------
    ValueError
        An unknown or native policy (``"native_fp16"``: the hardware's own arithmetic is
        torch's, ``model.half()``); a format wider than the parameters' dtype; a model
        already emulated.
    NotImplementedError
        A policy with a scaling recipe.

    Examples
    --------
    >>> import torch
    >>> import fpsim.torch
    >>> model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())
    >>> emulation = fpsim.torch.emulate(model, "mixed")
    >>> y = model(torch.full((1, 4), 0.1))
    >>> bool((y == fpsim.torch.round(y, "fp16")).all())  # activations in fp16
    True
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    p = as_policy(policy)
    if p.native:
        raise ValueError(f"policy {str(p)!r} is native: its arithmetic is the hardware's, "
                         "which in torch is the model itself (model.half(), torch.autocast); "
                         "emulate takes emulated policies")
    if getattr(p, "recipe", None) is not None:
        raise NotImplementedError("a policy with a scaling recipe is not emulated on torch "
                                  "models yet: quantize with fpsim.torch.quantize")
    if getattr(model, "_fpsim_emulation", None) is not None:
        raise ValueError("the model is emulated already: call remove() on its emulation first")
    params = list(model.parameters())
    for name, param in model.named_parameters():
        if param.dtype not in (torch.float32, torch.float64):
            raise ValueError(f"parameter {name} is {param.dtype}: emulate takes float32 (or "
                             "float64) models, whose values the policy's formats round")
    stored = [(name, getattr(sub, name)) for sub in (p, *(o for _, o in p.overrides))
              for name in FORMAT_FIELDS if name != "accum"]
    for param in params:
        for name, fmt in stored:
            if not covers(as_format(DTYPE_FORMATS[param.dtype]), fmt):
                raise ValueError(f"{name}={fmt.name} is wider than the parameters' "
                                 f"{param.dtype}: use model.double()")
    emulation = Emulation(model, p)
    for param in params:
        emulation._in_place_round(param.data, p.params, p)
        emulation._handles.append(
            cast(Any, param).register_post_accumulate_grad_hook(emulation._grad_hook))

    def enter(module: torch.nn.Module, inputs: Any) -> None:
        emulation.__enter__()

    def leave(module: torch.nn.Module, inputs: Any, output: Any) -> None:
        emulation.__exit__()

    emulation._handles.append(model.register_forward_pre_hook(enter))
    emulation._handles.append(model.register_forward_hook(leave, always_call=True))
    setattr(model, "_fpsim_emulation", emulation)  # noqa: B010 - not a Module attribute
    return emulation
