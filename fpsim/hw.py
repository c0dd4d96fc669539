"""Block fused multiply-add models of NVIDIA tensor cores: the presets.

``docs/hardware-models.md`` gives each preset's parameters and sources; the
model itself is ``BlockFMA`` (``fpsim.accumulation.blocks``). ``V100`` ... ``B200``
read fp16 inputs, the ``_BF16`` presets bf16 ones; all accumulate in fp32, and an
overflow gives +-inf and a zero result +0 (MMA-Sim's rules; the docs give the sources).

Examples
--------
>>> import fpsim
>>> sorted(fpsim.hw.PRESETS)
['A100', 'A100/bf16', 'B200', 'B200/bf16', 'H100', 'H100/bf16', 'V100']
>>> A, B = [[1.0, 2.0**-24, 2.0**-24, 2.0**-24]], [[1.0]] * 4
>>> fpsim.matmul(A, B, model=fpsim.hw.V100).tolist()
[[1.0]]
>>> fpsim.matmul(A, B, model=fpsim.hw.H100).tolist()
[[1.0000001192092896]]
"""

from fpsim.accumulation.blocks import (
    OUTPUT_ROUNDINGS,
    OVERFLOWS,
    ZERO_SIGNS,
    BlockFMA,
    block_matmul,
)

__all__ = ["BlockFMA", "OUTPUT_ROUNDINGS", "OVERFLOWS", "ZERO_SIGNS", "PRESETS", "block_matmul",
           "V100", "A100", "H100", "B200", "A100_BF16", "H100_BF16", "B200_BF16"]

# Fasi, Higham, Mikaitis, Pranesh, PeerJ Comput. Sci. 7:e330 (2021); Khattak and
# Mikaitis, "Accurate models of NVIDIA tensor cores" (2025); Xie et al., "MMA-Sim"
# (arXiv 2511.10909; mmasim 2.1.1): see docs/hardware-models.md.
#: NVIDIA V100 (Volta): blocks of 4 products, 23 fraction bits kept, no exponent floor.
V100 = BlockFMA("V100", block=4, frac_bits=23, exp_floor=None)
#: NVIDIA A100 (Ampere): blocks of 8, 24 fraction bits, alignment exponent at least -132.
A100 = BlockFMA("A100", block=8, frac_bits=24, exp_floor=-132)
#: NVIDIA H100 (Hopper): blocks of 16, 25 fraction bits, alignment exponent at least -133.
H100 = BlockFMA("H100", block=16, frac_bits=25, exp_floor=-133)
#: NVIDIA B200 (Blackwell): as the H100.
B200 = BlockFMA("B200", block=16, frac_bits=25, exp_floor=-133)
#: The A100 reading bf16 inputs.
A100_BF16 = A100.with_input("bf16")
#: The H100 reading bf16 inputs.
H100_BF16 = H100.with_input("bf16")
#: The B200 reading bf16 inputs.
B200_BF16 = B200.with_input("bf16")
#: Every preset by its name (``"H100"``, ``"H100/bf16"``, ...).
PRESETS: dict[str, BlockFMA] = {
    m.name: m for m in (V100, A100, H100, B200, A100_BF16, H100_BF16, B200_BF16)
}
