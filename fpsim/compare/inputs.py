"""Inputs of the comparison cases: every class of value, ties and near-ties."""

from __future__ import annotations

from typing import Any

import numpy as np

from fpsim.bits import from_bits, to_bits
from fpsim.formats import Format, as_format
from fpsim.rounding import round as round_to


def encodings(rng: np.random.Generator, fmt: Format | str, n: int) -> np.ndarray:
    """``n`` values of ``fmt`` from uniformly random encodings: zeros, subnormals,
    normals, infinities and NaNs in their proportions among the encodings."""
    fmt = as_format(fmt)
    codes = rng.integers(0, 2**fmt.bits, n, dtype=np.uint64)
    return np.asarray(from_bits(codes, fmt), dtype=np.float64)


def near(rng: np.random.Generator, fmt: Format | str, x: np.ndarray) -> np.ndarray:
    """Values of ``fmt`` near ``x`` in exponent (cancellation, absorption, ties), by moving
    each finite element's encoding a little and its exponent by up to +-(t + 2)."""
    fmt = as_format(fmt)
    step = rng.integers(-3, 4, x.size) + (rng.integers(-fmt.man_bits - 2, fmt.man_bits + 3,
                                                       x.size) << fmt.man_bits)
    sign = rng.integers(0, 2, x.size).astype(np.int64) << (fmt.bits - 1)
    finite = np.isfinite(x)
    base = np.where(finite, x, 1.0)
    mag = to_bits(np.abs(base), fmt).astype(np.int64) + step
    top = to_bits(fmt.max, fmt).astype(np.int64)
    mag = np.clip(mag, 0, top)
    return np.asarray(from_bits((mag | sign).astype(np.uint64), fmt), dtype=np.float64)


def halves(rng: np.random.Generator, shape: int | tuple[int, ...], low: int = -8,
           high: int = 4) -> np.ndarray:
    """Finite binary16 values (float16) of moderate size: sums of many stay finite."""
    x = rng.standard_normal(shape) * np.exp2(rng.integers(low, high, shape))
    return np.asarray(round_to(x, "fp16"), dtype=np.float16)


def binary16_operands(rng: np.random.Generator, n: int, arity: int) -> list[np.ndarray]:
    """Binary16 operands (float16): the first of every class, the others half of the time
    near it."""
    first = encodings(rng, "fp16", n)
    out = [first]
    for _ in range(arity - 1):
        other = encodings(rng, "fp16", n)
        close = rng.random(n) < 0.5
        out.append(np.where(close, near(rng, "fp16", first), other))
    return [x.astype(np.float16) for x in out]


def around(rng: np.random.Generator, fmt: Format | str, n: int,
           source: type[np.floating[Any]] = np.float32) -> np.ndarray:
    """``source`` values (float32 or float64) at, between and beside values of ``fmt`` over
    its whole range and beyond: exact ties, one ``source`` ulp either side of a tie, far
    from one, subnormals of ``fmt``, overflow, infinities and NaN."""
    fmt = as_format(fmt)
    src = np.finfo(source)
    v = encodings(rng, fmt, n)
    v = np.where(np.isfinite(v), v, fmt.max)
    e = np.floor(np.log2(np.where(v == 0, fmt.smallest_subnormal, np.abs(v))))
    ulp = np.exp2(np.maximum(e, fmt.emin) - fmt.man_bits)
    tie = (v + np.copysign(ulp / 2, np.where(v == 0, 1.0, v))).astype(source)
    pick = rng.integers(0, 6, n)
    with np.errstate(over="ignore", invalid="ignore"):
        wide = (rng.standard_normal(n) * np.exp2(rng.integers(
            max(fmt.emin - fmt.man_bits - 4, src.minexp - src.nmant),
            min(fmt.emax + 4, src.maxexp - 1), n))).astype(source)
        x = np.select(
            [pick == 0, pick == 1, pick == 2, pick == 3, pick == 4],
            [tie, np.nextafter(tie, source(np.inf)), np.nextafter(tie, source(-np.inf)),
             v.astype(source), wide],
            (v + ulp * rng.uniform(-0.5, 0.5, n)).astype(source),
        )
    specials = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, fmt.max, -fmt.max],
                        dtype=source)
    x[rng.choice(n, min(n, specials.size), replace=False)] = specials[:min(n, specials.size)]
    out: np.ndarray = x.astype(source)
    return out
