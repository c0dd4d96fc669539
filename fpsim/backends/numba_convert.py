"""Exact conversions between 16-bit float arrays (float16, ml_dtypes' bfloat16) and
float32/float64 ones, in parallel loops: NumPy converts float16 element by element
(about 1/50 of a copy's speed). ``STORES`` also serve the rounding loops, which store
16-bit results themselves.

Every conversion here is exact by contract: the narrow side's values are the wide
side's (``Backend.convert``). Binary16 goes through the CPU's conversion (F16C's
``vcvtph2ps`` / ``vcvtps2ph``, aarch64's ``fcvt``), exact on such values whatever the
rounding direction; bfloat16 is the upper half of the binary32 encoding. NaN stays
NaN: its sign and payload are free, and a float16 or float32 input's signalling NaN
reads as quiet (docs/semantics.md).
"""

from __future__ import annotations

import numba
import numpy as np
from numba import prange

from fpsim._dtypes import is_bfloat16
from fpsim.backends._instantiate import clone
from fpsim.backends.numba_half import (  # _half_f32: read by the cloned _from_half
    _bits_f32,
    _f32_bits,
    _f32_half,
    _from_half,
    _half_f32,  # noqa: F401
)

# Arrays this large or larger convert in parallel.
PARALLEL_FROM = 1 << 16


def store_value(v):
    return v


def store_binary16(v):
    """A binary16 value's encoding (exact: any rounding direction keeps it)."""
    return _f32_half(np.float32(v))


def store_bfloat16(v):
    """A bfloat16 value's encoding: the upper half of its binary32 one (NaN: the quiet NaN,
    which a NaN's upper half alone might not be)."""
    w = np.float32(v)
    return np.uint16(0x7FC0) if w != w else np.uint16((_f32_bits(w) >> 16) & 0xFFFF)


# How a loop stores its results, by output kind (``kind``).
STORES = {"wide": store_value, "binary16": store_binary16, "bfloat16": store_bfloat16}


def kind(dtype: np.dtype) -> str | None:
    """"wide" (float32, float64), "binary16" (float16), "bfloat16" (ml_dtypes'), or None."""
    if dtype in (np.float32, np.float64):
        return "wide"
    if dtype == np.float16:
        return "binary16"
    return "bfloat16" if is_bfloat16(dtype) else None


def _to_binary16(x, out):
    for i in prange(x.size):
        out[i] = store_binary16(x[i])


def _from_bfloat16(h, out):
    for i in prange(h.size):
        out[i] = _bits_f32(np.int32(np.int64(h[i]) << 16))


def _to_bfloat16(x, out):
    for i in prange(x.size):
        out[i] = store_bfloat16(x[i])


_LOOPS = {"from_binary16": _from_half, "to_binary16": _to_binary16,
          "from_bfloat16": _from_bfloat16, "to_bfloat16": _to_bfloat16}


class Conversions:
    """The loops, compiled lazily (``cache=True``) per name and parallelism."""

    def __init__(self, binary16: bool, digest: str) -> None:
        self.binary16 = binary16  # the target has binary16 conversions (numba_half)
        self.digest = digest
        self._compiled: dict = {}

    def loop(self, x_dtype: np.dtype, out_dtype: np.dtype) -> str | None:
        """The name of the loop converting ``x_dtype`` to ``out_dtype``, or None."""
        kinds = [kind(np.dtype(d)) for d in (x_dtype, out_dtype)]
        if kinds.count("wide") != 1 or None in kinds or (
                "binary16" in kinds and not self.binary16):
            return None
        return "to_" + kinds[1] if kinds[0] == "wide" else "from_" + kinds[0]

    def __call__(self, name: str, x: np.ndarray, out: np.ndarray) -> None:
        parallel = x.size >= PARALLEL_FROM
        func = self._compiled.get((name, parallel))
        if func is None:
            namespace = dict(globals(), **{f.__name__: numba.njit(inline="always")(f)
                                           for f in STORES.values()})
            func = self._compiled[name, parallel] = numba.njit(parallel=parallel, cache=True)(
                clone(_LOOPS[name], namespace, f"{name}_{int(parallel)}_{self.digest}"))
        func(x, out)
