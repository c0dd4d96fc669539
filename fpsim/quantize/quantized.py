"""Block quantization: values to elements and shared scales (``quantize``), and back
(``dequantize``)."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from numpy.lib.array_utils import normalize_axis_index

from fpsim._checks import boolean, integer
from fpsim._device import array_module, binary64
from fpsim._elementwise import random_key
from fpsim._inputs import as_float_array
from fpsim.backends import array_kernels, get_backend_name
from fpsim.bits import from_bits
from fpsim.formats import PRESETS, Format
from fpsim.kernels.blockscale import Encoding
from fpsim.kernels.spec import make_spec
from fpsim.quantize.blocks import Blocks
from fpsim.quantize.blockwise import scale_blockwise
from fpsim.quantize.current import scale_current
from fpsim.quantize.mx import mx_parameters, scale_mx
from fpsim.quantize.nvfp4 import nvfp4_parameters, scale_nvfp4
from fpsim.quantize.schemes import Scheme, scheme
from fpsim.quantize.telemetry import QuantizationStats, summarize
from fpsim.rounding import round as round_to

if TYPE_CHECKING:
    from fpsim._typing import Values

__all__ = ["Quantized", "dequantize", "quantize", "quantize_repeated"]

Floats = npt.NDArray[np.float64]
Codes = npt.NDArray[np.unsignedinteger[Any]]


@dataclass(frozen=True, eq=False)
class Quantized:
    """Block-quantized values: elements, one scale per block, and the layout.

    Attributes
    ----------
    scheme : Scheme
        The scheme (element and scale formats, block size).
    axis : int
        The axis along which consecutive elements form blocks (non-negative).
    bits : numpy.ndarray of unsigned integers
        The elements' encodings in ``scheme.element``, in the shape of the input.
    values : numpy.ndarray of float64
        The elements' values (decoded from ``bits`` on first use).
    scales : numpy.ndarray of float64
        Each block's scale: the input's shape with ``axis`` cut to the number of blocks
        (the last one shorter where the axis is not a multiple of the block); NaN for an
        MX block with a NaN or an infinity (``docs/block-scaled.md`` for each scheme).
    scale_bits : numpy.ndarray of unsigned integers
        The scales' encodings in ``scheme.scale_format``.
    scale_rule : str
        The rule that chose the scales.
    rounding : str
        The rounding mode of the elements.
    tensor_scale : float or None
        NVFP4's binary32 decode scale for the whole tensor (None for the MX schemes).
    flags : numpy.ndarray of uint8 or None
        The IEEE flags of each element's rounding (``fpsim.OVERFLOW`` where it saturated);
        None where the caller asked for none (a training step that nobody observes).
    amax : float
        The input's largest magnitude (NaN if it held a NaN).

    Examples
    --------
    >>> import fpsim
    >>> q = fpsim.quantize([0.1, -3.0, 1000.0, 0.0], "mxfp4_e2m1", pad=True)
    >>> q.values.tolist(), q.scales.tolist(), q.scale_bits.tolist()
    ([0.0, -0.0, 6.0, 0.0], [128.0], [134])
    >>> q.bits.tolist()  # e2m1: sign, 2 exponent bits, 1 fraction bit
    [0, 8, 7, 0]
    """

    scheme: Scheme
    axis: int
    bits: Codes
    scales: Floats
    scale_bits: Codes
    scale_rule: str
    rounding: str
    flags: npt.NDArray[np.uint8] | None
    amax: float
    tensor_scale: float | None = None

    @functools.cached_property
    def values(self) -> Floats:
        """The elements' values, in the shape of the input (decoded from ``bits``)."""
        return decoded(self.bits, self.scheme.element)

    @functools.cached_property
    def _scaled(self) -> Floats:
        """Each element times its block's scale (not NVFP4's tensor scale), exact in
        binary64 (widened from ``_scaled32`` where the Numba backend's loops wrote it as
        they quantized); kept once computed, read-only."""
        held = self.__dict__.get("_scaled32")
        out = _times_scales(self) if held is None else held.astype(np.float64)
        if array_module(out) is np:
            out.setflags(write=False)
        return out

    def stats(self) -> QuantizationStats:
        """Telemetry: the shares of elements saturated, flushed to zero and subnormal, the
        input's amax and the scales' histogram.

        Returns
        -------
        QuantizationStats

        Examples
        --------
        >>> import fpsim
        >>> q = fpsim.quantize([100.0, 1e-5] + [1.0] * 30, "mxfp8_e4m3")
        >>> q.stats().flushed * 32, q.stats().amax
        (1.0, 100.0)
        """
        if self.flags is None:
            raise ValueError("stats() reads the elements' flags, and this quantization "
                             "computed none (flags=False)")
        return summarize(self.values, self.flags, self.scales, self.amax, self.scheme.element)

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape of the quantized array."""
        return tuple(self.bits.shape)

    @property
    def block(self) -> int:
        """Elements per block along ``axis`` (the axis's length for per_row, the array's
        size for per_tensor)."""
        if self.scheme.name == "per_tensor":
            return int(self.bits.size)
        return self.scheme.block or int(self.bits.shape[self.axis])

    def __repr__(self) -> str:
        return (f"Quantized(scheme={self.scheme.name!r}, shape={self.shape}, axis={self.axis}, "
                f"blocks={self.scales.size}, scale_rule={self.scale_rule!r}, "
                f"rounding={self.rounding!r})")


@functools.lru_cache(maxsize=64)
def _table(fmt: Format) -> Floats:
    """The value of every encoding of a format of at most 8 bits."""
    table: Floats = np.asarray(from_bits(np.arange(1 << fmt.bits), fmt), np.float64)
    table.setflags(write=False)
    return table


def decoded(bits: Codes, fmt: Format) -> Floats:
    """The values of the encodings ``bits`` of ``fmt`` (``fpsim.from_bits``; a table
    lookup for formats of 8 bits or fewer), on the device of ``bits``: there, formats of 8
    bits or fewer and binary32 (its encodings read as float32, widened exactly)."""
    xp = array_module(bits)
    if fmt.bits <= 8:
        table = _table(fmt)
        return table[bits] if xp is np else xp.asarray(table)[bits]
    if xp is not np:
        if fmt != PRESETS["fp32"]:
            raise ValueError(f"decoding {fmt.name} encodings on the device is not supported "
                             "(formats of 8 bits or fewer, and fp32)")
        out: Floats = binary64(bits.view(np.float32))
        return out
    return np.asarray(from_bits(bits, fmt), np.float64).reshape(bits.shape)


def encoded(values: Any, fmt: Format) -> Codes:
    """The encodings of values of ``fmt``, as ``fmt.bits_dtype``
    (``fpsim.kernels.blockscale.encode``)."""
    xp = array_module(values)
    codes = array_kernels(values)["encode"](binary64(xp.asarray(values)), Encoding.of(fmt))
    out: Codes = xp.asarray(codes).astype(fmt.bits_dtype)
    return out


def quantize(x: Values, scheme_name: str | Scheme, axis: int = -1, *,
             scale_rule: str | None = None, rounding: str = "nearest_even",
             subnormals: bool = True, seed: int | None = None,
             random_bits: int | None = None, pad: bool = False) -> Quantized:
    """Quantize values in blocks along an axis, each block sharing one scale.

    Every block of ``scheme.block`` consecutive elements along ``axis`` gets a scale from
    the block's largest magnitude (amax). MX: ``2**s`` by the scale rule, clamped to
    E8M0's range; each element is ``x / 2**s`` (exact) rounded once to the element
    format, saturating at its largest value (OCP MX v1.0 section 6.3). NVFP4: a UE4M3
    scale per block of 16 and a binary32 scale for the tensor, computed in binary32 as
    TransformerEngine does. Blockwise FP8: a binary32 scale ``amax / 448`` per block of
    128, as DeepSeek-V3's kernels compute it. Current scaling: ``448 / amax`` per tensor
    or row, as TransformerEngine computes it. ``docs/block-scaled.md`` states every rule.

    Parameters
    ----------
    x : array_like
        The values, taken exactly as ``fpsim.round`` takes them: host arrays, or CuPy
        arrays under the ``cupy`` backend, whose ``Quantized`` holds device arrays
        computed by its kernels (its ``amax`` and NVFP4's tensor scale are read back:
        host numbers).
    scheme_name : str or Scheme
        ``"mxfp8_e4m3"``, ``"mxfp8_e5m2"``, ``"mxfp6_e2m3"``, ``"mxfp6_e3m2"``,
        ``"mxfp4_e2m1"``, ``"nvfp4"``, ``"fp8_block1x128"``, the tiles of the last two
        axes ``"nvfp4_16x16"`` and ``"fp8_block128x128"``, and FP8 current scaling
        ``"per_tensor"`` and ``"per_row"`` (along ``axis``) (``from fpsim.quantize
        import SCHEMES``).
    axis : int, default -1
        The axis along which the blocks run (rows: -1; columns of a matrix: 0). The
        tiled schemes cover the last two axes and take only -1.
    scale_rule : str, optional
        ``"ocp"`` (the scheme's default: ``floor(log2(amax)) - emax``), ``"ceil"``,
        ``"torchao_even"`` or ``"transformer_engine"``
        (``from fpsim.quantize import SCALE_RULES``); NVFP4 and blockwise FP8 take only
        their own (``"transformer_engine"``, ``"deepseek_v3"``); per_tensor and per_row
        ``"transformer_engine"`` or, with power-of-two scales,
        ``"transformer_engine_pow2"``.
    rounding : str, default "nearest_even"
        The elements' rounding mode: any of ``fpsim.ROUNDING_MODES``.
    subnormals : bool, default True
        False: elements below the element format's smallest normal become zeros.
    seed, random_bits : int, optional
        Stochastic rounding, as ``fpsim.round`` takes them: the stream is keyed by the
        element's C-order index in ``x``.
    pad : bool, default False
        False: an axis whose length is not a multiple of the block is refused. True:
        its last block is shorter (as if padded with zeros, which change no amax).
        NaN and infinities are handled per scheme (``docs/block-scaled.md``).

    Returns
    -------
    Quantized

    Raises
    ------
    ValueError
        An unknown scheme, scale rule or rounding mode (the message lists the known
        ones); an axis length that is not a multiple of the block without ``pad``; an
        ``axis`` that is not an integer; values fpsim cannot take exactly.
    numpy.exceptions.AxisError
        ``axis`` out of range (a 0-d ``x`` has none).

    Examples
    --------
    >>> import numpy as np
    >>> import fpsim
    >>> x = np.linspace(-1.0, 1.0, 32)
    >>> q = fpsim.quantize(x, "mxfp8_e4m3")
    >>> q.scales.tolist()  # 2**(floor(log2(1.0)) - 8)
    [0.00390625]
    >>> err = np.abs(fpsim.dequantize(q) - x).max()
    >>> bool(err <= 2.0**-4)
    True
    """
    return _quantize(x, scheme_name, axis, scale_rule, rounding, subnormals, seed, random_bits,
                     pad, hot=False, flags=True)


# quantize's options and their defaults, read from its signature (one place to change).
_OPTIONS: dict[str, Any] = dict(quantize.__kwdefaults__ or {})


def quantize_repeated(x: Values, scheme_name: str | Scheme, axis: int = -1, *,
                      flags: bool = True, **options: Any) -> Quantized:
    """``quantize`` of a call that a training run repeats with the same parameters: on the
    Numba backend, in a loop compiled for them (constants folded) at any size. Without
    ``flags``, the elements' flags are not computed (``Quantized.flags`` is None)."""
    unknown = set(options) - set(_OPTIONS)
    if unknown:
        raise TypeError(f"quantize got unexpected arguments: {', '.join(sorted(unknown))}")
    given = {**_OPTIONS, **options}
    return _quantize(x, scheme_name, axis, given["scale_rule"], given["rounding"],
                     given["subnormals"], given["seed"], given["random_bits"], given["pad"],
                     hot=True, flags=boolean(flags, "flags"))


@functools.lru_cache(maxsize=256, typed=True)  # typed: True and 1 are checked apart
def _checked(scheme_name: str | Scheme, scale_rule: str | None, rounding: str,
             subnormals: bool, random_bits: int | None, pad: bool,
             axis: int) -> tuple[Scheme, str, Any, bool, int]:
    """``quantize``'s options checked: the scheme, the scale rule, the elements' rounding
    spec, ``pad`` and ``axis``; kept for the next call with the same options (a training
    step's)."""
    sch = scheme(scheme_name)
    rule = sch.scale_rule if scale_rule is None else scale_rule
    if not isinstance(rule, str) or rule not in sch.rules:
        raise ValueError(f"unknown scale_rule {rule!r} for {sch.name}; known rules: "
                         f"{', '.join(sch.rules)}")
    spec = make_spec(sch.element, rounding, subnormals, True, random_bits)
    return sch, rule, spec, boolean(pad, "pad"), integer(axis, "axis")


def _quantize(x: Values, scheme_name: str | Scheme, axis: int, scale_rule: str | None,
              rounding: str, subnormals: bool, seed: int | None, random_bits: int | None,
              pad: bool, hot: bool, flags: bool) -> Quantized:
    options = (scheme_name, scale_rule, rounding, subnormals, random_bits, pad, axis)
    try:
        sch, rule, spec, pad, axis = _checked(*options)
    except TypeError:  # an unhashable option: checked (and refused) without the cache
        sch, rule, spec, pad, axis = _checked.__wrapped__(*options)
    arr = as_float_array(x, "x", device=True)
    xp = array_module(arr)
    arr = xp.asarray(arr, dtype=np.float32 if arr.dtype == np.float32 else np.float64)
    if sch.rows > 1:  # tiles over the last two axes
        if arr.ndim < 2:
            raise ValueError(f"{sch.name} tiles the last two axes: x must have at least 2 "
                             f"dimensions, got shape {arr.shape}")
        if axis not in (-1, arr.ndim - 1):
            raise ValueError(f"axis={axis}: {sch.name} tiles the last two axes; leave axis "
                             "at -1")
        ax = arr.ndim - 1
        uneven = arr.shape[-2] % sch.rows or arr.shape[-1] % sch.block
    else:
        ax = normalize_axis_index(axis, arr.ndim)
        size = sch.block or max(arr.shape[ax], 1)  # per_row, per_tensor: the whole axis
        uneven = 0 if sch.name == "per_tensor" else arr.shape[ax] % size
    if uneven and not pad:
        what = (f"shape {arr.shape[-2:]} is not a multiple of the {sch.rows}x{sch.block} tile"
                if sch.rows > 1 else f"x has {arr.shape[ax]} elements along axis {ax}, not a "
                f"multiple of the block of {sch.block}")
        raise ValueError(f"{what} of {sch.name}: pass pad=True for shorter last blocks")
    if xp is np and get_backend_name() == "numba" and sch.kind in ("mx", "nvfp4") and sch.rows == 1:
        from fpsim.backends import numba_quantize  # Numba compiles on first use

        key = random_key(seed, spec.mode)
        if sch.kind == "mx":
            params = mx_parameters(sch, rule, spec)
            bits, flag_bits, scaled, scale_bits, scales, amax = numba_quantize.quantize_mx(
                arr, ax, params, key, sch.block, hot, flags)
            tensor_scale = None
        else:
            bits, flag_bits, scaled, scale_bits, amax, nv = numba_quantize.quantize_nvfp4(
                arr, ax, lambda amax: nvfp4_parameters(sch, amax, spec), key, sch.block, hot,
                flags)
            scales = decoded(scale_bits, sch.scale_format)
            tensor_scale = float(nv.global_decode)
        q = Quantized(scheme=sch, axis=ax, bits=bits, scales=scales, scale_bits=scale_bits,
                      scale_rule=rule, rounding=rounding, tensor_scale=tensor_scale,
                      flags=flag_bits, amax=one_nan(amax))
        if scaled is not None:  # the loops' element times scale, binary32 (exact)
            scaled.setflags(write=False)
            q.__dict__["_scaled32"] = scaled
        return q
    q = _quantize_arrays(arr, sch, ax, rule, rounding, subnormals, seed, random_bits)
    return q if flags else replace(q, flags=None)


def _quantize_arrays(arr: Floats, sch: Scheme, ax: int, rule: str, rounding: str,
                     subnormals: bool, seed: int | None, random_bits: int | None) -> Quantized:
    """``quantize`` in whole-array operations: the block-scaling kernels on whole arrays
    (``array_kernels``: the host's, or the cupy backend's on a device array), the
    elements rounded by the backend in force. On the device, the input's amax is read
    back (``Quantized.amax``; NVFP4's tensor scale is computed from it on the host)."""
    xp = array_module(arr)
    tensor_scale = None
    if sch.rows > 1:
        blocks = Blocks(arr, sch.block, sch.rows)
    elif sch.name == "per_tensor":  # one block: every element, in C order
        blocks = Blocks(arr.reshape(-1), max(arr.size, 1))
    else:
        blocks = Blocks(xp.moveaxis(arr, ax, -1), sch.block or max(arr.shape[ax], 1))
    spec = make_spec(sch.element, rounding, subnormals, True, random_bits)
    amax = largest(arr)
    if sch.kind == "nvfp4":
        params = nvfp4_parameters(sch, amax, spec)
        scaled, per_block = scale_nvfp4(blocks, params)
        tensor_scale = float(params.global_decode)
    elif sch.kind == "blockwise":
        scaled, per_block = scale_blockwise(blocks)
    elif sch.kind == "current":
        pow2 = rule == "transformer_engine_pow2"
        scaled, per_block = scale_current(blocks, sch.element.max, pow2)
    else:
        scaled, per_block = scale_mx(blocks, mx_parameters(sch, rule, spec))
    if sch.name == "per_tensor":  # an empty tensor: amax 0, scale 1
        per_block = per_block if per_block.size else xp.ones(1)
        scaled, per_block = scaled.reshape(arr.shape), per_block.reshape((1,) * arr.ndim)
    rounded, flags = round_to(xp.moveaxis(scaled, -1, ax), sch.element, rounding,
                              subnormals=subnormals, saturate=True, seed=seed,
                              random_bits=random_bits, flags=True)
    scale_bits = encoded(xp.moveaxis(per_block, -1, ax), sch.scale_format)
    return Quantized(scheme=sch, axis=ax, bits=encoded(rounded, sch.element),
                     scales=decoded(scale_bits, sch.scale_format), scale_bits=scale_bits,
                     scale_rule=rule, rounding=rounding, tensor_scale=tensor_scale,
                     flags=xp.asarray(flags, dtype=np.uint8), amax=amax)


def dequantize(q: Quantized) -> Floats:
    """The values a ``Quantized`` stands for: each element times its block's scale (times
    the tensor's scale, NVFP4).

    Exact: every such product of an element and its scales is a binary64 value.

    Parameters
    ----------
    q : Quantized
        The output of ``fpsim.quantize``.

    Returns
    -------
    numpy.ndarray of float64
        In ``q.shape``; NaN throughout a block whose scale is NaN.

    Raises
    ------
    ValueError
        ``q`` is not a ``Quantized``.

    Examples
    --------
    >>> import fpsim
    >>> q = fpsim.quantize([3.0, 0.7, -0.2, 5.5] * 8, "mxfp4_e2m1")
    >>> fpsim.dequantize(q)[:4].tolist()
    [3.0, 0.5, -0.0, 6.0]
    """
    if not isinstance(q, Quantized):
        raise ValueError(f"q: expected a Quantized (from fpsim.quantize), got {type(q).__name__}")
    kept = "_scaled" in q.__dict__ or "_scaled32" in q.__dict__
    held = q._scaled if kept else None  # kept: read-only, copied below
    scaled = _times_scales(q) if held is None else held
    if q.tensor_scale is None:
        return scaled.copy() if held is not None else scaled
    xp = array_module(q.bits)
    with np.errstate(invalid="ignore"):
        out = scaled * q.tensor_scale
        return xp.where(out != out, np.nan, out)  # type: ignore[no-any-return]


def _times_scales(q: Quantized) -> Floats:
    """Each element of ``q`` times its block's scale (NaN throughout a block whose scale is
    NaN, the one quiet NaN)."""
    xp = array_module(q.bits)
    if q.scheme.rows > 1:
        each = Blocks(q.values, q.scheme.block, q.scheme.rows).each(q.scales)
    elif q.scheme.block == 0:  # per_tensor, per_row: the scales broadcast
        each = q.scales
    else:
        moved = Blocks(xp.moveaxis(q.values, q.axis, -1), q.scheme.block)
        each = xp.moveaxis(moved.each(xp.moveaxis(q.scales, q.axis, -1)), -1, q.axis)
    with np.errstate(invalid="ignore"):  # 0 times an infinite scale: NaN, as the kernels
        out: Floats = q.values * each
        # Every NaN the one quiet NaN (a GPU's arithmetic gives its own).
        return xp.where(out != out, np.nan, out)  # type: ignore[no-any-return]


def largest(arr: Floats) -> float:
    """The largest magnitude of ``arr`` (host or device), read back: 0 for an empty
    array, the one quiet NaN where any element is a NaN."""
    if not arr.size:
        return 0.0
    xp = array_module(arr)
    return one_nan(float(xp.max(xp.abs(binary64(arr)))))


def one_nan(v: float) -> float:
    """``v``, a NaN as the one quiet NaN (a GPU's arithmetic, or the input's payload,
    would give another)."""
    return math.nan if v != v else v
