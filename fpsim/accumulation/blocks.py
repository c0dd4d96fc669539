"""Accumulation as a tensor core's block fused multiply-add does it.

A ``BlockFMA`` describes how one matrix-multiply instruction adds a block of
products to an accumulator (``docs/accumulation.md`` gives the algorithm);
``fpsim.hw`` holds the presets of real GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np

from fpsim._checks import boolean, integer
from fpsim._inputs import array_module, as_dtype, host_value, result_dtype
from fpsim.accumulation.operands import initial, layout
from fpsim.accumulation.stats import AccumulationStats
from fpsim.arithmetic import add
from fpsim.backends import get_backend
from fpsim.formats import MAX_ARITH_MAN_BITS, PRESETS, Format, as_format
from fpsim.kernels.core import NO_EXPONENT
from fpsim.kernels.spec import BlockSpec, make_spec
from fpsim.rounding import round as round_to

FP32 = PRESETS["fp32"]
#: How a block FMA may round its exact sum to the output format.
OUTPUT_ROUNDINGS = ("toward_zero", "nearest_even")
#: What a block result beyond the output format's range becomes.
OVERFLOWS = ("inf", "saturate")
#: The sign of a block result that is zero.
ZERO_SIGNS = ("positive", "signed")
#: How a block aligns its terms: NVIDIA's (c among the products, all cut toward zero), or
#: AMD CDNA3's fused dot product (the products' sum and c aligned by rounding down).
ALIGNMENTS = ("truncate", "round_down")
MAX_FRAC_BITS = 40
# Two inputs' significands (t + 1 bits each) multiply exactly in int64.
MAX_INPUT_MAN_BITS = 30


@dataclass(frozen=True)
class BlockFMA:
    """A model of one tensor-core instruction's block fused multiply-add.

    Each step adds ``block`` exact products and the running sum: the terms are
    aligned to the largest exponent among them (at least ``exp_floor``), cut
    toward zero to ``frac_bits`` fraction bits below it, added exactly, and the
    sum rounded to ``output`` (``docs/accumulation.md``). Pass one to
    ``fpsim.matmul(..., model=...)``; ``fpsim.hw`` holds the presets of real GPUs.

    Parameters
    ----------
    name : str
        A label (``"H100"``).
    block : int
        Products added per step (at least 1).
    frac_bits : int
        Fraction bits kept below the alignment exponent (1..40).
    exp_floor : int or None
        The lowest alignment exponent (None: no floor).
    input : str or Format, default "fp16"
        The format of the inputs (of A's, where ``input_b`` is given; at most 30
        fraction bits).
    output : str or Format, default "fp32"
        The accumulator's format (at most 29 fraction bits).
    output_rounding : {"toward_zero", "nearest_even"}, default "toward_zero"
        How each step's exact sum is rounded to ``output`` (to ``block_output``, where
        given).
    overflow : {"inf", "saturate"}, default "inf"
        A step's result beyond ``output``'s range: ``"inf"`` gives +-inf, whatever the
        rounding (MMA-Sim and Khattak and Mikaitis's models of NVIDIA tensor cores);
        ``"saturate"`` gives +-the largest finite value (IEEE 754's rule for rounding
        toward zero). A later step adds to an infinite c as IEEE addition does.
    zero_sign : {"positive", "signed"}, default "positive"
        A step's result that is zero: ``"positive"`` gives +0 always (MMA-Sim);
        ``"signed"`` gives -0 where a negative nonzero sum rounds to zero (IEEE 754's
        rule; Khattak and Mikaitis's model). An exactly zero sum is +0 in both.
    split_k : int or None, default None
        cuBLAS's split-K: ``K`` is cut into slices of this many products (the last
        one shorter), each slice is accumulated from +0 by the block FMA, and the
        slices' results are added in ``k`` order, each addition rounded to ``output``
        to nearest even. None: one pass over ``K``. ``docs/hardware.md`` shows the
        slice lengths cuBLAS chose on an H100.
    input_b : str or Format or None, default None
        The format of B's inputs, where it is not ``input``'s (e.g. fp8 e4m3 x e5m2);
        each input's exponent and subnormals are read in its own format.
    block_output : str or Format or None, default None
        A narrower format each step's result is rounded to (with ``output_rounding``)
        before it is kept in ``output``, which must hold all its values: Hopper's fp8
        ``wgmma`` keeps 13 fraction bits (``Format(8, 13)``). The initial ``c`` is read
        as a value of ``output``. None: the result is rounded to ``output``.
    promote_every : int or None, default None
        DeepSeek-V3's promotion of fp8 partial sums: ``K`` is cut into chunks of this
        many products (the last one shorter), each chunk accumulated from +0 by the
        block FMA, and each chunk's result added to a binary32 accumulator (starting
        at ``c``, or +0) rounded to nearest even, as CUDA cores do. The result is a
        binary32 value. None: no promotion. Not together with ``split_k``.
    align : {"truncate", "round_down"}, default "truncate"
        ``"truncate"``: c and the products are aligned together and cut toward zero, as
        above (NVIDIA's tensor cores). ``"round_down"``: AMD CDNA3's fused dot product
        (MMA-Sim's ``tr_fdpa``): the products are aligned to the largest of their
        exponents (a zero product takes no part, no floor), each cut toward zero to
        ``frac_bits`` fraction bits and added exactly; that sum and c are then aligned
        to the largest of the products' exponent, c's exponent and ``exp_floor`` (c = 0
        counts at ``exp_floor``), each rounded down (toward -inf), the sum to
        ``sum_bits + 1`` fraction bits and c to ``frac_bits``; their exact sum is
        rounded down to ``sum_bits`` fraction bits below its leading bit (an exponent
        at least ``output``'s least normal one), then rounded to ``output`` with
        ``output_rounding``. A product of magnitude at least 2**(emax + 1) of
        ``output`` is +-inf. It takes no ``block_output`` and no ``stats``.
    sum_bits : int or None, default None
        ``"round_down"``'s fraction bits of the sum of the products and c (MMA-Sim's
        F2, 31 on CDNA3); only with ``align="round_down"``.

    Raises
    ------
    ValueError
        A parameter out of range or of the wrong type, or a model fpsim cannot
        run exactly (its exact sums must fit 64-bit integers).

    Examples
    --------
    >>> import fpsim
    >>> fpsim.hw.H100
    BlockFMA(name='H100', block=16, frac_bits=25, exp_floor=-133, input='fp16', ...)
    >>> toy = fpsim.hw.BlockFMA("toy", block=2, frac_bits=10, exp_floor=None)
    >>> fpsim.matmul([[1.0, 2.0**-11, 2.0**-11]], [[1.0]] * 3, model=toy).tolist()
    [[1.0]]
    """

    name: str
    block: int
    frac_bits: int
    exp_floor: int | None
    input: str | Format = "fp16"
    output: str | Format = "fp32"
    output_rounding: str = "toward_zero"
    split_k: int | None = None
    overflow: Literal["inf", "saturate"] = "inf"
    zero_sign: Literal["positive", "signed"] = "positive"
    input_b: str | Format | None = None
    block_output: str | Format | None = None
    promote_every: int | None = None
    align: Literal["truncate", "round_down"] = "truncate"
    sum_bits: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"name must be a non-empty string, got {self.name!r}")
        frac_bits = integer(self.frac_bits, "frac_bits", 1, MAX_FRAC_BITS)
        # The block's exact sum, (block + 1) terms below 2**(frac_bits + 2), fits int64.
        integer(self.block, "block", 1, (1 << (61 - frac_bits)) - 1)
        if self.exp_floor is not None:
            integer(self.exp_floor, "exp_floor", -2000, 2000)
        if self.split_k is not None:
            integer(self.split_k, "split_k", 1, 1 << 62)
        if self.promote_every is not None:
            integer(self.promote_every, "promote_every", 1, 1 << 62)
            if self.split_k is not None:
                raise ValueError("split_k and promote_every cannot both be given")
        for field, allowed in (("output_rounding", OUTPUT_ROUNDINGS), ("overflow", OVERFLOWS),
                               ("zero_sign", ZERO_SIGNS), ("align", ALIGNMENTS)):
            value = getattr(self, field)
            if not isinstance(value, str) or value not in allowed:
                raise ValueError(f"{field} must be one of {', '.join(allowed)}, got {value!r}")
        formats = {}
        for role, fmt, most in (("input", self.input, MAX_INPUT_MAN_BITS),
                                ("input_b", self.input_b, MAX_INPUT_MAN_BITS),
                                ("output", self.output, MAX_ARITH_MAN_BITS),
                                ("block_output", self.block_output, MAX_ARITH_MAN_BITS)):
            if fmt is None and role in ("input_b", "block_output"):
                continue
            if not isinstance(fmt, (str, Format)):
                raise ValueError(f"{role} must be a format or a format name, got {fmt!r}")
            f = formats[role] = as_format(fmt)
            if f.man_bits > most:
                raise ValueError(
                    f"{role} format {f.name} has {f.man_bits} fraction bits; a block-FMA "
                    f"model takes {role.split('_')[0]}s of at most {most} (its exact products "
                    "and sums are 64-bit integers)"
                )
        narrow, out = formats.get("block_output"), formats["output"]
        if narrow is not None and not (
                narrow.man_bits <= out.man_bits and narrow.emin >= out.emin
                and narrow.max <= out.max and (out.infinities or not narrow.infinities)):
            raise ValueError(
                f"block_output {narrow.name} is not a subset of output {out.name}: each "
                "step's result must be a value of the output format")
        if self.align == "round_down":
            self._check_round_down()
        elif self.sum_bits is not None:
            raise ValueError('sum_bits is a parameter of align="round_down" only')

    def _check_round_down(self) -> None:
        """A ``round_down`` model's second stage must fit the kernels' 64-bit integers."""
        if self.sum_bits is None:
            raise ValueError('align="round_down" needs sum_bits (the fraction bits of the '
                             "sum of the products and c; 31 on CDNA3)")
        sum_bits = integer(self.sum_bits, "sum_bits", 1, MAX_FRAC_BITS)
        if self.block_output is not None:
            raise ValueError('align="round_down" takes no block_output')
        # The second stage's sum: block + 1 terms below 2**(grid + 2) on 2**(E - grid).
        grid = max(sum_bits + 1, self.frac_bits)
        if self.block >= (1 << (59 - grid)):
            raise ValueError(
                f'align="round_down": block {self.block} with sum_bits {sum_bits} and '
                f"frac_bits {self.frac_bits} does not fit the kernels' 64-bit sums (at most "
                f"{(1 << (59 - grid)) - 1} products)")

    def with_input(self, fmt: Format | str) -> BlockFMA:
        """The same model reading inputs of another format.

        Parameters
        ----------
        fmt : Format or str
            The inputs' format (e.g. ``"bf16"``).

        Returns
        -------
        BlockFMA
            A copy named ``"<name>/<format>"``.

        Raises
        ------
        ValueError
            An unknown format, or one wider than the model can take exactly (more
            than 30 fraction bits).

        Examples
        --------
        >>> import fpsim
        >>> fpsim.hw.H100.with_input("bf16").name
        'H100/bf16'
        """
        f = as_format(fmt)
        return replace(self, input=_named(f), input_b=None,
                       name=f"{self.name.split('/')[0]}/{f.name}")

    def with_inputs(self, a: Format | str, b: Format | str) -> BlockFMA:
        """The same model reading A's inputs in one format and B's in another.

        Parameters
        ----------
        a, b : Format or str
            The formats of A's and B's inputs (e.g. ``"fp8_e4m3"``, ``"fp8_e5m2"``).

        Returns
        -------
        BlockFMA
            A copy named ``"<name>/<a>"`` where the two are one format, else
            ``"<name>/<a>*<b>"``.

        Raises
        ------
        ValueError
            An unknown format, or one wider than the model can take exactly.

        Examples
        --------
        >>> import fpsim
        >>> fpsim.hw.H100_FP8.with_inputs("fp8_e4m3", "fp8_e5m2").name
        'H100_FP8/fp8_e4m3*fp8_e5m2'
        """
        fa, fb = as_format(a), as_format(b)
        if fa == fb:
            return self.with_input(fa)
        return replace(self, input=_named(fa), input_b=_named(fb),
                       name=f"{self.name.split('/')[0]}/{fa.name}*{fb.name}")

    def with_split_k(self, length: int | None) -> BlockFMA:
        """The same model with K cut into slices of ``length`` products (cuBLAS's
        split-K; see ``split_k``), or in one pass (None).

        Parameters
        ----------
        length : int or None
            Products per slice (at least 1), or None.

        Returns
        -------
        BlockFMA
            A copy named ``"<name> split-K <length>"``.

        Raises
        ------
        ValueError
            A length that is not a positive integer.

        Examples
        --------
        >>> import fpsim
        >>> fpsim.hw.H100.with_split_k(1408).name
        'H100 split-K 1408'
        """
        base = self.name.split(" split-K ")[0]
        name = base if length is None else f"{base} split-K {length}"
        return replace(self, split_k=length, name=name)

    def with_promotion(self, every: int | None) -> BlockFMA:
        """The same model with each chunk of ``every`` products promoted to a binary32
        accumulator (DeepSeek-V3's fp8 practice; see ``promote_every``), or none (None).

        Parameters
        ----------
        every : int or None
            Products per chunk (at least 1), or None.

        Returns
        -------
        BlockFMA
            A copy named ``"<name> promote <every>"``.

        Raises
        ------
        ValueError
            A chunk length that is not a positive integer, or a split-K model.

        Examples
        --------
        >>> import fpsim
        >>> fpsim.hw.H100_FP8.with_promotion(128).name
        'H100_FP8 promote 128'
        """
        base = self.name.split(" promote ")[0]
        name = base if every is None else f"{base} promote {every}"
        return replace(self, promote_every=every, name=name)

    def params(self) -> BlockSpec:
        """What the kernels read of this model.

        Returns
        -------
        fpsim.kernels.spec.BlockSpec
            The input and output formats' fraction bits and least exponents, the
            fraction bits kept, the exponent floor (a sentinel for none), and the
            overflow and zero-sign rules as flags.

        Examples
        --------
        >>> import fpsim
        >>> spec = fpsim.hw.H100.params()
        >>> spec.t_in, spec.t_out, spec.frac_bits, spec.exp_floor
        (10, 23, 25, -133)
        >>> spec.overflow_inf, spec.signed_zero
        (1, 0)

        """
        fin, fout = as_format(self.input), as_format(self.output)
        fin_b = fin if self.input_b is None else as_format(self.input_b)
        return BlockSpec(
            t_in=fin.man_bits, emin_in=fin.emin, t_in_b=fin_b.man_bits, emin_in_b=fin_b.emin,
            t_out=fout.man_bits, emin_out=fout.emin,
            frac_bits=self.frac_bits,
            exp_floor=NO_EXPONENT if self.exp_floor is None else self.exp_floor,
            overflow_inf=int(self.overflow == "inf"), signed_zero=int(self.zero_sign == "signed"),
            round_down=int(self.align == "round_down"), sum_bits=self.sum_bits or 0,
            product_limit=(2.0 ** (fout.emax + 1) if self.align == "round_down"
                           and fout.emax < 1023 else np.inf),
        )


def block_matmul(a: Any, b: Any, model: BlockFMA, *, c: Any = None,
                 out: Format | str | None = None, stats: bool = False) -> Any:
    """A @ B as the hardware computes it with ``model``: ``fpsim.matmul(A, B, model=model)``.

    Parameters
    ----------
    a, b : array_like
        (..., M, K) and (..., K, N) arrays of the model's input formats.
    model : BlockFMA
        The block-FMA model.
    c : array_like, optional
        The initial accumulator: values of the model's output format (binary32 with
        ``promote_every``).
    out : Format or str, optional
        Round the result to this format at the end.
    stats : bool, default False
        True: also return the ``AccumulationStats``.

    Returns
    -------
    numpy.ndarray
        The (..., M, N) result (and, with ``stats=True``, the stats).

    Raises
    ------
    ValueError
        Inputs that are not values of the model's input format; anything
        ``fpsim.matmul`` refuses.

    Examples
    --------
    >>> import numpy as np
    >>> import fpsim
    >>> a, b = np.array([[1.0, 2.0**-24, 2.0**-24, 2.0**-24]]), np.ones((4, 1))
    >>> fpsim.hw.block_matmul(a, b, fpsim.hw.H100).tolist()
    [[1.0000001192092896]]
    """
    if not isinstance(model, BlockFMA):
        raise ValueError(f"model must be a fpsim.hw.BlockFMA, got {model!r}")
    stats = boolean(stats, "stats")
    fout = as_format(model.output)
    backend = get_backend()
    xp = array_module([a, b])
    shape, a2, b3 = layout(a, b, xp)
    for name, x, fmt in (("A", a2, model.input), ("B", b3, model.input_b or model.input)):
        f = as_format(fmt)
        flat = x.reshape(-1)
        bad = backend.first_unrepresentable(flat, make_spec(f, "nearest_even", True, False, None))
        if bad >= 0:
            raise ValueError(
                f"{name} holds {host_value(flat[bad])!r}, not a value of the model's input format "
                f"{f.name} ({model.name})"
            )
    out_spec = make_spec(as_format(model.block_output or fout), model.output_rounding, True,
                         model.overflow == "saturate", None)
    k_len = a2.shape[1]
    chunk = model.split_k if model.promote_every is None else model.promote_every
    length = max(1, k_len if chunk is None else min(chunk, k_len))
    if model.split_k is not None and length < k_len and (c is not None or stats):
        raise ValueError(
            f"{model.name}: {'c' if c is not None else 'stats'} cannot be given with a split-K "
            "model (how the hardware adds C to the slices, and what its reduction counts, "
            "are not modelled)"
        )
    promote = model.promote_every is not None
    if promote and stats:
        raise ValueError(f"{model.name}: stats cannot be given with promote_every (what the "
                         "CUDA cores' additions count is not modelled)")
    if model.align == "round_down" and stats:
        raise ValueError(f'{model.name}: stats cannot be given with align="round_down" (its '
                         "roundings are not counted)")
    # The accumulator c starts: the block FMA's, or (promotion) the CUDA cores' binary32 one.
    acc_fmt = FP32 if promote else fout
    c0 = initial(c, shape, acc_fmt, make_spec(acc_fmt, "nearest_even", True, False, None),
                 xp).reshape(a2.shape[0], b3.shape[2])
    counts = np.zeros(5, dtype=np.int64)
    result: Any = c0 if promote else None
    # One pass over K; cuBLAS's split-K (each slice accumulated from +0, the slices'
    # results added in k order as plain additions in the output format); or promotion
    # (each chunk from +0, added to the binary32 accumulator that starts at c).
    for lo in range(0, k_len if promote else max(k_len, 1), length):
        part = xp.zeros(c0.shape)
        if part.size:
            counts = backend.accumulate_blocks(
                xp.ascontiguousarray(a2[:, lo:lo + length]),
                xp.ascontiguousarray(b3[:, lo:lo + length]),
                xp.zeros(c0.shape) if promote else c0, part, model.params(), out_spec,
                model.block, stats
            )
        result = part if result is None else add(result, part, acc_fmt, "nearest_even")
    result = result.reshape(shape)
    if out is not None:
        result = round_to(result, out)
    dtype = result_dtype(a, b, (as_format(out) if out is not None else acc_fmt).dtype)
    result = as_dtype(result, dtype)
    return (result, AccumulationStats.from_counts(counts)) if stats else result


def _named(f: Format) -> str | Format:
    """A format as a model keeps it: a preset by name, a custom format as itself."""
    return f.name if PRESETS.get(f.name) == f else f
