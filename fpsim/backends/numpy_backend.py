"""The NumPy reference backend: the kernels evaluated on whole arrays, chunk by chunk."""

from __future__ import annotations

import numpy as np

from fpsim.backends._instantiate import instantiate

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
    name = "numpy"

    def __init__(self) -> None:
        self.kernels = instantiate(PRIMITIVES)

    def apply(self, kernel, operands, out, flags, spec, key, check=False) -> int:
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
                if want_flags:
                    flags[start:stop] = flag
                if check:
                    ok = np.logical_and.reduce([representable(a, spec) for a in args])
                    bad += int(np.count_nonzero(~ok))
        return bad

    def first_unrepresentable(self, x, spec) -> int:
        with np.errstate(all="ignore"):
            for start in range(0, x.size, CHUNK):
                ok = self.kernels["representable"](
                    np.asarray(x[start : start + CHUNK], dtype=np.float64), spec
                )
                bad = np.flatnonzero(~ok)
                if bad.size:
                    return start + int(bad[0])
        return -1
