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
from dataclasses import dataclass, field, fields, replace

from fpsim.formats import Format, as_format
from fpsim.modes import mode_code

ORDERS = ("sequential", "pairwise", "any")
FORMAT_FIELDS = ("params", "compute", "accum", "reduce", "output")
_NATIVE = ("fp16", "fp32", "fp64")

_stack: contextvars.ContextVar[tuple] = contextvars.ContextVar("fpsim_policy", default=())


@dataclass(frozen=True)
class Policy:
    """Formats and rounding of every operation category; a context manager.

    ``native=True`` runs the same operations in NumPy's own float16/32/64
    arithmetic instead of emulation (only fp16, fp32 and fp64 then).
    ``overrides`` maps an operation name (``"softmax"``, ``"exp"``, ``"linear"``,
    ...) to the policy that operation uses instead.
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
    overrides: tuple[tuple[str, Policy], ...] = ()

    def __post_init__(self) -> None:
        for name in FORMAT_FIELDS:
            object.__setattr__(self, name, as_format(getattr(self, name)))
        mode_code(self.rounding)
        mode_code(self.accum_rounding)
        if self.order not in ORDERS:
            raise ValueError(f"unknown order {self.order!r}; known orders: {', '.join(ORDERS)}")
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
        if isinstance(self.overrides, dict):
            object.__setattr__(self, "overrides", tuple(self.overrides.items()))
        for op, sub in self.overrides:
            if not isinstance(op, str) or not isinstance(sub, Policy):
                raise ValueError(f"an override maps an operation name to a Policy, got {op!r}")
            if sub.native != self.native:
                raise ValueError(f"override {op!r} mixes native and emulated arithmetic")

    @property
    def master_weights(self) -> bool:
        """Whether parameters are kept in a format wider than the compute format."""
        return self.params.precision > self.compute.precision

    def for_op(self, op: str) -> Policy:
        """The policy operation ``op`` runs under."""
        for name, sub in self.overrides:
            if name == op:
                return sub
        return self

    def replace(self, **changes) -> Policy:
        """A copy with ``changes`` (format names accepted)."""
        return replace(self, **changes)

    def __str__(self) -> str:
        parts = [f"{name}={getattr(self, name).name}" for name in FORMAT_FIELDS]
        default = Policy()
        for f in fields(self):
            if f.name in FORMAT_FIELDS or f.name == "overrides":
                continue
            if getattr(self, f.name) != getattr(default, f.name):
                parts.append(f"{f.name}={getattr(self, f.name)}")
        for op, sub in self.overrides:
            for name in FORMAT_FIELDS + ("rounding", "accum_rounding", "order"):
                if getattr(sub, name) != getattr(self, name):
                    value = getattr(sub, name)
                    parts.append(f"{op}.{name}={getattr(value, 'name', value)}")
        return ",".join(parts)

    def __enter__(self) -> Policy:
        _stack.set(_stack.get() + (self,))
        return self

    def __exit__(self, *exc) -> None:
        _stack.set(_stack.get()[:-1])


_DEFAULT = Policy()

PRESETS: dict[str, dict] = {
    "fp32": {},
    "fp64": dict(params="fp64", compute="fp64", accum="fp64", reduce="fp64", output="fp64"),
    "mixed": dict(compute="fp16"),
    "fp16": dict(params="fp16", compute="fp16", accum="fp16", reduce="fp16", output="fp16"),
    "bf16": dict(compute="bf16"),
    "native_fp32": dict(native=True),
    "native_fp16": dict(compute="fp16", native=True),
}


def parse(text: str) -> Policy:
    """A policy from a preset name and/or ``key=value`` pairs.

    ``"mixed"``, ``"params=fp32,compute=fp16,accum=fp32"``,
    ``"mixed,accum=fp16"``, ``"compute=fp16,softmax.compute=fp32"`` (an override).
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"a policy string needs a preset or key=value pairs, got {text!r}")
    base: dict = {}
    ops: dict[str, dict] = {}
    for token in (t.strip() for t in text.split(",")):
        if "=" not in token:
            if token not in PRESETS:
                raise ValueError(
                    f"unknown policy preset {token!r}; known presets: {', '.join(PRESETS)}"
                )
            base.update(PRESETS[token])
            continue
        key, value = (s.strip() for s in token.split("=", 1))
        op, _, key = key.rpartition(".")
        (ops.setdefault(op, {}) if op else base)[key] = _value(key, value)
    policy = Policy(**base)
    overrides = tuple((op, Policy(**{**base, **changes})) for op, changes in ops.items())
    return policy.replace(overrides=overrides) if overrides else policy


def _value(key: str, value: str):
    known = {f.name: f for f in fields(Policy)}
    if key not in known or key == "overrides":
        names = ", ".join(n for n in known if n != "overrides")
        raise ValueError(f"unknown policy key {key!r}; known keys: {names}")
    if key in ("subnormals", "native"):
        if value.lower() not in ("true", "false", "1", "0", "on", "off"):
            raise ValueError(f"{key} takes true or false, got {value!r}")
        return value.lower() in ("true", "1", "on")
    if key == "seed":
        return int(value)
    return value


def as_policy(policy: Policy | str | None) -> Policy:
    """Accept a Policy, a policy string, or None (the current policy)."""
    if policy is None:
        return current()
    if isinstance(policy, Policy):
        return policy
    if isinstance(policy, str):
        return parse(policy)
    raise ValueError(f"expected a Policy or a policy string, got {policy!r}")


def current() -> Policy:
    """The innermost active policy (``with policy:``), else fp32 emulation."""
    stack = _stack.get()
    return stack[-1] if stack else _DEFAULT
