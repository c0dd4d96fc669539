"""Block-scaled tensor-core instructions: NVIDIA Blackwell's ``kind::mxf8f6f4``,
``kind::mxf4`` and ``kind::mxf4nvf4`` MMAs, whose block FMA applies each operand's
per-block scale factors inside the instruction.

A ``BlockScaledFMA`` is a ``BlockFMA`` (the instruction's K as its block, its F, floor,
element formats and fp32 output) with a scale format and scale block. Two rules, after
MMA-Sim (Xie et al., arXiv 2511.10909; ``mmasim`` 2.1.1, ``mmasim/arithmetic/fdpa.py``):

- ``group=None`` (``kind::mxf8f6f4``, MMA-Sim's ``st_fdpa``): each product's exponent is
  its inputs' (read as the block FMA reads them) plus its two E8M0 scales' exponents; then
  the block FMA's truncation rule over the scaled products and c.
- ``group=G`` (``kind::mxf4``, ``kind::mxf4nvf4``, MMA-Sim's ``gst_fdpa``): each group of G
  products is summed exactly; its term is that sum times the two scales' significands, at
  the exponent of the scales (the sum's own magnitude does not count); a group of zero
  products, or with a zero scale, takes no part; then the truncation rule over the terms
  and c.

``docs/hardware-models.md`` gives the rules, sources and edge cases. The instructions
are computed with the shared block-FMA kernels (``fpsim.kernels.blockfma``) evaluated by
the NumPy reference backend on whole arrays, on the host.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from fpsim._checks import integer
from fpsim._device import binary64
from fpsim._inputs import array_module, as_dtype, host_value, result_dtype
from fpsim.accumulation.blocks import BlockFMA, block_matmul
from fpsim.accumulation.operands import initial, layout
from fpsim.backends import array_kernels, get_backend
from fpsim.backends import backend as use_backend
from fpsim.backends.numpy_backend import Backend as NumpyBackend
from fpsim.formats import PRESETS, Format, as_format
from fpsim.kernels.core import NO_EXPONENT
from fpsim.kernels.spec import make_spec

__all__ = ["BlockScaledFMA", "SCALE_FORMATS", "block_scaled_matmul", "promoted_matmul"]

#: The scale formats a block-scaled instruction reads.
SCALE_FORMATS = ("e8m0", "ue4m3")


@dataclass(frozen=True)
class BlockScaledFMA:
    """A model of a block-scaled tensor-core instruction.

    Parameters
    ----------
    name : str
        A label (``"B200_MXF8F6F4"``).
    fma : BlockFMA
        The instruction's block FMA without scales: ``block`` its K (products per
        instruction), ``frac_bits``, ``exp_floor`` (MMA-Sim's ``e_zero``), the element
        formats (``input``, ``input_b``) and the output. Truncation alignment, no
        ``block_output``, ``split_k`` or ``promote_every``.
    scale : {"e8m0", "ue4m3"}
        The scale factors' format.
    scale_block : int
        Elements along K that share one scale (32, or 16 for NVFP4).
    group : int or None
        None: each product carries its scales (``kind::mxf8f6f4``; E8M0 scales only). An
        integer G: products are summed exactly in groups of G, each group's sum scaled as
        one term (``kind::mxf4``, ``kind::mxf4nvf4``).
    elements : tuple of str
        The element formats the instruction takes (an operand's scheme must use one).

    Raises
    ------
    ValueError
        A parameter out of range or of the wrong type.

    Examples
    --------
    >>> import numpy as np, fpsim
    >>> qa = fpsim.quantize(np.full((1, 32), 3.0), "mxfp8_e4m3")
    >>> qb = fpsim.quantize(np.full((32, 1), 0.5), "mxfp8_e4m3", axis=0)
    >>> fpsim.matmul(qa, qb, model=fpsim.hw.B200_MXF8F6F4).tolist()
    [[48.0]]
    """

    name: str
    fma: BlockFMA
    scale: str
    scale_block: int
    group: int | None
    elements: tuple[str, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"name must be a non-empty string, got {self.name!r}")
        if not isinstance(self.fma, BlockFMA):
            raise ValueError(f"fma must be a fpsim.hw.BlockFMA, got {self.fma!r}")
        m = self.fma
        if (m.align != "truncate" or m.block_output is not None or m.split_k is not None
                or m.promote_every is not None):
            raise ValueError(f"{self.name}: the block FMA of a block-scaled instruction aligns "
                             "by truncation, with no block_output, split_k or promote_every")
        if self.scale not in SCALE_FORMATS:
            raise ValueError(f"scale must be one of {', '.join(SCALE_FORMATS)}, got "
                             f"{self.scale!r}")
        integer(self.scale_block, "scale_block", 1, m.block)
        if self.group is None:
            if self.scale != "e8m0":
                raise ValueError("scales per product (group=None) are E8M0 (powers of two)")
        else:
            integer(self.group, "group", 1, m.block)
            if self.scale_block % self.group or m.block % self.group:
                raise ValueError(f"group {self.group} must divide scale_block "
                                 f"{self.scale_block} and the block {m.block}")
        if (not isinstance(self.elements, tuple) or not self.elements
                or not all(isinstance(e, str) and e in PRESETS for e in self.elements)):
            raise ValueError(f"elements must be a tuple of format names, got {self.elements!r}")

    def with_inputs(self, a: Format | str, b: Format | str) -> BlockScaledFMA:
        """The same instruction reading A's elements in ``a`` and B's in ``b``.

        Parameters
        ----------
        a, b : Format or str
            Two of the instruction's element formats (``elements``).

        Returns
        -------
        BlockScaledFMA
            A copy named ``"<name>/<a>"`` or ``"<name>/<a>*<b>"``.

        Raises
        ------
        ValueError
            A format the instruction does not take.

        Examples
        --------
        >>> import fpsim
        >>> fpsim.hw.B200_MXF8F6F4.with_inputs("fp8_e4m3", "fp6_e2m3").name
        'B200_MXF8F6F4/fp8_e4m3*fp6_e2m3'
        """
        for fmt in (a, b):
            if as_format(fmt).name not in self.elements:
                raise ValueError(f"{self.name} takes elements of {', '.join(self.elements)}, "
                                 f"not {as_format(fmt).name}")
        fma = self.fma.with_inputs(a, b)
        return replace(self, fma=fma, name=self.name.split("/")[0] + "/" + fma.name.split("/")[1])


def block_scaled_matmul(a: Any, b: Any, scale_a: Any, scale_b: Any, model: BlockScaledFMA, *,
                        c: Any = None) -> Any:
    """``A @ B`` as the block-scaled instruction ``model`` computes it, chained over K.

    Parameters
    ----------
    a, b : array_like
        The elements, (..., M, K) and (..., K, N): values of ``model.fma``'s input formats.
    scale_a, scale_b : array_like
        Each element's scale, in the shapes of ``a`` and ``b``: values of ``model.scale``
        (NaN for a NaN scale). Elements of one block of ``model.scale_block`` along K
        share it.
    model : BlockScaledFMA
        The instruction.
    c : array_like, optional
        The initial accumulator: values of the output format (default +0).

    Returns
    -------
    numpy.ndarray
        The (..., M, N) result, binary32 values (CuPy in, CuPy out).

    Raises
    ------
    ValueError
        Values that are not of their formats, or shapes that do not multiply.

    Examples
    --------
    >>> import numpy as np, fpsim
    >>> from fpsim.accumulation.scaled import block_scaled_matmul
    >>> a, b = np.ones((1, 32)), np.ones((32, 1))
    >>> block_scaled_matmul(a, b, a * 2.0**-127, b * 2.0**-127, fpsim.hw.B200_MXF8F6F4).tolist()
    [[0.0]]
    """
    if not isinstance(model, BlockScaledFMA):
        raise ValueError(f"model must be a fpsim.hw.BlockScaledFMA, got {model!r}")
    xp = array_module([a, b])
    dtype = result_dtype(a, b, np.float32)
    host = [np.asarray(xp.asnumpy(x) if xp is not np else x, dtype=np.float64)
            for x in (a, b, scale_a, scale_b)]
    if host[2].shape != host[0].shape or host[3].shape != host[1].shape:
        raise ValueError(f"the scales' shapes {host[2].shape}, {host[3].shape} must be the "
                         f"elements' {host[0].shape}, {host[1].shape}")
    shape, a2, b3 = layout(host[0], host[1], np)
    _, sa2, sb3 = layout(host[2], host[3], np)
    fout = as_format(model.fma.output)
    with use_backend("numpy"):
        backend = get_backend()
        assert isinstance(backend, NumpyBackend)
        for name, x, fmt in (("A", a2, model.fma.input), ("B", b3, model.fma.input_b or
                                                          model.fma.input),
                             ("A's scales", sa2, model.scale), ("B's scales", sb3, model.scale)):
            f = as_format(fmt)
            flat = x.reshape(-1)
            flat = flat[~np.isnan(flat)] if "scales" in name else flat
            bad = backend.first_unrepresentable(
                flat, make_spec(f, "nearest_even", True, False, None))
            if bad >= 0:
                raise ValueError(f"{name} holds {host_value(flat[bad])!r}, not a value of "
                                 f"{f.name} ({model.name})")
        c0 = initial(c if c is None or xp is np else xp.asnumpy(xp.asarray(c)), shape, fout,
                     make_spec(fout, "nearest_even", True, False, None), np)
        acc = c0.reshape(a2.shape[0], b3.shape[2])
        if acc.size and a2.shape[1]:
            acc = _chain(array_kernels(), a2, b3, sa2, sb3, acc, model)
    result = as_dtype(acc.reshape(shape), dtype)
    return result if xp is np else xp.asarray(result)


def promoted_matmul(a: Any, b: Any, scale_a: Any, scale_b: Any, model: BlockFMA, *,
                    c: Any = None) -> Any:
    """``A @ B`` with binary32 block scales applied where the partial sums are promoted, as
    DeepSeek-V3's FP8 GEMM does on Hopper (arXiv 2412.19437, section 3.3.2; DeepGEMM).

    K is cut into chunks of ``model.promote_every`` products; each chunk is accumulated
    from +0 by the tensor core's block FMA (``model`` without its promotion), and added to
    a binary32 accumulator that starts at ``c`` (or +0) as
    ``acc = fma(chunk, fp32(scale_a * scale_b), acc)``: the two scales multiplied in
    binary32, then one fused multiply-add, each rounded to nearest even (DeepGEMM's
    ``final_accum += scale_a * scale_b * accum``, which nvcc compiles to FMUL then FFMA).

    Parameters
    ----------
    a, b : array_like
        The elements, (..., M, K) and (..., K, N): values of ``model``'s input formats.
    scale_a, scale_b : array_like
        Each element's scale, in the shapes of ``a`` and ``b``: binary32 values (NaN and
        infinities too), one value along K within each chunk of ``model.promote_every``.
    model : BlockFMA
        The tensor core, with ``promote_every`` (``fpsim.hw.H100_FP8.with_promotion(128)``).
    c : array_like, optional
        The initial accumulator: binary32 values (default +0).

    Returns
    -------
    numpy.ndarray
        The (..., M, N) result, binary32 values (CuPy in, CuPy out: computed on the
        device by the ``cupy`` backend; the scales' checks read one answer per chunk).

    Raises
    ------
    ValueError
        A model without ``promote_every``; elements, scales or c that are not values of
        their formats; scales that change within a chunk; shapes that do not multiply.

    Examples
    --------
    >>> import numpy as np, fpsim
    >>> from fpsim.accumulation.scaled import promoted_matmul
    >>> a, b = np.full((1, 256), 2.0), np.full((256, 1), 3.0)
    >>> sa = np.repeat([[0.5, 2.0**-20]], 128, axis=1)  # one scale per 128 of K
    >>> model = fpsim.hw.H100_FP8.with_promotion(128)
    >>> promoted_matmul(a, b, sa, np.ones((256, 1)), model).tolist()  # 768 * (0.5 + 2**-20)
    [[384.000732421875]]
    """
    from fpsim.arithmetic import fma
    from fpsim.rounding import round as round_to

    if not isinstance(model, BlockFMA) or model.promote_every is None:
        raise ValueError(f"model must be a fpsim.hw.BlockFMA with promote_every (the scales "
                         f"are applied at the promotion), got {model!r}")
    xp = array_module([a, b])
    dtype = result_dtype(a, b, np.float32)
    x, y, sx, sy = (binary64(xp.asarray(v)) for v in (a, b, scale_a, scale_b))
    if x.ndim < 2 or y.ndim < 2 or x.shape[-1] != y.shape[-2]:
        raise ValueError(f"K must be A's last and B's second-last dimension, got A of shape "
                         f"{x.shape} and B of shape {y.shape}")
    if sx.shape != x.shape or sy.shape != y.shape:
        raise ValueError(f"the scales' shapes {sx.shape}, {sy.shape} must be the elements' "
                         f"{x.shape}, {y.shape}")
    fp32 = as_format("fp32")
    spec = make_spec(fp32, "nearest_even", True, False, None)
    every, k_len = model.promote_every, x.shape[-1]
    for name, s, k_axis in (("A's scales", sx, -1), ("B's scales", sy, -2)):
        flat = s.reshape(-1)
        bad = get_backend().first_unrepresentable(flat, spec)
        if bad >= 0:
            raise ValueError(f"{name} hold {host_value(flat[bad])!r}, not a binary32 value")
        for lo in range(0, k_len, every):
            chunk = xp.moveaxis(s, k_axis, -1)[..., lo:lo + every]
            if not bool(xp.array_equal(chunk, xp.broadcast_to(chunk[..., :1], chunk.shape),
                                       equal_nan=True)):
                raise ValueError(f"{name} change within the chunk of K {lo}..{lo + every - 1}: "
                                 f"promote_every={every} must not cross a scale block")
    shape = np.broadcast_shapes(x.shape[:-2], y.shape[:-2]) + (x.shape[-2], y.shape[-1])
    acc = initial(c if c is None else xp.asarray(c), shape, fp32, spec, xp)
    chunk_model = model.with_promotion(None)
    with np.errstate(all="ignore"):
        for lo in range(0, k_len, every):
            part = block_matmul(x[..., lo:lo + every], y[..., lo:lo + every, :], chunk_model)
            # fp32(scale_a * scale_b): exact in binary64, rounded once (FMUL).
            scale = round_to(sx[..., :, lo][..., :, None] * sy[..., lo, :][..., None, :],
                             fp32)
            acc = xp.asarray(fma(xp.asarray(part, np.float64), scale, acc, fp32), np.float64)
    return as_dtype(acc, dtype)


def _chain(k: Mapping[str, Any], a2: Any, b3: Any, sa2: Any, sb3: Any, acc: Any,
           model: BlockScaledFMA) -> Any:
    """The instructions chained over K: (rows, K), (groups, K, N) elements and scales in,
    the (rows, N) result of the last instruction out."""
    fma = model.fma
    hw = fma.params()
    out_spec = make_spec(as_format(fma.output), fma.output_rounding, True,
                         fma.overflow == "saturate", None)
    sf = as_format(model.scale)
    groups, k_len, n = b3.shape
    a = a2.reshape(groups, -1, k_len)
    sa = sa2.reshape(groups, -1, k_len)
    c = acc.reshape(groups, -1, n)
    fz, decode = k["finite_or_zero"], k["hw_decode"]
    # Each scale read as the block FMA reads an input: (significand, exponent).
    (sig_a, e_a), (sig_b, e_b) = (decode(fz(s), sf.man_bits, sf.emin) for s in (sa, sb3))
    nan_a, nan_b = np.isnan(sa), np.isnan(sb3)
    with np.errstate(all="ignore"):
        for k0 in range(0, k_len, fma.block):
            cols = range(k0, min(k_len, k0 + fma.block))
            # A non-finite input, or a NaN scale: the IEEE sum of c and the scaled products.
            naive, bad = c.copy(), k["is_nonfinite"](c)
            for i in cols:
                x, y = a[:, :, i, None], b3[:, None, i, :]
                naive = naive + x * y * sa[:, :, i, None] * sb3[:, None, i, :]
                bad = (bad | k["is_nonfinite"](x) | k["is_nonfinite"](y)
                       | nan_a[:, :, i, None] | nan_b[:, None, i, :])
            if model.group is None:
                total, align = _scaled_products(k, a, b3, e_a, e_b, c, cols, hw)
            else:
                total, align = _scaled_groups(k, a, b3, (sig_a, e_a), (sig_b, e_b), c, cols,
                                              model.group, hw, sf.man_bits)
            value, _ = k["hw_finish"](total, align, fz(c), hw, out_spec, False)
            c = k["hw_result"](value, naive, bad)
    return c.reshape(acc.shape)


def _scaled_products(k: Mapping[str, Any], a: Any, b: Any, e_a: Any, e_b: Any, c: Any, cols: range,
                     hw: Any) -> tuple[Any, Any]:
    """``kind::mxf8f6f4`` (MMA-Sim's ``st_fdpa``): each product's exponent plus its two
    E8M0 scales' exponents; c and the products aligned together and cut toward zero."""
    fz = k["finite_or_zero"]
    align = k["hw_c_exponent"](fz(c), hw)
    shifts = []
    for i in cols:
        x, y = fz(a[:, :, i, None]), fz(b[:, None, i, :])
        s = e_a[:, :, i, None] + e_b[:, None, i, :]
        p, e_top, _ = k["hw_product"](x, y, hw)
        align = np.maximum(align, np.where(p == 0, NO_EXPONENT, e_top + s))
        shifts.append((x, y, s))
    total = k["hw_c_term"](fz(c), align, hw)[0]
    for x, y, s in shifts:
        # A product scaled by 2**s cut on the grid of E is the product cut on E - s's.
        total = total + k["hw_term"](x, y, align - s, hw)[0]
    return total, align


def _scaled_groups(k: Mapping[str, Any], a: Any, b: Any, scale_a: tuple[Any, Any],
                   scale_b: tuple[Any, Any], c: Any, cols: range, group: int, hw: Any,
                   t_s: int) -> tuple[Any, Any]:
    """``kind::mxf4``/``mxf4nvf4`` (MMA-Sim's ``gst_fdpa``): each group's exact sum times
    its scales' significands, at its scales' exponent (a group whose products are all
    zero, or with a zero scale, takes no part); c and the terms aligned together and cut
    toward zero."""
    fz = k["finite_or_zero"]
    (sig_a, e_a), (sig_b, e_b) = scale_a, scale_b
    # Every product is an integer on the grid of the smallest products, 2**grid.
    grid = hw.emin_in - hw.t_in + hw.emin_in_b - hw.t_in_b
    align = k["hw_c_exponent"](fz(c), hw)
    terms = []
    for g0 in range(cols.start, cols.stop, group):
        total = nonzero = 0
        for i in range(g0, min(cols.stop, g0 + group)):
            x, y = fz(a[:, :, i, None]), fz(b[:, None, i, :])
            p, _, e_lsb = k["hw_product"](x, y, hw)
            neg = (k["f64_bits"](x) < 0) != (k["f64_bits"](y) < 0)
            total = total + np.where(neg, -1, 1) * (p << (e_lsb - grid))
            nonzero = nonzero | (p != 0)
        sig = sig_a[:, :, g0, None] * sig_b[:, None, g0, :]
        e = e_a[:, :, g0, None] + e_b[:, None, g0, :]
        align = np.maximum(align, np.where(nonzero & (sig != 0), e, NO_EXPONENT))
        terms.append((total, sig, grid + e - 2 * t_s))
    out = k["hw_c_term"](fz(c), align, hw)[0]
    for total, sig, e_lsb in terms:
        cut = k["hw_truncate"](np.abs(total) * sig, e_lsb, align, hw.frac_bits)
        out = out + np.where(total < 0, -cut, cut)
    return out, align
