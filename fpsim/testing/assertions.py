"""Assertions about values of a format, with messages that show the encodings."""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from fpsim._inputs import as_float_array
from fpsim.bits import to_bits
from fpsim.compare.metrics import ulp_distance
from fpsim.formats import Format, as_format
from fpsim.modes import mode_code
from fpsim.rounding import round as round_to

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    import numpy.typing as npt

SHOWN = 5  # differing elements a message lists
_BINARY64_MAX = float(np.finfo(np.float64).max)


def _values(x: npt.ArrayLike, fmt: Format, name: str) -> np.ndarray:
    """``x`` as float64 values of ``fmt``; AssertionError naming the first that is not."""
    __tracebackhide__ = True  # pytest: the failure is the caller's line, not this one
    arr = np.asarray(as_float_array(x, name), dtype=np.float64)
    representable = np.asarray(round_to(arr, fmt)) == arr
    representable |= np.isnan(arr)
    if not representable.all():
        i = _index(np.flatnonzero(~representable.reshape(-1))[0], arr.shape)
        raise AssertionError(f"{name}{list(i)} = {float(arr[i])!r} is not a value of {fmt.name}")
    return arr


def _index(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(int(v) for v in np.unravel_index(flat, shape)) if shape else ()


def _hex(v: float, fmt: Format) -> str:
    digits = -(-fmt.bits // 4)
    return f"0x{int(to_bits(v, fmt)):0{digits}x}"


def _report(title: str, where: np.ndarray, actual: np.ndarray, desired: Sequence[np.ndarray],
            fmt: Format, extra: Callable[[tuple[int, ...]], str] | None = None,
            given: Callable[[tuple[int, ...]], str] | None = None) -> str:
    """``title``, then the first ``SHOWN`` elements of ``where``: the input (``given``),
    the actual value and the desired one (either of ``desired``'s), each with its
    encoding, and a note (``extra``)."""
    lines = [title]
    for flat in np.flatnonzero(where.reshape(-1))[:SHOWN]:
        i = _index(flat, actual.shape)
        a = float(actual[i])
        wanted = list(dict.fromkeys(_hex(float(d[i]), fmt) for d in desired))
        values = {_hex(float(d[i]), fmt): float(d[i]) for d in desired}
        want = " or ".join(f"{values[h]!r} [{h}]" for h in wanted)
        note = f" ({extra(i)})" if extra else ""
        source = f"{given(i)}: " if given else ""
        lines.append(f"  at {list(i)}: {source}actual {a!r} [{_hex(a, fmt)}], desired {want}"
                     f"{note}")
    return "\n".join(lines)


def assert_bits_equal(actual: npt.ArrayLike, desired: npt.ArrayLike, fmt: Format | str,
                      err_msg: str = "") -> None:
    """Raise ``AssertionError`` unless ``actual`` and ``desired`` hold the same values of
    ``fmt``, encoding for encoding: -0 and +0 differ; any NaN matches any NaN.

    The message gives how many elements differ and the first ones, with both
    encodings in hex.

    Parameters
    ----------
    actual, desired : array_like
        Values of ``fmt``, of one shape.
    fmt : Format or str
        The format.
    err_msg : str, default ""
        Put before the message.

    Raises
    ------
    AssertionError
        If an element differs, the shapes differ, or a value is not of ``fmt``.

    Examples
    --------
    >>> import fpsim.testing as ft
    >>> ft.assert_bits_equal([0.5, -0.0], [0.5, -0.0], "fp16")
    >>> ft.assert_bits_equal([0.5, 0.0], [0.5, -0.0], "fp16")
    Traceback (most recent call last):
    ...
    AssertionError: 1 of 2 elements differ (fp16):
      at [1]: actual 0.0 [0x0000], desired -0.0 [0x8000]
    """
    __tracebackhide__ = True
    fmt = as_format(fmt)
    a, d = _values(actual, fmt, "actual"), _values(desired, fmt, "desired")
    if a.shape != d.shape:
        raise AssertionError(f"shapes differ: actual {a.shape}, desired {d.shape}")
    differ = to_bits(a, fmt) != to_bits(d, fmt)
    if np.any(differ):
        head = f"{err_msg}\n" if err_msg else ""
        raise AssertionError(head + _report(
            f"{int(np.count_nonzero(differ))} of {a.size} elements differ ({fmt.name}):",
            differ, a, [d], fmt))


def assert_ulp_close(actual: npt.ArrayLike, desired: npt.ArrayLike, fmt: Format | str,
                     max_ulp: int,
                     err_msg: str = "") -> None:
    """Raise ``AssertionError`` unless each element of ``actual`` is at most ``max_ulp``
    values of ``fmt`` away from ``desired``'s (a NaN against a number never is).

    Parameters
    ----------
    actual, desired : array_like
        Values of ``fmt``, of one shape.
    fmt : Format or str
        The format.
    max_ulp : int
        The largest distance allowed, in values of ``fmt`` (0 or more).
    err_msg : str, default ""
        Put before the message.

    Raises
    ------
    AssertionError
        If an element is farther, the shapes differ, or a value is not of ``fmt``.
    ValueError
        If ``max_ulp`` is not a non-negative integer.

    Examples
    --------
    >>> import fpsim.testing as ft
    >>> ft.assert_ulp_close([1.0009765625], [1.0], "fp16", max_ulp=1)
    >>> ft.assert_ulp_close([1.001953125], [1.0], "fp16", max_ulp=1)
    Traceback (most recent call last):
    ...
    AssertionError: 1 of 1 elements are more than 1 ulp apart (fp16), at most 2:
      at [0]: actual 1.001953125 [0x3c02], desired 1.0 [0x3c00] (2 ulp)
    """
    __tracebackhide__ = True
    fmt = as_format(fmt)
    if isinstance(max_ulp, bool) or not isinstance(max_ulp, (int, np.integer)) or max_ulp < 0:
        raise ValueError(f"max_ulp must be a non-negative integer, got {max_ulp!r}")
    a, d = _values(actual, fmt, "actual"), _values(desired, fmt, "desired")
    if a.shape != d.shape:
        raise AssertionError(f"shapes differ: actual {a.shape}, desired {d.shape}")
    distance = ulp_distance(to_bits(a, fmt), to_bits(d, fmt), fmt).reshape(a.shape)
    far = distance > max_ulp
    if np.any(far):
        head = f"{err_msg}\n" if err_msg else ""
        worst = float(distance.max())
        most = "a NaN against a number" if np.isinf(worst) else f"{worst:g}"
        raise AssertionError(head + _report(
            f"{int(np.count_nonzero(far))} of {a.size} elements are more than {max_ulp} ulp "
            f"apart ({fmt.name}), at most {most}:",
            far, a, [d], fmt, lambda i: f"{distance[i]:g} ulp"))


def _odd_binary64(q: Fraction) -> float:
    """The rational ``q`` rounded to binary64 to odd: exact, or the neighbour whose last
    bit is set. Rounding that to a format of at most 51 fraction bits is rounding ``q``
    to it correctly (Boldo and Melquiond, IEEE TC 2008)."""
    f = float(q)  # nearest (OverflowError beyond binary64's range)
    if Fraction(f) == q:
        return f
    toward_zero = f if abs(Fraction(f)) < abs(q) else float(np.nextafter(f, 0.0))
    if np.frombuffer(np.float64(toward_zero).tobytes(), np.uint64)[0] & 1:
        return toward_zero
    return float(np.nextafter(toward_zero, np.copysign(np.inf, float(q))))


def _exact(exact: npt.ArrayLike | Sequence[Fraction]) -> np.ndarray:
    """``exact`` (floats, Fractions, arrays of them) as binary64 values that round as it
    does: floats as they are, Fractions rounded to odd."""
    if isinstance(exact, np.ndarray) and exact.dtype.kind in "fiu":
        return np.asarray(as_float_array(exact, "exact"), dtype=np.float64)
    values = np.asarray(exact, dtype=object)
    out = np.empty(values.shape, dtype=np.float64)
    for i, v in np.ndenumerate(values):
        if isinstance(v, Fraction):
            try:
                out[i] = _odd_binary64(v)
            except OverflowError:
                # Beyond binary64: its largest value (odd) rounds as the Fraction does
                # to any narrower format.
                out[i] = _BINARY64_MAX if v > 0 else -_BINARY64_MAX
        else:
            out[i] = float(as_float_array(v, "exact"))
    return out


def assert_correctly_rounded(result: npt.ArrayLike, exact: npt.ArrayLike | Sequence[Fraction],
                             fmt: Format | str,
                             rounding: str = "nearest_even", *, subnormals: bool = True,
                             saturate: bool = False, err_msg: str = "") -> None:
    """Raise ``AssertionError`` unless ``result`` is ``exact`` rounded to ``fmt`` in mode
    ``rounding`` (for "stochastic": one of the two neighbours of ``exact``).

    ``exact`` may be float64 values, Fractions (rounded exactly, for formats of at
    most 51 fraction bits), or the output of a wider fpsim computation (then it is
    the exact value only where that computation was exact).

    Parameters
    ----------
    result : array_like
        Values of ``fmt``: what the code under test computed.
    exact : array_like
        The exact values: floats, Fractions, or arrays of them.
    fmt : Format or str
        The format.
    rounding : str, default "nearest_even"
        The rounding mode.
    subnormals : bool, default True
        False: results below the normals flush to zero.
    saturate : bool, default False
        True: overflow gives the largest finite value.
    err_msg : str, default ""
        Put before the message.

    Raises
    ------
    AssertionError
        If an element is not the rounding, the shapes differ, or a value is not of ``fmt``.
    ValueError
        For an unknown mode, or Fractions and a format of more than 51 fraction bits.

    Examples
    --------
    >>> from fractions import Fraction
    >>> import fpsim.testing as ft
    >>> ft.assert_correctly_rounded([0.333251953125], [Fraction(1, 3)], "fp16")
    >>> ft.assert_correctly_rounded([0.33349609375], [Fraction(1, 3)], "fp16")
    Traceback (most recent call last):
    ...
    AssertionError: 1 of 1 elements are not correctly rounded to nearest_even (fp16):
      at [0]: exact 1/3 (~0.3333333333333333): actual 0.33349609375 [0x3556],
      desired 0.333251953125 [0x3555]
    """
    __tracebackhide__ = True
    fmt = as_format(fmt)
    mode_code(rounding)
    has_fraction = not isinstance(exact, np.ndarray) and any(
        isinstance(v, Fraction) for v in np.asarray(exact, dtype=object).ravel())
    if has_fraction and fmt.man_bits > 51:
        raise ValueError(f"a Fraction is rounded exactly to formats of at most 51 fraction "
                         f"bits; {fmt.name} has {fmt.man_bits}")
    x = _exact(exact)
    r = _values(result, fmt, "result")
    if r.shape != x.shape:
        raise AssertionError(f"shapes differ: result {r.shape}, exact {x.shape}")
    options: dict[str, Any] = dict(subnormals=subnormals, saturate=saturate)
    if rounding == "stochastic":
        down = np.asarray(round_to(x, fmt, "down", **options), dtype=np.float64)
        up = np.asarray(round_to(x, fmt, "up", **options), dtype=np.float64)
        codes = to_bits(r, fmt)
        wrong = (codes != to_bits(down, fmt)) & (codes != to_bits(up, fmt))
        desired = [down, up]
    else:
        nearest = np.asarray(round_to(x, fmt, rounding, **options), dtype=np.float64)
        wrong = to_bits(r, fmt) != to_bits(nearest, fmt)
        desired = [nearest]
    if np.any(wrong):
        head = f"{err_msg}\n" if err_msg else ""
        changed = "".join(f", {k}={v}" for k, v in options.items()
                          if v != (k == "subnormals"))
        raise AssertionError(head + _report(
            f"{int(np.count_nonzero(wrong))} of {r.size} elements are not correctly rounded "
            f"to {rounding} ({fmt.name}{changed}):", wrong, r, desired, fmt,
            given=lambda i: f"exact {_shown(exact, x, i)}"))


def _shown(exact: Any, x: np.ndarray, i: tuple[int, ...]) -> str:
    """Element ``i`` of the exact values as given: a Fraction as a ratio (and its value),
    a number as its float and its encoding (in its array's dtype, else binary64)."""
    v = exact[i] if isinstance(exact, np.ndarray) else np.asarray(exact, dtype=object)[i]
    if isinstance(v, Fraction) and (v.denominator != 1 or abs(v) >= Fraction(2) ** 1024):
        text = str(v) if len(str(v)) <= 60 else f"{str(v)[:24]}...{str(v)[-24:]}"
        return f"{text} (~{float(v)!r})" if abs(v) < Fraction(2) ** 1024 else text
    value = np.asarray(v)
    if value.dtype not in (np.float16, np.float32, np.float64):
        value = np.asarray(x[i])
    code = int(value.astype(value.dtype.newbyteorder("=")).view(f"u{value.dtype.itemsize}"))
    return f"{float(x[i])!r} ({value.dtype.name} 0x{code:0{2 * value.dtype.itemsize}x})"
