"""Scaling recipes at run time: amax histories and scales, quantized GEMM operands, the
weights' once-per-step quantizations, and the products of quantized operands.

Every operand is a matrix of rows by K (the product's reduction axis), quantized along K:
a product ``A @ B`` takes A's rows and B's columns (B transposed), so that a tensor's
columnwise quantization is its transpose's rowwise one. ``docs/training.md`` ("FP8 and
FP4 recipes") states every rule.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from fpsim import _device
from fpsim.formats import PRESETS as FORMATS
from fpsim.formats import Format

if TYPE_CHECKING:
    from fpsim.precision.policy import Policy
    from fpsim.precision.recipes import Recipe, Scaling
    from fpsim.quantize.quantized import Quantized

__all__ = ["DelayedState", "Operand", "QuantizationEvent", "advance", "bind", "kept",
           "observers", "states", "step_observers"]

F32 = np.float32
_F32_MAX = F32(np.finfo(np.float32).max)
_SIGN_EXPONENT = np.uint32(0xFF800000)


@dataclass
class QuantizationEvent:
    """One quantization of a recipe, as ``observers`` see it.

    Attributes
    ----------
    owner : object
        The tensor whose layer quantized it (the weight Parameter), or None.
    category : str
        ``"act"``, ``"weight"``, ``"grad"`` or ``"wgrad"``.
    scaling : Scaling
        The category's scaling.
    amax : float
        The largest magnitude quantized (NaN ignored).
    scale : float
        The largest decode scale (``element * scale`` is the value; NVFP4's block scale
        times its tensor scale).
    saturated, flushed : int
        Elements whose rounding overflowed and was clamped to the format's largest value;
        nonzero values that became zero.
    scale_underflow : int
        Blocks with a nonzero amax whose scale its format could not hold (``docs``).
    size, blocks : int
        Elements and blocks quantized.
    state : DelayedState or None
        A delayed scaling's state (its history and scale as used).
    """

    owner: Any
    category: str
    scaling: Scaling
    amax: float
    scale: float
    saturated: int
    flushed: int
    scale_underflow: int
    size: int
    blocks: int
    state: DelayedState | None


#: Called with each ``QuantizationEvent`` while registered (``fpsim.training.monitor``'s
#: ``RecipeMonitor``); nothing is counted while it is empty.
observers: list[Callable[[QuantizationEvent], object]] = []
#: Called with the parameters of each step that ends (``advance``), before the delayed
#: scales are updated.
step_observers: list[Callable[[list[Any]], object]] = []


class DelayedState:
    """A tensor's delayed scaling (TransformerEngine's ``DelayedScaling``): its amax history,
    binary32 scale and inverse.

    ``record`` keeps the step's largest amax in ``history[0]``; ``update`` (once per step,
    ``advance``) rolls the history and computes the scale, as TransformerEngine's
    ``amax_and_scale_update`` kernel (``transformer_engine/common/recipe/delayed_scaling.cu``):
    the history moves one place toward its start, the step's amax going to its end and
    position 0 zeroed; the amax is the window's largest (``max``) or the step's
    (``most_recent``); ``scale = (max * 2**-margin) / amax`` in binary32, the previous scale
    where amax is zero or not finite, ``FLT_MAX`` where the division overflows;
    ``scale_inv = 1 / scale``. The scale starts at 1.

    Parameters
    ----------
    scaling : Scaling
        A delayed scaling (its history length, algorithm, margin, interval, pow2).

    Attributes
    ----------
    history : numpy.ndarray of float32
        The amaxes, ``history[0]`` the current step's.
    scale, scale_inv : numpy.float32
        The scale that multiplies values before rounding, and its inverse.
    updates : int
        Updates so far.

    Examples
    --------
    >>> from fpsim.precision.recipes import scaling
    >>> s = DelayedState(scaling("fp8_e4m3:delayed:history=2"))
    >>> s.record(2.0); s.update()
    >>> float(s.scale), s.history.tolist()
    (224.0, [0.0, 2.0])
    >>> s.record(0.5); s.update()  # the window still holds 2.0
    >>> float(s.scale), s.history.tolist()
    (224.0, [0.0, 0.5])
    """

    def __init__(self, scaling: Scaling) -> None:
        self.scaling = scaling
        self.history = np.zeros(scaling.history, dtype=np.float32)
        self.scale = F32(1.0)
        self.scale_inv = F32(1.0)
        self.updates = 0

    def record(self, amax: float) -> None:
        """Keep ``amax`` in ``history[0]`` if it is the step's largest (NaN is ignored, as
        ``fmaxf`` ignores it)."""
        with np.errstate(over="ignore"):
            a = F32(amax)
        if not np.isnan(a):
            self.history[0] = max(self.history[0], a)

    def update(self) -> None:
        """Roll the history and, every ``interval`` updates, compute the scale."""
        s = self.scaling
        last = self.history[0]
        window = np.concatenate([self.history[1:], [last]]).astype(np.float32)
        amax = window.max() if s.algo == "max" else last
        window[0] = 0.0
        self.history = window
        self.updates += 1
        if (self.updates - 1) % s.interval:
            return
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            scaled_max = F32(F32(s.format.max) * F32(2.0 ** -s.margin))
            if np.isfinite(amax) and amax > 0:
                self.scale = F32(scaled_max / amax)
            if np.isinf(self.scale):
                self.scale = _F32_MAX
            if s.pow2:
                self.scale = _pow2(self.scale)
            self.scale_inv = F32(F32(1.0) / self.scale)


def _pow2(scale: np.float32) -> np.float32:
    """The scale's fraction bits cleared: a power of two, rounded down (TransformerEngine's
    ``force_pow_2_scales``)."""
    bits = np.array([scale], dtype=np.float32).view(np.uint32) & _SIGN_EXPONENT
    cleared: np.float32 = bits.view(np.float32)[0]
    return cleared


# Each tensor's delayed-scaling states, by (category, what): kept while the tensor lives.
_STATES: weakref.WeakKeyDictionary[Any, dict[str, DelayedState]] = weakref.WeakKeyDictionary()
# Each weight's quantizations of this step, by orientation.
_WEIGHTS: weakref.WeakKeyDictionary[Any, dict[Any, Any]] = weakref.WeakKeyDictionary()
# The weights of layers left in higher precision (Recipe.keep), by recipe (held weakly:
# a model's weights go when the model does).
_KEPT: dict[Any, weakref.WeakSet[Any]] = {}


def states(owner: Any) -> dict[str, DelayedState]:
    """The delayed-scaling states a layer's weight ``owner`` (a Tensor) holds, by category.

    Raises
    ------
    ValueError
        For an owner that is not a Tensor (no history could be kept with it).
    """
    from fpsim.autograd.tensor import Tensor

    try:
        if not isinstance(owner, Tensor):
            raise TypeError
        return _STATES.setdefault(owner, {})
    except TypeError:
        raise ValueError(
            "delayed scaling keeps an amax history per layer: the product's weight must be a "
            "Tensor kept from step to step (a Parameter of nn.Linear, nn.Conv2d, nn.LSTM), "
            f"got {type(owner).__name__}") from None


def advance(params: Iterable[Any]) -> None:
    """End a step for the layers of ``params``: every delayed scaling's history rolls and
    its scale is recomputed (an optimizer's ``step`` calls it)."""
    params = list(params)
    for observe in list(step_observers):
        observe(params)
    for p in params:
        for state in _STATES.get(p, {}).values():
            state.update()


def bind(layers: list[tuple[str, list[Any]]], policy: Policy) -> None:
    """Mark the layers ``policy``'s recipe keeps in higher precision (``Recipe.keep``).

    ``layers`` are a model's modules in ``modules()`` order, each as its dotted name and
    the weights of its products (empty for a module without products; ``Module.to``
    passes them). ``first``/``last``/``firstN``/``lastN`` count the layers with products
    (Linear, Conv2d, LSTM); other names are modules' dotted names.

    Raises
    ------
    ValueError
        A name that is no module of the model, or more layers than it has.
    """
    recipes = {p.recipe for p in (policy, *(sub for _, sub in policy.overrides))
               if p.recipe is not None and p.recipe.keep}
    if not recipes:
        return
    gemm = [weights for _, weights in layers if weights]
    names = dict(layers)
    for r in recipes:
        chosen: list[list[Any]] = []
        for token in r.keep:
            if token.startswith(("first", "last")) and token.rstrip("0123456789") in (
                    "first", "last"):
                count = int(token[len(token.rstrip("0123456789")):] or 1)
                if count > len(gemm):
                    raise ValueError(f"keep={token}: the model has {len(gemm)} layers with "
                                     "products")
                chosen += gemm[:count] if token.startswith("first") else gemm[-count:]
            elif token in names:
                chosen.append(names[token])
            else:
                raise ValueError(f"keep={token}: no module of that name; the model's: "
                                 f"{', '.join(n for n in names if n)}")
        _KEPT.setdefault(r, weakref.WeakSet()).update(w for ws in chosen for w in ws)


def kept(recipe: Recipe, weight: Any) -> bool:
    """Whether ``weight``'s layer is left in higher precision by ``recipe``."""
    held = _KEPT.get(recipe)
    try:
        return held is not None and weight in held
    except TypeError:  # not a weakly referable weight (an array): no layer of a model
        return False


@dataclass(frozen=True)
class Operand:
    """A GEMM operand of rows by K, quantized along K.

    Attributes
    ----------
    values : numpy.ndarray
        (rows, K): the elements (values of ``fmt``); an MX or NVFP4 operand's are its
        ``quantized.values``, decoded on first use (its product reads the elements times
        their scales, which quantizing wrote).
    fmt : Format
        The elements' format.
    scales : numpy.ndarray or None
        (rows or 1, blocks along K): binary32 decode scales (the value is element times
        scale); None for an MX or NVFP4 operand, whose product is ``quantized``'s.
    block : int
        Elements of K per scale.
    quantized : Quantized or None
        The MX or NVFP4 quantization (blocks along K).
    """

    elements: Any
    fmt: Format
    scales: Any
    block: int
    quantized: Quantized | None = None

    @property
    def values(self) -> Any:
        """The elements, (rows, K)."""
        if self.elements is None:
            return self._quantized().values
        return self.elements

    @property
    def array(self) -> Any:
        """An array of the operand, on its device."""
        return self._quantized().bits if self.elements is None else self.elements

    def _quantized(self) -> Quantized:
        if self.quantized is None:
            raise ValueError("an Operand needs its elements or its quantization")
        return self.quantized

    @property
    def per_tensor(self) -> bool:
        """Whether one scale covers the whole operand."""
        return self.scales is not None and self.scales.shape == (1, 1)


def plain(values: Any, fmt: Format) -> Operand:
    """Unquantized values (a category without a scaling): a scale of 1."""
    return Operand(values, fmt, _device.array_module(values).ones((1, 1)),
                   max(values.shape[-1], 1))


def quantize(values: Any, s: Scaling, policy: Policy, owner: Any, category: str,
             key: str = "") -> Operand:
    """``values`` (rows, K) quantized along K per ``s``: delayed scaling with ``owner``'s
    state for ``category + key``, current and block scaling by ``fpsim.quantize``; on the
    values' device (a delayed scaling's amax is read back to its state on the host)."""
    with _device.kernels(values):
        return _quantize(values, s, policy, owner, category, key)


def _quantize(values: Any, s: Scaling, policy: Policy, owner: Any, category: str,
              key: str) -> Operand:
    from fpsim.backends import array_kernels
    from fpsim.precision import numerics

    rows, k = values.shape
    seed = (numerics.seed(numerics.stream(policy, f"recipe.{category}"), "stochastic")
            if s.rounding == "stochastic" else None)
    if s.kind in ("none", "delayed"):
        state = states(owner).setdefault(category + key, DelayedState(s)) if (
            s.kind == "delayed") else None
        if state is not None and state.scaling != s:  # the recipe changed: start again
            state = states(owner)[category + key] = DelayedState(s)
        xp = _device.array_module(values)
        with np.errstate(over="ignore", invalid="ignore"):
            # Not CuPy's conversions and arithmetic on binary32: they flush subnormals.
            x32 = _device.binary32(values)
            scale = F32(1.0) if state is None else F32(state.scale)
            amax = float(xp.nanmax(xp.abs(_device.binary64(x32)))) if x32.size else 0.0
            # x * scale in binary32 (fpsim.kernels.blockscale.scaled32).
            scaled = _device.binary64(array_kernels(x32)["scaled32"](x32, scale))
        from fpsim.rounding import round as round_to

        elements, flags = round_to(scaled, s.format, s.rounding, saturate=saturates(s.format),
                                   seed=seed, random_bits=s.random_bits, flags=True)
        decode = 1.0 if state is None else float(state.scale_inv)
        op = Operand(_device.binary64(elements), s.format,
                     xp.full((1, 1), decode), max(k, 1))
        if state is not None:
            state.record(amax)
        if observers:
            _notify(owner, category, s, op, flags, amax, _device.binary64(x32), state)
        return op
    q = _quantize_blocks(values, s, seed)
    if observers:
        _notify(owner, category, s, None, q.flags, q.amax, values, None, q)
    if q.scheme.kind in ("mx", "nvfp4"):
        return Operand(None, s.format, None, q.scheme.block, q)
    block = q.scheme.block or max(k, 1)
    scales = q.scales.reshape(q.scales.shape[0] if q.scales.ndim == 2 else 1, -1)
    if q.scheme.rows > 1:  # tiles: a scale per (tile row, tile column), repeated per row
        scales = _device.array_module(scales).repeat(scales, q.scheme.rows, axis=0)[:rows]
    return Operand(q.values, s.format, scales, block)


def saturates(fmt: Format) -> bool:
    """Whether a rounding to ``fmt`` saturates: the conversions to formats of 8 bits or
    fewer do (the hardware's ``satfinite``), a wider result overflows to infinity."""
    return fmt.bits <= 8


def _quantize_blocks(values: Any, s: Scaling, seed: int | None) -> Quantized:
    """``fpsim.quantize`` of the matrix along its last axis (current scaling: the
    ``per_tensor`` scheme with the category's format)."""
    from fpsim.quantize.quantized import quantize_repeated
    from fpsim.quantize.schemes import scheme as find_scheme

    if s.kind == "current":
        sch = replace(find_scheme("per_tensor"), element=s.format)
        rule = "transformer_engine_pow2" if s.pow2 else None
        pad = False
    else:
        sch = find_scheme(str(s.scheme))
        rule = "transformer_engine_pow2" if s.pow2 else s.rule
        pad = s.pad
        if sch.kind == "blockwise" and rule in ("transformer_engine", "transformer_engine_pow2"):
            # TransformerEngine's Float8BlockScaling: compute_scale_from_amax per block or
            # tile (transformer_engine/common/recipe/recipe_common.cuh), which is
            # fpsim.quantize's current scaling with the scheme's blocks.
            current = find_scheme("per_tensor")
            sch = replace(sch, kind="current", scale_rule=rule, rules=current.rules)
    try:
        # The elements' flags only for the observers' telemetry (_notify).
        return quantize_repeated(values, sch, axis=-1, flags=bool(observers), scale_rule=rule,
                                 rounding=s.rounding, seed=seed, random_bits=s.random_bits,
                                 pad=pad)
    except ValueError as exc:
        if "pad=True" in str(exc):
            raise ValueError(f"{s}: {exc.args[0].split(': pass pad=True')[0]}; add ':pad=on' "
                             "to the scaling for a shorter last block") from None
        raise


def weight_operand(weight: Any, matrix: Any, s: Scaling | None, policy: Policy,
                   orientation: str, fmt: Format) -> Operand:
    """The weight's operand in ``orientation`` (``matrix``: its rows by K there), quantized
    once per step: kept until the weight's values change (an optimizer's step) or its
    delayed scale does."""
    if s is None:
        return plain(matrix, fmt)
    owner = weight
    try:
        cache = _WEIGHTS.setdefault(owner, {})
    except TypeError:  # not a Tensor: quantized at each use
        return quantize(matrix, s, policy, owner, "weight")
    version = _version(owner, s)
    data = getattr(owner, "data", None)

    def current(entry: Any) -> bool:
        return entry is not None and entry[0] == version and entry[1] is data

    if current(cache.get(orientation)):
        op: Operand = cache[orientation][2]
        return op
    if s.kind in ("none", "delayed", "current") and orientation == "column" and current(
            cache.get("row")):
        # One scale for the tensor: its transpose is the same quantization, transposed.
        op = transposed(cache["row"][2])
    else:
        op = quantize(matrix, s, policy, owner, "weight")
    cache[orientation] = (_version(owner, s), data, op)
    return op


def _version(owner: Any, s: Scaling) -> tuple[Any, ...]:
    """What a weight's quantization depends on besides its values: the scaling, and a
    delayed scale's updates."""
    state = _STATES.get(owner, {}).get("weight")
    return (s, None if state is None else state.updates)


def transposed(op: Operand) -> Operand:
    """A per-tensor operand's transpose (the same scale); None for another."""
    return replace(op, elements=op.values.T, block=max(op.values.shape[0], 1))


def _notify(owner: Any, category: str, s: Scaling, op: Operand | None, flags: Any,
            amax: float, source: Any, state: DelayedState | None,
            q: Quantized | None = None) -> None:
    """Tell the observers what a quantization did."""
    from fpsim.flags import OVERFLOW, UNDERFLOW

    values = q.values if q is not None else op.values  # type: ignore[union-attr]
    xp = _device.array_module(values)
    saturated = int(xp.count_nonzero(flags & OVERFLOW))
    flushed = int(xp.count_nonzero(((flags & UNDERFLOW) != 0) & (values == 0)))
    if q is not None:
        scales, underflow, blocks = _block_scale_underflow(q, source)
    else:
        scales = op.scales  # type: ignore[union-attr]
        # A per-tensor decode scale below binary32's normals (its scale near FLT_MAX).
        underflow = int(bool(amax > 0 and 0 <= abs(float(scales[0, 0])) < 2.0 ** -126))
        blocks = 1
    scale = float(xp.nanmax(scales)) if scales.size else 1.0
    if q is not None and q.tensor_scale is not None:  # NVFP4: element * block * tensor scale
        scale *= q.tensor_scale
    event = QuantizationEvent(
        owner=owner, category=category, scaling=s, amax=amax, scale=scale, saturated=saturated,
        flushed=flushed, scale_underflow=underflow, size=int(np.size(values)), blocks=blocks,
        state=state)
    for observe in list(observers):
        observe(event)


def _block_scale_underflow(q: Quantized, source: Any) -> tuple[Any, int, int]:
    """(scales, blocks whose scale underflowed, blocks): a block with a nonzero amax whose
    scale is at the bottom of its format: zero or below its normals (UE4M3, binary32), or
    E8M0's smallest, 2**-127, where an MX rule's exponent is clamped."""
    from fpsim.quantize.blocks import Blocks

    sch = q.scheme
    xp = _device.array_module(q.scales)
    x = _device.binary64(xp.asarray(source))
    if sch.name == "per_tensor":
        amax = xp.full((1, 1), q.amax)
    else:  # per_row (one block a row), and blocks or tiles
        amax = Blocks(x, sch.block or x.shape[-1], sch.rows).amax()
    scales = xp.abs(xp.asarray(q.scales, dtype=np.float64)).reshape(amax.shape)
    fmt = sch.scale_format
    with np.errstate(invalid="ignore"):
        live = xp.isfinite(amax) & (amax > 0)
        bottom = 2.0 ** fmt.emin if fmt.man_bits == 0 else fmt.smallest_normal
        low = live & ((scales < bottom) | ((fmt.man_bits == 0) & (scales == bottom)))
    return q.scales, int(xp.count_nonzero(low)), int(amax.size)


def product(a: Operand, b: Operand, policy: Policy, recipe: Recipe, pair: tuple[str, str]
            ) -> Any:
    """``A @ B^T`` of two operands (each rows by K): binary32 values (or the accumulator's
    format for MX and NVFP4 products).

    MX and NVFP4 operands: ``fpsim.matmul`` of the two ``Quantized`` (each term exact,
    summed with the policy's accumulator, or as the block-scaled instruction ``gemm``
    sums them). Operands with binary32 scales: K is cut into
    chunks (a scale block, or ``promote`` products), each chunk's element products summed
    by the tensor core ``gemm`` or the policy's accumulator; with one scale per operand the
    chunks are added in binary32 and the sum multiplied by ``fp32(scale_a * scale_b)``
    once, rounded to binary32 (the GEMM's epilogue); with block scales each chunk is
    added as ``fp32(acc + chunk * fp32(scale_a * scale_b))`` (one fused multiply-add, as
    DeepSeek-V3's promotion on the CUDA cores). On the operands' device.
    """
    with _device.kernels(a.array):
        return _product(a, b, policy, recipe, pair)


def _product(a: Operand, b: Operand, policy: Policy, recipe: Recipe, pair: tuple[str, str]
             ) -> Any:
    model = recipe.tensor_core(*pair)
    if a.quantized is not None or b.quantized is not None:
        return _block_scaled(a, b, policy, pair, model)
    k = a.values.shape[-1]
    xp = _device.array_module(a.values)
    with np.errstate(over="ignore", invalid="ignore"):
        if a.per_tensor and b.per_tensor:
            if model is not None:
                from fpsim.accumulation.blocks import block_matmul

                total = xp.asarray(block_matmul(a.values, b.values.T, model), np.float64)
            else:
                total = _chunked(a.values, b.values, policy, recipe.promote or max(k, 1))
            # fp32(scale_a * scale_b) (a (1, 1) array on the operands' device), then the
            # exact product of two binary32 values rounded once.
            alpha = _binary32(xp.asarray(a.scales, np.float64) * xp.asarray(b.scales, np.float64))
            return _binary32(total * alpha)
        chunk = min(a.block, b.block, max(k, 1))
        if recipe.promote is not None and recipe.promote < chunk:
            if chunk % recipe.promote:
                raise ValueError(f"promote={recipe.promote} does not divide the scale blocks "
                                 f"of {chunk} elements")
            chunk = recipe.promote
        if model is not None:  # the tensor core's chunks, promoted with their scales
            from fpsim.accumulation.scaled import promoted_matmul

            return _device.binary64(promoted_matmul(
                a.values, b.values.T, each_scale(a), each_scale(b).T,
                model.with_promotion(chunk)))
        from fpsim.arithmetic import fma

        acc = xp.zeros((a.values.shape[0], b.values.shape[0]))
        for start in range(0, k, chunk):
            stop = min(start + chunk, k)
            part = _chunked(a.values[:, start:stop], b.values[:, start:stop], policy,
                            stop - start)
            sa = a.scales[:, min(start // a.block, a.scales.shape[1] - 1)]
            sb = b.scales[:, min(start // b.block, b.scales.shape[1] - 1)]
            scale = _binary32(xp.asarray(sa, np.float64)[:, None]
                              * xp.asarray(sb, np.float64)[None, :])
            acc = _device.binary64(fma(part, scale, acc, "fp32"))
        return acc


def each_scale(op: Operand) -> Any:
    """Each element's decode scale, in the operand's (rows, K) shape."""
    rows, k = op.values.shape
    xp = _device.array_module(op.values)
    each = xp.repeat(xp.asarray(op.scales), op.block, axis=1)[:, :k]
    return xp.broadcast_to(each, (rows, k))


def _binary32(x: Any) -> Any:
    """``x`` rounded to binary32, nearest even (the GEMM's fp32 arithmetic), as float64
    values on its device (``fpsim.round``)."""
    from fpsim.rounding import round as round_to

    return _device.binary64(round_to(x, FORMATS["fp32"]))


def _chunked(a: Any, b: Any, policy: Policy, chunk: int) -> Any:
    """``a @ b.T`` with the policy's accumulator, in chunks of ``chunk`` products each added
    to a binary32 sum (nearest even) when there is more than one."""
    from fpsim.precision import numerics

    gemm = _gemm_policy(policy)
    k = a.shape[-1]
    xp = _device.array_module(a)
    if chunk >= k:
        return _device.binary64(numerics.matmul(a, b.T, gemm))
    from fpsim.arithmetic import add

    total = xp.zeros((a.shape[0], b.shape[0]))
    for start in range(0, k, chunk):
        part = numerics.matmul(a[:, start:start + chunk], b[:, start:start + chunk].T, gemm)
        total = _device.binary64(add(total, _binary32(part), "fp32"))
    return total


def _gemm_policy(policy: Policy) -> Policy:
    """The policy of a quantized product's sums: the accumulator's, results in binary32."""
    held = policy.__dict__.get("_recipe_gemm")
    if held is None:
        held = replace(policy, compute=FORMATS["fp32"], model=None, recipe=None, overrides=(),
                       category="recipe.gemm")
        object.__setattr__(policy, "_recipe_gemm", held)
    gemm: Policy = held
    return gemm


def _block_scaled(a: Operand, b: Operand, policy: Policy, pair: tuple[str, str],
                  model: Any) -> Any:
    """``fpsim.matmul`` of two MX or NVFP4 operands, B's quantization transposed to K by N:
    summed by the block-scaled instruction ``model``, or by the policy's accumulator."""
    from fpsim.accumulation import matmul
    from fpsim.precision import numerics

    qa: Any = a.quantized
    qb: Any = b.quantized
    if a.quantized is None or b.quantized is None:
        raise ValueError(f"{pair[0]} and {pair[1]}: an MX or NVFP4 operand's product takes "
                         "another MX or NVFP4 operand (fpsim.quantize's product)")
    xp = _device.array_module(qa.bits)
    if model is not None and xp is not np:
        raise NotImplementedError(
            f"{pair[0]} and {pair[1]}: the block-scaled instruction {model.name} "
            "(fpsim.accumulation.scaled.block_scaled_matmul) is computed on the host only; "
            "on device 'cuda', leave the recipe's gemm out (the policy's accumulator sums "
            "the products) or train on the cpu device")
    if model is not None:
        return _device.binary64(matmul(qa, _transpose_quantized(qb), model=model))
    gemm = _gemm_policy(policy)
    return _device.binary64(matmul(qa, _transpose_quantized(qb),
                                   accum=policy.accum, rounding=policy.accum_rounding,
                                   order=policy.order, subnormals=policy.subnormals,
                                   seed=numerics.seed(gemm, policy.accum_rounding)))


def _transpose_quantized(q: Quantized) -> Any:
    """A rows-by-K quantization as the K-by-rows operand B of a product."""
    out = replace(q, bits=q.bits.T, scales=q.scales.T, scale_bits=q.scale_bits.T,
                  flags=None if q.flags is None else q.flags.T,
                  axis=1 if q.scheme.rows > 1 else 0)
    for held in ("values", "_scaled", "_scaled32"):  # what q has decoded or kept, transposed
        if held in q.__dict__:
            out.__dict__[held] = q.__dict__[held].T
    if "_binary32_terms" in q.__dict__:  # the scales' proof holds for the transpose
        out.__dict__["_binary32_terms"] = q.__dict__["_binary32_terms"]
    return out
