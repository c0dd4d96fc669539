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

#: How a block FMA may round its exact sum to the output format.
OUTPUT_ROUNDINGS = ("toward_zero", "nearest_even")
#: What a block result beyond the output format's range becomes.
OVERFLOWS = ("inf", "saturate")
#: The sign of a block result that is zero.
ZERO_SIGNS = ("positive", "signed")
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
        The format of the inputs (at most 30 fraction bits).
    output : str or Format, default "fp32"
        The accumulator's format (at most 29 fraction bits).
    output_rounding : {"toward_zero", "nearest_even"}, default "toward_zero"
        How each step's exact sum is rounded to ``output``.
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
        for field, allowed in (("output_rounding", OUTPUT_ROUNDINGS), ("overflow", OVERFLOWS),
                               ("zero_sign", ZERO_SIGNS)):
            value = getattr(self, field)
            if not isinstance(value, str) or value not in allowed:
                raise ValueError(f"{field} must be one of {', '.join(allowed)}, got {value!r}")
        for role, fmt, most in (("input", self.input, MAX_INPUT_MAN_BITS),
                                ("output", self.output, MAX_ARITH_MAN_BITS)):
            if not isinstance(fmt, (str, Format)):
                raise ValueError(f"{role} must be a format or a format name, got {fmt!r}")
            f = as_format(fmt)
            if f.man_bits > most:
                raise ValueError(
                    f"{role} format {f.name} has {f.man_bits} fraction bits; a block-FMA "
                    f"model takes {role}s of at most {most} (its exact products and sums "
                    "are 64-bit integers)"
                )

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
        # A preset is kept by name; a custom format as itself (its name is no preset's).
        value = f.name if PRESETS.get(f.name) == f else f
        return replace(self, input=value, name=f"{self.name.split('/')[0]}/{f.name}")

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
        return BlockSpec(
            t_in=fin.man_bits, emin_in=fin.emin, t_out=fout.man_bits, emin_out=fout.emin,
            frac_bits=self.frac_bits,
            exp_floor=NO_EXPONENT if self.exp_floor is None else self.exp_floor,
            overflow_inf=int(self.overflow == "inf"), signed_zero=int(self.zero_sign == "signed"),
        )


def block_matmul(a: Any, b: Any, model: BlockFMA, *, c: Any = None,
                 out: Format | str | None = None, stats: bool = False) -> Any:
    """A @ B as the hardware computes it with ``model``: ``fpsim.matmul(A, B, model=model)``.

    Parameters
    ----------
    a, b : array_like
        (..., M, K) and (..., K, N) arrays of the model's input format.
    model : BlockFMA
        The block-FMA model.
    c : array_like, optional
        The initial accumulator: values of the model's output format.
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
    fin, fout = as_format(model.input), as_format(model.output)
    backend = get_backend()
    in_spec = make_spec(fin, "nearest_even", True, False, None)
    xp = array_module([a, b])
    shape, a2, b3 = layout(a, b, xp)
    for name, x in (("A", a2), ("B", b3)):
        flat = x.reshape(-1)
        bad = backend.first_unrepresentable(flat, in_spec)
        if bad >= 0:
            raise ValueError(
                f"{name} holds {host_value(flat[bad])!r}, not a value of the model's input format "
                f"{fin.name} ({model.name})"
            )
    out_spec = make_spec(fout, model.output_rounding, True, model.overflow == "saturate", None)
    k_len = a2.shape[1]
    length = max(1, k_len if model.split_k is None else min(model.split_k, k_len))
    split = length < k_len
    if split and (c is not None or stats):
        raise ValueError(
            f"{model.name}: {'c' if c is not None else 'stats'} cannot be given with a split-K "
            "model (how the hardware adds C to the slices, and what its reduction counts, "
            "are not modelled)"
        )
    c0 = initial(c, shape, fout, out_spec, xp).reshape(a2.shape[0], b3.shape[2])
    counts = np.zeros(5, dtype=np.int64)
    result: Any = None
    # One pass over K, or cuBLAS's split-K: each slice accumulated from +0, the slices'
    # results added in k order as plain additions in the output format.
    for lo in range(0, max(k_len, 1), length):
        part = xp.zeros(c0.shape)
        if part.size:
            counts = backend.accumulate_blocks(
                xp.ascontiguousarray(a2[:, lo:lo + length]),
                xp.ascontiguousarray(b3[:, lo:lo + length]),
                c0, part, model.params(), out_spec, model.block, stats
            )
        result = part if result is None else add(result, part, fout, "nearest_even")
    result = result.reshape(shape)
    if out is not None:
        result = round_to(result, out)
    dtype = result_dtype(a, b, (as_format(out) if out is not None else fout).dtype)
    result = as_dtype(result, dtype)
    return (result, AccumulationStats.from_counts(counts)) if stats else result
