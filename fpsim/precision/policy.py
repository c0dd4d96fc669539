"""Mixed-precision policy: which format each category of operation computes and stores in.

Categories follow "Mixed Precision Training" (Micikevicius et al., 2018), section 3.3:
dot products (inputs in ``compute``, products accumulated in ``accum``, result
rounded to ``compute``), reductions (statistics and sums in ``reduce``, result
stored in ``compute``; losses stored in ``output``) and pointwise operations
(``compute``). Parameters are stored in ``params``: wider than ``compute`` means a
master copy.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

from fpsim._checks import boolean, integer
from fpsim.formats import PRESETS as PRESETS_BY_NAME
from fpsim.formats import Format, as_format
from fpsim.modes import mode_code
from fpsim.precision.recipes import (
    RECIPE_KEYS,
    RECIPES,
    Recipe,
    build,
    optional_int,
    recipe_value,
)

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

ORDERS = ("sequential", "pairwise", "any")
FORMAT_FIELDS = ("params", "compute", "accum", "reduce", "output")
_NATIVE = ("fp16", "fp32", "fp64")
# The operations a policy can override (each calls fpsim.autograd.cast.op_policy).
OPERATIONS = (
    "add", "sub", "mul", "div", "neg", "pow", "relu", "tanh", "sigmoid", "exp", "log",
    "dropout", "matmul", "conv2d", "sum", "mean", "softmax", "log_softmax", "batch_norm",
    "layer_norm", "cross_entropy", "mse_loss", "reshape", "transpose", "getitem", "cat",
    "embedding",
)
# A policy's seed is combined with a count of its stochastic calls into a 64-bit seed.
SEED_LIMIT = 1 << 32

_stack: contextvars.ContextVar[tuple[Policy, ...]] = contextvars.ContextVar("fpsim_policy",
                                                                         default=())


@dataclass(frozen=True, kw_only=True)
class Policy:
    """Formats and rounding of every operation category; a context manager.

    Operations inside ``with policy:`` run under it (``current()``). Its arguments are
    keywords; ``fpsim.precision.parse`` reads a policy from text, a preset such as
    ``"mixed"`` or pairs such as ``"params=fp32,compute=fp16,accum=fp32"``.

    Parameters
    ----------
    params : Format, str or NumPy float dtype, default fp32
        Where parameters are stored; wider than ``compute`` means a master copy.
        Every format argument takes what ``fpsim.formats.as_format`` takes
        (``"fp16"``, ``np.float16``, ...).
    compute : Format or str, default fp32
        The inputs and results of pointwise and dot operations, and activations.
    accum : Format or str, default fp32
        The accumulator of dot products (``matmul``, ``linear``, ``conv2d``).
    reduce : Format or str, default fp32
        Statistics and sums of reductions, softmax and losses.
    output : Format or str, default fp32
        Where losses are stored.
    rounding : str, default "nearest_even"
        The rounding mode of every rounding but the accumulator's.
    accum_rounding : str, default "nearest_even"
        The rounding mode of the accumulator's additions.
    order : {"sequential", "pairwise", "any"}, default "any"
        The order of the accumulator's additions ("any": the fastest exact one).
    subnormals : bool, default True
        False flushes subnormal results to zero.
    native : bool, default False
        Run the same operations in NumPy's own float16/32/64 arithmetic instead of
        emulation (only fp16, fp32 and fp64 then, and nearest even).
    seed : int, optional
        The seed of stochastic rounding (0 <= seed < 2**32).
    model : str, optional
        A tensor core's block FMA (a name of ``fpsim.hw.PRESETS``, ``"H100"``) that
        computes the dot products instead of ``accum`` and ``order``: the compute format
        is its input (the GPU's instruction for that format, ``fpsim.hw.for_input``: tf32
        on ``"MI300"`` is ``MI300_XF32``), its fp32 output is rounded to ``compute``.
        ``accum`` must then be fp32 (the model's), ``order`` "any" and ``accum_rounding``
        nearest_even.
    recipe : Recipe or str, optional
        An FP8/FP4 scaling recipe (``fpsim.precision.recipes``; a name of its ``RECIPES``):
        the products of ``linear`` and ``conv2d`` (Linear, Conv2d, LSTM) quantize their
        operands per category. None (the default) changes nothing.
    overrides : dict or tuple of (str, Policy)
        Map an operation name (``"softmax"``, ``"exp"``, ``"matmul"``, ...) to the policy
        that operation uses instead (stored as a tuple of pairs).
    category : str
        Set by a parent policy on its overrides: the operation an override serves.

    Raises
    ------
    ValueError
        For an unknown format, mode, order or operation, a native policy with an
        emulated format, or an override with overrides of its own.
    TypeError
        For a positional argument (``Policy("mixed")``: a preset is read by
        ``fpsim.precision.parse("mixed")``).

    Examples
    --------
    >>> import fpsim
    >>> policy = fpsim.Policy(compute="fp16")
    >>> str(policy)
    'params=fp32,compute=fp16,accum=fp32,reduce=fp32,output=fp32'
    >>> policy.master_weights
    True
    >>> with policy:
    ...     fpsim.tensor([1.0]) + 2.0**-11
    Tensor(array([1.]), format=fp16)
    >>> fpsim.precision.parse("mixed") == policy
    True
    """

    params: Format = field(default_factory=lambda: as_format("fp32"))
    compute: Format = field(default_factory=lambda: as_format("fp32"))
    accum: Format = field(default_factory=lambda: as_format("fp32"))
    reduce: Format = field(default_factory=lambda: as_format("fp32"))
    output: Format = field(default_factory=lambda: as_format("fp32"))
    rounding: str = "nearest_even"
    accum_rounding: str = "nearest_even"
    order: str = "any"
    subnormals: bool = True
    native: bool = False
    seed: int | None = None
    model: str | None = None
    recipe: Recipe | None = None
    overrides: tuple[tuple[str, Policy], ...] = ()
    # The operation an override policy serves (set by its parent): its stochastic
    # stream is derived from the seed and this name, apart from the parent's.
    category: str = field(default="", compare=False, repr=False)

    if TYPE_CHECKING:  # what __init__ takes (the fields hold formats, from formats or names)
        def __init__(self, *, params: Format | str = ..., compute: Format | str = ...,
                     accum: Format | str = ..., reduce: Format | str = ...,
                     output: Format | str = ..., rounding: str = ...,
                     accum_rounding: str = ..., order: str = ..., subnormals: bool = ...,
                     native: bool = ..., seed: int | None = ..., model: str | None = ...,
                     recipe: Recipe | str | None = ...,
                     overrides: Sequence[tuple[str, Policy]] | Mapping[str, Policy] = ...,
                     category: str = ...) -> None: ...

    def __new__(cls, *args: object, **kwargs: object) -> Policy:
        if args:
            text = args[0] if isinstance(args[0], str) else "mixed"
            raise TypeError(f"Policy takes keyword arguments only (Policy(compute='fp16')), got "
                            f"{args[0]!r}; a preset or policy text is read by "
                            f"fpsim.precision.parse, as in parse({text!r})")
        return super().__new__(cls)

    def __post_init__(self) -> None:
        for name in FORMAT_FIELDS:
            object.__setattr__(self, name, _format(name, getattr(self, name)))
        mode_code(self.rounding)
        mode_code(self.accum_rounding)
        if not isinstance(self.order, str) or self.order not in ORDERS:
            raise ValueError(f"unknown order {self.order!r}; known orders: {', '.join(ORDERS)}")
        object.__setattr__(self, "subnormals", boolean(self.subnormals, "subnormals"))
        object.__setattr__(self, "native", boolean(self.native, "native"))
        if self.seed is not None:
            object.__setattr__(self, "seed", integer(self.seed, "seed", 0, SEED_LIMIT - 1))
        if self.native:
            for name in FORMAT_FIELDS:
                fmt = getattr(self, name)
                if fmt.name not in _NATIVE:
                    raise ValueError(
                        f"a native policy needs formats with a NumPy dtype ({', '.join(_NATIVE)}); "
                        f"{name} is {fmt.name}"
                    )
            if self.rounding != "nearest_even" or self.accum_rounding != "nearest_even":
                raise ValueError("a native policy rounds to nearest, ties to even, only")
        if self.model is not None:
            self.hardware_model()  # checked now
        if self.recipe is not None:
            made = RECIPES.get(self.recipe) if isinstance(self.recipe, str) else self.recipe
            if not isinstance(made, Recipe):
                raise ValueError(f"unknown recipe {self.recipe!r}; known recipes: "
                                 f"{', '.join(RECIPES)} (or a Recipe)")
            if self.native:
                raise ValueError("a recipe quantizes in emulation; a native policy cannot "
                                 "take one")
            if self.compute.man_bits > 23 or self.compute.exp_bits > 8:
                raise ValueError(f"a recipe's products read binary32 values: its compute "
                                 f"format must be binary32 or narrower, not "
                                 f"{self.compute.name}")
            object.__setattr__(self, "recipe", None if made.empty else made)
        overrides = self.overrides
        if isinstance(overrides, dict):
            overrides = tuple(overrides.items())
        if not isinstance(overrides, (tuple, list)):
            raise ValueError(f"overrides map operation names to policies, got {overrides!r}")
        kept: list[tuple[str, Policy]] = []
        for item in overrides:
            if not (isinstance(item, (tuple, list)) and len(item) == 2):
                raise ValueError(f"an override is (operation name, Policy), got {item!r}")
            op, sub = item
            if not isinstance(op, str) or not isinstance(sub, Policy):
                raise ValueError(f"an override maps an operation name to a Policy, got {op!r}")
            if op not in OPERATIONS:
                raise ValueError(f"unknown operation {op!r} in an override; known operations: "
                                 f"{', '.join(OPERATIONS)}")
            if sub.overrides:
                raise ValueError(f"override {op!r} has overrides of its own")
            if sub.native != self.native:
                raise ValueError(f"override {op!r} mixes native and emulated arithmetic")
            if any(op == name for name, _ in kept):
                raise ValueError(f"operation {op!r} is overridden twice")
            if _settings(sub) != _settings(self):  # an override that changes nothing is none
                kept.append((op, replace(sub, category=op)))
        object.__setattr__(self, "overrides", tuple(kept))

    def hardware_model(self) -> Any:
        """The ``fpsim.hw.BlockFMA`` of ``model`` taking the compute format, or None.

        Raises
        ------
        ValueError
            For an unknown preset, a compute format it does not take, a native policy,
            or an ``accum``, ``order`` or ``accum_rounding`` the model overrides.

        Examples
        --------
        >>> from fpsim.precision import parse
        >>> parse("mixed,model=H100").hardware_model().name
        'H100'
        """
        if self.model is None:
            return None
        if self.native:
            raise ValueError("model= emulates a tensor core; a native policy's products "
                             "are the hardware's own")
        clashes = [f"{k}={_text(getattr(self, k))}" for k, default in
                   (("accum", as_format("fp32")), ("order", "any"),
                    ("accum_rounding", "nearest_even")) if getattr(self, k) != default]
        if clashes:
            raise ValueError(f"model={self.model} fixes how products are added; drop "
                             f"{', '.join(clashes)}")
        return _hardware_model(self.model, self.compute)

    @property
    def master_weights(self) -> bool:
        """Whether parameters are kept in a format wider than the compute format.

        Examples
        --------
        >>> from fpsim.precision import parse
        >>> parse("mixed").master_weights, parse("fp16").master_weights
        (True, False)
        """
        return self.params.precision > self.compute.precision

    def for_op(self, op: str) -> Policy:
        """The policy operation ``op`` runs under: its override, or this policy.

        Parameters
        ----------
        op : str
            An operation name (``"softmax"``, ``"matmul"``, ...).

        Returns
        -------
        Policy

        Examples
        --------
        >>> from fpsim.precision import parse
        >>> policy = parse("compute=fp16,softmax.compute=fp32")
        >>> policy.for_op("softmax").compute.name, policy.for_op("exp").compute.name
        ('fp32', 'fp16')
        """
        for name, sub in self.overrides:
            if name == op:
                return sub
        return self

    def replace(self, **changes: Any) -> Policy:
        """A copy with ``changes`` (format names accepted).

        Parameters
        ----------
        **changes
            New values of fields, as the constructor takes them.

        Returns
        -------
        Policy

        Examples
        --------
        >>> from fpsim.precision import parse
        >>> str(parse("mixed").replace(accum="fp16"))
        'params=fp32,compute=fp16,accum=fp16,reduce=fp32,output=fp32'
        """
        return replace(self, **changes)

    def __str__(self) -> str:
        """The policy as ``parse`` reads it back: ``parse(str(p)) == p``."""
        parts = [f"{name}={_text(getattr(self, name))}" for name in FORMAT_FIELDS]
        default = _settings(Policy())
        mine = _settings(self)
        parts += [f"{k}={_text(v)}" for k, v in mine.items()
                  if k not in FORMAT_FIELDS and k != "recipe" and v != default[k]]
        if self.recipe is not None:
            parts += [f"{k}={v}" for k, v in self.recipe.pairs()]
        for op, sub in self.overrides:
            parts += [f"{op}.{k}={_text(v)}" for k, v in _settings(sub).items()
                      if k != "recipe" and v != mine[k]]
            if sub.recipe != self.recipe:  # the override's recipe, whole
                parts.append(f"{op}.recipe=none")
                parts += [f"{op}.{k}={v}" for k, v in (sub.recipe.pairs() if sub.recipe
                                                       else [])]
        return ",".join(parts)

    def __enter__(self) -> Policy:
        _stack.set(_stack.get() + (self,))
        return self

    def __exit__(self, *exc: object) -> None:
        _stack.set(_stack.get()[:-1])


# help() and inspect show the keyword arguments (__init__'s), not __new__'s catch-all.
_INIT = inspect.signature(Policy.__init__)
Policy.__signature__ = _INIT.replace(  # type: ignore[attr-defined]
    parameters=list(_INIT.parameters.values())[1:], return_annotation=inspect.Signature.empty)


@functools.lru_cache(maxsize=64)
def _hardware_model(model: object, compute: Format) -> Any:
    """The ``fpsim.hw`` preset ``model`` taking ``compute`` as its input: built once per
    pair (every product of a policy with ``model=`` asks for it)."""
    from fpsim.hw import PRESETS as MODELS
    from fpsim.hw import for_input

    if not isinstance(model, str) or model not in MODELS:
        raise ValueError(f"unknown model {model!r}; known models: {', '.join(sorted(MODELS))}")
    try:  # the GPU's instruction for the compute format ("MI300" with tf32: "MI300/tf32")
        return for_input(model, compute)
    except ValueError as exc:
        raise ValueError(f"model={model} with compute={compute.name}: {exc}") from None


def _format(name: str, value: object) -> Format:
    """A format field's value as a Format; ValueError naming the field."""
    try:
        return as_format(value)  # type: ignore[arg-type]  # any value: as_format says why not
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None


def _settings(policy: Policy) -> dict[str, Any]:
    """Every field but the overrides (and the category, which is not a setting)."""
    return {f.name: getattr(policy, f.name) for f in fields(policy)
            if f.name not in ("overrides", "category")}


def _text(value: object) -> str:
    """A field's value as ``parse`` reads it."""
    if isinstance(value, Format):
        return value.name if PRESETS_BY_NAME.get(value.name) == value else value.canonical_name
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


_DEFAULT = Policy()

PRESETS: dict[str, dict[str, Any]] = {
    "fp32": {},
    "fp64": dict(params="fp64", compute="fp64", accum="fp64", reduce="fp64", output="fp64"),
    "mixed": dict(compute="fp16"),
    "fp16": dict(params="fp16", compute="fp16", accum="fp16", reduce="fp16", output="fp16"),
    "bf16": dict(compute="bf16"),
    "native_fp32": dict(native=True),
    "native_fp16": dict(compute="fp16", native=True),
    # The FP8/FP4 recipes (fpsim.precision.recipes.RECIPES) over bf16 compute: the other
    # operations in bf16, fp32 master weights, as TransformerEngine runs them.
    **{name: dict(compute="bf16", recipe=r) for name, r in RECIPES.items()},
}


def parse(text: str) -> Policy:
    """A policy from a preset name and/or ``key=value`` pairs.

    ``"mixed"``, ``"params=fp32,compute=fp16,accum=fp32"``,
    ``"mixed,accum=fp16"``, ``"compute=fp16,softmax.compute=fp32"`` (an override).

    Parameters
    ----------
    text : str
        Comma-separated presets (``fp32``, ``fp64``, ``mixed``, ``fp16``, ``bf16``,
        ``native_fp32``, ``native_fp16``, and the recipes ``fp8_hybrid_delayed``,
        ``fp8_hybrid_current``, ``mxfp8``, ``nvfp4``, ``fp8_blockwise``) and ``key=value``
        pairs, applied in order, each key at most once; a key ``op.key`` sets that
        operation's override. A recipe's keys (``recipe=<name or none>``, ``act``,
        ``weight``, ``grad``, ``wgrad``, ``gemm``, ``promote``, ``rht``, ``keep``) change
        the preset's recipe, in whatever order they come.

    Returns
    -------
    Policy
        ``parse(str(policy)) == policy``.

    Raises
    ------
    ValueError
        For an unknown preset, key, operation or value, or a key given twice.

    Examples
    --------
    >>> from fpsim.precision import parse
    >>> str(parse("mixed,accum=fp16"))
    'params=fp32,compute=fp16,accum=fp16,reduce=fp32,output=fp32'
    >>> parse("fp16").params.name
    'fp16'
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"a policy string needs a preset or key=value pairs, got {text!r}")
    base: dict[str, Any] = {}
    ops: dict[str, dict[str, Any]] = {}
    recipes: dict[str, dict[str, Any]] = {}  # each scope's ("" or an operation) recipe keys
    given: dict[str, str] = {}  # each key ("compute", "softmax.compute"): its pair
    for token in (t.strip() for t in text.split(",")):
        if "=" not in token:
            if token not in PRESETS:
                raise ValueError(
                    f"unknown policy preset {token!r}; known presets: {', '.join(PRESETS)}"
                )
            base.update(PRESETS[token])
            continue
        name, value = (s.strip() for s in token.split("=", 1))
        op, _, key = name.rpartition(".")
        if op and op not in OPERATIONS:
            raise ValueError(f"unknown operation {op!r} in {token!r}; known operations: "
                             f"{', '.join(OPERATIONS)}")
        if name in given:
            raise ValueError(f"policy key {name!r} is given twice ({given[name]!r} and "
                             f"{token!r}): give each key once")
        given[name] = token
        if key in RECIPE_KEYS:
            try:
                recipes.setdefault(op, {})[key] = recipe_value(key, value)
            except ValueError as exc:
                raise ValueError(f"{op + '.' if op else ''}{exc}") from None
            ops.setdefault(op, {}) if op else None
            continue
        (ops.setdefault(op, {}) if op else base)[key] = _value(key, value)
    if "" in recipes:
        base["recipe"] = _recipe(base.get("recipe"), recipes[""], "")
    policy = Policy(**base)
    overrides = tuple((op, Policy(**{**base, **changes, "recipe": _recipe(
        changes.get("recipe", base.get("recipe")), recipes.get(op, {}), op)}))
        for op, changes in ops.items())
    return policy.replace(overrides=overrides) if overrides else policy


def _recipe(base: Recipe | None, changes: dict[str, Any], op: str) -> Recipe | None:
    """``base`` with a scope's recipe keys; ValueError naming the scope's keys."""
    try:
        return build(base, changes)
    except ValueError as exc:
        raise ValueError(f"{op + '.' if op else ''}{exc}") from None


def _value(key: str, value: str) -> Format | Recipe | str | bool | int | None:
    """The value of ``key=value``, checked: ValueError naming the key."""
    known = [f.name for f in fields(Policy) if f.name not in ("overrides", "category")]
    if key not in known:
        raise ValueError(f"unknown policy key {key!r}; known keys: {', '.join(known)}")
    if key in FORMAT_FIELDS:
        return _format(key, value)
    if key in ("rounding", "accum_rounding"):
        try:
            mode_code(value)
        except ValueError as exc:
            raise ValueError(f"{key}: {exc}") from None
    if key == "order" and value not in ORDERS:
        raise ValueError(f"order: unknown order {value!r}; known orders: {', '.join(ORDERS)}")
    if key in ("subnormals", "native"):
        if value.lower() not in ("true", "false", "1", "0", "on", "off"):
            raise ValueError(f"{key} takes true or false, got {value!r}")
        return value.lower() in ("true", "1", "on")
    if key == "model":
        return None if value.lower() == "none" else value
    if key == "recipe":
        if value.lower() == "none":
            return None
        if value not in RECIPES:
            raise ValueError(f"unknown recipe {value!r}; known recipes: {', '.join(RECIPES)}")
        return RECIPES[value]
    if key == "seed":
        return optional_int(value, f"seed takes an integer in 0..{SEED_LIMIT - 1}")
    return value


def as_policy(policy: Policy | str | None) -> Policy:
    """Accept a Policy, a policy string, or None (the current policy).

    Parameters
    ----------
    policy : Policy, str or None
        A policy, a string for ``parse``, or None.

    Returns
    -------
    Policy

    Raises
    ------
    ValueError
        For anything else, or a string ``parse`` refuses.

    Examples
    --------
    >>> from fpsim.precision import as_policy
    >>> as_policy("bf16").compute.name
    'bf16'
    """
    if policy is None:
        return current()
    if isinstance(policy, Policy):
        return policy
    if isinstance(policy, str):
        return parse(policy)
    raise ValueError(f"expected a Policy or a policy string, got {policy!r}")


def current() -> Policy:
    """The innermost active policy (``with policy:``), else fp32 emulation.

    Returns
    -------
    Policy

    Examples
    --------
    >>> from fpsim.precision import current, parse
    >>> with parse("mixed"):
    ...     current().compute.name
    'fp16'
    >>> current().compute.name
    'fp32'
    """
    stack = _stack.get()
    return stack[-1] if stack else _DEFAULT
