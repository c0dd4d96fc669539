"""The fpsim.torch GPU tests' precondition, and the premise of their comparisons.

A run on CUDA tensors gives a CPU run's bits where each value it computes is either
fpsim's (the cupy backend's kernels give the NumPy backend's bits) or torch's own
arithmetic of a kind whose result cannot depend on the device or the order of its
operations. ``TorchArithmetic`` checks the second part on the CPU: it watches every
operation torch dispatches in a run and holds each to one of these kinds (any other
fails the check):

- data movement, comparisons, selections and exact operations (views, copies,
  ``threshold_backward``, ``isfinite``, ``neg``, ...), and ``relu`` of no -0 (whether
  ``max(-0, 0)`` is -0 or +0 is the implementation's);
- an elementwise operation rounded once: ``add``/``sub`` (``alpha`` a power of two,
  so that ``alpha * b`` is exact and a fused ``a + alpha * b`` equals the unfused one),
  ``mul``, ``div`` by a power of two (CUDA multiplies by the reciprocal, which is then
  exact), ``mse_loss_backward`` with a power-of-two output gradient (``2 * (x - t) * g``:
  the one rounding is ``x - t``), GradScaler's unscaling and scale update by powers of
  two; one IEEE rounding of the same operands gives the same bits on any device;
- a sum or a product (``sum``, ``mm``, ``addmm``, ``bmm``, ``convolution`` and its
  backward) whose every partial sum, in every order, is exact: its finite terms are
  multiples of ``2**L`` and their magnitudes add up to less than ``2**(L + p)`` (``p``
  the dtype's precision, 24 for float32): then every partial sum is a multiple of
  ``2**L`` below ``2**(L + p)``, a value of the dtype. (With an infinite term the result
  is infinite or NaN in any order: fpsim's rounding, which every gradient passes through,
  makes each NaN its one quiet NaN);
- ``mse_loss``'s value, which the tests compare within binary32's rounding (its sum is
  torch's, in the device's order): it reaches nothing else.
"""

from __future__ import annotations

import math

import numpy as np
import pytest


def skip_without_cuda():
    """Skip the calling test unless CUDA tensors can be rounded by the cupy backend."""
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA torch")
    from fpsim.backends import gpu_missing

    missing = gpu_missing()
    if missing:
        pytest.skip(missing)


def grid(rng, shape, low, k=8):
    """float32 values ``i * 2**e``, ``i`` in [-k, -1] and [1, k], ``e`` in {low, low + 1}:
    few significant bits over two binades, so that the sums a run makes of them and of the
    values computed from them stay exact, and none zero, so that few products are -0
    (``TorchArithmetic`` checks both)."""
    i = rng.integers(1, k + 1, shape) * rng.choice([-1, 1], shape)
    return (i * 2.0 ** rng.integers(low, low + 2, shape)).astype(np.float32)


MOVES = frozenset({
    "detach", "t", "transpose", "view", "_unsafe_view", "reshape", "permute", "expand",
    "clone", "copy_", "_to_copy", "alias", "empty", "empty_like", "empty_strided", "zeros",
    "zeros_like", "ones", "ones_like", "full", "full_like", "fill_", "zero_", "select",
    "slice", "squeeze", "unsqueeze", "as_strided", "lift_fresh", "lift_fresh_copy",
    "_local_scalar_dense", "scalar_tensor", "new_zeros", "new_ones", "new_empty",
    "new_empty_strided", "_foreach_copy_", "set_", "is_nonzero", "_record_function_enter",
    "_record_function_enter_new", "_record_function_exit",
    # test data and initial weights (made on the CPU for both runs)
    "randn", "randint", "uniform_", "normal_",
    # exact: comparisons, selections, sign changes, ReLU's backward (ReLU: _rounded_once)
    "threshold_backward", "isfinite", "isnan", "isinf", "eq", "ne", "gt", "ge", "lt",
    "le", "logical_and", "logical_or", "logical_not", "bitwise_and", "bitwise_or", "all",
    "any", "abs", "neg", "where", "masked_fill", "masked_fill_",
})
"""Torch operations that compute no rounded value."""

SUMS = frozenset({"sum", "mm", "addmm", "bmm", "convolution", "convolution_backward"})
"""Torch's sums and products: held to the exactness bound."""


def _power_of_two(value) -> bool:
    import torch

    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            v = value.detach().double().cpu().abs()
            return bool(((v == 0) | (torch.frexp(v).mantissa == 0.5) | v.isinf()).all())
        value = value.item()
    v = abs(float(value))
    return v == 0 or math.isinf(v) or math.frexp(v)[0] == 0.5


def lowest_bit(t):
    """The exponent of the lowest set bit of ``t``'s finite nonzero values (None: none)."""
    a = t.detach().double().cpu().numpy().ravel()
    a = a[np.isfinite(a) & (a != 0)]
    if not a.size:
        return None
    m, e = np.frexp(np.abs(a))
    significand = (m * 2.0**53).astype(np.int64)
    return int((e - 53 + np.log2(significand & -significand).astype(np.int64)).min())


def _outputs(value):
    """An operation's results as a list (None where it gave none)."""
    import torch

    if isinstance(value, (list, tuple)):
        return [v if isinstance(v, torch.Tensor) else None for v in value]
    return [value if isinstance(value, torch.Tensor) else None]


# Where each sum's and product's operands are: its first factors, its second factors (none
# for a sum) and a term added to the products (a bias).
ROLES = {"sum": ((0,), (), None), "mm": ((0,), (1,), None), "bmm": ((0,), (1,), None),
         "addmm": ((1,), (2,), 0), "convolution": ((0,), (1,), 2),
         "convolution_backward": ((0,), (1, 2), None)}


def _applied(func, args, kwargs, fa, fb=None, fc=None):
    """``func`` of its operands mapped by ``fa``, ``fb`` and ``fc`` (float64 tensors of
    their shapes; ``fc`` None: the bias zero), as a list of results."""
    import torch

    first, second, extra = ROLES[func.overloadpacket.__name__]
    new = list(args)
    for i in first:
        new[i] = fa(args[i])
    for i in second:
        new[i] = fb(args[i])
    if extra is not None and isinstance(args[extra], torch.Tensor):
        new[extra] = (fc or (lambda t: torch.zeros_like(t, dtype=torch.float64)))(args[extra])
    return _outputs(func(*new, **kwargs))


def _sum_is_exact(func, args, kwargs, out) -> str | None:
    """None where the sum or product ``func(*args)`` gives the same bits in every order and
    from any starting value; else why: its terms are not all multiples of one ``2**L``
    whose magnitudes add up to less than ``2**(L + p)``, or they are all -0 (the result is
    -0 added up, +0 where an implementation starts from +0)."""
    import torch

    name = func.overloadpacket.__name__
    first, second, extra = ROLES[name]
    if not args[first[0]].is_floating_point():
        return None  # integer and boolean sums are exact
    bit = {i: lowest_bit(args[i]) for i in (*first, *second) if args[i] is not None}
    if extra is not None and isinstance(args[extra], torch.Tensor):
        bit[extra] = lowest_bit(args[extra])

    def product_bit(j):  # the lowest bit of the products of the first factors and j's
        return None if None in (bit[first[0]], bit[j]) else bit[first[0]] + bit[j]

    if name == "convolution_backward":  # (grad_input, grad_weight, grad_bias)
        lows = [product_bit(2), product_bit(1), bit[0]]
    else:
        candidates = [bit[first[0]]] if not second else [product_bit(second[0])]
        if extra in bit:
            candidates.append(bit[extra])
        low = min((b for b in candidates if b is not None), default=None)
        lows = [low] * len(_outputs(out))

    def f64(t):
        return t.detach().double()

    def finite_abs(t):
        v = f64(t).abs()
        return torch.where(torch.isfinite(v), v, torch.zeros_like(v))

    def ones(t):
        return torch.ones_like(t, dtype=torch.float64)

    def sign(t):
        return f64(torch.signbit(t))

    def nonzero(t):
        return f64(t != 0)

    def nonzero_sign(t):
        return nonzero(t) * sign(t)

    def negative_zero(t):
        return (1 - nonzero(t)) * sign(t)

    bounds = _applied(func, args, kwargs, finite_abs, finite_abs, finite_abs)
    if not second:  # a sum: its terms that are -0
        terms = _applied(func, args, kwargs, ones)
        negative_zeros = _applied(func, args, kwargs, negative_zero)
    else:  # products a * b that are -0: zero, of signs that differ (ones_, xor spelled out)
        terms = _applied(func, args, kwargs, ones, ones, ones)
        pieces = [(sign, ones, 1), (ones, sign, 1), (sign, sign, -2),
                  (nonzero_sign, nonzero, -1), (nonzero, nonzero_sign, -1),
                  (nonzero_sign, nonzero_sign, 2)]
        negative_zeros = [None if r is None else torch.zeros_like(r) for r in terms]
        for fa, fb, weight in pieces:
            for i, r in enumerate(_applied(func, args, kwargs, fa, fb)):
                if r is not None:
                    negative_zeros[i] = negative_zeros[i] + weight * r
        if extra is not None and isinstance(args[extra], torch.Tensor):
            for i, r in enumerate(_applied(func, args, kwargs, lambda t: torch.zeros_like(
                    t, dtype=torch.float64), lambda t: torch.zeros_like(t, dtype=torch.float64),
                    negative_zero)):
                negative_zeros[i] = negative_zeros[i] + r
        if name == "convolution_backward" and terms[2] is not None:  # the bias's: a sum
            g = args[0]
            terms[2] = ones(g).sum((0, 2, 3))
            negative_zeros[2] = negative_zero(g).sum((0, 2, 3))
    for result, bound, low, n, zeros in zip(_outputs(out), bounds, lows, terms,
                                            negative_zeros, strict=False):
        if result is None or not result.is_floating_point():
            continue
        if bool(((zeros == n) & (n > 0) & (result == 0)).any()):
            return f"{name}: a result whose terms are all -0"
        if low is None:
            continue
        precision = {torch.float32: 24, torch.float64: 53}[result.dtype]
        largest = float(bound.max()) if bound.numel() else 0.0
        if largest >= 2.0 ** (low + precision):
            return (f"{name}: terms multiples of 2**{low} adding up to {largest!r}, not below "
                    f"2**{low + precision}")
    return None


def _rounded_once(name, args, kwargs) -> str | None:
    """None where the elementwise ``name`` rounds once whatever the device; else why."""
    import torch

    if name in ("relu", "relu_"):  # exact, but max(-0, 0) is either zero
        x = args[0]
        return "relu of -0" if bool(((x == 0) & torch.signbit(x)).any()) else None
    if name in ("add", "add_", "sub", "sub_", "_foreach_add_", "_foreach_sub_"):
        alpha = kwargs.get("alpha", 1)
        return None if _power_of_two(alpha) else f"{name} with alpha={alpha!r}"
    if name in ("mul", "mul_", "_foreach_mul_"):
        return None
    if name in ("div", "div_"):
        return None if _power_of_two(args[1]) else f"{name} by {args[1]!r}"
    if name == "mse_loss_backward":
        return None if _power_of_two(args[0]) else "mse_loss_backward of another gradient"
    if name == "reciprocal":  # GradScaler's inverse scale
        return None if _power_of_two(args[0]) else f"reciprocal of {args[0]!r}"
    if name == "_amp_foreach_non_finite_check_and_unscale_":  # the gradients times it
        return None if _power_of_two(args[2]) else f"unscaled by {args[2]!r}"
    if name == "_amp_update_scale_":  # the scale times the growth or backoff factor
        factors = args[3:5]
        return None if all(map(_power_of_two, factors)) else f"scale factors {factors!r}"
    return f"{name}: not an operation whose result is known not to depend on the device"


def torch_arithmetic():
    """A ``TorchDispatchMode`` that records, in its ``problems``, each operation torch
    computes that could give other bits on another device (see the module docstring);
    ``losses`` counts the ``mse_loss`` values, whose sum is torch's."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class TorchArithmetic(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.problems: list[str] = []
            self.losses = 0
            self.checked = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            name = func.overloadpacket.__name__
            if name in MOVES:
                return out
            if name == "mse_loss":
                self.losses += 1
                return out
            problem = (_sum_is_exact(func, args, kwargs, out) if name in SUMS
                       else _rounded_once(name, args, kwargs))
            self.checked += 1
            if problem is not None:
                self.problems.append(problem)
            return out

    return TorchArithmetic()


def assert_same_bits(got, want):
    """The tensors (on the CPU) hold the same encodings: dtype, shape and every bit
    (``-0.0`` is not ``0.0`` here, as ``torch.equal`` has it)."""
    import torch

    assert got.dtype == want.dtype and got.shape == want.shape
    ints = {2: torch.int16, 4: torch.int32, 8: torch.int64}[got.element_size()]
    assert torch.equal(got.contiguous().view(ints), want.contiguous().view(ints))
