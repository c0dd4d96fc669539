"""Accumulation as a tensor core's block fused multiply-add does it.

A ``BlockFMA`` describes how one matrix-multiply instruction adds a block of
products to an accumulator (``docs/accumulation.md`` gives the algorithm);
``fpsim.hw`` holds the presets of real GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from fpsim._inputs import array_module, host_value, result_dtype
from fpsim.accumulation.operands import initial, layout
from fpsim.accumulation.stats import AccumulationStats
from fpsim.backends import get_backend
from fpsim.formats import Format, as_format
from fpsim.kernels.core import NO_EXPONENT
from fpsim.kernels.spec import BlockSpec, make_spec
from fpsim.rounding import round as round_to

OUTPUT_ROUNDINGS = ("toward_zero", "nearest_even")


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
        if self.block < 1 or not 1 <= self.frac_bits <= 40:
            raise ValueError(f"block must be >= 1 and frac_bits in 1..40, got {self}")
        if self.output_rounding not in OUTPUT_ROUNDINGS:
            raise ValueError(f"output_rounding must be one of {OUTPUT_ROUNDINGS}")
        for fmt in (self.input, self.output):
            as_format(fmt)

    def with_input(self, fmt: Format | str) -> BlockFMA:
        """The same model reading inputs of another format (e.g. ``"bf16"``)."""
        name = as_format(fmt).name
        return replace(self, input=name, name=f"{self.name.split('/')[0]}/{name}")

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
    result = xp.empty((rows, n))
    counts = backend.accumulate_blocks(
        a2, b3, c0.reshape(rows, n), result, model.params(), out_spec, model.block, stats
    )
    result = result.reshape(shape)
    if out is not None:
        result = round_to(result, out)
    dtype = result_dtype(a, b, (as_format(out) if out is not None else fout).dtype)
    result = result.astype(dtype, copy=False)
    return (result, AccumulationStats.from_counts(counts)) if stats else result
