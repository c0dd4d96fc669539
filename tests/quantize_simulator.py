"""fpsim.quantize under the cupy backend, in Numba's CUDA simulator, against the NumPy
backend: the same elements, flags, scales and encodings, bit for bit, for every scheme
(every MX scale rule) in every rounding mode, stochastic included, rows and columns.

Under the cupy backend quantize computes the scales on the host with the block-scaling
kernels and rounds the elements with the backend's CUDA kernels (host arrays go to the
device and back). It must run in its own process: ``NUMBA_ENABLE_CUDASIM=1`` must be set
before numba.cuda is first imported::

    NUMBA_ENABLE_CUDASIM=1 python tests/quantize_simulator.py

Prints one line per difference and a summary; exit status 1 on any difference.
"""

from __future__ import annotations

import os
import sys
import warnings

import numpy as np

import fpsim
from fpsim.quantize import SCALE_RULES, SCHEMES

MODES = ("nearest_even", "up", "stochastic")


def cases(rng: np.random.Generator):
    """(scheme, x, options): small arrays whose blocks reach every rule's edges, NaN,
    infinities, zeros and values far below the block's amax."""
    base = (rng.standard_normal((4, 32)) * np.logspace(-6, 6, 32)).astype(np.float32)
    base[1, :16] = 0.0
    base[2, 3] = 448.0 * (1 - 2.0**-10)
    base[3, 5] = np.float32(2.0**-149)
    special = base.copy()
    special[0, 7], special[2, 20] = np.nan, np.inf
    for name, sch in SCHEMES.items():
        # Tiles and blocks of 128: a few rows (shorter last tiles, pad=True).
        shape = (min(sch.rows, 16), max(sch.block, 32)) if sch.rows > 1 or sch.block == 128 \
            else None
        x = (rng.standard_normal(shape) * 10.0).astype(np.float32) if shape else base
        rules = list(SCALE_RULES) if sch.kind == "mx" else [sch.scale_rule]
        for rule in rules:
            for mode in MODES:
                options = dict(scale_rule=rule, rounding=mode, pad=True,
                               seed=7 if mode == "stochastic" else None)
                yield name, x, options
                if shape is None:
                    yield name, special, options
                if shape is None and mode == "stochastic":  # columns: the stream's index
                    yield name, x.T.copy(), dict(options, axis=0)


def same(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind == "f":
        return bool(np.array_equal(a.view(np.int64 if a.itemsize == 8 else np.int32),
                                   b.view(np.int64 if b.itemsize == 8 else np.int32)))
    return a.dtype == b.dtype and bool(np.array_equal(a, b))


def main() -> int:
    if os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":
        print("set NUMBA_ENABLE_CUDASIM=1 (this runs the CUDA kernels in the simulator)")
        return 2
    warnings.simplefilter("ignore")  # the simulator's NumPy scalars warn on wrapping
    differ = compared = 0
    for name, x, options in cases(np.random.default_rng(20261126)):
        with fpsim.backend("numpy"):
            want = fpsim.quantize(x, name, **options)
        with fpsim.backend("cupy"):
            got = fpsim.quantize(x, name, **options)
        for field in ("bits", "flags", "scale_bits", "scales", "values"):
            compared += 1
            if not same(getattr(got, field), getattr(want, field)):
                differ += 1
                print(f"DIFFERS {name} {options} {field}")
        if not same(np.float64([got.tensor_scale or 0.0, got.amax]),
                    np.float64([want.tensor_scale or 0.0, want.amax])):
            differ += 1
            print(f"DIFFERS {name} {options} tensor_scale or amax")
    print(f"{compared} comparisons, {differ} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
