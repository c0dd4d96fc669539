"""The operands of an accumulation: value checks, the initial accumulator, the layout."""

from __future__ import annotations

import math
from types import ModuleType
from typing import Any

import numpy as np

from fpsim._device import binary32, binary64
from fpsim._inputs import array_module, as_dtype, as_float_array, host_value
from fpsim._workspace import scratch
from fpsim.backends import get_backend
from fpsim.formats import Format
from fpsim.kernels.spec import Spec


def check_float32_values(x: Any, name: str) -> Any:
    """Products of float32 values are exact in binary64; refuse anything else.

    Returns the values as a float32 array: ``x`` itself when it is one, else, for a host
    array, a scratch array (``fpsim._workspace``) that only this call may use.
    """
    if x.dtype in (np.float16, np.float32):
        return as_dtype(x, np.float32)
    xp = array_module([x])
    narrowed = (scratch(f"narrowed {name}", x.shape, np.float32) if xp is np
                else xp.empty(x.shape, dtype=np.float32))
    flat = xp.ascontiguousarray(x).reshape(-1)
    if xp is np:
        bad = get_backend().narrow(flat, narrowed.reshape(-1))
    else:  # fpsim's conversions, not CuPy's (its kernels flush binary32 subnormals)
        narrowed.reshape(-1)[...] = binary32(flat)
        held = (binary64(narrowed.reshape(-1)).view(np.int64) == flat.view(np.int64)) | (
            xp.isnan(flat))
        bad = -1 if bool(held.all()) else int(xp.argmin(held))
    if bad >= 0:
        where = tuple(int(i) for i in np.unravel_index(bad, x.shape))
        raise ValueError(
            f"{name}[{where}]={host_value(x[where])!r} is not a float32 value; the "
            f"inputs of an accumulation must be float32 values (fp32, tf32, bf16, "
            f"fp16, fp8) so that their products are exact"
        )
    return narrowed


def initial(c: Any, shape: tuple[int, ...], fmt: Format, spec: Spec,
            xp: ModuleType = np) -> Any:
    """The initial accumulator: ``c`` broadcast to ``shape`` (values of ``fmt``), or +0,
    as a float64 array of ``xp`` (NumPy, or CuPy on the GPU)."""
    if c is None:
        return xp.zeros(shape)
    arr = xp.asarray(as_float_array(c, "c", device=True))
    try:
        flat = binary64(xp.ascontiguousarray(xp.broadcast_to(arr, shape)))
    except ValueError:
        raise ValueError(f"c of shape {arr.shape} does not broadcast to {shape}") from None
    bad = get_backend().first_unrepresentable(flat.reshape(-1), spec)
    if bad >= 0:
        raise ValueError(
            f"c={host_value(flat.reshape(-1)[bad])!r} (flat index {bad}) is not a value of the "
            f"accumulator format {fmt.name}"
        )
    return flat


def result_shape(a: Any, b: Any) -> tuple[int, ...]:
    """The shape of a @ b: the broadcast batch dimensions, then (M, N)."""
    try:
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise ValueError(
            f"batch dimensions do not broadcast: {a.shape[:-2]} and {b.shape[:-2]}"
        ) from None
    return batch + (a.shape[-2], b.shape[-1])


def layout(a: Any, b: Any, xp: ModuleType = np) -> tuple[tuple[int, ...], Any, Any]:
    """The result's shape, a as (rows, K) and b as (groups, K, N), batch dimensions broadcast.

    Row r of a pairs with b[r // (rows // groups)]; b is not copied when it is one matrix.
    Both come out as float64 (exact) arrays of ``xp``, so that each compiled loop serves
    every dtype.
    """
    m, k_len = a.shape[-2:]
    n = b.shape[-1]
    batch = result_shape(a, b)[:-2]
    single = math.prod(b.shape[:-2]) == 1
    groups = 1 if single else math.prod(batch)
    rows = math.prod(batch) * m
    a, b = xp.asarray(a), xp.asarray(b)
    a2 = binary64(xp.ascontiguousarray(xp.broadcast_to(a, batch + (m, k_len))))
    b3 = binary64(xp.ascontiguousarray(
        b.reshape(1, k_len, n) if single else xp.broadcast_to(b, batch + (k_len, n))))
    a2 = a2.reshape(rows, k_len)
    b3 = b3.reshape(groups, k_len, n)
    return batch + (m, n), a2, b3
