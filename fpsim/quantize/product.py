"""Products of block-scaled operands: ``fpsim.matmul`` of two ``Quantized``.

As a Blackwell block-scaled MMA forms them (``mma.kind::mxf8f6f4.block_scale``,
``kind::mxf4nvf4``; MMA-Sim, Xie et al. 2025): each term is the product of two
elements times their blocks' two scales, exact (an MX scale is a power of two, an NVFP4
scale a UE4M3 value: every such term is a binary64 value); the terms are then added
with any of fpsim's accumulators and orders, as ``fpsim.matmul`` adds products. An
NVFP4 operand's binary32 tensor scale is applied once, at the end, as a GEMM epilogue
does. ``docs/block-scaled.md`` states the rule.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fpsim._device import array_module, binary32, binary64
from fpsim.accumulation.blocks import BlockFMA
from fpsim.accumulation.matmul import ACCUMULATOR_OPTIONS, accumulate, blas_sum
from fpsim.accumulation.scaled import BlockScaledFMA, block_scaled_matmul, promoted_matmul
from fpsim.formats import as_format
from fpsim.quantize.blocks import Blocks
from fpsim.quantize.quantized import Quantized
from fpsim.rounding import round as round_to

__all__ = ["quantized_matmul"]

# Scale kinds whose products with elements are exact in every term (binary64).
EXACT_KINDS = ("mx", "nvfp4")
# Scale kinds whose binary32 scales a tensor core's promotion applies (DeepSeek-V3).
PROMOTED_KINDS = ("blockwise",)


def _k_block(q: Quantized, name: str, k_axis: int, kinds: tuple[str, ...] = EXACT_KINDS) -> int:
    """The elements along K that share one scale in ``q`` (the A or B of a product)."""
    sch = q.scheme
    if sch.kind not in kinds:
        if kinds == PROMOTED_KINDS and sch.kind in EXACT_KINDS:
            raise ValueError(
                f"{name}: a product of {sch.name} operands takes a block-scaled instruction "
                "(fpsim.hw.BLOCK_SCALED: B200_MXF8F6F4, B200_MXF4, B200_NVF4, ...), whose "
                "block FMA applies the scales; a BlockFMA model reads unscaled values")
        if kinds == PROMOTED_KINDS:
            raise ValueError(
                f"{name}: a tensor core with promote_every applies DeepSeek-V3's blockwise "
                f"binary32 scales at each promotion; {sch.name} is not blockwise FP8 "
                "(fp8_block1x128, fp8_block128x128)")
        raise ValueError(
            f"{name}: a product of {sch.name} operands is not supported: its binary32 scales "
            "times the elements are not exact per term; dequantize it, use an MX or NVFP4 "
            "scheme, or (blockwise FP8) a tensor core that promotes every N, "
            "model=fpsim.hw.H100_FP8.with_promotion(128)")
    ndim = q.bits.ndim
    if ndim < 2:
        raise ValueError(f"{name}: matmul needs at least 2 dimensions, got shape {q.shape}")
    if sch.rows > 1:  # tiles of the last two axes: K is A's columns, B's rows
        return sch.block if k_axis == ndim - 1 else sch.rows
    if q.axis != k_axis:
        which = "last" if k_axis == ndim - 1 else "second to last"
        raise ValueError(f"{name}: its blocks run along axis {q.axis}; a product needs them "
                         f"along K, the {which} axis ({k_axis}): quantize it with "
                         f"axis={k_axis - ndim}")
    return sch.block


def quantized_matmul(qa: Any, qb: Any, *, model: Any = None, **options: Any) -> Any:
    """``fpsim.matmul`` of block-scaled operands; ``options`` as ``fpsim.matmul`` takes them.

    Each term ``a[m, k] * b[k, n] * scale_a * scale_b`` is exact; the terms are added in
    ``k`` order (or pairwise), each addition rounded to ``accum``; or, with a block-scaled
    instruction's ``model`` (``fpsim.hw.BLOCK_SCALED``), as that instruction adds them,
    chained over K. An NVFP4 tensor scale multiplies the result at the end:
    ``alpha = fp32(ts_a * ts_b)``, the result ``acc * alpha`` rounded once to ``accum``
    (the model's output) to nearest even, as a GEMM epilogue does. Blockwise FP8 operands
    (binary32 scales, DeepSeek-V3) take a tensor core that promotes every N
    (``model=fpsim.hw.H100_FP8.with_promotion(128)``): each chunk's block-FMA sum is
    added to a binary32 accumulator as ``fma(chunk, fp32(scale_a * scale_b), acc)``
    (``fpsim.accumulation.scaled.promoted_matmul``).

    Examples
    --------
    >>> import numpy as np
    >>> import fpsim
    >>> a = fpsim.quantize(np.full((1, 32), 3.0), "mxfp8_e4m3")
    >>> b = fpsim.quantize(np.full((32, 1), 0.5), "mxfp8_e4m3", axis=0)
    >>> fpsim.matmul(a, b).tolist()
    [[48.0]]
    >>> fpsim.matmul(a, b, model=fpsim.hw.B200_MXF8F6F4).tolist()
    [[48.0]]
    """
    for name, q in (("A", qa), ("B", qb)):
        if not isinstance(q, Quantized):
            raise ValueError(f"{name}: a product with a Quantized operand needs both quantized "
                             f"(fpsim.quantize), got {type(q).__name__}")
    promoted = isinstance(model, BlockFMA)
    if model is not None and not (promoted or isinstance(model, BlockScaledFMA)):
        raise ValueError(
            f"model={getattr(model, 'name', model)!r}: a product of Quantized operands takes a "
            "block-scaled instruction (fpsim.hw.BLOCK_SCALED: B200_MXF8F6F4, B200_MXF4, "
            "B200_NVF4, ...), whose block FMA applies the scales, or (blockwise FP8) a "
            "tensor core that promotes every N (fpsim.hw.H100_FP8.with_promotion(128))")
    kinds = PROMOTED_KINDS if promoted else EXACT_KINDS
    k_a = _k_block(qa, "A", qa.bits.ndim - 1, kinds)
    k_b = _k_block(qb, "B", qb.bits.ndim - 2, kinds)
    if qa.shape[-1] != qb.shape[-2]:
        raise ValueError(f"inner dimensions differ: A {qa.shape} and B {qb.shape}")
    if k_a != k_b:
        raise ValueError(f"A's blocks span {k_a} elements of K and B's {k_b}: a block-scaled "
                         "product pairs blocks of equal length")
    tensor_scaled = qa.tensor_scale is not None or qb.tensor_scale is not None
    if tensor_scaled and options.get("c") is not None:
        raise ValueError("c: an initial accumulator with an NVFP4 tensor scale is not "
                         "supported (the epilogue would scale it too)")
    if isinstance(model, BlockFMA):
        return _promoted(qa, qb, model, k_a, options)
    if model is not None:
        return _instruction(qa, qb, model, k_a, options)
    given = {k: options.pop(k, None) for k in ACCUMULATOR_OPTIONS}
    settings: dict[str, Any] = {k: ACCUMULATOR_OPTIONS[k] if v is None else v
                                for k, v in given.items()}
    out, c, stats = options.pop("out", None), options.pop("c", None), options.pop("stats", False)
    if options:
        raise TypeError(f"matmul got unexpected arguments: {', '.join(options)}")
    kept = qa.__dict__.get("_scaled32"), qb.__dict__.get("_scaled32")
    if (kept[0] is not None and kept[1] is not None and out is None and c is None
            and not tensor_scaled
            and blas_sum(as_format(settings["accum"]), settings["rounding"], settings["order"],
                         settings["subnormals"], settings["saturate"], stats, np)):
        # The loops' binary32 terms (exact) go to the BLAS product as they are.
        return _wide(accumulate(*kept, narrowed=kept, out=None, c=None, stats=False,
                                **settings))
    a, b = qa._scaled, qb._scaled  # the terms' factors: elements times block scales
    if settings["order"] == "any" and not (_binary32(qa, a) and _binary32(qb, b)):
        settings["order"] = "sequential"  # BLAS would read the terms' factors as float32
    result = accumulate(a, b, out=None if tensor_scaled else out, c=c, stats=stats,
                        **settings)
    if not tensor_scaled:
        return result
    acc, counts = result if stats else (result, None)
    final = _epilogue(acc, qa, qb, settings["accum"], out, subnormals=settings["subnormals"],
                      saturate=settings["saturate"])
    return (final, counts) if stats else final


def _epilogue(acc: Any, qa: Quantized, qb: Quantized, accum: Any, out: Any,
              **rounding: Any) -> Any:
    """The NVFP4 tensor scales applied to a product's result, as a GEMM epilogue:
    ``acc * fp32(ts_a * ts_b)`` rounded once to ``accum`` to nearest even; then ``out``."""
    ts_a = np.float32(1.0 if qa.tensor_scale is None else qa.tensor_scale)
    ts_b = np.float32(1.0 if qb.tensor_scale is None else qb.tensor_scale)
    alpha = float(ts_a * ts_b)  # binary32, nearest even
    with np.errstate(invalid="ignore"):
        scaled = binary64(acc) * alpha  # exact: <= 29 + 24 bits
    final = round_to(scaled, as_format(accum), "nearest_even", **rounding)
    if out is not None:
        final = round_to(binary64(final), as_format(out))
    return final


def _instruction(qa: Quantized, qb: Quantized, model: BlockScaledFMA, k_block: int,
                 options: dict[str, Any]) -> Any:
    """``qa @ qb`` as the block-scaled instruction ``model`` computes it."""
    _fixed(model, options)
    for name, q in (("A", qa), ("B", qb)):
        sch = q.scheme
        if sch.scale_format.name != model.scale or k_block != model.scale_block:
            raise ValueError(
                f"{name}: {model.name} reads {model.scale} scales, one per {model.scale_block} "
                f"elements of K; {sch.name} has {sch.scale_format.name} scales per {k_block}")
        if sch.element.name not in model.elements:
            raise ValueError(f"{name}: {model.name} takes elements of "
                             f"{', '.join(model.elements)}, not {sch.element.name}")
    inst = model.with_inputs(qa.scheme.element, qb.scheme.element)
    acc = block_scaled_matmul(qa.values, qb.values, _element_scales(qa), _element_scales(qb),
                              inst, c=options.get("c"))
    out = options.get("out")
    if qa.tensor_scale is None and qb.tensor_scale is None:
        return acc if out is None else round_to(_wide(acc), as_format(out))
    return _epilogue(acc, qa, qb, inst.fma.output, out)


def _fixed(model: Any, options: dict[str, Any]) -> None:
    """Refuse the accumulator options a hardware ``model`` fixes."""
    given = [k for k in (*ACCUMULATOR_OPTIONS, "stats") if options.get(k) not in (None, False)]
    if given:
        raise ValueError(f"model={model.name!r} fixes how the products are added up; "
                         f"{', '.join(given)} cannot be given with it")


def _promoted(qa: Quantized, qb: Quantized, model: BlockFMA, k_block: int,
              options: dict[str, Any]) -> Any:
    """``qa @ qb`` of blockwise FP8 operands on a tensor core that promotes every N, the
    scales applied at each promotion (DeepSeek-V3, DeepGEMM)."""
    _fixed(model, options)
    every = model.promote_every
    if every is None or k_block % every:
        raise ValueError(
            f"model={model.name!r}: blockwise FP8's binary32 scales are applied when each "
            f"chunk's partial sum is promoted to binary32, so the model must promote every N "
            f"products, N dividing the scale block of {k_block} (DeepSeek-V3: "
            f"{model.name.split(' promote ')[0]}.with_promotion({k_block}))")
    inst = model.with_inputs(qa.scheme.element, qb.scheme.element).with_promotion(every)
    acc = promoted_matmul(qa.values, qb.values, _element_scales(qa), _element_scales(qb), inst,
                          c=options.get("c"))
    out = options.get("out")
    return acc if out is None else round_to(_wide(acc), as_format(out))


def _element_scales(q: Quantized) -> Any:
    """Each element's block scale, in the shape of ``q``'s values."""
    if q.scheme.rows > 1:
        return Blocks(q.values, q.scheme.block, q.scheme.rows).each(q.scales)
    xp = array_module(q.values)
    moved = Blocks(xp.moveaxis(q.values, q.axis, -1), q.scheme.block)
    return xp.moveaxis(moved.each(xp.moveaxis(q.scales, q.axis, -1)), -1, q.axis)


def _wide(x: Any) -> Any:
    """``x`` as float64, on its device (exactly: ``fpsim._device.binary64``)."""
    return binary64(array_module(x).asarray(x))


def _binary32(q: Quantized, x: Any) -> bool:
    """Whether every value of ``x``, ``q``'s elements times their block scales, is a
    binary32 value (NaN included): from the scales alone where they prove it, else read
    from ``x`` (on the device, read back)."""
    if _binary32_by_scales(q):
        return True
    xp = array_module(x)
    with np.errstate(over="ignore"):  # a value beyond binary32's range: not one of its
        return bool(xp.array_equal(binary64(binary32(x)), x, equal_nan=True))


def _binary32_by_scales(q: Quantized) -> bool:
    """Whether ``q``'s scales prove each element times its scale a binary32 value.

    An element has at most ``p_e`` significant bits, none below its format's smallest
    subnormal; a scale ``s`` at most ``p_s``, none below ``s / 2**p_s``. Their product then
    has at most ``p_e + p_s`` bits, none below ``min(s) * tiny_e / 2**p_s``, and is at
    most ``max(s) * max_e``: a binary32 value when ``p_e + p_s <= 24``, that lowest bit
    is no smaller than 2**-149 and the largest is at most binary32's largest finite.
    Blocks with a NaN scale are NaN throughout (a binary32 value)."""
    held = q.__dict__.get("_binary32_terms")
    if held is not None:
        return bool(held)
    element, scale_format = q.scheme.element, q.scheme.scale_format
    p_e, p_s = element.man_bits + 1, scale_format.man_bits + 1
    proven = p_e + p_s <= 24
    if proven and q.scales.size:
        xp = array_module(q.scales)
        smallest, biggest = float(xp.min(q.scales)), float(xp.max(q.scales))
        if not smallest > 0 or biggest != biggest:
            # NaN scales (their blocks are NaN) and zero ones (their blocks are zeros) aside
            live = q.scales[q.scales > 0]
            smallest = float(xp.min(live)) if live.size else 1.0
            biggest = float(xp.max(live)) if live.size else 1.0
        tiny = 2.0 ** (element.emin - element.man_bits)
        proven = (smallest * tiny / 2.0**p_s >= 2.0**-149
                  and biggest * element.max <= float(np.finfo(np.float32).max))
    q.__dict__["_binary32_terms"] = proven
    return proven
