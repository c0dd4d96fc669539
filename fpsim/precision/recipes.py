"""Scaling recipes of FP8 and FP4 training: how each category of GEMM operand is quantized.

A ``Recipe`` names, per category of tensor, a ``Scaling``: its element format and how its
scale is chosen. The categories are the operands of a layer's three products (forward
``Y = X W^T``, data gradient ``dX = dY W``, weight gradient ``dW = dY^T X``):

- ``act``: the forward activations X (rowwise in the forward product, columnwise in the
  weight gradient's);
- ``weight``: the weights W (quantized once per step, rowwise and columnwise);
- ``grad``: the activation gradients dY (rowwise in the data gradient, columnwise in the
  weight gradient);
- ``wgrad``: the weight gradients dW the weight-gradient product writes.

The scalings (``docs/training.md``, "FP8 and FP4 recipes", gives every rule and source):

- none: the values rounded to the format (a scale of 1), saturating;
- ``delayed``: TransformerEngine's per-tensor delayed scaling, a scale from an amax history;
- ``current``: TransformerEngine's per-tensor current scaling, a scale from the tensor;
- block: a scheme of ``fpsim.quantize`` (MX, NVFP4, blockwise FP8, per row).

A recipe is written in the policy string: ``"bf16,act=fp8_e4m3:delayed,weight=..."``;
``Recipe.pairs`` and ``recipe_pairs`` read and write those keys.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

from fpsim._checks import boolean, integer
from fpsim.formats import PRESETS as FORMATS
from fpsim.formats import Format, as_format
from fpsim.modes import mode_code

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["CATEGORIES", "KINDS", "RECIPES", "RECIPE_KEYS", "Recipe", "Scaling", "recipe",
           "scaling"]

#: The categories of tensor a recipe quantizes.
CATEGORIES = ("act", "weight", "grad", "wgrad")
#: The scalings: none (round to the format), delayed, current, block (a quantize scheme).
KINDS = ("none", "delayed", "current", "block")
AMAX_ALGOS = ("max", "most_recent")
#: The policy-string keys of a recipe (besides ``recipe=<preset>``).
RECIPE_KEYS = (*CATEGORIES, "gemm", "promote", "rht", "keep")
# Which options each kind of scaling takes.
_OPTIONS = {
    "none": ("rounding", "random_bits"),
    "delayed": ("history", "algo", "margin", "interval", "pow2", "rounding", "random_bits"),
    "current": ("pow2", "rounding", "random_bits"),
    "block": ("rule", "pow2", "rounding", "random_bits", "pad"),
}
_FORWARD = ("act", "weight")
#: The categories multiplied in each of a layer's products: forward, data gradient,
#: weight gradient.
PRODUCTS = (("act", "weight"), ("grad", "weight"), ("grad", "act"))
_KEEP_TOKEN = re.compile(r"^(first|last)([1-9][0-9]*)?$|^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*$")


@dataclass(frozen=True)
class Scaling:
    """How one category of tensor is quantized: its element format and its scale.

    Parameters
    ----------
    format : Format or str
        The elements' format (a block scheme's element format for ``kind="block"``).
    kind : {"none", "delayed", "current", "block"}, default "none"
        none: the values rounded to ``format`` with a scale of 1, saturating at its largest
        value; ``delayed``: a per-tensor binary32 scale from the amax history of earlier
        steps (TransformerEngine's ``DelayedScaling``); ``current``: a per-tensor scale
        from the tensor's own amax (``Float8CurrentScaling``); ``block``: ``scheme``'s
        blocks and scales (``fpsim.quantize``).
    scheme : str, optional
        The ``fpsim.quantize`` scheme of a block scaling (``"mxfp8_e4m3"``, ``"nvfp4"``,
        ``"nvfp4_16x16"``, ``"fp8_block1x128"``, ...).
    history : int, default 1024
        delayed: the amax history's length (at least 1).
    algo : {"max", "most_recent"}, default "max"
        delayed: the history's largest amax, or the last one.
    margin : int, default 0
        delayed: the scale maps the amax to ``max * 2**-margin``.
    interval : int, default 1
        delayed: the scale is recomputed every ``interval`` steps.
    pow2 : bool, default False
        delayed and current: the scale's fraction bits cleared (a power of two, rounded
        down), as TransformerEngine's ``force_pow_2_scales``; block: the rule
        ``transformer_engine_pow2`` (``per_tensor``, ``per_row``, and the blockwise FP8
        schemes, where it is TransformerEngine's ``Float8BlockScaling`` default).
    rule : str, optional
        block: the scale rule (the scheme's default otherwise); the blockwise FP8 schemes
        also take TransformerEngine's ``transformer_engine`` and ``transformer_engine_pow2``
        besides DeepSeek-V3's ``deepseek_v3``.
    rounding : str, default "nearest_even"
        The elements' rounding mode (``"stochastic"``: seeded by the policy's seed).
    random_bits : int, optional
        Stochastic rounding: the random bits drawn per element (``fpsim.round``'s).
    pad : bool, default False
        block: an axis that is not a multiple of the block has a shorter last block;
        without it such an axis is refused.

    Raises
    ------
    ValueError
        For an unknown format, kind, scheme, rule, algorithm or rounding mode, a history,
        interval or random-bit count below 1, or an option the kind does not take.

    Examples
    --------
    >>> from fpsim.precision.recipes import Scaling, scaling
    >>> s = scaling("fp8_e4m3:delayed:history=16")
    >>> s.kind, s.history, s.algo, str(s)
    ('delayed', 16, 'max', 'fp8_e4m3:delayed:history=16')
    >>> scaling("nvfp4:rounding=stochastic").format.name
    'fp4_e2m1'
    """

    format: Format
    kind: str = "none"
    scheme: str | None = None
    history: int = 1024
    algo: str = "max"
    margin: int = 0
    interval: int = 1
    pow2: bool = False
    rule: str | None = None
    rounding: str = "nearest_even"
    random_bits: int | None = None
    pad: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.kind, str) or self.kind not in KINDS:
            raise ValueError(f"unknown scaling {self.kind!r}; known scalings: "
                             f"{', '.join(KINDS)}")
        if self.kind == "block":
            from fpsim.quantize.schemes import scheme as find_scheme

            sch = find_scheme(self.scheme)  # type: ignore[arg-type]  # ValueError listing them
            object.__setattr__(self, "scheme", sch.name)
            given = as_format(self.format) if self.format is not None else sch.element
            if given != sch.element:
                raise ValueError(f"{sch.name}'s elements are {sch.element.name}, not "
                                 f"{given.name}")
            object.__setattr__(self, "format", sch.element)
            rules = block_rules(sch)
            if self.rule is not None and self.rule not in rules:
                raise ValueError(f"unknown scale rule {self.rule!r} for {sch.name}; known "
                                 f"rules: {', '.join(rules)}")
            if self.pow2 and "transformer_engine_pow2" not in rules:
                raise ValueError(
                    f"pow2: {sch.name}'s scales follow its own rule ({', '.join(rules)}); "
                    "power-of-two scales are an option of per_tensor, per_row and the "
                    "blockwise FP8 schemes (MX scales are powers of two already)")
            if self.pow2 and self.rule not in (None, "transformer_engine_pow2"):
                raise ValueError(f"pow2=on is the rule transformer_engine_pow2, not "
                                 f"{self.rule}: give one of them")
        else:
            if self.scheme is not None:
                raise ValueError(f"a scheme ({self.scheme!r}) belongs to block scaling, "
                                 f"not {self.kind}")
            try:
                object.__setattr__(self, "format", as_format(self.format))
            except ValueError as exc:
                raise ValueError(f"scaling format: {exc}") from None
        mode_code(self.rounding)
        object.__setattr__(self, "pow2", boolean(self.pow2, "pow2"))
        object.__setattr__(self, "pad", boolean(self.pad, "pad"))
        object.__setattr__(self, "history", integer(self.history, "history", 1, 1 << 20))
        object.__setattr__(self, "interval", integer(self.interval, "interval", 1, 1 << 30))
        object.__setattr__(self, "margin", integer(self.margin, "margin", -126, 126))
        if self.algo not in AMAX_ALGOS:
            raise ValueError(f"unknown amax algorithm {self.algo!r}; known: "
                             f"{', '.join(AMAX_ALGOS)}")
        if self.random_bits is not None:
            object.__setattr__(self, "random_bits",
                               integer(self.random_bits, "random_bits", 1, 64))
            if self.rounding != "stochastic":
                raise ValueError("random_bits is the budget of stochastic rounding: give "
                                 "rounding=stochastic too")
        default = _DEFAULT_OPTIONS
        for name in default:
            if getattr(self, name) != default[name] and name not in _OPTIONS[self.kind]:
                raise ValueError(f"{name} is not an option of {self.kind} scaling; its "
                                 f"options: {', '.join(_OPTIONS[self.kind])}")

    def __str__(self) -> str:
        """The scaling as ``scaling`` reads it back."""
        if self.kind == "block":
            head = [str(self.scheme)]
        else:
            head = [_format_text(self.format)] + ([] if self.kind == "none" else [self.kind])
        options = [f"{k}={_option_text(getattr(self, k))}" for k in _OPTIONS[self.kind]
                   if getattr(self, k) != _DEFAULT_OPTIONS[k]]
        return ":".join(head + options)


_DEFAULT_OPTIONS: dict[str, Any] = {
    f.name: f.default for f in fields(Scaling) if f.name not in ("format", "kind", "scheme")}


def _format_text(fmt: Format) -> str:
    return fmt.name if FORMATS.get(fmt.name) == fmt else fmt.canonical_name


def _option_text(value: object) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def scaling(text: str | Scaling | None) -> Scaling | None:
    """A category's scaling from its text: ``none``, a format (``fp8_e4m3``: rounded, a
    scale of 1), ``<format>:delayed`` or ``<format>:current``, or a block scheme
    (``mxfp8_e4m3``), each followed by ``:option=value`` pairs.

    Parameters
    ----------
    text : str, Scaling or None
        ``"fp8_e4m3:delayed:history=16:margin=1"``, ``"fp8_e5m2:current:pow2=on"``,
        ``"nvfp4_16x16"``, ``"nvfp4:rounding=stochastic:random_bits=16"``,
        ``"mxfp8_e4m3:pad=on"``, ``"none"``; a Scaling or None is returned as it is.

    Returns
    -------
    Scaling or None
        None for ``"none"``.

    Raises
    ------
    ValueError
        For an unknown format, scheme, scaling or option, a value out of range, or an
        option the scaling does not take (the message names it and lists the known).

    Examples
    --------
    >>> from fpsim.precision.recipes import scaling
    >>> scaling("fp8_e5m2:current").kind
    'current'
    >>> scaling("none") is None
    True
    """
    if text is None or isinstance(text, Scaling):
        return text
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"a scaling is written format[:kind][:option=value...], got {text!r}")
    parts = [p.strip() for p in text.split(":")]
    if parts == ["none"]:
        return None
    head, rest = parts[0], parts[1:]
    kind = "none"
    if rest and "=" not in rest[0]:
        kind = rest.pop(0)
        if kind not in KINDS:
            raise ValueError(f"unknown scaling {kind!r} in {text!r}; known scalings: "
                             f"{', '.join(KINDS)}")
    args: dict[str, Any] = {}
    from fpsim.quantize.schemes import SCHEMES

    if head.lower() in SCHEMES:
        if kind not in ("none", "block"):
            raise ValueError(f"{head} is a block scheme: its scales are the scheme's, not "
                             f"{kind} scaling")
        kind = "block"
        args.update(format=None, scheme=head.lower())
    elif kind == "block":
        raise ValueError(f"block scaling names a scheme of fpsim.quantize, got {head!r}; "
                         f"known schemes: {', '.join(SCHEMES)}")
    else:
        try:
            args["format"] = as_format(head)
        except ValueError:
            raise ValueError(f"unknown format or scheme {head!r} in {text!r}; known schemes: "
                             f"{', '.join(SCHEMES)}") from None
    for option in rest:
        name, eq, value = (s.strip() for s in option.partition("="))
        if not eq:
            raise ValueError(f"{option!r} in {text!r}: options are written name=value")
        if name not in _DEFAULT_OPTIONS:
            raise ValueError(f"unknown recipe option {name!r} in {text!r}; known options of "
                             f"{kind} scaling: {', '.join(_OPTIONS[kind])}")
        if name in args:
            raise ValueError(f"option {name!r} is given twice in {text!r}")
        args[name] = _option_value(name, value)
    return Scaling(kind=kind, **args)


def _option_value(name: str, value: str) -> Any:
    """A scaling option's value read from its text."""
    if name in ("pow2", "pad"):
        if value.lower() not in ("on", "off", "true", "false", "1", "0"):
            raise ValueError(f"{name} takes on or off, got {value!r}")
        return value.lower() in ("on", "true", "1")
    if name in ("history", "interval", "margin", "random_bits"):
        if not re.fullmatch(r"-?[0-9]+", value):
            raise ValueError(f"{name} takes an integer, got {value!r}")
        return int(value)
    if name == "rule" and value == "default":
        return None
    return value


@dataclass(frozen=True)
class Recipe:
    """A scaling recipe: each category's ``Scaling``, how quantized products accumulate,
    the weight gradient's Hadamard transform, and the layers left in higher precision.

    Parameters
    ----------
    act, weight, grad, wgrad : Scaling, str or None
        Forward activations, weights, activation gradients and weight gradients (as
        ``scaling`` reads them); None leaves the category in the compute format (a
        ``wgrad`` of None: the weight gradient is rounded to the compute format).
    gemm : str, optional
        A tensor core (a name of ``fpsim.hw.PRESETS``, e.g. ``"H100_FP8"``) whose block FMA
        sums the quantized elements' products, taking their formats as its inputs; or, for
        MX and NVFP4 operands, a block-scaled instruction (a name of
        ``fpsim.hw.BLOCK_SCALED``, e.g. ``"B200_MXF8F6F4"``, ``"B200_NVF4"``) that applies
        their block scales as it sums; the policy's ``accum``, ``accum_rounding`` and
        ``order`` otherwise.
    promote : int, optional
        Products per chunk summed in the reduced accumulator (``gemm``, or ``accum``)
        before each chunk is added to a binary32 accumulator (DeepSeek-V3's promotion).
    rht : int, default 0
        The size of the random Hadamard transform of the weight gradient's two operands
        along their reduction axis (NVFP4's 16; 0: none).
    rht_seed : int, default 0
        The seed of the transform's random signs (``fpsim.quantize.random_signs``).
    keep : tuple of str
        Layers left in higher precision: ``"first"``, ``"last"``, ``"firstN"``,
        ``"lastN"`` (the first or last N layers with products), or a module's dotted name
        (``"decoder"``, ``"layers.0"``); bound when the model is put under the policy
        (``model.to(policy)``, which the Trainer does).

    Raises
    ------
    ValueError
        For a forward category in fp8 e5m2 (TransformerEngine: "Pure E5M2 training is not
        supported"), an unknown tensor core or one that does not take the formats, MX or
        NVFP4 operands with a tensor core that is not block-scaled (or other operands with
        one that is, or scales it does not read), a transform size that is not a power of
        4, or a malformed ``keep``.

    Examples
    --------
    >>> from fpsim.precision.recipes import RECIPES
    >>> str(RECIPES["fp8_hybrid_delayed"].grad)
    'fp8_e5m2:delayed'
    """

    act: Scaling | None = None
    weight: Scaling | None = None
    grad: Scaling | None = None
    wgrad: Scaling | None = None
    gemm: str | None = None
    promote: int | None = None
    rht: int = 0
    rht_seed: int = 0
    keep: tuple[str, ...] = field(default=())

    if TYPE_CHECKING:
        def __init__(self, *, act: Scaling | str | None = ..., weight: Scaling | str | None = ...,
                     grad: Scaling | str | None = ..., wgrad: Scaling | str | None = ...,
                     gemm: str | None = ..., promote: int | None = ..., rht: int = ...,
                     rht_seed: int = ..., keep: tuple[str, ...] | str = ...) -> None: ...

    def __post_init__(self) -> None:
        for name in CATEGORIES:
            value = getattr(self, name)
            try:
                object.__setattr__(self, name, scaling(value))
            except ValueError as exc:
                raise ValueError(f"{name}: {exc}") from None
            s = getattr(self, name)
            if name in _FORWARD and s is not None and s.format == FORMATS["fp8_e5m2"]:
                raise ValueError(
                    f"{name}={s}: the forward pass is E4M3 in TransformerEngine's recipes "
                    "(Format.HYBRID: E4M3 forward, E5M2 gradients; 'Pure E5M2 training is "
                    "not supported'); use fp8_e4m3, or fp8_e5m2 for grad or wgrad")
        if self.promote is not None:
            object.__setattr__(self, "promote", integer(self.promote, "promote", 1, 1 << 40))
        object.__setattr__(self, "rht", integer(self.rht, "rht", 0, 1 << 12))
        object.__setattr__(self, "rht_seed", integer(self.rht_seed, "rht seed", 0, 2**64 - 1))
        if self.rht and (self.rht & (self.rht - 1) or (self.rht.bit_length() - 1) % 2):
            raise ValueError(f"rht: the Hadamard transform's size must be a power of 4 "
                             f"(16 in NVFP4's recipe), got {self.rht}")
        if self.rht and (self.act is None or self.grad is None):
            raise ValueError("rht: the transform precedes the quantization of the weight "
                             "gradient's operands; give act= and grad= scalings")
        keep = self.keep
        if isinstance(keep, str):
            keep = tuple(k for k in keep.split("+") if k) if keep != "none" else ()
        if not isinstance(keep, (tuple, list)) or not all(
                isinstance(k, str) and _KEEP_TOKEN.match(k) for k in keep):
            raise ValueError(f"keep names layers (first, last, firstN, lastN or a module's "
                             f"dotted name), joined by '+'; got {self.keep!r}")
        object.__setattr__(self, "keep", tuple(keep))
        for a, b in PRODUCTS:
            sa, sb = getattr(self, a), getattr(self, b)
            exact = [s is not None and s.kind == "block" and _exact_scales(s) for s in (sa, sb)]
            if any(exact) and not all(exact):
                raise ValueError(
                    f"{a}={sa or 'none'} with {b}={sb or 'none'}: an MX or NVFP4 operand's "
                    "product takes another MX or NVFP4 operand (fpsim.quantize's product of "
                    "two Quantized)")
            if all(exact) and _k_block(sa) != _k_block(sb):
                raise ValueError(f"{a}={sa} with {b}={sb}: a block-scaled product pairs blocks "
                                 f"of equal length along K ({_k_block(sa)} and "
                                 f"{_k_block(sb)} here)")
            if any(exact) and self.promote is not None:
                raise ValueError(f"promote: the products of {sa} operands are fpsim.quantize's "
                                 "(each term exact, then summed by accum=), which take no "
                                 "promotion")
        if self.gemm is not None:
            missing = [c for c in ("act", "weight", "grad") if getattr(self, c) is None]
            if missing:
                raise ValueError(f"gemm={self.gemm} sums quantized elements: give "
                                 f"{', '.join(missing)} a scaling too")
            for a, b in PRODUCTS:
                self.tensor_core(a, b)  # checked now

    @property
    def empty(self) -> bool:
        """Whether the recipe changes nothing (no category quantized, nothing kept)."""
        return self == Recipe()

    def tensor_core(self, a: str, b: str) -> Any:
        """The ``fpsim.hw.BlockFMA`` of ``gemm`` taking categories ``a`` and ``b``'s
        element formats (with ``promote``), the ``fpsim.hw.BlockScaledFMA`` reading them
        (a block-scaled ``gemm``), or None without a ``gemm``.

        Raises
        ------
        ValueError
            For an unknown preset, formats it does not take, MX or NVFP4 operands with a
            tensor core that is not block-scaled, or other operands (or other scales)
            with one that is.
        """
        if self.gemm is None:
            return None
        from fpsim.hw import BLOCK_SCALED
        from fpsim.hw import PRESETS as MODELS

        if not isinstance(self.gemm, str) or self.gemm not in {**MODELS, **BLOCK_SCALED}:
            raise ValueError(f"unknown gemm {self.gemm!r}; known tensor cores: "
                             f"{', '.join(sorted(MODELS))}; block-scaled instructions (MX "
                             f"and NVFP4 operands): {', '.join(BLOCK_SCALED)}")
        sa, sb = getattr(self, a), getattr(self, b)
        if self.gemm in BLOCK_SCALED:
            return _block_scaled_core(BLOCK_SCALED[self.gemm], (a, sa), (b, sb))
        for s in (sa, sb):
            if s is not None and s.kind == "block" and _exact_scales(s):
                raise ValueError(
                    f"gemm={self.gemm}: the products of {s.scheme} operands apply each block's "
                    "scales in the instruction, which a plain tensor core does not; name a "
                    f"block-scaled instruction ({', '.join(BLOCK_SCALED)}), or leave gemm "
                    "out (accum= then sums the exact terms)")
        fa = FORMATS["fp32"] if sa is None else sa.format
        fb = FORMATS["fp32"] if sb is None else sb.format
        try:
            model = MODELS[self.gemm].with_inputs(fa, fb)
        except ValueError as exc:
            raise ValueError(f"gemm={self.gemm} with {a}={fa.name}, {b}={fb.name}: "
                             f"{exc}") from None
        return model.with_promotion(self.promote) if self.promote is not None else model

    def pairs(self) -> list[tuple[str, str]]:
        """The recipe's policy-string keys and values (those not at their defaults)."""
        out: list[tuple[str, str]] = []
        for name in CATEGORIES:
            s = getattr(self, name)
            if s is not None:
                out.append((name, str(s)))
        if self.gemm is not None:
            out.append(("gemm", self.gemm))
        if self.promote is not None:
            out.append(("promote", str(self.promote)))
        if self.rht:
            out.append(("rht", str(self.rht) + (f":seed={self.rht_seed}" if self.rht_seed
                                                 else "")))
        if self.keep:
            out.append(("keep", "+".join(self.keep)))
        return out

    def __str__(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.pairs())


def _block_scaled_core(model: Any, *operands: tuple[str, Scaling | None]) -> Any:
    """``model`` (a ``fpsim.hw.BlockScaledFMA``) reading two categories' MX or NVFP4
    operands; ValueError where it cannot read them (its scale format and block, its element
    formats)."""
    from fpsim.quantize.schemes import scheme as find_scheme

    for name, s in operands:
        if s is None or s.kind != "block" or not _exact_scales(s):
            raise ValueError(
                f"gemm={model.name} is a block-scaled instruction: it multiplies MX or NVFP4 "
                f"operands with their block scales, got {name}={s or 'none'} (use a tensor "
                "core such as H100_FP8 or B200_FP8 for per-tensor and blockwise scales)")
        sch = find_scheme(str(s.scheme))
        if sch.scale_format.name != model.scale or sch.block != model.scale_block:
            raise ValueError(
                f"gemm={model.name} reads {model.scale} scales, one per {model.scale_block} "
                f"elements of K; {name}={s} has {sch.scale_format.name} scales per {sch.block}")
        if sch.element.name not in model.elements:
            raise ValueError(f"gemm={model.name} takes elements of "
                             f"{', '.join(model.elements)}, not {name}={sch.element.name}")
    (_, sa), (_, sb) = operands
    return model.with_inputs(sa.format, sb.format)  # type: ignore[union-attr]


def block_rules(sch: Any) -> tuple[str, ...]:
    """The scale rules a block scaling of scheme ``sch`` takes: the scheme's own, and for
    blockwise FP8 also TransformerEngine's ``Float8BlockScaling`` rules
    (``transformer_engine``: ``scale = max / amax`` per block, TransformerEngine's
    ``compute_scale_from_amax``; ``transformer_engine_pow2``: that scale's fraction bits
    cleared, its default), which ``fpsim.quantize``'s current scaling computes per block."""
    if sch.kind == "blockwise":
        return (*sch.rules, "transformer_engine", "transformer_engine_pow2")
    return tuple(sch.rules)


def _exact_scales(s: Scaling) -> bool:
    """Whether a block scaling's products are formed exactly per term (MX and NVFP4)."""
    from fpsim.quantize.schemes import scheme as find_scheme

    return find_scheme(str(s.scheme)).kind in ("mx", "nvfp4")


def _k_block(s: Scaling) -> int:
    from fpsim.quantize.schemes import scheme as find_scheme

    return find_scheme(str(s.scheme)).block


def optional_int(value: str, what: str) -> int | None:
    """``none`` or a non-negative integer's digits, read from a policy string; ValueError
    saying ``what`` (``"seed takes an integer"``) otherwise."""
    if value.lower() == "none":
        return None
    if not value.isdigit():
        raise ValueError(f"{what}, got {value!r}")
    return int(value)


def recipe_value(key: str, value: str) -> Any:
    """The value of recipe key ``key`` read from ``value`` (a policy string's pair)."""
    if key in CATEGORIES:
        try:
            return scaling(value)
        except ValueError as exc:
            raise ValueError(f"{key}: {exc}") from None
    if key == "gemm":
        return None if value.lower() == "none" else value
    if key == "promote":
        return optional_int(value, "promote takes a number of products")
    if key == "rht":
        size, _, seed = value.partition(":")
        if size.lower() in ("none", "off", "0"):
            if seed:
                raise ValueError(f"rht={value}: no transform takes no seed")
            return (0, 0)
        seed_text = seed.removeprefix("seed=") if seed else "0"
        if not size.isdigit() or not seed_text.isdigit() or (seed and not
                                                             seed.startswith("seed=")):
            raise ValueError(f"rht takes a size and an optional seed (rht=16, "
                             f"rht=16:seed=3), got {value!r}")
        return (int(size), int(seed_text))
    if key == "keep":
        return value
    raise ValueError(f"unknown recipe key {key!r}; known: {', '.join(RECIPE_KEYS)}")


def build(base: Recipe | None, changes: Mapping[str, Any]) -> Recipe | None:
    """``base`` (or an empty recipe) with the keys ``changes`` read by ``recipe_value``;
    None when the result changes nothing."""
    args = dict(changes)
    if "rht" in args:
        args["rht"], args["rht_seed"] = args["rht"]
    made = replace(base or Recipe(), **args)
    return None if made.empty else made


def _hybrid(kind: str) -> Recipe:
    return Recipe(act=Scaling(FORMATS["fp8_e4m3"], kind), weight=Scaling(FORMATS["fp8_e4m3"], kind),
                  grad=Scaling(FORMATS["fp8_e5m2"], kind), wgrad=Scaling(FORMATS["fp32"]))


#: The recipes by name, each after what it reproduces (``docs/training.md`` gives the
#: sources of every default): TransformerEngine's ``DelayedScaling`` and
#: ``Float8CurrentScaling`` with ``Format.HYBRID``, ``MXFP8BlockScaling``,
#: ``NVFP4BlockScaling`` (NVIDIA, arXiv 2509.25149), and ``Float8BlockScaling`` (DeepSeek-V3's
#: blockwise FP8, arXiv 2412.19437 section 3.3, with TransformerEngine's default
#: power-of-two scales).
RECIPES: dict[str, Recipe] = {
    "fp8_hybrid_delayed": _hybrid("delayed"),
    "fp8_hybrid_current": _hybrid("current"),
    "mxfp8": Recipe(act="mxfp8_e4m3:rule=transformer_engine",
                    weight="mxfp8_e4m3:rule=transformer_engine",
                    grad="mxfp8_e4m3:rule=transformer_engine", wgrad="fp32"),
    "nvfp4": Recipe(act="nvfp4", weight="nvfp4_16x16", grad="nvfp4:rounding=stochastic",
                    wgrad="fp32", rht=16, keep=("last",)),
    "fp8_blockwise": Recipe(act="fp8_block1x128:pow2=on", weight="fp8_block128x128:pow2=on",
                            grad="fp8_block1x128:pow2=on", wgrad="fp32", gemm="H100_FP8",
                            keep=("last",)),
}


def recipe(name: str | Recipe) -> Recipe:
    """A recipe by name (``RECIPES``), or a Recipe as it is.

    Raises
    ------
    ValueError
        For an unknown name (the message lists the known ones).

    Examples
    --------
    >>> from fpsim.precision.recipes import recipe
    >>> recipe("nvfp4").rht
    16
    """
    if isinstance(name, Recipe):
        return name
    if isinstance(name, str) and name in RECIPES:
        return RECIPES[name]
    raise ValueError(f"unknown recipe {name!r}; known recipes: {', '.join(RECIPES)}")
