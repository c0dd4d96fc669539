"""The one path from a public call to a kernel: checks, spec, dtype, backend call."""

from __future__ import annotations

import os
import sys
import warnings
from types import ModuleType
from typing import TYPE_CHECKING, Any, NamedTuple, cast

import numpy as np

from fpsim._checks import boolean
from fpsim._device import GPU_ARRAY_TYPES
from fpsim._dtypes import is_bfloat16
from fpsim._inputs import (
    FLOAT_DTYPES,
    array_module,
    as_dtype,
    as_float_array,
    broadcast,
    copy_exact,
    flat_operand,
    host_value,
    result_dtype,
)
from fpsim.backends import get_backend
from fpsim.bits import format_of_dtype
from fpsim.formats import MAX_ARITH_MAN_BITS, Format, as_format
from fpsim.kernels.random import mix64
from fpsim.kernels.spec import Spec, make_spec
from fpsim.modes import CODES, STOCHASTIC

if TYPE_CHECKING:
    from fpsim.backends.protocol import Backend

SEED_LIMIT = 1 << 64


def random_key(seed: int | None, mode: int) -> int | None:
    """The key of a call's random stream in rounding mode ``mode`` (a code): the stream
    of ``seed`` for stochastic rounding; None for the other modes, which draw no random
    bits, where a seed is still checked and a ``UserWarning`` says that it does nothing."""
    if mode == STOCHASTIC:
        return stream_key(seed)
    if seed is not None:
        stream_key(seed)
        name = next(k for k, v in CODES.items() if v == mode)
        warnings.warn(f"seed does nothing with rounding {name!r}, which draws no random bits "
                      "(only 'stochastic' does)", UserWarning, stacklevel=_callers_level())
    return None


def _callers_level() -> int:
    """``warnings.warn``'s stacklevel of the first frame outside fpsim, for a warning
    raised by the function that calls this one."""
    package = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and frame.f_code.co_filename.startswith(package):
        frame, level = frame.f_back, level + 1
    return level


def stream_key(seed: int | None) -> int:
    """The 64-bit key of the random stream for ``seed`` (None: fresh entropy)."""
    if seed is None:
        seed = cast(int, np.random.SeedSequence().entropy) % SEED_LIMIT
    if (isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer))
            or not 0 <= seed < SEED_LIMIT):
        raise ValueError(f"seed must be an integer in 0..2**64-1 or None, got {seed!r}")
    with np.errstate(over="ignore"):
        return int(mix64(np.array([int(seed)], dtype=np.uint64))[0])


class Plan(NamedTuple):
    """What a call's format, mode and options and its operands' dtypes and shapes decide."""

    spec: Spec
    shape: tuple[int, ...]  # the result's
    dtype: np.dtype  # the result's
    check: bool  # operands need the representability check
    flags: bool
    scalar: bool  # every operand 0-d: a scalar result
    xp: ModuleType
    stored: bool  # backends store the result's dtype (into's if given): _stored


# Plans of earlier calls: a call like one before (the same options, operands of the same
# dtypes and shapes) skips the validation that made its plan. Only options of their
# exact types are looked up, so that a value equal to a valid one (1 for True) is
# validated anew.
_PLANS: dict[tuple[Any, ...], Plan] = {}
MAX_PLANS = 4096


def elementwise(
    kernel: str,
    operands: dict[str, Any],
    fmt: Format | str,
    rounding: str,
    *,
    subnormals: bool,
    saturate: bool,
    flags: bool,
    seed: int | None,
    random_bits: int | None,
    arithmetic: bool,
    into: Any = None,
    dtype: np.dtype | None = None,
) -> Any:
    """Evaluate ``kernel`` over broadcast ``operands``; returns the result (and flags).

    ``into``: an array the result is written to, and returned (``round``'s ``out``).
    ``dtype``: the result's dtype, one holding every value of ``fmt`` (default: NumPy's
    promotion of the operands' dtypes and ``fmt.dtype``).
    """
    options = (fmt, rounding, subnormals, saturate, flags, random_bits)
    key = _plan_key(kernel, options, arithmetic, dtype, operands.values(), into)
    try:
        plan = None if key is None else _PLANS.get(key)
    except TypeError:  # an unhashable format or mode: _plan names it
        key = plan = None
    if plan is None:
        plan, arrays = _plan(kernel, operands, *options, arithmetic, into, dtype)
        if key is not None:
            if len(_PLANS) >= MAX_PLANS:
                _PLANS.clear()
            _PLANS[key] = plan
    else:
        arrays = operands  # float16/32/64 arrays of NumPy or CuPy, as _plan takes them
    if into is not None and not getattr(into.flags, "writeable", True):  # CuPy: no such flag
        raise ValueError("out is read-only")
    return _execute(kernel, plan, arrays, fmt, seed, into)


def _plan_key(kernel: str, options: tuple[Any, ...], arithmetic: bool,
              dtype: np.dtype | None, operands: Any, into: Any) -> tuple[Any, ...] | None:
    """The key of a call's plan; None for operands other than float arrays of NumPy or of
    a GPU array type already met (``_device.array_module``), or for options of other types
    than their plans were made for (1 for True: validated anew)."""
    _, _, subnormals, saturate, flags, random_bits = options
    if (type(subnormals) is not bool or type(saturate) is not bool or type(flags) is not bool
            or (random_bits is not None and type(random_bits) is not int)):
        return None
    key: tuple[Any, ...] = (kernel, arithmetic, dtype, options)
    for x in operands:
        kind = type(x)
        if (kind is not np.ndarray and kind not in GPU_ARRAY_TYPES) or x.dtype not in FLOAT_DTYPES:
            return None
        key += (kind, x.dtype, x.shape)
    if into is not None:
        kind = type(into)
        if kind is not np.ndarray and kind not in GPU_ARRAY_TYPES:
            return None
        key += (kind, into.dtype, into.shape)
    return key


def _plan(kernel: str, operands: dict[str, Any], fmt: Format | str, rounding: str,
          subnormals: bool, saturate: bool, flags: bool, random_bits: int | None,
          arithmetic: bool, into: Any, dtype: np.dtype | None) -> tuple[Plan, dict[str, Any]]:
    """A call's plan and its operands as arrays, or ValueError naming what is wrong."""
    fmt = as_format(fmt)
    spec = make_spec(fmt, rounding, subnormals, saturate, random_bits)
    flags = boolean(flags, "flags")
    if arithmetic and fmt.man_bits > MAX_ARITH_MAN_BITS:
        raise ValueError(
            f"arithmetic supports formats with man_bits <= {MAX_ARITH_MAN_BITS}; "
            f"{fmt.name} has {fmt.man_bits}"
        )
    arrays = {name: as_float_array(x, name, device=True) for name, x in operands.items()}
    xp = array_module(arrays.values())
    shape = broadcast(arrays)
    if dtype is None:
        dtype = result_dtype(*arrays.values(), fmt.dtype)
    stored = _stored(dtype if into is None else _check_into(into, shape, fmt, xp).dtype, xp)
    # Operands of a dtype whose values are the format's need no check.
    check = arithmetic and any(format_of_dtype(a.dtype) != fmt for a in arrays.values())
    scalar = all(a.ndim == 0 for a in arrays.values())
    return Plan(spec, shape, dtype, check, flags, scalar, xp, stored), arrays


def _execute(kernel: str, plan: Plan, arrays: dict[str, Any], fmt: Format | str,
             seed: int | None, into: Any) -> Any:
    """Run a planned call: its result (and flags), written to ``into`` if given."""
    xp, shape = plan.xp, plan.shape
    flat = [flat_operand(a, shape, xp) for a in arrays.values()]
    if into is not None:
        written = into if plan.stored and _direct(into, flat, xp) else None
    else:
        # A 16-bit result (float16, bfloat16) is stored by the kernels themselves.
        written = xp.empty(shape, dtype=plan.dtype) if plan.stored else None
    if written is not None:
        out = written
    else:
        work = np.dtype(np.float64) if plan.dtype == np.float64 else np.dtype(np.float32)
        out = xp.empty(shape, dtype=work)
    flag_out = xp.zeros(shape, dtype=np.uint8) if plan.flags else None
    bad = run(kernel, flat, out, flag_out, plan.spec, seed, check=plan.check)
    if bad:
        _raise_unrepresentable(get_backend(), arrays, plan.spec, as_format(fmt), xp)
    if into is not None:
        if written is None:
            copy_exact(out, into)  # values of fmt, into a dtype holding them
        return (into, flag_out) if plan.flags else into
    result = as_dtype(out, plan.dtype)
    if plan.scalar:
        result = result[()]
        flag_out = None if flag_out is None else flag_out[()]
    return (result, flag_out) if plan.flags else result


def _check_into(into: Any, shape: tuple[int, ...], fmt: Format, xp: ModuleType) -> Any:
    """``into`` if the result can be written to it exactly; ValueError naming the problem."""
    kind = "a CuPy array (the cupy backend)" if xp is not np else "a NumPy array"
    if not isinstance(into, xp.ndarray):
        raise ValueError(f"out must be {kind}, got {type(into).__name__}")
    if into.shape != shape:
        raise ValueError(f"out has shape {into.shape}; the result's shape is {shape}")
    holds = into.dtype in (np.float32, np.float64) and np.can_cast(fmt.dtype, into.dtype)
    if not holds and format_of_dtype(into.dtype) != fmt:
        raise ValueError(f"out's dtype {into.dtype} cannot hold every value of {fmt.name}: use "
                         f"float64, float32 (for formats within binary32) or a dtype of "
                         f"exactly {fmt.name}")
    return into


def _stored(dtype: np.dtype, xp: ModuleType) -> bool:
    """Whether backends store results of this dtype themselves (``Backend.apply``)."""
    return dtype in (np.float32, np.float64) or (xp is np and dtype.itemsize == 2 and (
        dtype == np.float16 or is_bfloat16(dtype)))


def _direct(into: Any, flat: list[Any], xp: ModuleType) -> bool:
    """Whether the kernel can write ``into``, of a dtype backends store (``_stored``), in
    place: contiguous, and no operand overlaps it or it is exactly an operand (each element
    read before written)."""
    if not into.flags.c_contiguous:
        return False
    for operand in flat:
        if xp.may_share_memory(operand, into):
            target = into.reshape(-1)
            if not (_address(operand, xp) == _address(target, xp)
                    and operand.dtype == target.dtype and operand.strides == target.strides):
                return False
    return True


def _address(x: Any, xp: ModuleType) -> int:
    if xp is np:
        return int(x.ctypes.data)
    return int(x.__cuda_array_interface__["data"][0])


def run(kernel: str, flat: list[np.ndarray], out: np.ndarray, flag_out: np.ndarray | None,
        spec: Spec, seed: int | None, check: bool = False, hot: bool = False) -> int:
    """The backend call alone: ``kernel`` over contiguous 1-D float32/float64 operands into
    ``out`` (and ``flag_out``); returns how many operands were unrepresentable (``check``).

    ``hot``: the caller repeats this spec many times (worth a loop compiled for it).
    """
    key = None if seed is None and spec.mode != STOCHASTIC else random_key(seed, spec.mode)
    return get_backend().apply(
        kernel, flat, out.reshape(-1), None if flag_out is None else flag_out.reshape(-1),
        spec, key, check=check, hot=hot,
    )


def _raise_unrepresentable(backend: Backend, arrays: dict[str, Any], spec: Spec, fmt: Format,
                           xp: ModuleType) -> None:
    for name, arr in arrays.items():
        flat = flat_operand(arr, arr.shape, xp)
        bad = backend.first_unrepresentable(flat, spec)
        if bad >= 0:
            where = tuple(int(i) for i in np.unravel_index(bad, arr.shape)) if arr.ndim else ()
            raise ValueError(
                f"operand {name}={host_value(flat[bad])!r} (at index {where}) is not representable "
                f"in {fmt.name}; round it first with fpsim.round"
            )
    raise AssertionError("an operand was reported unrepresentable but none was found")
