"""The NumPy reference backend: the kernels evaluated on whole arrays, chunk by chunk."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from fpsim.backends._instantiate import instantiate
from fpsim.backends.protocol import COUNTED_FLAGS
from fpsim.backends.schedule import PUSH_C, pairwise_program

if TYPE_CHECKING:
    from fpsim.kernels.spec import BlockSpec, Spec

CHUNK = 1 << 16

PRIMITIVES = {
    "select": np.where,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "f64_bits": lambda x: np.asarray(x, dtype=np.float64).view(np.int64),
    "bits_f64": lambda u: np.asarray(u, dtype=np.int64).view(np.float64),
    "i64_f64": lambda i: np.asarray(i).astype(np.float64),
    "f64_i64": lambda x: np.asarray(x).astype(np.int64),
    "u64": lambda i: np.asarray(i).astype(np.uint64),
    "i64": lambda u: np.asarray(u).astype(np.int64),
    "fsqrt": np.sqrt,
}


class Backend:
    """The reference backend (``fpsim.backends.protocol.Backend``)."""

    name = "numpy"

    def __init__(self) -> None:
        self.kernels = instantiate(PRIMITIVES)

    def apply(self, kernel: str, operands: Sequence[np.ndarray], out: np.ndarray,
              flags: np.ndarray | None, spec: Spec, key: int | None, check: bool = False,
              hot: bool = False) -> int:
        func = self.kernels[kernel]
        representable = self.kernels["representable"]
        want_flags = flags is not None
        bad = 0
        with np.errstate(all="ignore"):
            for start in range(0, out.size, CHUNK):
                stop = min(out.size, start + CHUNK)
                args = [np.asarray(x[start:stop], dtype=np.float64) for x in operands]
                rnd = 0
                if key is not None:
                    index = np.arange(start, stop, dtype=np.int64)
                    rnd = self.kernels["random53"](np.uint64(key), index)
                value, flag = func(*args, rnd, spec, want_flags)
                out[start:stop] = value
                if flags is not None:  # want_flags
                    flags[start:stop] = flag
                if check:
                    ok = np.logical_and.reduce([representable(a, spec) for a in args])
                    bad += int(np.count_nonzero(~ok))
        return bad

    def convert(self, x: np.ndarray, out: np.ndarray) -> None:
        np.copyto(out, x, casting="unsafe")

    def first_unrepresentable(self, x: np.ndarray, spec: Spec) -> int:
        with np.errstate(all="ignore"):
            for start in range(0, x.size, CHUNK):
                ok = self.kernels["representable"](
                    np.asarray(x[start : start + CHUNK], dtype=np.float64), spec
                )
                bad = np.flatnonzero(~ok)
                if bad.size:
                    return start + int(bad[0])
        return -1

    def narrow(self, x: np.ndarray, out: np.ndarray) -> int:
        return narrow_arrays(np, x, out)

    def accumulate(self, A: np.ndarray, B: np.ndarray, C: np.ndarray, out: np.ndarray,
                   spec: Spec, *, key: int | None, order: Literal["sequential", "pairwise"],
                   rounded: bool, has_c: bool, want_stats: bool) -> np.ndarray:
        k = self.kernels
        rows, k_len = A.shape
        groups, _, n = B.shape
        a = np.asarray(A, dtype=np.float64).reshape(groups, rows // groups, k_len)
        b = np.asarray(B, dtype=np.float64)
        stride = 2 * k_len + 1
        base = np.arange(rows * n, dtype=np.int64).reshape(a.shape[:2] + (n,)) * stride
        counts = np.zeros(5, dtype=np.int64)

        def rnd(r: int) -> Any:
            return 0 if key is None else k["random53"](np.uint64(key), base + r)

        def add(x: np.ndarray, y: np.ndarray, r: int) -> Any:
            value, flag = k["op_add"](x, y, rnd(r), spec, want_stats)
            if want_stats:
                counts[:] += count_flags(flag)
            return value

        def term(i: int, r: int, rounded: bool) -> np.ndarray:
            p = a[:, :, i, None] * b[:, None, i, :]
            return k["round_value"](p, rnd(r), spec, False)[0] if rounded else p

        c = np.asarray(C, dtype=np.float64).reshape(base.shape)
        with np.errstate(all="ignore"):
            if order == "pairwise":
                stack, adds = [], 0
                for op in pairwise_program(k_len, has_c):
                    if op >= 0:
                        # A pairwise tree sums terms rounded to the accumulator.
                        stack.append(term(op, 2 * op, True))
                    elif op == PUSH_C:
                        stack.append(c)
                    else:
                        # The addition of c comes after the tree's k_len - 1: index 2K.
                        step = 2 * k_len if adds == k_len - 1 else 2 * adds + 1
                        right = stack.pop()
                        stack.append(add(stack.pop(), right, step))
                        adds += 1
                total = stack[0] if stack else c
            else:
                total = c
                for i in range(k_len):
                    total = add(total, term(i, 2 * i, rounded), 2 * i + 1)
        out[...] = np.asarray(total).reshape(out.shape)
        return counts


    def accumulate_blocks(self, A: np.ndarray, B: np.ndarray, C: np.ndarray, out: np.ndarray,
                          hw: BlockSpec, out_spec: Spec, block: int,
                          want_stats: bool) -> np.ndarray:
        k = self.kernels
        rows, k_len = A.shape
        groups, _, n = B.shape
        a = np.asarray(A, dtype=np.float64).reshape(groups, rows // groups, k_len)
        b = np.asarray(B, dtype=np.float64)
        c = np.asarray(C, dtype=np.float64).reshape(groups, rows // groups, n)
        counts = np.zeros(5, dtype=np.int64)
        fz = k["finite_or_zero"]
        with np.errstate(all="ignore"):
            for k0 in range(0, k_len, block):
                cols = range(k0, min(k_len, k0 + block))
                pairs = [(a[:, :, i, None], b[:, None, i, :]) for i in cols]
                align = k["hw_c_exponent"](fz(c), hw)
                naive = c.copy()
                bad = k["is_nonfinite"](c)
                for x, y in pairs:
                    align = np.maximum(align, k["hw_product"](fz(x), fz(y), hw)[1])
                    share, odd = k["hw_naive"](x, y, hw)
                    naive = naive + share
                    bad = bad | odd
                total, vanished = k["hw_c_term"](fz(c), align, hw)
                vanished = np.count_nonzero(vanished)
                for x, y in pairs:
                    term, lost = k["hw_term"](fz(x), fz(y), align, hw)
                    total = total + term
                    vanished += np.count_nonzero(lost)
                value, flag = k["hw_finish"](total, align, fz(c), hw, out_spec, want_stats)
                c = k["hw_result"](value, naive, bad)
                if want_stats:
                    counts += count_flags(flag)
                    counts[2] += vanished
        out[...] = c.reshape(out.shape)
        return counts


def narrow_arrays(xp: Any, x: Any, out: Any) -> int:
    """``Backend.narrow`` in whole-array operations of the array module ``xp`` (NumPy
    or CuPy)."""
    with np.errstate(all="ignore"):
        out[...] = x
        held = (out.astype(np.float64).view(np.int64) == x.view(np.int64)) | xp.isnan(x)
    return -1 if bool(held.all()) else int(xp.argmin(held))


def count_flags(flags: np.ndarray) -> np.ndarray:
    """The ``protocol.COUNTERS`` of one array of addition flags."""
    flags = np.asarray(flags)
    return np.array([flags.size] + [np.count_nonzero(flags & f) for f in COUNTED_FLAGS])


if TYPE_CHECKING:  # mypy checks that the reference backend is what the core calls
    from fpsim.backends import protocol

    _conforms: protocol.Backend = Backend()
