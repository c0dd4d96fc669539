"""The GPU's own binary16 and bfloat16 conversions and arithmetic, where they are fpsim's.

PTX instructions, as inline assembly (compute capability 9.0: ``add``, ``sub`` and
``mul`` of bfloat16 and its directed conversions need it):

- ``cvt.{rn,rz,rm,rp}.{f16,bf16}.f32``: float32 to binary16 or bfloat16, correctly
  rounded in the IEEE mode named (PTX ISA, ``cvt``; no ``.ftz``: subnormals are kept;
  overflow as IEEE 754 section 7.4 says, infinity or the largest value by mode);
- ``{add,sub,mul,fma}.rn.{f16,bf16}``: correctly rounded, nearest-even; the explicit
  ``.rn`` forbids ptxas to contract them into anything else.

fpsim's rounding is these instructions' exactly when the format is binary16 (fp16) or
bfloat16 (bf16) with subnormals kept and without saturation, in the instruction's mode,
with no flags asked for (the GPU raises none fpsim could read) and no stochastic
rounding. Two differences remain, and the loops (``cuda_loops.hardware_round`` and
``hardware_arithmetic``) keep fpsim's bits across them: a NaN becomes the GPU's
canonical NaN, where fpsim gives its own quiet NaN (a NaN input, or any element whose
hardware result is NaN, takes fpsim's rule); and an instruction rounds its operands'
values, where fpsim's operation is exact on operands that are not values of the format
(an element with such an operand runs the software kernel in the same loop). An
operand is a value of the format exactly when its conversion gives it back.

Before a path is used, ``Probes`` runs its loop (the one the calls run) once per
process on inputs that exercise ties, subnormals, overflow, NaN, infinities and signed
zeros, against fpsim's NumPy backend: a path that disagrees, or fails to compile or
launch, is not used again, and a ``RuntimeWarning`` says why. Under Numba's CUDA
simulator the instructions are stand-ins computed exactly with ``fractions.Fraction``.
"""

from __future__ import annotations

import math
import warnings
from fractions import Fraction
from importlib import import_module
from typing import Any, NamedTuple

import numpy as np

from fpsim.formats import format as preset
from fpsim.kernels.spec import Spec, make_spec

FORMATS = ("fp16", "bf16")
PTX_TYPE = {"fp16": "f16", "bf16": "bf16"}
# fpsim's rounding mode -> the PTX rounding modifier of the conversion.
CONVERSION_MODES = {"nearest_even": "rn", "toward_zero": "rz", "down": "rm", "up": "rp"}
# fpsim's kernel -> the PTX instruction (nearest-even) and its operands.
ARITHMETIC = {"op_add": ("add", 2), "op_sub": ("sub", 2), "op_mul": ("mul", 2),
              "op_fma": ("fma", 3)}


class Path(NamedTuple):
    """A hardware path: ``kernel`` ("round_value" or one of ``ARITHMETIC``) on ``fmt``
    (one of ``FORMATS``) in rounding mode ``mode``."""

    kernel: str
    fmt: str
    mode: str


def _specs() -> dict[Spec, tuple[str, str]]:
    """The specs the instructions compute, random bits aside: spec -> (format, mode)."""
    return {make_spec(preset(fmt), mode, True, False, None): (fmt, mode)
            for fmt in FORMATS for mode in CONVERSION_MODES}


SPECS = _specs()
RANDOM_BITS = next(iter(SPECS)).rbits


def path(kernel: str, dtypes: tuple[np.dtype, ...], out_dtype: np.dtype, spec: Spec,
         flags: bool, stochastic: bool) -> Path | None:
    """The hardware path that computes this call exactly, or None: float32 operands and
    result, no flags, not stochastic, a spec in ``SPECS`` and a mode the kernel has.

    Examples
    --------
    >>> import numpy as np, fpsim
    >>> f32 = np.dtype(np.float32)
    >>> spec = make_spec(fpsim.format("bf16"), "toward_zero", True, False, None)
    >>> path("round_value", (f32,), f32, spec, False, False)
    Path(kernel='round_value', fmt='bf16', mode='toward_zero')
    >>> path("op_add", (f32, f32), f32, spec, False, False) is None  # nearest-even only
    True
    >>> path("round_value", (f32,), f32, spec, True, False) is None  # flags
    True
    """
    if flags or stochastic or out_dtype != np.float32 or any(d != np.float32 for d in dtypes):
        return None
    found = SPECS.get(spec._replace(rbits=RANDOM_BITS))
    if found is None:
        return None
    fmt, mode = found
    if kernel == "round_value" or (kernel in ARITHMETIC and mode == "nearest_even"):
        return Path(kernel, fmt, mode)
    return None


def spec_of(p: Path) -> Spec:
    """The spec ``p`` computes (its random bits: the default's, which it draws none of).

    Examples
    --------
    >>> spec_of(Path("op_fma", "fp16", "nearest_even")).t
    10
    """
    return next(spec for spec, found in SPECS.items() if found == (p.fmt, p.mode))


# -- the instructions ----------------------------------------------------------------


def _instruction(asm: str, result: Any, *args: Any) -> Any:
    """A numba-cuda intrinsic running the PTX ``asm`` ($0 the result, $1... the operands),
    of numba types ``result(*args)``: uint16 for a 16-bit register, float32 for f32."""
    from numba.cuda.extending import intrinsic

    ir: Any = import_module("llvmlite.ir")

    types: Any = import_module("numba.cuda.types")
    llvm = {types.uint16: (ir.IntType(16), "h"), types.float32: (ir.FloatType(), "f")}
    signature = result(*args)
    function = ir.FunctionType(llvm[result][0], [llvm[a][0] for a in args])
    constraints = ",".join(["=" + llvm[result][1]] + [llvm[a][1] for a in args])

    def codegen(context: Any, builder: Any, sig: Any, values: Any) -> Any:
        return builder.asm(function, asm, constraints, list(values), side_effect=False)

    typers = {1: lambda typingctx, a: (signature, codegen),
              2: lambda typingctx, a, b: (signature, codegen),
              3: lambda typingctx, a, b, c: (signature, codegen)}
    return intrinsic(typers[len(args)])


def device_instructions(p: Path) -> dict[str, Any]:
    """``NARROW`` (float32 to the format's bits, in ``p.mode``), ``EXACT`` (the same,
    nearest-even: exact on the format's values), ``WIDEN`` (bits to float32, exact) and,
    for arithmetic, ``OPERATE`` (three operands' bits to the result's), for the device."""
    types: Any = import_module("numba.cuda.types")
    ptx = PTX_TYPE[p.fmt]
    h, f = types.uint16, types.float32
    out: dict[str, Any] = {
        "NARROW": _instruction(f"cvt.{CONVERSION_MODES[p.mode]}.{ptx}.f32 $0, $1;", h, f),
        "EXACT": _instruction(f"cvt.rn.{ptx}.f32 $0, $1;", h, f),
        # bfloat16 is binary32's upper half (cvt.f32.bf16 needs compute capability 9.0).
        "WIDEN": (_instruction("cvt.f32.f16 $0, $1;", f, h) if p.fmt == "fp16" else
                  _instruction("{ .reg .b16 lo; mov.b16 lo, 0; mov.b32 $0, {lo, $1}; }",
                               f, h)),
    }
    if p.kernel in ARITHMETIC:
        name, arity = ARITHMETIC[p.kernel]
        # Three operands each (the loop passes three): a binary instruction ignores $3.
        operands = "$1, $2" if arity == 2 else "$1, $2, $3"
        out["OPERATE"] = _instruction(f"{name}.rn.{ptx} $0, {operands};", h, h, h, h)
    return out


# -- the simulator's stand-ins ---------------------------------------------------------


def _limits(fmt: str) -> tuple[int, int, Fraction]:
    f = preset(fmt)
    return f.man_bits, f.emin, Fraction(f.max)


def _encode(fmt: str, v: float) -> Any:
    """The encoding of ``v``, a value of ``fmt`` (or ±inf, or NaN: the canonical NaN)."""
    if v != v:
        return np.uint16(0x7FFF)
    if fmt == "fp16":
        return np.uint16(np.float16(v).view(np.uint16))
    return np.uint16(int(np.float32(v).view(np.uint32)) >> 16)


def _decode(fmt: str, bits: Any) -> Any:
    if fmt == "fp16":
        return np.float32(np.uint16(bits).view(np.float16))
    return np.float32(np.uint32(int(bits) << 16).view(np.float32))


def exact_round(v: Fraction, negative: bool, fmt: str, mode: str) -> float:
    """The exact value ``v`` (its sign ``negative`` where it is zero) rounded to ``fmt`` in
    ``mode``, IEEE 754 (subnormals, overflow by mode).

    Examples
    --------
    >>> exact_round(Fraction(1) + Fraction(1, 2**11), False, "fp16", "nearest_even")
    1.0
    >>> exact_round(Fraction(65520), False, "fp16", "nearest_even")
    inf
    >>> exact_round(Fraction(-65520), True, "fp16", "toward_zero")
    -65504.0
    """
    t, emin, largest = _limits(fmt)
    m = abs(v)
    neg = v < 0 or (v == 0 and negative)
    if m == 0:
        return -0.0 if neg else 0.0
    e = m.numerator.bit_length() - m.denominator.bit_length()
    if Fraction(2) ** e > m:
        e -= 1
    quantum = Fraction(2) ** (max(e, emin) - t)
    units, rest = divmod(m, quantum)
    half = Fraction(1, 2) * quantum
    away = {"nearest_even": rest > half or (rest == half and units % 2 == 1),
            "toward_zero": False, "up": rest > 0 and not neg, "down": rest > 0 and neg}[mode]
    r = (units + away) * quantum
    if r > largest:  # overflow: infinity, or the largest value where the mode keeps it
        to_inf = mode == "nearest_even" or (mode == "up" and not neg) or (mode == "down" and neg)
        value = math.inf if to_inf else float(largest)
    else:
        value = float(r)
    return -value if neg else value


def host_instructions(p: Path) -> dict[str, Any]:
    """``device_instructions``' stand-ins for the simulator: exact, with ``Fraction``."""
    fmt = p.fmt

    def convert(x: Any, mode: str) -> Any:
        x = float(x)
        if x != x or math.isinf(x):
            return _encode(fmt, x)
        return _encode(fmt, exact_round(Fraction(x), math.copysign(1, x) < 0, fmt, mode))

    out: dict[str, Any] = {"NARROW": lambda x: convert(x, p.mode),
           "EXACT": lambda x: convert(x, "nearest_even"),
           "WIDEN": lambda h: _decode(fmt, h)}
    if p.kernel in ARITHMETIC:
        out["OPERATE"] = lambda a, b, c: _operate(p.kernel, fmt, a, b, c)
    return out


def _operate(kernel: str, fmt: str, a: Any, b: Any, c: Any) -> Any:
    """The instruction on three operands' bits, exactly: nearest-even, IEEE specials."""
    x, y, z = (float(_decode(fmt, v)) for v in (a, b, c))
    # float64 gives IEEE's specials and the sign of an exact zero (these operations on
    # binary16 or bfloat16 values are exact in it but for fma, whose sign is right still).
    with np.errstate(all="ignore"):
        naive = {"op_add": np.float64(x) + y, "op_sub": np.float64(x) - y,
                 "op_mul": np.float64(x) * y, "op_fma": np.float64(x) * y + z}[kernel]
    if not all(math.isfinite(v) for v in (x, y, z)) or not math.isfinite(naive):
        return _encode(fmt, float(naive))  # infinities and NaN: exact as IEEE computes them
    fx, fy, fz = Fraction(x), Fraction(y), Fraction(z)
    exact = {"op_add": fx + fy, "op_sub": fx - fy, "op_mul": fx * fy,
             "op_fma": fx * fy + fz}[kernel]
    return _encode(fmt, exact_round(exact, math.copysign(1, naive) < 0, fmt, "nearest_even"))


# -- probes ------------------------------------------------------------------------------


def probe_operands(p: Path) -> list[np.ndarray]:
    """Float32 inputs of the path's probe: for a conversion, every exponent with fractions
    at and beside the ties of both formats, both signs, NaN, infinities and zeros; for
    arithmetic, pairs (triples) of the format's edge values and of seeded random values of
    the format, NaN, infinities and a value that is not of the format."""
    if p.kernel == "round_value":
        fractions = np.array([0, 1, 0x7FFFFF, 0x1000, 0x0FFF, 0x1001, 0x3000, 0x2FFF, 0x3001,
                              0x8000, 0x7FFF, 0x8001, 0x18000, 0x17FFF, 0x18001, 0x400000],
                             dtype=np.uint32)
        exponents = np.arange(256, dtype=np.uint32) << 23
        codes = (exponents[:, None] | fractions[None, :]).ravel()
        codes = np.concatenate([codes, codes | np.uint32(0x80000000),
                                np.array([0x7FA00000, 0xFFC00001], dtype=np.uint32)])
        return [codes.view(np.float32)]
    f = preset(p.fmt)
    ss, sn, eps = f.smallest_subnormal, f.smallest_normal, f.eps
    edges = np.array([0.0, -0.0, ss, -ss, 3 * ss, sn - ss, sn, -sn, 1.0, -1.0, 1 + eps,
                      -(1 + eps), 1.5, 2.0, eps / 2, -eps / 2, 3 * eps / 4, f.max, -f.max,
                      f.max / 2, 2 - eps, np.inf, -np.inf, np.nan, 1 + eps / 2],
                     dtype=np.float32)
    arity = ARITHMETIC[p.kernel][1]
    if arity == 3:  # fewer, so that the triples stay few; (1+eps)(1-eps/2) + 9*ss: a sum
        # that rounding the product first would round wrongly (double rounding)
        edges = np.array([0.0, -0.0, ss, -ss, 9 * ss, sn, 1.0, -1.0, 1 + eps, 1 - eps / 2,
                          2 - eps, f.max, -f.max, np.inf, np.nan, 1 + eps / 2],
                         dtype=np.float32)
    rng = np.random.default_rng(35)
    codes = rng.integers(0, 1 << 16, (arity, 4096), dtype=np.uint32)
    rows: list[list[int]] = codes.tolist()
    draws = [np.array([_decode(p.fmt, c) for c in row], dtype=np.float32) for row in rows]
    grid = np.meshgrid(*[edges] * arity, indexing="ij")
    return [np.concatenate([g.ravel(), d]) for g, d in zip(grid, draws, strict=True)]


class Probes:
    """Each path's probe, run once per process (``sound``): the loop a call would run, on
    ``probe_operands``, against fpsim's NumPy backend."""

    def __init__(self) -> None:
        self._sound: dict[Path, bool] = {}

    def sound(self, p: Path, run: Any) -> bool:
        """Whether ``p`` may be used: ``run(operands, out) -> bad`` runs its loop (with the
        operand check) and copies the result to the host array ``out``."""
        found = self._sound.get(p)
        if found is None:
            found = self._sound[p] = self._probe(p, run)
        return found

    def known(self, p: Path) -> bool | None:
        """The probe's verdict on ``p``, None if it has not run."""
        return self._sound.get(p)

    @staticmethod
    def _probe(p: Path, run: Any) -> bool:
        from fpsim.backends.numpy_backend import Backend as Reference

        operands = probe_operands(p)
        spec = spec_of(p)
        check = p.kernel != "round_value"
        want = np.empty(operands[0].size, np.float32)
        want_bad = Reference().apply(p.kernel, operands, want, None, spec, None, check=check)
        got = np.empty_like(want)
        try:
            got_bad = run(operands, got)
        except Exception as exc:  # noqa: BLE001 (any failure: the software kernel runs)
            _warn(p, f"it failed to run: {type(exc).__name__}: {exc}")
            return False
        differ = np.flatnonzero(got.view(np.uint32) != want.view(np.uint32))
        if differ.size or got_bad != want_bad:
            if differ.size:
                i = differ[0]
                args = ", ".join(f"{v[i]!r}" for v in operands)
                why = (f"{differ.size} of {got.size} probes differ (first: ({args}) gave "
                       f"{got[i]!r}, fpsim {want[i]!r})")
            else:
                why = f"its operand check counted {got_bad}, fpsim's {want_bad}"
            _warn(p, why)
            return False
        return True


def _warn(p: Path, why: str) -> None:
    warnings.warn(f"the GPU's {p.fmt} {p.kernel} ({p.mode}) is not used: {why}; the software "
                  "kernel runs instead", RuntimeWarning, stacklevel=4)
