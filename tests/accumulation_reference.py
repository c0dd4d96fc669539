"""Exact reference for fpsim's accumulation layer (docs/accumulation.md).

Independent of fpsim. Every rounded addition is ``reference.ref_add`` (exact,
then rounded once), every rounding of a product or term is
``reference.ref_round``; the block-FMA models use Python integers. Arrays in,
float64 NumPy arrays out (values compared bit for bit by the tests).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from reference import ABSORBED, INEXACT, OVERFLOW, UNDERFLOW, as_fmt, ref_add, ref_round


@dataclass
class RefStats:
    """Counts over every rounded addition (docs/accumulation.md, stats=True)."""

    additions: int = 0
    inexact: int = 0
    absorbed: int = 0
    underflow: int = 0
    overflow: int = 0

    def record(self, flags: int) -> None:
        self.additions += 1
        self.inexact += bool(flags & INEXACT)
        self.absorbed += bool(flags & ABSORBED)
        self.underflow += bool(flags & UNDERFLOW)
        self.overflow += bool(flags & OVERFLOW)

    def as_tuple(self) -> tuple[int, int, int, int, int]:
        return (self.additions, self.inexact, self.absorbed, self.underflow, self.overflow)


class _Ctx:
    """Accumulator format, rounding mode and options, plus the stats being counted."""

    def __init__(self, accum, rounding, subnormals, saturate, stats):
        self.fmt = as_fmt(accum)
        self.mode = rounding
        self.subnormals = subnormals
        self.saturate = saturate
        self.stats = stats

    def add(self, s: float, t: float) -> float:
        r, fl = ref_add(s, t, self.fmt, self.mode, self.subnormals, self.saturate)
        self.stats.record(fl)
        return r

    def round(self, x: float) -> float:
        return ref_round(x, self.fmt, self.mode, self.subnormals, self.saturate)[0]


def _seq(terms: list[float], c: float | None, ctx: _Ctx, round_terms: bool) -> float:
    """s = c (or +0); s = round(s + t_k) for every term in order."""
    s = 0.0 if c is None else c
    for t in terms:
        s = ctx.add(s, ctx.round(t) if round_terms else t)
    return s


def _tree(terms: list[float], ctx: _Ctx) -> float:
    """Balanced tree: first ceil(n/2) terms, plus the last floor(n/2), every addition rounded."""
    n = len(terms)
    if n == 1:
        return terms[0]
    h = (n + 1) // 2
    left = _tree(terms[:h], ctx)
    right = _tree(terms[h:], ctx)
    return ctx.add(left, right)


def _pairwise(terms: list[float], c: float | None, ctx: _Ctx) -> float:
    """Terms rounded to accum, summed as a tree, then c added last (K = 0: c or +0)."""
    if not terms:
        return 0.0 if c is None else c
    s = _tree([ctx.round(t) for t in terms], ctx)
    return s if c is None else ctx.add(s, c)


def _reduce(terms, c, ctx, order, products):
    if order == "sequential":
        return _seq(terms, c, ctx, products == "rounded")
    if order == "pairwise":
        return _pairwise(terms, c, ctx)
    raise ValueError(f"reference has no order {order!r}")


def _final(res: np.ndarray, out) -> np.ndarray:
    """``out=``: the result rounded to ``out`` (nearest_even)."""
    if out is None:
        return res
    flat = [ref_round(v, out, "nearest_even")[0] for v in res.ravel().tolist()]
    return np.array(flat, dtype=np.float64).reshape(res.shape)


def ref_matmul(
    A,
    B,
    c=None,
    *,
    accum="fp32",
    rounding="nearest_even",
    order="sequential",
    products="exact",
    out=None,
    subnormals=True,
    saturate=False,
    stats=False,
):
    """Exact matmul of (..., M, K) by (..., K, N); deterministic modes only."""
    A = np.asarray(A, dtype=np.float64)
    B = np.asarray(B, dtype=np.float64)
    batch = np.broadcast_shapes(A.shape[:-2], B.shape[:-2])
    M, K = A.shape[-2:]
    K2, N = B.shape[-2:]
    if K != K2:
        raise ValueError("inner dimensions differ")
    nb = int(np.prod(batch, dtype=np.int64))
    A = np.broadcast_to(A, batch + (M, K)).reshape(nb, M, K)
    B = np.broadcast_to(B, batch + (K, N)).reshape(nb, K, N)
    shape = batch + (M, N)
    cs = None if c is None else np.broadcast_to(np.asarray(c, np.float64), shape).reshape(-1)
    st = RefStats()
    ctx = _Ctx(accum, rounding, subnormals, saturate, st)
    res = np.empty(int(np.prod(shape, dtype=np.int64)), dtype=np.float64)
    i = 0
    for b in range(A.shape[0]):
        rows, cols = A[b].tolist(), B[b].T.tolist()
        for m in range(M):
            for n in range(N):
                # Products of float32 values are exact in binary64.
                terms = [x * y for x, y in zip(rows[m], cols[n], strict=True)]
                ci = None if cs is None else float(cs[i])
                res[i] = _reduce(terms, ci, ctx, order, products)
                i += 1
    res = _final(res.reshape(shape), out)
    return (res, st) if stats else res


def ref_matmul_sequential(A, B, c=None, **kw):
    """Sequential order: s = c (or +0); s = round(s + p_k) for k = 0..K-1."""
    return ref_matmul(A, B, c, order="sequential", **kw)


def ref_matmul_pairwise(A, B, c=None, **kw):
    """Pairwise order: rounded terms as a balanced tree, then + c."""
    return ref_matmul(A, B, c, order="pairwise", **kw)


def ref_dot(a, b, c=None, **kw):
    """``fpsim.dot``: matmul(a[None, :], b[:, None])[0, 0]."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    cc = None if c is None else np.asarray(c, dtype=np.float64).reshape(1, 1)
    r = ref_matmul(a[None, :], b[:, None], cc, **kw)
    if kw.get("stats"):
        return r[0][0, 0], r[1]
    return r[0, 0]


def ref_sum(
    x,
    axis=None,
    c=None,
    *,
    accum="fp32",
    rounding="nearest_even",
    order="sequential",
    out=None,
    subnormals=True,
    saturate=False,
    stats=False,
):
    """Sum along axis (all elements in C order for None); sequential adds exact terms."""
    x = np.asarray(x, dtype=np.float64)
    if axis is None:
        rows = x.reshape(1, -1)
        shape: tuple[int, ...] = ()
    else:
        moved = np.moveaxis(x, axis, -1)
        shape = moved.shape[:-1]
        rows = moved.reshape(-1, moved.shape[-1])
    cs = None if c is None else np.broadcast_to(np.asarray(c, np.float64), shape).reshape(-1)
    st = RefStats()
    ctx = _Ctx(accum, rounding, subnormals, saturate, st)
    vals = []
    for i, row in enumerate(rows.tolist()):
        ci = None if cs is None else float(cs[i])
        vals.append(_reduce(row, ci, ctx, order, "exact"))
    res = _final(np.array(vals, dtype=np.float64).reshape(shape), out)
    return (res, st) if stats else res


# --- hardware block-FMA models ------------------------------------------------------------


def _ilog2_float(x: float) -> int:
    """floor(log2|x|) of a finite nonzero float."""
    return math.frexp(x)[1] - 1


def _param(model, name):
    return model[name] if isinstance(model, dict) else getattr(model, name)


def _has_param(model, name) -> bool:
    return name in model if isinstance(model, dict) else hasattr(model, name)


def _naive(prods, c: float) -> float:
    """IEEE result of c + sum of products when an input is infinite or NaN: NaN if any
    term is NaN (inf * 0 included) or infinities of both signs meet, else the infinity."""
    terms = [a * b for a, b in prods] + [c]
    if any(t != t for t in terms):
        return math.nan
    infs = {t for t in terms if math.isinf(t)}
    return math.nan if len(infs) > 1 else infs.pop()


def _block(prods, c, in_emin, out_fmt, frac_bits, exp_floor, out_mode,
           overflow="inf", zero_sign="positive"):
    """One block: d = c + sum of exact products, aligned, truncated, summed, rounded once.

    prods: list of (a, b) input values; c: a value of the output format. A block with
    an infinite or NaN input gives its naive IEEE sum. A rounded result that overflows
    is +-inf (overflow "inf") or +-max ("saturate"); a result that rounds to zero is +0
    (zero_sign "positive") or keeps the sum's sign ("signed"); an exact zero is +0.
    """
    if not all(math.isfinite(x) for pair in prods for x in pair) or not math.isfinite(c):
        return _naive(prods, c)
    exps = []
    ints = []  # (value as Fraction) of each term, c included
    for a, b in prods:
        if a == 0 or b == 0:
            continue
        ea = max(_ilog2_float(a), in_emin)
        eb = max(_ilog2_float(b), in_emin)
        exps.append(ea + eb)
        ints.append(Fraction(a) * Fraction(b))
    if c != 0:
        exps.append(max(_ilog2_float(c), out_fmt.emin))
        ints.append(Fraction(c))
    if exp_floor is not None:
        exps.append(exp_floor)
    if not ints:
        return 0.0
    E = max(exps)
    unit = Fraction(2) ** (E - frac_bits)
    total = 0
    for t in ints:
        q = abs(t) / unit
        k = q.numerator // q.denominator  # truncation toward zero of the magnitude
        total += -k if t < 0 else k
    if total == 0:
        return 0.0
    exact = total * unit
    r, flags = ref_round(exact, out_fmt, out_mode, True, overflow == "saturate")
    if flags & OVERFLOW and overflow == "inf":
        r = math.copysign(math.inf, exact)
    if r == 0 and zero_sign == "positive":
        r = 0.0
    return r


def ref_block_fma(A, B, c=None, model_params=None, *, in_fmt=None):
    """Block-FMA model (docs/accumulation.md): A (..., M, K) @ B (..., K, N) + c.

    model_params: an object or dict with block, frac_bits, exp_floor, output,
    output_rounding (and inputs, used when in_fmt is not given), and optionally
    overflow ("inf" or "saturate", default "inf") and zero_sign ("positive" or
    "signed", default "positive").
    """
    block = int(_param(model_params, "block"))
    frac_bits = int(_param(model_params, "frac_bits"))
    exp_floor = _param(model_params, "exp_floor")
    out_fmt = as_fmt(_param(model_params, "output"))
    out_mode = _param(model_params, "output_rounding")
    in_emin = as_fmt(in_fmt if in_fmt is not None else _param(model_params, "inputs")).emin
    rules = {name: _param(model_params, name) for name in ("overflow", "zero_sign")
             if _has_param(model_params, name)}
    A = np.asarray(A, dtype=np.float64)
    B = np.asarray(B, dtype=np.float64)
    batch = np.broadcast_shapes(A.shape[:-2], B.shape[:-2])
    M, K = A.shape[-2:]
    N = B.shape[-1]
    nb = int(np.prod(batch, dtype=np.int64))
    A = np.broadcast_to(A, batch + (M, K)).reshape(nb, M, K)
    B = np.broadcast_to(B, batch + (K, N)).reshape(nb, K, N)
    shape = batch + (M, N)
    cs = np.zeros(shape) if c is None else np.broadcast_to(np.asarray(c, np.float64), shape)
    cs = cs.reshape(-1).tolist()
    res = []
    i = 0
    for b in range(A.shape[0]):
        rows, cols = A[b].tolist(), B[b].T.tolist()
        for m in range(M):
            for n in range(N):
                s = cs[i]
                pairs = list(zip(rows[m], cols[n], strict=True))
                for k0 in range(0, K, block):
                    s = _block(pairs[k0 : k0 + block], s, in_emin, out_fmt, frac_bits,
                               exp_floor, out_mode, **rules)
                res.append(s)
                i += 1
    return np.array(res, dtype=np.float64).reshape(shape)


# --- conv2d as a matmul -------------------------------------------------------------------


def _pair(v) -> tuple[int, int]:
    if isinstance(v, (tuple, list)):
        return int(v[0]), int(v[1])
    return int(v), int(v)


def ref_im2col(x, w, stride=1, padding=0):
    """im2col for NCHW input and OIHW weights.

    Returns (Wmat (O, K), cols (N, K, OH*OW), (N, O, OH, OW)); the inner index K
    runs over (c, kh, kw) in C order and padding is +0.
    """
    x = np.asarray(x, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    n_, c_, h_, w_ = x.shape
    o_, c2, kh, kw = w.shape
    if c_ != c2:
        raise ValueError("channel mismatch")
    sh, sw = _pair(stride)
    ph, pw = _pair(padding)
    oh = (h_ + 2 * ph - kh) // sh + 1
    ow = (w_ + 2 * pw - kw) // sw + 1
    xp = np.zeros((n_, c_, h_ + 2 * ph, w_ + 2 * pw))
    xp[:, :, ph : ph + h_, pw : pw + w_] = x
    cols = np.zeros((n_, c_ * kh * kw, oh * ow))
    for i in range(oh):
        for j in range(ow):
            patch = xp[:, :, i * sh : i * sh + kh, j * sw : j * sw + kw]
            cols[:, :, i * ow + j] = patch.reshape(n_, -1)
    return w.reshape(o_, -1), cols, (n_, o_, oh, ow)
