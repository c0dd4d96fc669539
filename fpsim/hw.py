"""Block fused multiply-add models of NVIDIA tensor cores and AMD matrix cores: the presets.

``docs/hardware-models.md`` gives each preset's parameters and sources; the
model itself is ``BlockFMA`` (``fpsim.accumulation.blocks``). ``V100`` ... ``RTX5090``
read fp16 inputs, the ``_BF16`` presets bf16 ones and the ``_FP8`` presets fp8 e4m3
(``with_inputs`` for e5m2 and mixed); all but ``H100_FP8_F16`` and ``H100_F16`` accumulate
in fp32, and an overflow gives +-inf and a zero result +0 (MMA-Sim's rules, confirmed on an
H100; the docs give the sources). ``H100_TF32``, ``H100_F16`` and ``h100_fp8_mma`` (fp8
``mma.sync`` as sm_90 lowers it) are the H100 instructions that the probe of 2026-11-25
decided, outside ``PRESETS``, which holds the presets recorded against MMA-Sim.
``MI300``, ``MI300_BF16`` and ``MI300_XF32`` are AMD CDNA3's fp16, bf16 and xf32 ``mfma``
(``align="round_down"``, MMA-Sim's model), in ``PRESETS`` too.
``mi200_mfma`` and ``mi100_mfma`` are CDNA2's and CDNA1's fp16 and bf16 ``mfma``, which are
not a block FMA (rounded additions in pairs; one exact sum rounded once), and
``mi300_fp8_mfma`` CDNA3's fp8/bf8 ``mfma`` on the fnuz formats (even and odd products
aligned apart).
``BLOCK_SCALED`` holds Blackwell's block-scaled MMAs (``BlockScaledFMA``: kind::mxf8f6f4,
kind::mxf4, kind::mxf4nvf4), which take ``Quantized`` operands: ``fpsim.matmul(qa, qb,
model=fpsim.hw.B200_NVF4)``.

Examples
--------
>>> import fpsim
>>> sorted(fpsim.hw.PRESETS)[:6]
['A100', 'A100/bf16', 'B200', 'B200/bf16', 'B200_FP8', 'H100']
>>> A, B = [[1.0, 2.0**-24, 2.0**-24, 2.0**-24]], [[1.0]] * 4
>>> fpsim.matmul(A, B, model=fpsim.hw.V100).tolist()
[[1.0]]
>>> fpsim.matmul(A, B, model=fpsim.hw.H100).tolist()
[[1.0000001192092896]]
>>> fpsim.matmul([[1.0]], [[1.0]], c=[[-2.0**-30]], model=fpsim.hw.MI300).tolist()
[[0.9999999403953552]]
"""

from dataclasses import replace as _replace
from typing import Any as _Any

from fpsim.accumulation.blocks import (
    ALIGNMENTS,
    OUTPUT_ROUNDINGS,
    OVERFLOWS,
    ZERO_SIGNS,
    BlockFMA,
    block_matmul,
)
from fpsim.accumulation.scaled import BlockScaledFMA, block_scaled_matmul
from fpsim.formats import Format
from fpsim.formats import as_format as fpsim_format

__all__ = ["BlockFMA", "OUTPUT_ROUNDINGS", "OVERFLOWS", "ZERO_SIGNS", "PRESETS", "block_matmul",
           "V100", "T4", "A100", "L40", "H100", "B200", "RTX5090", "A100_BF16", "L40_BF16",
           "H100_BF16", "B200_BF16", "RTX5090_BF16", "L40_FP8", "H100_FP8", "H100_FP8_F16",
           "B200_FP8", "RTX5090_FP8", "E8M13", "H100_TF32", "H100_F16", "h100_fp8_mma",
           "ALIGNMENTS", "MI300", "MI300_BF16", "MI300_XF32", "mi200_mfma", "mi100_mfma",
           "TF32", "for_input", "mi300_fp8_mfma", "FNUZ", "BlockScaledFMA",
           "block_scaled_matmul", "BLOCK_SCALED",
           "B200_MXF8F6F4", "B200_MXF4", "B200_NVF4", "RTX5090_MXF8F6F4", "RTX5090_MXF4",
           "RTX5090_NVF4"]

# Fasi, Higham, Mikaitis, Pranesh, PeerJ Comput. Sci. 7:e330 (2021); Khattak and
# Mikaitis, "Accurate models of NVIDIA tensor cores" (2025); Xie et al., "MMA-Sim"
# (arXiv 2511.10909; mmasim 2.1.1, mmasim/nv_ptx/sim.py): see docs/hardware-models.md.
#: The format of an fp8 block's result on Ada and Hopper: binary32's exponent range, 13
#: fraction bits (MMA-Sim's "RZ-E8M13").
E8M13 = Format(8, 13, name="e8m13")
#: NVIDIA V100 (Volta): blocks of 4 products, 23 fraction bits kept, no exponent floor.
V100 = BlockFMA("V100", block=4, frac_bits=23, exp_floor=None)
#: NVIDIA T4 (Turing, ``mma.m16n8k8``): blocks of 8, 24 fraction bits, floor -132.
T4 = BlockFMA("T4", block=8, frac_bits=24, exp_floor=-132)
#: NVIDIA A100 (Ampere): blocks of 8, 24 fraction bits, alignment exponent at least -132.
A100 = BlockFMA("A100", block=8, frac_bits=24, exp_floor=-132)
#: NVIDIA L40 (Ada Lovelace) on fp16, bf16 and tf32: as the A100.
L40 = BlockFMA("L40", block=8, frac_bits=24, exp_floor=-132)
#: NVIDIA H100 (Hopper): blocks of 16, 25 fraction bits, alignment exponent at least -133.
H100 = BlockFMA("H100", block=16, frac_bits=25, exp_floor=-133)
#: NVIDIA B200 (Blackwell): as the H100.
B200 = BlockFMA("B200", block=16, frac_bits=25, exp_floor=-133)
#: NVIDIA RTX 5090 (RTX Blackwell, ``mma``): as the B200.
RTX5090 = BlockFMA("RTX5090", block=16, frac_bits=25, exp_floor=-133)
#: The A100 reading bf16 inputs.
A100_BF16 = A100.with_input("bf16")
#: The L40 reading bf16 inputs.
L40_BF16 = L40.with_input("bf16")
#: The H100 reading bf16 inputs.
H100_BF16 = H100.with_input("bf16")
#: The B200 reading bf16 inputs.
B200_BF16 = B200.with_input("bf16")
#: The RTX 5090 reading bf16 inputs.
RTX5090_BF16 = RTX5090.with_input("bf16")
#: Ada's fp8 ``mma.m16n8k32`` (e4m3; ``with_inputs`` for e5m2 and mixed): two blocks of
#: 16, 13 fraction bits, each block's result cut to ``E8M13``.
L40_FP8 = BlockFMA("L40_FP8", block=16, frac_bits=13, exp_floor=-132, input="fp8_e4m3",
                   block_output=E8M13)
#: Hopper's fp8 ``wgmma`` k32 (e4m3; ``with_inputs`` for e5m2 and mixed): one block of
#: 32, 13 fraction bits, the result cut to ``E8M13``.
H100_FP8 = BlockFMA("H100_FP8", block=32, frac_bits=13, exp_floor=-133, input="fp8_e4m3",
                    block_output=E8M13)
#: Hopper's fp8 ``wgmma`` with fp16 output: the block's sum rounded to nearest even fp16.
H100_FP8_F16 = BlockFMA("H100_FP8_F16", block=32, frac_bits=13, exp_floor=-21,
                        input="fp8_e4m3", output="fp16", output_rounding="nearest_even")
#: Blackwell's ``tcgen05.mma`` kind::f8f6f4 (e4m3; ``with_inputs`` for e5m2, fp6 e3m2 and
#: e2m3, fp4 e2m1 and mixed): one block of 32, 25 fraction bits.
B200_FP8 = BlockFMA("B200_FP8", block=32, frac_bits=25, exp_floor=-133, input="fp8_e4m3")
#: RTX Blackwell's ``mma.m16n8k32`` kind::f8f6f4 (fp8, fp6, fp4): as the B200's.
RTX5090_FP8 = BlockFMA("RTX5090_FP8", block=32, frac_bits=25, exp_floor=-133,
                       input="fp8_e4m3")
#: Hopper's ``mma.m16n8k8.tf32`` and ``wgmma`` k8 .tf32: the H100 reading tf32, blocks of
#: 8 (a block holds as many bytes of inputs as with fp16: MMA-Sim Hopper, and the H100
#: cuBLAS TF32 recordings). Source: the H100 instruction probe of 2026-11-25
#: (``docs/hardware/mma/mma_probes.md``), equal on every class of input (its K = 8 is one
#: block: the probe does not test the block).
H100_TF32 = _replace(H100.with_input("tf32"), block=8)
#: Hopper's fp16-output ``mma.m16n8k16.f16.f16.f16.f16`` and ``wgmma`` .f16.f16.f16: the
#: H100's blocks, each result rounded to nearest even fp16, alignment floor -21 (MMA-Sim's
#: fp16 ``e_zero``). Source: the H100 instruction probe of 2026-11-25
#: (``docs/hardware/mma/mma_probes.md``): equal on every class, the floor -21 on all 178
#: (``mma``) and 165 (``wgmma``) elements where it differs from -133.
H100_F16 = BlockFMA("H100_F16", block=16, frac_bits=25, exp_floor=-21, output="fp16",
                    output_rounding="nearest_even")
#: AMD MI300 (CDNA3) ``v_mfma_f32_{32x32x8,16x16x16}_f16``: MMA-Sim's fused dot product
#: (``tr_fdpa``, F = 24, F2 = 31): blocks of 8 products aligned among themselves and cut
#: toward zero to 24 fraction bits, that sum and c aligned by rounding down, the sum
#: rounded down to 31 fraction bits, then to nearest even fp32 (a negative sum that
#: rounds to zero gives -0; a product of 2**128 or more is +-inf).
MI300 = BlockFMA("MI300", block=8, frac_bits=24, exp_floor=-126,
                 output_rounding="nearest_even", zero_sign="signed", align="round_down",
                 sum_bits=31)
#: MI300 (CDNA3) reading bf16 inputs (``v_mfma_f32_*_bf16``): as ``MI300``.
MI300_BF16 = MI300.with_input("bf16")
#: MI300 (CDNA3) ``v_mfma_f32_{16x16x8,32x32x4}_xf32``: as ``MI300`` on tf32 inputs (the
#: instruction reads fp32 registers and truncates them to tf32: pass tf32 values), blocks
#: of 4.
MI300_XF32 = _replace(MI300.with_input("tf32"), block=4)
#: The tf32 instruction of each preset that has one, by the preset's name: a block holds as
#: many bytes of inputs as the fp16 one (MMA-Sim's ``L_max``), so half its products
#: (``H100_TF32``, ``MI300_XF32``; checked against MMA-Sim's recorded tf32 instructions).
#: V100 and T4 have no TF32 tensor cores.
TF32: dict[str, BlockFMA] = {
    "A100": _replace(A100.with_input("tf32"), block=4),
    "L40": _replace(L40.with_input("tf32"), block=4),
    "H100": H100_TF32,
    "B200": _replace(B200.with_input("tf32"), block=8),
    "RTX5090": _replace(RTX5090.with_input("tf32"), block=8),
    "MI300": MI300_XF32,
}
# Blackwell's block-scaled MMAs (MMA-Sim 2.1.1, mmasim/nv_ptx/sim.py: MMA_ST_FDPA(F=25,
# L_max=32, e_zero=-133) for kind::mxf8f6f4, MMA_GST_FDPA(G=16, F=35, L_max=64,
# e_zero=-139) for kind::mxf4 and kind::mxf4nvf4; docs/hardware-models.md).
_F8F6F4 = ("fp8_e4m3", "fp8_e5m2", "fp6_e3m2", "fp6_e2m3", "fp4_e2m1")
_F4 = BlockFMA("F4", block=64, frac_bits=35, exp_floor=-139, input="fp4_e2m1")
#: Blackwell's ``tcgen05.mma`` kind::mxf8f6f4.block_scale.block32 (E8M0 scales, one per 32
#: elements of K): ``B200_FP8``'s block of 32 with each product's exponent raised by its
#: two scales' exponents. Elements: fp8 e4m3/e5m2, fp6 e3m2/e2m3, fp4 e2m1, any pairing.
B200_MXF8F6F4 = BlockScaledFMA("B200_MXF8F6F4", B200_FP8, "e8m0", 32, None, _F8F6F4)
#: Blackwell's ``tcgen05.mma`` kind::mxf4.block32 and kind::mxf4nvf4.block32 with E8M0
#: scales (MXFP4): k64, each group of 16 fp4 products summed exactly and scaled as one
#: term at its scales' exponent, 35 fraction bits, floor -139.
B200_MXF4 = BlockScaledFMA("B200_MXF4", _replace(_F4, name="B200_MXF4"), "e8m0", 32, 16,
                           ("fp4_e2m1",))
#: Blackwell's ``tcgen05.mma`` kind::mxf4nvf4.block16 with UE4M3 scales (NVFP4): as
#: ``B200_MXF4``, one UE4M3 scale per 16 elements of K.
B200_NVF4 = BlockScaledFMA("B200_NVF4", _replace(_F4, name="B200_NVF4"), "ue4m3", 16, 16,
                           ("fp4_e2m1",))
#: RTX Blackwell's ``mma.sync`` m16n8k32 kind::mxf8f6f4.block_scale: as ``B200_MXF8F6F4``.
RTX5090_MXF8F6F4 = BlockScaledFMA("RTX5090_MXF8F6F4", RTX5090_FP8, "e8m0", 32, None, _F8F6F4)
#: RTX Blackwell's ``mma.sync`` m16n8k64 kind::mxf4 (and mxf4nvf4.block32, E8M0): as
#: ``B200_MXF4``.
RTX5090_MXF4 = _replace(B200_MXF4, name="RTX5090_MXF4")
#: RTX Blackwell's ``mma.sync`` m16n8k64 kind::mxf4nvf4.block16 (UE4M3): as ``B200_NVF4``.
RTX5090_NVF4 = _replace(B200_NVF4, name="RTX5090_NVF4")
#: The block-scaled instructions, by name (``fpsim.matmul(qa, qb, model=...)`` with two
#: ``Quantized`` operands; each checked against MMA-Sim's recorded instructions).
BLOCK_SCALED: dict[str, BlockScaledFMA] = {
    m.name: m for m in (B200_MXF8F6F4, B200_MXF4, B200_NVF4, RTX5090_MXF8F6F4, RTX5090_MXF4,
                        RTX5090_NVF4)
}
# The sm_90 lowering of fp8 ``mma.m16n8k32`` (``h100_fp8_mma``): the H100's fp16 model,
# each k32 step a chunk of its own added to a binary32 accumulator (nearest even).
_H100_FP8_MMA = H100.with_promotion(32)
#: Every preset checked against MMA-Sim's recorded instructions, by its name (``"H100"``,
#: ``"H100/bf16"``, ``"H100_FP8"``, ``"MI300/tf32"``, ...): the names ``Policy(model=...)``
#: takes.
PRESETS: dict[str, BlockFMA] = {
    m.name: m for m in (V100, T4, A100, L40, H100, B200, RTX5090, A100_BF16, L40_BF16,
                        H100_BF16, B200_BF16, RTX5090_BF16, L40_FP8, H100_FP8, H100_FP8_F16,
                        B200_FP8, RTX5090_FP8, MI300, MI300_BF16, MI300_XF32)
}


def for_input(name: str, fmt: Format | str) -> BlockFMA:
    """The preset ``name`` (a key of ``PRESETS``) as the instruction that reads ``fmt``.

    That is the preset itself where it reads ``fmt``, else the same GPU's preset for that
    input (``"MI300"`` with tf32 is ``MI300_XF32``, ``"H100"`` with tf32 ``H100_TF32``,
    ``"MI300/tf32"`` with fp16 is ``MI300``: ``TF32`` and ``PRESETS``), else
    ``with_input(fmt)`` (the same block and rule reading ``fmt``).

    Parameters
    ----------
    name : str
        A name of ``PRESETS`` (``"H100"``, ``"MI300/bf16"``).
    fmt : Format or str
        The inputs' format.

    Returns
    -------
    BlockFMA

    Raises
    ------
    ValueError
        An unknown preset, tf32 on a GPU without TF32 tensor cores (V100, T4), or a
        format the model cannot take.

    Examples
    --------
    >>> import fpsim
    >>> fpsim.hw.for_input("MI300", "tf32") is fpsim.hw.MI300_XF32
    True
    >>> fpsim.hw.for_input("H100", "tf32").block, fpsim.hw.for_input("H100", "bf16").block
    (8, 16)
    """
    if not isinstance(name, str) or name not in PRESETS:
        raise ValueError(f"unknown model {name!r}; known models: {', '.join(sorted(PRESETS))}")
    f = fpsim_format(fmt)
    base = name.split("/")[0]
    for model in (PRESETS[name], PRESETS.get(base), PRESETS.get(f"{base}/{f.name}"),
                  TF32.get(base) if f.name == "tf32" else None):
        if model is not None and model.input_b is None and fpsim_format(model.input) == f:
            return model
    if f.name == "tf32" and base in ("V100", "T4"):
        raise ValueError(f"{base} has no TF32 tensor cores (Volta and Turing take fp16)")
    return PRESETS[name].with_input(f)


def h100_fp8_mma(a: _Any, b: _Any, c: _Any = None, hmma: BlockFMA | None = None) -> _Any:
    """``A @ B + c`` as an H100 (sm_90) runs fp8 ``mma.sync.m16n8k32``, chained over K.

    The instruction is not Hopper's fp8 tensor-core path (``H100_FP8`` is ``wgmma``'s):
    nvcc 13.0 lowers it to an fp16 conversion of A and B, one fp16 HMMA.16816.F32 over
    the products with ``k % 4 < 2`` from c = 0, a second chained on it over those with
    ``k % 4 >= 2``, and an fp32 FADD (nearest even) of C last. Each HMMA is a block of
    ``H100``; the two and the FADD are ``H100.with_promotion(32)`` with K's products
    reordered within each step of 32. It is a function, not a ``BlockFMA``, for that
    reordering. Source: the H100 instruction probe of 2026-11-25
    (``docs/hardware/mma/mma_probes.md``): equal to the hardware on every class of input,
    e4m3, e5m2 and mixed; MMA-Sim's Ada and Hopper fp8 rules are not.

    Parameters
    ----------
    a : array_like
        A, (..., M, K) of fp8 values (e4m3 or e5m2; any values exact in fp16).
    b : array_like
        B, (..., K, N).
    c : array_like, optional
        C, (..., M, N) binary32 values (default +0).
    hmma : BlockFMA, optional
        The fp16 model of one HMMA (default ``H100``; its input is read as fp16).

    Returns
    -------
    numpy.ndarray
        D as binary32 values.

    Raises
    ------
    ValueError
        K not a multiple of 32 (one instruction is k32), or what ``fpsim.matmul`` raises.

    Examples
    --------
    >>> import numpy as np, fpsim
    >>> a, b = np.zeros((1, 32)), np.zeros((32, 1))
    >>> a[0, :3], b[:3, 0] = [1.0, 2.0, 2.0**-10], 1.0
    >>> fpsim.hw.h100_fp8_mma(a, b, c=[[2.0**24]]).tolist()  # c added last, to nearest
    [[16777220.0]]
    """
    import numpy as np

    from fpsim import matmul

    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    k = a.shape[-1] if a.ndim else 0
    if a.ndim < 2 or k % 32 or k == 0:
        raise ValueError(f"h100_fp8_mma: K must be a positive multiple of 32 (one k32 step),"
                         f" got A of shape {a.shape}")
    step = np.arange(32)
    order = np.concatenate([step[step % 4 < 2], step[step % 4 >= 2]])
    perm = (np.arange(0, k, 32)[:, None] + order[None, :]).ravel()
    return matmul(a[..., perm], b[..., perm, :] if b.ndim >= 2 else b, c=c,
                  model=_H100_FP8_MMA if hmma is None else
                  hmma.with_input("fp16").with_promotion(32))


def mi200_mfma(a: _Any, b: _Any, c: _Any = None, *, input: str = "fp16",
               group: int = 4) -> _Any:
    """``A @ B + c`` as AMD's CDNA2 (MI200) fp16 and bf16 ``mfma`` computes it, chained over K.

    MMA-Sim's model (``mmasim/amd/sim.py``, ``MMA_FTZ_MUL_ADD`` in
    ``mmasim/arithmetic/ftz_mul_add.py``): subnormal inputs (and zeros) are read as +0,
    and so is a subnormal c; each product is rounded to nearest even binary32; the
    products are added in binary32 (nearest even) in groups of ``group`` in k order,
    (p0 + p1) + (p2 + p3) or p0 + p1, and each group's sum is added to the accumulator;
    a subnormal product or sum is flushed to a zero of its sign. There is no fused
    block, so it is a function, not a ``BlockFMA``. Source: MMA-Sim, checked against its
    recorded outputs (``tests/test_mmasim_records.py``); no AMD GPU has checked it here.

    Parameters
    ----------
    a : array_like
        A, (..., M, K) values of ``input``.
    b : array_like
        B, (..., K, N) values of ``input``.
    c : array_like, optional
        C, broadcast to (..., M, N): binary32 values (default +0).
    input : {"fp16", "bf16"}, default "fp16"
        The inputs' format.
    group : {4, 2}, default 4
        Products per group: 4 for ``v_mfma_f32_*_f16`` and the bf16 ``*_bf16_1k``
        instructions, 2 for CDNA2's older bf16 ones (``v_mfma_f32_*_bf16``, as CDNA1's).

    Returns
    -------
    numpy.ndarray
        D, binary32 values (float64 for float64 inputs, as ``fpsim.matmul``).

    Raises
    ------
    ValueError
        An unknown input format or group, shapes that do not multiply, K not a
        multiple of ``group``, or inputs that are not values of their formats.

    Examples
    --------
    >>> import fpsim
    >>> a = [[1.0, 2.0**-12, 2.0**-12, 0.0]]
    >>> b = [[1.0], [2.0**-12], [2.0**-12], [0.0]]
    >>> fpsim.hw.mi200_mfma(a, b).tolist()  # (1 + 2**-24) + (2**-24 + 0), each rounded
    [[1.0]]
    >>> fpsim.hw.mi200_mfma([[2.0**-20, 0.0, 0.0, 0.0]], [[1.0]] * 4).tolist()  # subnormal
    [[0.0]]
    >>> fpsim.hw.mi200_mfma([[1.0]], [[1.0]], input="bf16", group=2)
    Traceback (most recent call last):
    ...
    ValueError: mi200_mfma: K must be a multiple of 2, got A of shape (1, 1)
    """
    import numpy as np

    from fpsim._inputs import as_dtype
    from fpsim.arithmetic import add
    from fpsim.rounding import round as round_to

    if isinstance(group, bool) or group not in (2, 4):
        raise ValueError(f"mi200_mfma: group must be 2 or 4, got {group!r}")
    xp, x, y, acc, dtype = _mfma_operands("mi200_mfma", a, b, c, input, group)
    least = fpsim_format(input).smallest_normal
    tiny = fpsim_format("fp32").smallest_normal

    def flush(v: _Any) -> _Any:
        """A subnormal binary32 value to a zero of its sign."""
        return xp.where(xp.abs(v) < tiny, v * 0.0, v)

    def fadd(u: _Any, v: _Any) -> _Any:
        return flush(add(u, v, "fp32"))

    with np.errstate(all="ignore"):
        x, y = (xp.where(xp.abs(v) < least, 0.0, v) for v in (x, y))
        acc = xp.where(xp.abs(acc) < tiny, 0.0, acc)
        for k0 in range(0, x.shape[-1], group):
            p = [flush(round_to(x[..., :, k, None] * y[..., None, k, :], "fp32"))
                 for k in range(k0, k0 + group)]
            s = fadd(p[0], p[1]) if group == 2 else fadd(fadd(p[0], p[1]), fadd(p[2], p[3]))
            acc = fadd(acc, s)
    return as_dtype(acc, dtype)


def mi100_mfma(a: _Any, b: _Any, c: _Any = None, *, input: str = "fp16") -> _Any:
    """``A @ B + c`` as AMD's CDNA1 (MI100) fp16 and bf16 ``mfma`` computes it, chained over K.

    MMA-Sim's model (``mmasim/amd/sim.py``, ``MMA_E_FDPA`` and ``e_fdpa`` in
    ``mmasim/arithmetic/fdpa.py``): per step of 4 products (fp16) or 2 (bf16), in k
    order, c and the products are added exactly and the sum rounded once to nearest
    even binary32 (subnormals kept, +-inf beyond the range); an exactly zero sum is +0,
    and a step with an infinite or NaN input gives the IEEE sum. An exact sum across
    binary32's range is wider than a ``BlockFMA``'s 64-bit integers, so it is a function:
    the sum is distilled exactly in binary64 (Knuth's TwoSum, repeated until it no
    longer changes) and rounded from there. Source: MMA-Sim, checked against its
    recorded outputs (``tests/test_mmasim_records.py``); no AMD GPU has checked it here.

    Parameters
    ----------
    a, b : array_like
        A (..., M, K) and B (..., K, N), values of ``input``.
    c : array_like, optional
        The initial accumulator, binary32 values broadcast to (..., M, N); default +0.
    input : {"fp16", "bf16"}, default "fp16"
        The inputs' format (4 products a step for fp16, 2 for bf16).

    Returns
    -------
    numpy.ndarray
        The binary32 result, as ``mi200_mfma``'s.

    Raises
    ------
    ValueError
        An unknown input format, shapes that do not multiply, K not a multiple of the
        step, or inputs that are not values of their formats.

    Examples
    --------
    >>> import fpsim
    >>> a = [[1.0, 2.0**-12, 2.0**-12, 0.0]]
    >>> b = [[1.0], [2.0**-12], [2.0**-12], [0.0]]
    >>> fpsim.hw.mi100_mfma(a, b).tolist()  # 1 + 2**-23 exactly
    [[1.0000001192092896]]
    >>> fpsim.hw.mi100_mfma([[2.0**10, 2.0**-20]], [[2.0**10], [-(2.0**-20)]],
    ...                     c=-(2.0**20), input="bf16").tolist()  # -2**-40, kept
    [[-9.094947017729282e-13]]
    """
    import numpy as np

    from fpsim._inputs import as_dtype
    from fpsim.rounding import round as round_to

    step = 4 if input == "fp16" else 2
    xp, x, y, acc, dtype = _mfma_operands("mi100_mfma", a, b, c, input, step)
    with np.errstate(all="ignore"):
        for k0 in range(0, x.shape[-1], step):
            terms = [acc] + [x[..., :, k, None] * y[..., None, k, :]
                             for k in range(k0, k0 + step)]
            naive = sum(terms[1:], terms[0])
            bad = ~xp.isfinite(naive)
            # Distil: after passes that change nothing, S = p[-1] + p[-2] + ..., each
            # |p[k]| at most half an ulp of p[k + 1]: p[-1] is within an ulp of S.
            p = [xp.where(bad, 0.0, t) for t in terms]
            for _ in range(200):
                before = list(p)
                for k in range(len(p) - 1):
                    p[k + 1], p[k] = _two_sum(p[k + 1], p[k])
                if all(bool((u == v).all()) for u, v in zip(p, before, strict=True)):
                    break
            else:  # pragma: no cover - TwoSum distillation of a few terms converges
                raise RuntimeError("mi100_mfma: the exact sum did not converge")
            top, rest = p[-1], p[-2]
            # Only a binary32 midpoint in p[-1] needs the rest: its sign breaks the tie.
            low, high = round_to(top, "fp32", "down"), round_to(top, "fp32", "up")
            beyond = 2.0 ** (fpsim_format("fp32").emax + 1)
            middle = (xp.clip(low, -beyond, beyond) + xp.clip(high, -beyond, beyond)) / 2 == top
            rounded = xp.where(middle & (rest > 0), high, xp.where(
                middle & (rest < 0), low, round_to(top, "fp32")))
            acc = xp.where(bad, naive, xp.where(top == 0, 0.0, rounded))
    return as_dtype(acc, dtype)


#: CDNA3's fp8 and bf8 ``mfma`` without its even/odd split: MMA-Sim's ``MMA_GTR_FDPA(F=24,
#: F2=31, RNE-FP32, L_max=16)`` as far as ``BlockFMA(align="round_down")`` goes (the kernels
#: read its formats, F, F2 and rules; ``mi300_fp8_mfma`` adds the split and the c rule).
_MI300_FP8 = BlockFMA("MI300_FP8", block=16, frac_bits=24, exp_floor=-126,
                      input="fp8_e4m3fnuz", output_rounding="nearest_even", zero_sign="signed",
                      align="round_down", sum_bits=31)
#: The element formats of CDNA3's fp8 (``fp8``) and bf8 (``bf8``) ``mfma``.
FNUZ = ("fp8_e4m3fnuz", "fp8_e5m2fnuz")


def mi300_fp8_mfma(a: _Any, b: _Any, c: _Any = None, *, input: str = "fp8_e4m3fnuz",
                   input_b: str | None = None) -> _Any:
    """``A @ B + c`` as AMD's CDNA3 (MI300) fp8/bf8 ``mfma`` computes it, chained over K.

    MMA-Sim's model (``mmasim/amd/sim.py``, ``MMA_GTR_FDPA(F=24, F2=31, RNE-FP32,
    L_max=16)``; ``gtr_fdpa`` in ``mmasim/arithmetic/fdpa.py``), per step of 16 products:
    the products of even k and those of odd k are each aligned to the largest exponent
    among them and cut toward zero to 24 fraction bits below it (a zero product takes no
    part), and each half's sum is added exactly; the two sums are aligned to the larger of
    their exponents and rounded down (toward -inf) to 24 bits below it; then ``MI300``'s
    second stage: that sum and c aligned to E, the larger of its exponent and c's (c = 0 at
    -126), rounded down to 32 and 24 fraction bits below E, except that a c whose exponent
    is below E - 25 counts as 0; their sum rounded down to 31 fraction bits below its
    leading bit (at least -126), then to nearest even binary32 (a negative nonzero sum
    that rounds to 0 is -0, an exact 0 is +0). A NaN input or an infinite or NaN c gives
    the IEEE sum. The elements are AMD's fnuz fp8 (``fp8_e4m3fnuz``, ``fp8_e5m2fnuz``:
    ``v_mfma_f32_*_fp8_fp8``, ``_fp8_bf8``, ``_bf8_fp8``, ``_bf8_bf8``). The even/odd split
    is not a ``BlockFMA`` (one alignment per block), so it is a function, computed with the
    shared block-FMA kernel's steps on the host. Source: MMA-Sim, checked against its
    recorded outputs (``tests/test_amd_presets.py``); no AMD GPU has checked it here.

    Parameters
    ----------
    a, b : array_like
        A (..., M, K) and B (..., K, N), values of ``input`` and ``input_b``.
    c : array_like, optional
        The initial accumulator, binary32 values broadcast to (..., M, N); default +0.
    input : {"fp8_e4m3fnuz", "fp8_e5m2fnuz"}, default "fp8_e4m3fnuz"
        A's format (CDNA3's fp8 or bf8).
    input_b : {"fp8_e4m3fnuz", "fp8_e5m2fnuz"}, optional
        B's format, where it is not A's.

    Returns
    -------
    numpy.ndarray
        D, binary32 values (float64 for float64 inputs, as ``fpsim.matmul``).

    Raises
    ------
    ValueError
        An unknown input format, shapes that do not multiply, K not a multiple of 16, or
        inputs that are not values of their formats.

    Examples
    --------
    >>> import numpy as np, fpsim
    >>> a, b = np.zeros((1, 16)), np.zeros((16, 1))
    >>> a[0, 0], b[0, 0] = 128.0, 128.0  # 2**14 at k = 0
    >>> a[0, 1::2], b[1::2, 0] = 2.0**-10, 0.5  # eight 2**-11 at odd k, 25 binades below
    >>> fpsim.hw.mi300_fp8_mfma(a, b).tolist()  # the odd half, aligned apart, keeps 2**-8
    [[16384.00390625]]
    >>> fpsim.hw.mi300_fp8_mfma(a, b, c=[[-(2.0**-20)]]).tolist()  # 34 binades below: 0
    [[16384.00390625]]
    """
    import numpy as np

    from fpsim._inputs import as_dtype
    from fpsim.backends import array_kernels
    from fpsim.kernels.core import NO_EXPONENT
    from fpsim.kernels.spec import make_spec

    fmt_b = input if input_b is None else input_b
    if input_b is not None and input_b not in FNUZ:
        raise ValueError(f"mi300_fp8_mfma: input_b must be one of {', '.join(FNUZ)}, got "
                         f"{input_b!r}")
    xp, x, y, acc, dtype = _mfma_operands("mi300_fp8_mfma", a, b, c, input, 16, FNUZ, fmt_b)
    x, y, acc = (np.asarray(xp.asnumpy(v) if xp is not np else v) for v in (x, y, acc))
    model = _MI300_FP8.with_inputs(input, fmt_b)
    hw, frac = model.params(), model.frac_bits
    out_spec = make_spec(fpsim_format("fp32"), "nearest_even", True, False, None)
    k = array_kernels()
    x, y = x[..., :, :, None], y[..., None, :, :]  # (..., M, K, 1) and (..., 1, K, N)
    acc = np.broadcast_to(acc, np.broadcast_shapes(acc.shape, x[..., 0, :].shape)).copy()
    with np.errstate(all="ignore"):
        for k0 in range(0, x.shape[-2], 16):
            naive, bad = acc.copy(), k["is_nonfinite"](acc)
            halves = []
            for first in (k0, k0 + 1):  # the even and the odd products, aligned apart
                terms = [k["hw_product"](x[..., i, :], y[..., i, :], hw) + (i,)
                         for i in range(first, k0 + 16, 2)]
                top = np.full(acc.shape, NO_EXPONENT, dtype=np.int64)
                for _, e_top, _, _ in terms:
                    top = np.maximum(top, e_top)
                total = np.zeros(acc.shape, dtype=np.int64)
                for p, _, e_lsb, i in terms:
                    cut = k["hw_truncate"](p, e_lsb, top, frac)
                    neg = (k["f64_bits"](x[..., i, :]) < 0) != (k["f64_bits"](y[..., i, :]) < 0)
                    total = total + np.where(neg, -cut, cut)
                    share, nonfinite = k["hw_naive"](x[..., i, :], y[..., i, :], hw)
                    naive, bad = naive + share, bad | nonfinite
                halves.append((total, top))
            e_dot = np.maximum(halves[0][1], halves[1][1])
            # Each half's sum rounded down to F bits below the larger exponent (MMA-Sim's
            # floor), then the two added exactly.
            dot = sum(k["hw_truncate"](t, e - frac, e_dot, frac) for t, e in halves)
            cc = k["finite_or_zero"](acc)
            e_c = k["hw_decode"](cc, hw.t_out, hw.emin_out)[1]
            # A c more than 25 binades below the products' sum is dropped, not rounded down.
            cc = np.where(e_c < e_dot - frac - 1, 0.0, cc)
            value, _ = k["hw_finish"](dot, e_dot, cc, hw, out_spec, False)
            acc = k["hw_result"](value, naive, bad)
    return as_dtype(xp.asarray(acc) if xp is not np else acc, dtype)


def _two_sum(u: _Any, v: _Any) -> tuple[_Any, _Any]:
    """Knuth's TwoSum: (s, e) with s = fl(u + v) and s + e = u + v exactly (finite u, v)."""
    s = u + v
    back = s - v
    return s, (u - back) + (v - (s - back))


def _mfma_operands(who: str, a: _Any, b: _Any, c: _Any, input: str, step: int,
                   formats: tuple[str, ...] = ("fp16", "bf16"), input_b: str | None = None
                   ) -> tuple[_Any, _Any, _Any, _Any, _Any]:
    """(xp, A, B, c broadcast to the result, result dtype) of an AMD ``mfma`` function,
    checked: inputs of ``formats`` (B's ``input_b``, where given), K a multiple of
    ``step``, every value of its format."""
    import numpy as np

    from fpsim._device import binary64
    from fpsim._inputs import array_module, result_dtype
    from fpsim.rounding import round as round_to

    if input not in formats:
        raise ValueError(f"{who}: input must be {' or '.join(formats)}, got {input!r}")
    xp = array_module([a, b])
    dtype = result_dtype(xp.asarray(a), xp.asarray(b), np.float32)
    x, y = binary64(xp.asarray(a)), binary64(xp.asarray(b))
    if x.ndim < 2 or y.ndim < 2 or x.shape[-1] != y.shape[-2]:
        raise ValueError(f"{who}: K must be A's last and B's second-last dimension, got A of"
                         f" shape {x.shape} and B of shape {y.shape}")
    if x.shape[-1] % step:
        raise ValueError(f"{who}: K must be a multiple of {step}, got A of shape {x.shape}")
    shape = np.broadcast_shapes(x.shape[:-2], y.shape[:-2]) + (x.shape[-2], y.shape[-1])
    acc = xp.zeros(shape) if c is None else xp.broadcast_to(
        binary64(xp.asarray(c)), shape).copy()
    for name, v, fmt in (("A", x, input), ("B", y, input_b or input), ("c", acc, "fp32")):
        with np.errstate(all="ignore"):
            held = (round_to(v, fmt) == v) | xp.isnan(v)
        if not bool(held.all()):
            raise ValueError(f"{who}: {name} holds values that are not {fmt} values")
    return xp, x, y, acc, dtype
