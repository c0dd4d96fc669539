"""The arithmetic a policy stands for: rounding, dot products and sums, emulated or native.

Emulated values live in float64 arrays holding values of their format; native
values live in the format's own NumPy dtype and use NumPy's arithmetic. The arrays
are NumPy's or CuPy's (``fpsim._device``): on a GPU, emulated roundings, products and
sums run on the ``cupy`` backend's kernels, native ones are CuPy's own arithmetic.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from fpsim._device import array_module, binary64, kernels
from fpsim._elementwise import run
from fpsim.accumulation import matmul as emulated_matmul
from fpsim.accumulation import sum as emulated_sum
from fpsim.accumulation.blocks import block_matmul
from fpsim.accumulation.matmul import accumulate
from fpsim.arithmetic import sub as emulated_sub
from fpsim.flags import ABSORBED
from fpsim.formats import MAX_ARITH_MAN_BITS, Format, as_format
from fpsim.kernels.spec import make_spec
from fpsim.precision.policy import Policy

if TYPE_CHECKING:
    from collections.abc import Sequence

    import numpy.typing as npt


def is_exact(fmt: Format) -> bool:
    """Whether float64 holds every value of ``fmt`` with nothing to round."""
    return fmt.man_bits >= 52 and fmt.exp_bits >= 11


def dtype(fmt: Format, policy: Policy) -> np.dtype:
    """The array dtype that stores values of ``fmt`` under ``policy``."""
    return fmt.dtype if policy.native else np.dtype(np.float64)


def _seed(policy: Policy, rounding: str) -> int | None:
    """The seed of a stochastic rounding call: the policy's seed and how many calls this
    policy object has made (a fresh policy object replays the same stream). An override's
    stream is keyed by its operation too, so that it is independent of its parent's."""
    if rounding != "stochastic" or policy.seed is None:
        return None
    calls = policy.__dict__.get("_calls")
    if calls is None:
        calls = itertools.count()
        object.__setattr__(policy, "_calls", calls)
    base = policy.seed
    if policy.category:
        digest = hashlib.sha256(f"{policy.seed}/{policy.category}".encode()).digest()
        base = int.from_bytes(digest[:4], "little")
    return base * (1 << 32) + next(calls)


def stream(policy: Policy, name: str) -> Policy:
    """The policy whose stochastic stream the roundings of ``name`` draw: one object per
    policy and name (its calls counted apart), keyed by the seed and the name as an
    override's is (``seed`` of it with ``"stochastic"`` gives each call's seed)."""
    streams = policy.__dict__.get("_streams")
    if streams is None:
        streams = {}
        object.__setattr__(policy, "_streams", streams)
    if name not in streams:
        streams[name] = replace(policy, category=name)
    held: Policy = streams[name]
    return held


def seed(policy: Policy, rounding: str) -> int | None:
    """The seed of the next stochastic rounding call under ``policy`` (None unless
    ``rounding`` is stochastic and the policy has a seed)."""
    return _seed(policy, rounding)


def covers(wide: Format, narrow: Format) -> bool:
    """Whether every value of ``narrow`` is a value of ``wide``."""
    return (
        wide.man_bits >= narrow.man_bits
        and wide.emax >= narrow.emax
        and wide.emin <= narrow.emin
        and (wide.infinities or not narrow.infinities)
    )


def round(x: npt.ArrayLike, fmt: Format, policy: Policy,
          source: Format | None = None) -> np.ndarray:
    """``x`` rounded to ``fmt`` with the policy's rounding mode and subnormals.

    ``source``: a format ``x``'s values are known to lie in (nothing to round
    when ``fmt`` covers it).
    """
    xp = array_module(x)
    if policy.native:
        stored: np.ndarray = xp.asarray(x).astype(fmt.dtype, copy=False)
        return stored
    wide: np.ndarray = binary64(xp.asarray(x))
    if is_exact(fmt) or (source is not None and covers(fmt, source)):
        return wide
    # fpsim.round without its input checks: wide is a float64 array already.
    spec = make_spec(fmt, policy.rounding, policy.subnormals, False, None)
    out: np.ndarray = xp.empty(wide.shape)
    with kernels(wide):
        run("round_value", [xp.ascontiguousarray(wide).reshape(-1)], out, None, spec,
            _seed(policy, policy.rounding), hot=True)
    return out


# Rounding to binary64: the shared kernels' exp, log and tanh as they compute them.
_BINARY64 = make_spec(as_format("fp64"), "nearest_even", True, False, None)
ELEMENTARY = ("exp", "log", "tanh")


def elementary(name: str, x: Any, policy: Policy) -> Any:
    """``exp``, ``log`` or ``tanh`` (``name``) of ``x``: for a native policy the array
    module's own; otherwise in binary64 by the shared kernels
    (``fpsim.kernels.transcendental``), the same bits on every backend and device.

    Examples
    --------
    >>> import numpy as np
    >>> from fpsim.precision import Policy
    >>> elementary("log", np.array([1.0, np.e]), Policy()).tolist()
    [0.0, 1.0]
    """
    if name not in ELEMENTARY:
        raise ValueError(f"unknown function {name!r}; known: {', '.join(ELEMENTARY)}")
    xp = array_module(x)
    if policy.native:
        native: np.ndarray = getattr(xp, name)(x)
        return native
    wide = binary64(xp.ascontiguousarray(x))
    out = xp.empty(wide.shape)
    with kernels(wide):
        run(f"op_{name}", [wide.reshape(-1)], out, None, _BINARY64, None)
    return out


def subtract(a: np.ndarray, b: np.ndarray, fmt: Format, policy: Policy,
             rounding: str | None = None,
             random_bits: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(a - b rounded to fmt, absorbed)``: absorbed marks a nonzero ``b`` with no effect.

    Emulated formats use ``fpsim.sub`` and its ABSORBED flag; ``rounding`` (the policy's
    by default) and ``random_bits`` are its own.
    """
    mode = policy.rounding if rounding is None else rounding
    if policy.native or fmt.man_bits > MAX_ARITH_MAN_BITS:
        if mode != policy.rounding or random_bits is not None:
            raise ValueError(f"a {'native' if policy.native else fmt.name} subtraction "
                             f"rounds as the policy does ({policy.rounding})")
        with np.errstate(all="ignore"):
            result = round(a - b, fmt, policy)
        return result, (b != 0) & (result == a)
    xp = array_module(a)
    with kernels(a):
        result, flags = emulated_sub(
            xp.asarray(a, np.float64), xp.asarray(b, np.float64), fmt, mode,
            subnormals=policy.subnormals, seed=_seed(policy, mode), flags=True,
            random_bits=random_bits,
        )
    return result, (xp.asarray(flags) & ABSORBED) != 0


def matmul(a: np.ndarray, b: np.ndarray, policy: Policy) -> np.ndarray:
    """``a @ b`` as a dot-product operation: accumulated in ``accum``, stored in ``compute``."""
    xp = array_module(a)
    if policy.native:
        work = policy.accum.dtype
        if xp is not np and policy.compute.dtype == np.float16 and work == np.float32:
            # On a GPU, the hardware's own fp16 product: cuBLAS's fp16 GEMM (tensor
            # cores, fp32 accumulation, the result rounded to fp16), as CuPy runs it.
            half: np.ndarray = xp.matmul(a.astype(np.float16, copy=False),
                                         b.astype(np.float16, copy=False))
            return half
        product: np.ndarray = xp.matmul(a.astype(work, copy=False), b.astype(work, copy=False))
        return product
    model = policy.hardware_model()
    if model is not None:
        with kernels(a):
            return round(block_matmul(a, b, model), policy.compute, policy)
    if is_exact(policy.accum):
        on_host(a, f"an emulated product with the {policy.accum.name} accumulator")
        return round(np.matmul(a, b), policy.compute, policy)
    options: dict[str, Any] = dict(
        accum=policy.accum, rounding=policy.accum_rounding, order=policy.order,
        subnormals=policy.subnormals, seed=_seed(policy, policy.accum_rounding))
    with kernels(a):
        if policy.compute.dtype.itemsize <= 4:
            # Compute-format values are float32 values: their products are exact, as
            # fpsim.matmul requires; skip its check.
            result = accumulate(a, b, products="exact", out=None, c=None, saturate=False,
                                random_bits=None, stats=False, **options)
        else:
            result = emulated_matmul(a, b, **options)
    return round(result, policy.compute, policy)


def on_host(x: Any, what: str) -> None:
    """Refuse a GPU array for ``what``, which the GPU cannot yet do as the CPU does."""
    if array_module(x) is not np:
        raise NotImplementedError(
            f"{what} is not supported on device 'cuda' yet: its sum would be CuPy's, in an "
            "order the CPU does not share; use a policy with a narrower accumulator, or "
            "the cpu device")


def normalize_axes(axis: int | Sequence[int] | None, ndim: int) -> tuple[int, ...]:
    """``axis`` (None, an int or a tuple of ints) as sorted non-negative axes."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out = []
    for a in axes:
        if not -ndim <= a < max(ndim, 1):
            raise ValueError(f"axis {a} is out of range for {ndim} dimensions")
        out.append(int(a) % max(ndim, 1))
    if len(set(out)) != len(out):
        raise ValueError(f"repeated axis in {axis!r}")
    return tuple(sorted(out))


def sum(x: np.ndarray, axis: int | Sequence[int] | None, policy: Policy, keepdims: bool = False,
        source: Format | None = None) -> np.ndarray:
    """The sum of ``x`` over ``axis`` (int, tuple or None), accumulated in ``reduce``
    (``x`` first rounded there unless ``source``, its values' format, fits)."""
    fmt = policy.reduce
    xp = array_module(x)
    if policy.native:
        native: np.ndarray = xp.sum(x.astype(fmt.dtype, copy=False), axis=axis, keepdims=keepdims)
        return native
    x = round(x, fmt, policy, source)
    if is_exact(fmt):
        on_host(x, f"an emulated sum in {fmt.name}")
        exact: np.ndarray = np.sum(x, axis=axis, keepdims=keepdims)
        return exact
    axes = normalize_axes(axis, x.ndim)
    rest = tuple(i for i in range(x.ndim) if i not in axes)
    moved = x.transpose(rest + axes)
    flat = moved.reshape(moved.shape[: len(rest)] + (-1,))
    with kernels(x):
        summed = emulated_sum(
            flat, axis=-1 if flat.ndim > 1 else None, accum=fmt,
            rounding=policy.accum_rounding, order=policy.order, subnormals=policy.subnormals,
            seed=_seed(policy, policy.accum_rounding),
        )
    total: np.ndarray = binary64(xp.asarray(summed))
    if keepdims:
        total = total.reshape(tuple(1 if i in axes else n for i, n in enumerate(x.shape)))
    return total



# NumPy's pairwise summation (numpy/_core/src/umath/loops_utils.h.src): runs of at most
# PAIRWISE_BLOCK elements summed with 8 accumulators, longer runs split in two (the first
# part a multiple of 8 long) and the two parts' sums added.
PAIRWISE_BLOCK = 128


@functools.lru_cache(maxsize=64)
def _pairwise_plan(n: int) -> tuple[list[tuple[int, Any, Any]], list[tuple[Any, Any, Any]],
                                    int, int]:
    """NumPy's summation tree of ``n >= 8`` elements, its nodes numbered: the blocks by
    length (length, nodes, first elements), the sums above them by height (nodes, left
    and right nodes), the root and the number of nodes."""
    blocks: list[tuple[int, int, int]] = []  # (node, first element, length)
    joins: list[tuple[int, int, int, int]] = []  # (node, height, left, right)

    def build(start: int, length: int) -> tuple[int, int]:  # (node, height)
        if length <= PAIRWISE_BLOCK:
            blocks.append((len(blocks) + len(joins), start, length))
            return blocks[-1][0], 0
        half = length // 2 - (length // 2) % 8
        (left, hl), (right, hr) = build(start, half), build(start + half, length - half)
        joins.append((len(blocks) + len(joins), max(hl, hr) + 1, left, right))
        return joins[-1][0], joins[-1][1]

    root, _ = build(0, n)
    by_length = [(m, np.array([b[0] for b in blocks if b[2] == m]),
                  np.array([b[1] for b in blocks if b[2] == m]))
                 for m in sorted({b[2] for b in blocks})]
    levels = [tuple(np.array([j[k] for j in joins if j[1] == h]) for k in (0, 2, 3))
              for h in sorted({j[1] for j in joins})]
    return by_length, levels, root, len(blocks) + len(joins)  # type: ignore[return-value]


def pairwise_sum(flat: Any) -> Any:
    """NumPy's binary64 sum of the 1-d float64 array ``flat`` (``np.add.reduce``: pairwise,
    8 accumulators per block), as a 0-d array on its device, by elementwise additions.

    The same additions in the same order on either device: on a GPU, CUDA's binary64
    addition is IEEE's as NumPy's, so the sum has the CPU's bits, where CuPy's own
    reduction adds in another order.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.default_rng(0).random(1000) * 1e8
    >>> bool(pairwise_sum(x) == np.sum(x)), bool(pairwise_sum(x) == np.sum(np.sort(x)))
    (True, False)
    """
    xp = array_module(flat)
    n = flat.shape[0]
    if n < 8:
        total = xp.zeros(1)
        for i in range(n):
            total = total + flat[i:i + 1]
        return total.reshape(())
    by_length, levels, root, nodes = _pairwise_plan(n)
    sums = xp.zeros(nodes)
    for m, node, first in by_length:
        rows = flat[xp.asarray(first[:, None] + np.arange(m))]
        acc = rows[:, :8]
        full = m - m % 8
        for i in range(8, full, 8):
            acc = acc + rows[:, i:i + 8]
        a = [acc[:, j] for j in range(8)]
        block = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]))
        for i in range(full, m):
            block = block + rows[:, i]
        sums[xp.asarray(node)] = block
    for node, left, right in levels:
        sums[xp.asarray(node)] = sums[xp.asarray(left)] + sums[xp.asarray(right)]
    return sums[root:root + 1].reshape(())


def float64_sum(x: Any) -> Any:
    """``np.sum(x)`` of a float64 array, with NumPy's bits on either device: NumPy's own
    on the host, ``pairwise_sum`` of the elements in memory order (NumPy's order for a
    dense array) on a GPU. A 0-d array (or NumPy scalar) on ``x``'s device.

    Examples
    --------
    >>> import numpy as np
    >>> float(float64_sum(np.full((3, 4), 0.1)))
    1.2
    """
    if array_module(x) is np:
        return np.sum(x)
    return pairwise_sum(x.ravel(order="K"))
