"""Hypothesis strategies: values and encodings of a format, inputs near its rounding
boundaries, arrays of them, custom formats, rounding modes."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from fpsim._checks import boolean
from fpsim._dtypes import is_ml_dtype
from fpsim.bits import format_of_dtype, from_bits, to_bits
from fpsim.formats import Format, as_format
from fpsim.modes import CODES

if TYPE_CHECKING:
    import numpy.typing as npt


def values(fmt: Format | str, *, finite: bool = True, subnormals: bool = True,
           exclude_zero: bool = False) -> st.SearchStrategy[float]:
    """Values of ``fmt`` (as Python floats) of every class, each class drawn often: zeros
    of both signs, subnormals, normals, the extremes (largest, smallest normal, smallest
    subnormal), and with ``finite=False`` infinities and NaN, each where the format has
    it (an unsigned format: no negative values; E8M0: no zero, no subnormals).

    Parameters
    ----------
    fmt : Format or str
        The format.
    finite : bool, default True
        Only finite values (False adds infinities and NaN).
    subnormals : bool, default True
        Include subnormals (and the smallest one).
    exclude_zero : bool, default False
        Leave out the zeros.

    Returns
    -------
    hypothesis.strategies.SearchStrategy of float
        Values of ``fmt``.

    Examples
    --------
    >>> import fpsim, fpsim.testing as ft
    >>> from hypothesis import given
    >>> @given(ft.values("fp8_e4m3", finite=False))
    ... def test(v):
    ...     assert v != v or fpsim.round(v, "fp8_e4m3") == v
    >>> test()
    """
    fmt = as_format(fmt)
    finite, subnormals, exclude_zero = (boolean(finite, "finite"),
                                        boolean(subnormals, "subnormals"),
                                        boolean(exclude_zero, "exclude_zero"))
    t, emin, emax = fmt.man_bits, fmt.emin, fmt.emax
    # An unsigned format has no negative values; an exponent-only one (E8M0) no zero and
    # no subnormals; a format without a NaN (fp6, fp4) no NaN.
    sign_list = [1.0, -1.0] if fmt.signed else [1.0]
    signs = st.sampled_from(sign_list)
    normal = st.builds(
        lambda s, e, m: s * float(np.ldexp(float(m), e - t)), signs,
        st.integers(emin, emax), st.integers(1 << t, (1 << (t + 1)) - 1)
    ).filter(lambda v: abs(v) <= fmt.max)
    extremes = [s * v for s in sign_list for v in (fmt.max, fmt.smallest_normal)]
    classes = [normal]
    if subnormals and t > 0:
        classes.append(st.builds(lambda s, m: s * float(np.ldexp(float(m), emin - t)), signs,
                                 st.integers(1, (1 << t) - 1)))
        extremes += [s * fmt.smallest_subnormal for s in sign_list]
    classes.append(st.sampled_from(extremes))
    if not exclude_zero and t > 0:
        classes.append(st.sampled_from([0.0, -0.0] if fmt.signed else [0.0]))
    if not finite:
        specials = ([np.inf, -np.inf] if fmt.infinities else []) + ([np.nan] if fmt.nan else [])
        if specials:
            classes.append(st.sampled_from(specials))
    return st.one_of(classes)


def bits(fmt: Format | str) -> st.SearchStrategy[int]:
    """Encodings of ``fmt``: integers in 0..2**bits - 1 (``fpsim.from_bits`` decodes them).

    Parameters
    ----------
    fmt : Format or str
        The format.

    Returns
    -------
    hypothesis.strategies.SearchStrategy of int
        Every encoding, NaNs included.

    Examples
    --------
    >>> import fpsim, fpsim.testing as ft
    >>> from hypothesis import given
    >>> @given(ft.bits("fp16"))
    ... def test(code):
    ...     v = fpsim.from_bits(code, "fp16")
    ...     assert v != v or fpsim.to_bits(v, "fp16") == code
    >>> test()
    """
    fmt = as_format(fmt)
    return st.integers(0, (1 << fmt.bits) - 1)


def near_ties(fmt: Format | str, rounding: str = "nearest_even") -> st.SearchStrategy[float]:
    """Binary64 inputs where rounding to ``fmt`` in mode ``rounding`` decides: for the
    nearest modes the midpoints between neighbouring values of the format, for the
    others the values themselves, each exactly and one binary64 step either side.

    Parameters
    ----------
    fmt : Format or str
        The format.
    rounding : str, default "nearest_even"
        The rounding mode whose decisions are probed.

    Returns
    -------
    hypothesis.strategies.SearchStrategy of float
        Binary64 inputs, of both signs.

    Raises
    ------
    ValueError
        For an unknown rounding mode.

    Examples
    --------
    >>> import fpsim, fpsim.testing as ft
    >>> from hypothesis import given
    >>> @given(ft.near_ties("bf16", "nearest_even"))
    ... def test(x):  # the bit trick rounds ties to even too
    ...     ft.assert_correctly_rounded(fpsim.round(x, "bf16"), x, "bf16")
    >>> test()
    """
    fmt = as_format(fmt)
    if rounding not in CODES:
        raise ValueError(f"unknown rounding mode {rounding!r}; known modes: {', '.join(CODES)}")
    nearest = rounding in ("nearest_even", "nearest_away")
    largest = int(to_bits(fmt.max, fmt))

    def boundary(code: int, step: int) -> float:
        v = float(from_bits(code, fmt))
        if nearest:
            # Above the largest value, the next one as if the exponent went on: the
            # midpoint is where rounding to nearest overflows.
            above = (float(from_bits(code + 1, fmt)) if code < largest
                     else v + 2.0 ** (fmt.emax - fmt.man_bits))
            v += (above - v) / 2
        return float(np.nextafter(v, np.inf * step)) if step else v

    return st.builds(lambda c, s, neg: (-1.0 if neg else 1.0) * boundary(c, s),
                     st.integers(0, largest), st.sampled_from([-1, 0, 1]), st.booleans())


def arrays(fmt: Format | str,
           shape: int | tuple[int, ...] | st.SearchStrategy[tuple[int, ...]] | None = None,
           *, dtype: npt.DTypeLike | None = None, finite: bool = True, subnormals: bool = True,
           exclude_zero: bool = False) -> st.SearchStrategy[np.ndarray]:
    """NumPy arrays of values of ``fmt`` (drawn as ``values`` draws them), of ``shape``
    (a shape or a strategy of shapes; by default up to 3 dimensions of up to 6
    elements, zero-size ones included), in ``dtype``.

    Parameters
    ----------
    fmt : Format or str
        The format.
    shape : int, tuple of int or strategy, optional
        The shape, or a strategy of shapes.
    dtype : data-type, optional
        The arrays' dtype, which must hold every value of ``fmt``: by default
        ``fmt.dtype``, the narrowest of float16, float32 and float64 that does
        (float32 for fp32, tf32 and bf16; float16 for fp16 and the fp8 formats);
        also a wider one, or an ml_dtypes dtype of exactly ``fmt``
        (``ml_dtypes.bfloat16`` for bf16).
    finite, subnormals, exclude_zero : bool
        As ``values``: only finite values (default True), subnormals too (default
        True), no zeros (default False).

    Returns
    -------
    hypothesis.strategies.SearchStrategy of numpy.ndarray
        Arrays of values of ``fmt``, of ``dtype``.

    Raises
    ------
    ValueError
        For a ``dtype`` that does not hold every value of ``fmt``.

    Examples
    --------
    >>> import numpy as np
    >>> import fpsim, fpsim.testing as ft
    >>> from hypothesis import given
    >>> @given(ft.arrays("fp16", finite=False))
    ... def test(a):
    ...     assert a.dtype == np.float16
    ...     ft.assert_bits_equal(fpsim.round(a, "fp16"), a, "fp16")
    >>> test()
    >>> @given(ft.arrays("bf16", 3, dtype=np.float64))
    ... def test_wider(a):
    ...     assert a.dtype == np.float64 and a.shape == (3,)
    >>> test_wider()
    """
    fmt = as_format(fmt)
    target = _holding(fmt, dtype)
    elements = values(fmt, finite=finite, subnormals=subnormals, exclude_zero=exclude_zero)
    shape = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=6) if shape is None \
        else shape
    drawn = hnp.arrays(np.float64, shape, elements=elements)
    return drawn if target == np.float64 else drawn.map(lambda a: a.astype(target))


def _holding(fmt: Format, dtype: npt.DTypeLike | None) -> np.dtype:
    """``dtype`` (default ``fmt.dtype``), if it holds every value of ``fmt``."""
    if dtype is None:
        return fmt.dtype
    try:
        target = np.dtype(dtype)
    except TypeError:
        raise ValueError(f"dtype: not a NumPy dtype: {dtype!r}") from None
    wide_enough = target.kind == "f" and not is_ml_dtype(target) and np.can_cast(fmt.dtype,
                                                                                   target)
    if not wide_enough and format_of_dtype(target) != fmt:
        raise ValueError(f"dtype {target} does not hold every value of {fmt.name}: use "
                         f"{fmt.dtype} or a wider float dtype, or a dtype of exactly {fmt.name}")
    return target


def formats(*, infinities: bool | None = None, max_bits: int = 64) -> st.SearchStrategy[Format]:
    """Custom binary formats: 2..11 exponent bits, 1..52 fraction bits, at most
    ``max_bits`` bits wide; IEEE style or (``infinities=False``) the finite style.

    Parameters
    ----------
    infinities : bool, optional
        IEEE style (True), the finite style (False), or both (None).
    max_bits : int, default 64
        The widest format drawn.

    Returns
    -------
    hypothesis.strategies.SearchStrategy of Format
        Custom formats.

    Examples
    --------
    >>> import fpsim, fpsim.testing as ft
    >>> from hypothesis import given
    >>> @given(ft.formats(max_bits=16))
    ... def test(fmt):
    ...     assert fpsim.round(fmt.max, fmt) == fmt.max and fmt.bits <= 16
    >>> test()
    """
    styles = st.booleans() if infinities is None else st.just(boolean(infinities, "infinities"))

    @st.composite
    def build(draw: st.DrawFn) -> Format:
        ieee = draw(styles)
        e = draw(st.integers(2, 11 if ieee else 10))
        m = draw(st.integers(1, max(1, min(52, max_bits - 1 - e))))
        return Format(e, m, infinities=ieee)

    return build()


def roundings(*, stochastic: bool = True) -> st.SearchStrategy[str]:
    """Rounding-mode names (every one, or all but ``"stochastic"``).

    Parameters
    ----------
    stochastic : bool, default True
        Include ``"stochastic"``.

    Returns
    -------
    hypothesis.strategies.SearchStrategy of str
        Names that ``fpsim.round`` takes.

    Examples
    --------
    >>> import fpsim, fpsim.testing as ft
    >>> from hypothesis import given
    >>> @given(ft.roundings(stochastic=False))
    ... def test(mode):
    ...     assert fpsim.round(0.5, "fp16", mode) == 0.5
    >>> test()
    """
    return st.sampled_from([m for m in CODES if stochastic or m != "stochastic"])
