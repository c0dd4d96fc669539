"""Accumulation as a tensor core's block fused multiply-add does it.

A ``BlockFMA`` describes how one matrix-multiply instruction adds a block of
products to an accumulator (``docs/accumulation.md`` gives the algorithm);
``fpsim.hw`` holds the presets of real GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from fpsim._checks import boolean, integer
from fpsim._inputs import array_module, host_value, result_dtype
from fpsim.accumulation.operands import initial, layout
from fpsim.accumulation.stats import AccumulationStats
from fpsim.backends import get_backend
from fpsim.formats import MAX_ARITH_MAN_BITS, PRESETS, Format, as_format
from fpsim.kernels.core import NO_EXPONENT
from fpsim.kernels.spec import BlockSpec, make_spec
from fpsim.rounding import round as round_to

OUTPUT_ROUNDINGS = ("toward_zero", "nearest_even")
MAX_FRAC_BITS = 40
# Two inputs' significands (t + 1 bits each) multiply exactly in int64.
MAX_INPUT_MAN_BITS = 30


@dataclass(frozen=True)
class BlockFMA:
    """One instruction's block FMA: ``block`` products plus the accumulator per step.

    ``frac_bits``: fraction bits kept below the alignment exponent (terms are
    cut toward zero to that grid); ``exp_floor``: lower bound of the alignment
    exponent (None: none); ``input``/``output``: formats; ``output_rounding``:
    how the block's exact sum is rounded to the output.
    """

    name: str
    block: int
    frac_bits: int
    exp_floor: int | None
    input: str = "fp16"
    output: str = "fp32"
    output_rounding: str = "toward_zero"

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"name must be a non-empty string, got {self.name!r}")
        frac_bits = integer(self.frac_bits, "frac_bits", 1, MAX_FRAC_BITS)
        # The block's exact sum, (block + 1) terms below 2**(frac_bits + 2), fits int64.
        integer(self.block, "block", 1, (1 << (61 - frac_bits)) - 1)
        if self.exp_floor is not None:
            integer(self.exp_floor, "exp_floor", -2000, 2000)
        if self.output_rounding not in OUTPUT_ROUNDINGS:
            raise ValueError(f"output_rounding must be one of {', '.join(OUTPUT_ROUNDINGS)}, "
                             f"got {self.output_rounding!r}")
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
        """The same model reading inputs of another format (e.g. ``"bf16"``)."""
        f = as_format(fmt)
        # A preset is kept by name; a custom format as itself (its name is no preset's).
        value = f.name if PRESETS.get(f.name) == f else f
        return replace(self, input=value, name=f"{self.name.split('/')[0]}/{f.name}")

    def params(self) -> BlockSpec:
        """What the kernels read of this model."""
        fin, fout = as_format(self.input), as_format(self.output)
        return BlockSpec(
            t_in=fin.man_bits, emin_in=fin.emin, t_out=fout.man_bits, emin_out=fout.emin,
            frac_bits=self.frac_bits,
            exp_floor=NO_EXPONENT if self.exp_floor is None else self.exp_floor,
        )


def block_matmul(a: np.ndarray, b: np.ndarray, model: BlockFMA, *, c=None, out=None,
                 stats: bool = False):
    """A @ B as the hardware computes it with ``model`` (see ``fpsim.matmul(model=...)``)."""
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
    out_spec = make_spec(fout, model.output_rounding, True, False, None)
    c0 = initial(c, shape, fout, out_spec, xp)
    rows, n = a2.shape[0], b3.shape[2]
    result = xp.zeros((rows, n))
    counts = np.zeros(5, dtype=np.int64)
    if result.size:
        counts = backend.accumulate_blocks(
            a2, b3, c0.reshape(rows, n), result, model.params(), out_spec, model.block, stats
        )
    result = result.reshape(shape)
    if out is not None:
        result = round_to(result, out)
    dtype = result_dtype(a, b, (as_format(out) if out is not None else fout).dtype)
    result = result.astype(dtype, copy=False)
    return (result, AccumulationStats.from_counts(counts)) if stats else result
