"""Instruction probes: one PTX ``mma.sync`` tensor-core instruction per warp (or one
``wgmma`` per warpgroup), on given inputs, against fpsim's presets and MMA-Sim's
recorded outputs (issue 31).

Each probe packs A (M x K, row-major), B (K x N, column-major) and C (M x N) into the
registers of the 32 lanes of a warp as the PTX ISA's fragment layouts say (section
"Matrix Fragments for mma.m16n8k*"), runs the instruction once in a CuPy RawKernel of
inline PTX, and unpacks D. The packing is NumPy on the host; the kernel only loads the
registers, runs the instruction and stores D. A ``wgmma`` probe (Hopper, ``sm_90a``,
compiled by nvcc) runs a warpgroup of 128 threads: A in registers (warp w holds rows
16w to 16w + 15 as ``mma.m16n8k*`` holds its 16), B in shared memory (K-major, no
swizzle, read through a matrix descriptor), D = A B + D. A ``tcgen05.mma`` probe
(Blackwell, compute capability 10.x, compiled by nvcc for ``sm_100a`` or ``sm_103a``) runs
a CTA of 128 threads: A and B in shared memory, C and D in tensor memory
(``tcgen05_source``). Before its numerics are read, a probe
checks its layout on the GPU: a case of small integers, whose exact product (computed
with ``fractions.Fraction``) every instruction returns exactly.

``python3 -m fpsim.compare.mma --out DIR`` runs every probe the GPU supports and writes
``DIR/mma_probes.npz`` and ``DIR/mma_probes.md``; ``fpsim compare --suite gpu`` runs
the same probes as cases. The inputs are seeded, and
``tests/data/make_mma_probe_records.py`` recorded MMA-Sim 2.1.1's outputs for them
(``tests/data/mma_probe_records.npz``).

Examples
--------
>>> from fpsim.compare.mma import INSTRUCTIONS, layout
>>> INSTRUCTIONS["f32.bf16.bf16"].ptx
'wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16'
>>> INSTRUCTIONS["f32.bf16.bf16.f32"].ptx
'mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32'
>>> rows, cols = layout("m16n8k16", "a", 16)
>>> rows.shape, int(rows[5, 2]), int(cols[5, 2])  # lane 5, element a2: row 9, col 2
((32, 8), 9, 2)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

import fpsim
from fpsim.compare.cases import Case, Record, skipped
from fpsim.formats import Format, as_format

# The inputs' seed and size: the recorded MMA-Sim outputs hold these inputs.
SEED = 20261125
PROBLEMS = 8  # problems (one instruction each) per class of input
CLASSES = ("layout", "random", "wide", "cancel", "subnormal", "nonfinite", "zero factors",
           "exponent floor", "overflow", "zero sign")
# The four disagreements of issue 31, by the class of input that shows each.
DISAGREEMENTS = {"zero factors": "zero products in the alignment",
                 "exponent floor": "the exponent floor with c = 0",
                 "overflow": "overflow: +-inf or +-FLT_MAX",
                 "zero sign": "the sign of a zero result"}
RECORDS = Path(__file__).resolve().parents[2] / "tests" / "data" / "mma_probe_records.npz"
#: fp8 accumulators of MMA-Sim's Ada mma and Hopper wgmma: 8 exponent bits, 13 fraction bits.
E8M13 = Format(8, 13, name="e8m13")


@dataclasses.dataclass(frozen=True)
class Instruction:
    """One ``mma.sync`` instruction: its shape, operand formats and where it runs.

    Parameters
    ----------
    types : str
        The PTX type suffix, D.A.B.C (``"f32.f16.f16.f32"``).
    shape : str
        The PTX shape (``"m16n8k16"``).
    a, b, cd : str
        fpsim's names of the A, B and C/D formats.
    capability : tuple of int
        The least compute capability with the instruction.

    Examples
    --------
    >>> from fpsim.compare.mma import INSTRUCTIONS
    >>> INSTRUCTIONS["f32.e4m3.e5m2.f32"].ptx
    'mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32'
    """

    types: str
    shape: str
    a: str
    b: str
    cd: str
    capability: tuple[int, int]
    wgmma: bool = False

    @property
    def ptx(self) -> str:
        """The PTX instruction."""
        if self.wgmma:
            return f"wgmma.mma_async.sync.aligned.{self.shape}.{self.types}"
        return f"mma.sync.aligned.{self.shape}.row.col.{self.types}"

    @property
    def key(self) -> str:
        """Its name among the probes (records, reports): the type suffix."""
        return self.types

    @property
    def label(self) -> str:
        """How reports name it: the PTX instruction."""
        return self.ptx

    @property
    def sync(self) -> bool:
        """A warp's ``mma.sync`` (not ``wgmma``): sm_90 lowers its fp8 forms to fp16 HMMA."""
        return not self.wgmma

    @property
    def warp_shape(self) -> str:
        """The ``mma`` shape whose A and C/D fragments each warp holds (``wgmma``: each of
        the four warps holds 16 of the 64 rows as ``mma.m16n8k*`` does)."""
        return self.shape.replace("m64", "m16") if self.wgmma else self.shape

    @property
    def mnk(self) -> tuple[int, int, int]:
        """(M, N, K)."""
        m, rest = self.shape[1:].split("n")
        n, k = rest.split("k")
        return int(m), int(n), int(k)

    @property
    def kernel(self) -> str:
        """The name of its kernel."""
        return ("probe_wgmma_" if self.wgmma else "probe_") + self.types.replace(".", "_")


INSTRUCTIONS: dict[str, Instruction] = {i.types: i for i in (
    Instruction("f32.f16.f16.f32", "m16n8k16", "fp16", "fp16", "fp32", (8, 0)),
    Instruction("f32.bf16.bf16.f32", "m16n8k16", "bf16", "bf16", "fp32", (8, 0)),
    Instruction("f32.tf32.tf32.f32", "m16n8k8", "tf32", "tf32", "fp32", (8, 0)),
    Instruction("f16.f16.f16.f16", "m16n8k16", "fp16", "fp16", "fp16", (8, 0)),
    Instruction("f32.e4m3.e4m3.f32", "m16n8k32", "fp8_e4m3", "fp8_e4m3", "fp32", (8, 9)),
    Instruction("f32.e5m2.e5m2.f32", "m16n8k32", "fp8_e5m2", "fp8_e5m2", "fp32", (8, 9)),
    Instruction("f32.e4m3.e5m2.f32", "m16n8k32", "fp8_e4m3", "fp8_e5m2", "fp32", (8, 9)),
    # Hopper's warpgroup instructions (sm_90a: compute capability 9.0 only); A from
    # registers, B from shared memory, D = A B + D.
    *(Instruction(t, shape, a, b, cd, (9, 0), wgmma=True) for t, shape, a, b, cd in (
        ("f32.f16.f16", "m64n8k16", "fp16", "fp16", "fp32"),
        ("f32.bf16.bf16", "m64n8k16", "bf16", "bf16", "fp32"),
        ("f16.f16.f16", "m64n8k16", "fp16", "fp16", "fp16"),
        ("f32.e4m3.e4m3", "m64n8k32", "fp8_e4m3", "fp8_e4m3", "fp32"),
        ("f32.e5m2.e5m2", "m64n8k32", "fp8_e5m2", "fp8_e5m2", "fp32"),
        ("f32.e4m3.e5m2", "m64n8k32", "fp8_e4m3", "fp8_e5m2", "fp32"),
        ("f16.e4m3.e4m3", "m64n8k32", "fp8_e4m3", "fp8_e4m3", "fp16"))),
)}
# Storage bits of an element in a register, by format.
WIDTH = {"fp16": 16, "bf16": 16, "tf32": 32, "fp32": 32, "fp8_e4m3": 8, "fp8_e5m2": 8}


def layout(shape: str, operand: str, width: int) -> tuple[np.ndarray, np.ndarray]:
    """The (row, column) of each lane's fragment elements, after the PTX ISA.

    Parameters
    ----------
    shape : {"m16n8k8", "m16n8k16", "m16n8k32"}
        The instruction's shape.
    operand : {"a", "b", "c"}
        A (row-major), B (column-major) or the accumulator C/D.
    width : int
        The bits of an element of ``operand`` (32 for tf32, 16, 8 for fp8).

    Returns
    -------
    rows, cols : numpy.ndarray
        Of shape (32, elements per lane): lane by element index (low to high).

    Raises
    ------
    ValueError
        A shape, operand or width the probes do not use.

    Examples
    --------
    >>> from fpsim.compare.mma import layout
    >>> rows, cols = layout("m16n8k8", "c", 32)
    >>> rows[7].tolist(), cols[7].tolist()  # lane 7: group 1, thread 3 in it
    ([1, 1, 9, 9], [6, 7, 6, 7])
    """
    lane = np.arange(32)[:, None]
    group, thread = lane >> 2, lane % 4
    key = (shape, operand, width)
    if operand == "c" and shape in ("m16n8k8", "m16n8k16", "m16n8k32") and width in (16, 32):
        i = np.arange(4)[None, :]
        return group + 8 * (i // 2), 2 * thread + i % 2
    if key in (("m16n8k16", "a", 16),):
        i = np.arange(8)[None, :]
        return group + 8 * ((i // 2) % 2), 2 * thread + i % 2 + 8 * (i // 4)
    if key == ("m16n8k16", "b", 16):
        i = np.arange(4)[None, :]
        return 2 * thread + i % 2 + 8 * (i // 2), np.broadcast_to(group, (32, 4))
    if key == ("m16n8k8", "a", 32):
        i = np.arange(4)[None, :]
        return group + 8 * (i % 2), thread + 4 * (i // 2)
    if key == ("m16n8k8", "b", 32):
        i = np.arange(2)[None, :]
        return thread + 4 * i, np.broadcast_to(group, (32, 2))
    if key == ("m16n8k32", "a", 8):
        i = np.arange(16)[None, :]
        return group + 8 * ((i // 4) % 2), 4 * thread + i % 4 + 16 * (i // 8)
    if key == ("m16n8k32", "b", 8):
        i = np.arange(8)[None, :]
        return 4 * thread + i % 4 + 16 * (i // 4), np.broadcast_to(group, (32, 8))
    raise ValueError(f"no fragment layout for shape {shape!r}, operand {operand!r}, "
                     f"{width}-bit elements")


def pack(bits: np.ndarray, shape: str, operand: str) -> np.ndarray:
    """Matrices of encodings (problems, rows, cols) as each lane's 32-bit registers.

    Parameters
    ----------
    bits : numpy.ndarray
        Unsigned encodings (uint8, uint16 or uint32), of shape (problems, rows, cols).
    shape, operand : str
        As ``layout``'s.

    Returns
    -------
    numpy.ndarray
        uint32 of shape (problems, 32, registers): element i of a lane in register
        ``i // (32 // width)``, at bit ``width * (i % (32 // width))``.

    Examples
    --------
    >>> import numpy as np
    >>> from fpsim.compare.mma import pack
    >>> c = np.arange(128, dtype=np.uint32).reshape(1, 16, 8)
    >>> pack(c, "m16n8k16", "c")[0, 1].tolist()  # lane 1: rows 0 and 8, cols 2 and 3
    [2, 3, 66, 67]
    """
    width = 8 * bits.dtype.itemsize
    rows, cols = layout(shape, operand, width)
    per = 32 // width
    elements = bits[:, rows, cols].astype(np.uint32)  # (problems, 32, elements)
    n = elements.shape[-1] // per
    shifted = elements.reshape(*elements.shape[:2], n, per) << (
        width * np.arange(per, dtype=np.uint32))
    packed: np.ndarray = np.bitwise_or.reduce(shifted, axis=-1).astype(np.uint32)
    return packed


def unpack(regs: np.ndarray, shape: str, operand: str, width: int,
           size: tuple[int, int]) -> np.ndarray:
    """The inverse of ``pack``: registers (problems, 32, registers) as matrices.

    Parameters
    ----------
    regs : numpy.ndarray
        uint32 registers.
    shape, operand : str
        As ``layout``'s.
    width : int
        Bits per element (16 or 32 for D).
    size : tuple of int
        (rows, cols) of the matrix.

    Returns
    -------
    numpy.ndarray
        Encodings of shape (problems, rows, cols), uint16 or uint32 (uint8 for 8).

    Examples
    --------
    >>> import numpy as np
    >>> from fpsim.compare.mma import pack, unpack
    >>> c = np.arange(128, dtype=np.uint16).reshape(1, 16, 8)
    >>> bool((unpack(pack(c, "m16n8k16", "c"), "m16n8k16", "c", 16, (16, 8)) == c).all())
    True
    """
    rows, cols = layout(shape, operand, width)
    per = 32 // width
    regs = np.asarray(regs, dtype=np.uint32)
    parts = (regs[..., None] >> (width * np.arange(per, dtype=np.uint32))) & np.uint32(
        (1 << width) - 1 if width < 32 else 0xFFFFFFFF)
    elements = parts.reshape(regs.shape[0], 32, -1)
    dtype = {8: np.uint8, 16: np.uint16, 32: np.uint32}[width]
    out = np.zeros((regs.shape[0], *size), dtype=dtype)
    out[:, rows, cols] = elements
    return out


def fragments(bits: np.ndarray, instr: Instruction, operand: str) -> np.ndarray:
    """A or C (encodings, (problems, M, cols)) as the registers of ``instr``'s threads,
    (problems, threads, registers): ``pack`` for ``mma``; for ``wgmma`` warp w of the
    warpgroup holds rows 16w to 16w + 15 as ``mma.m16n8k*`` does.

    Examples
    --------
    >>> import numpy as np
    >>> from fpsim.compare.mma import INSTRUCTIONS, fragments
    >>> c = np.arange(64 * 8, dtype=np.uint32).reshape(1, 64, 8)
    >>> fragments(c, INSTRUCTIONS["f32.f16.f16"], "c")[0, 32 + 1].tolist()  # warp 1, lane 1
    [130, 131, 194, 195]
    """
    if not instr.wgmma:
        return pack(bits, instr.shape, operand)
    p = bits.shape[0]
    warps = bits.reshape(p * 4, 16, bits.shape[2])
    return pack(warps, instr.warp_shape, operand).reshape(p, 128, -1)


def unfragment(regs: np.ndarray, instr: Instruction) -> np.ndarray:
    """D's registers (problems, threads, registers) as encodings (problems, M, N)."""
    m, n, _ = instr.mnk
    width = WIDTH[instr.cd]
    if not instr.wgmma:
        return unpack(regs, instr.shape, "c", width, (m, n))
    p = regs.shape[0]
    d = unpack(regs.reshape(p * 4, 32, -1), instr.warp_shape, "c", width, (16, n))
    return d.reshape(p, m, n)


def smem_offset(k: np.ndarray, n: np.ndarray, size: int) -> np.ndarray:
    """The byte offset of B[k, n] in a ``wgmma`` operand in shared memory, K-major with
    no swizzle: core matrices of 8 rows (n) by 16 bytes (of k), 128 bytes each, the one
    holding bytes 16c to 16c + 15 of each row at 128c (``size``: bytes an element).

    Examples
    --------
    >>> import numpy as np
    >>> from fpsim.compare.mma import smem_offset
    >>> smem_offset(np.array([0, 1, 8, 9]), np.array([0, 1, 0, 7]), 2).tolist()
    [0, 18, 128, 242]
    """
    per = 16 // size
    offset: np.ndarray = 128 * (k // per) + 16 * n + (k % per) * size
    return offset


def smem_image(bits: np.ndarray) -> np.ndarray:
    """B (encodings, (problems, K, N)) as the words of its shared-memory image,
    (problems, K N size / 4) uint32 (``smem_offset``; little-endian)."""
    p, k_len, n = bits.shape
    size = bits.dtype.itemsize
    k, col = np.meshgrid(np.arange(k_len), np.arange(n), indexing="ij")
    elements = np.zeros((p, k_len * n), dtype=bits.dtype)
    elements[:, smem_offset(k, col, size) // size] = bits
    words: np.ndarray = np.ascontiguousarray(elements).view("<u4")
    return words.astype(np.uint32)


# ---------------------------------------------------------------------------------------
# The kernels


def kernel_source(instr: Instruction) -> str:
    """The CUDA C++ of ``instr``'s probe: a warp per problem (block of 32 threads) loads
    its registers, runs the instruction once and stores D.

    Examples
    --------
    >>> from fpsim.compare.mma import INSTRUCTIONS, kernel_source
    >>> "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in kernel_source(
    ...     INSTRUCTIONS["f32.tf32.tf32.f32"])
    True
    """
    m, n, k = instr.mnk
    na, nb = m * k * WIDTH[instr.a] // 1024, k * n * WIDTH[instr.b] // 1024
    nc = m * n * WIDTH[instr.cd] // 1024
    f32 = instr.cd == "fp32"
    creg = "float" if f32 else "unsigned int"
    cload = "__uint_as_float" if f32 else ""
    dstore = "__float_as_uint" if f32 else ""
    con = "f" if f32 else "r"
    slots = iter(range(na + nb + 2 * nc))
    dlist = ", ".join(f"%{next(slots)}" for _ in range(nc))
    alist = ", ".join(f"%{next(slots)}" for _ in range(na))
    blist = ", ".join(f"%{next(slots)}" for _ in range(nb))
    clist = ", ".join(f"%{next(slots)}" for _ in range(nc))
    lines = [
        f'extern "C" __global__ void {instr.kernel}(const unsigned int* a, '
        "const unsigned int* b, const unsigned int* c, unsigned int* d) {",
        "    const unsigned long long t = (unsigned long long)blockIdx.x * 32 + threadIdx.x;",
        *(f"    unsigned int a{i} = a[t * {na} + {i}];" for i in range(na)),
        *(f"    unsigned int b{i} = b[t * {nb} + {i}];" for i in range(nb)),
        *(f"    {creg} c{i} = {cload}(c[t * {nc} + {i}]);" for i in range(nc)),
        *(f"    {creg} d{i};" for i in range(nc)),
        f'    asm volatile("{instr.ptx} {{{dlist}}}, {{{alist}}}, {{{blist}}}, {{{clist}}};"',
        "        : " + ", ".join(f'"={con}"(d{i})' for i in range(nc)),
        "        : " + ", ".join([*(f'"r"(a{i})' for i in range(na)),
                                  *(f'"r"(b{i})' for i in range(nb)),
                                  *(f'"{con}"(c{i})' for i in range(nc))]) + ");",
        *(f"    d[t * {nc} + {i}] = {dstore}(d{i});" for i in range(nc)),
        "}",
    ]
    return "\n".join(lines) + "\n"


def wgmma_source(instr: Instruction) -> str:
    """The CUDA C++ of a ``wgmma`` probe: a warpgroup (block of 128 threads) per problem
    copies B into shared memory, loads A and C (as D) into registers, runs the
    instruction once (D = A B + D) and stores D. Needs ``sm_90a``.

    Examples
    --------
    >>> from fpsim.compare.mma import INSTRUCTIONS, wgmma_source
    >>> "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3" in wgmma_source(
    ...     INSTRUCTIONS["f32.e4m3.e4m3"])
    True
    """
    m, n, k = instr.mnk
    na = 16 * k * WIDTH[instr.a] // 1024
    nb = k * n * WIDTH[instr.b] // 8 // 4  # words of B in shared memory
    nd = 16 * n * WIDTH[instr.cd] // 1024
    f32 = instr.cd == "fp32"
    dreg, con = ("float", "f") if f32 else ("unsigned int", "r")
    cload, dstore = ("__uint_as_float", "__float_as_uint") if f32 else ("", "")
    dlist = ", ".join(f"%{i}" for i in range(nd))
    alist = ", ".join(f"%{nd + i}" for i in range(na))
    trans = ", 0" if not instr.a.startswith("fp8") else ""  # imm-trans-b: B K-major
    lines = [
        f'extern "C" __global__ void __launch_bounds__(128) {instr.kernel}('
        "const unsigned int* a, const unsigned int* b, const unsigned int* c, "
        "unsigned int* d) {",
        f"    __shared__ __align__(128) unsigned int sb[{nb}];",
        "    const unsigned int tid = threadIdx.x;",
        "    const unsigned long long t = (unsigned long long)blockIdx.x * 128 + tid;",
        f"    for (unsigned int i = tid; i < {nb}; i += 128) "
        f"sb[i] = b[(unsigned long long)blockIdx.x * {nb} + i];",
        '    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");',
        "    __syncthreads();",
        *(f"    unsigned int a{i} = a[t * {na} + {i}];" for i in range(na)),
        *(f"    {dreg} d{i} = {cload}(c[t * {nd} + {i}]);" for i in range(nd)),
        "    const unsigned int addr = (unsigned int)__cvta_generic_to_shared(sb);",
        # Start address, and 128 bytes both as the leading and the stride byte offset:
        # the next core matrix along K is at +128, whichever field the unit reads for it.
        "    const unsigned long long desc = (unsigned long long)((addr & 0x3FFFF) >> 4)",
        "        | (8ull << 16) | (8ull << 32);",
        '    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");',
        f'    asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{nd + na + 1}, 0;\\n"',
        f'        "{instr.ptx} {{{dlist}}}, {{{alist}}}, %{nd + na}, p, 1, 1{trans};\\n}}\\n"',
        "        : " + ", ".join(f'"+{con}"(d{i})' for i in range(nd)),
        "        : " + ", ".join([*(f'"r"(a{i})' for i in range(na)), '"l"(desc)', '"r"(1)'])
        + ' : "memory");',
        '    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");',
        '    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");',
        *(f"    d[t * {nd} + {i}] = {dstore}(d{i});" for i in range(nd)),
        "}",
    ]
    return "\n".join(lines) + "\n"


def module_source(instructions: list[Instruction]) -> str:
    """The CUDA C++ of several probes, one translation unit."""
    return "\n".join(wgmma_source(i) if i.wgmma else kernel_source(i) for i in instructions)


# ---------------------------------------------------------------------------------------
# Blackwell's tcgen05.mma (sm_100a, sm_103a): run by the Prober on compute capability 10.x
# only; no Blackwell has run them yet


@dataclasses.dataclass(frozen=True)
class Tcgen05:
    """A Blackwell ``tcgen05.mma.cta_group::1`` probe instruction: A and B in shared memory
    (K-major, no swizzle), D in tensor memory, M = 128 and N = 16 (the ``B200`` presets'
    instructions: kind::f16, kind::tf32, kind::f8f6f4).

    Parameters
    ----------
    types : str
        D.A.B (``"f32.f16.f16"``).
    kind : str
        The PTX kind (``"f16"``, ``"tf32"``, ``"f8f6f4"``).
    a, b, cd : str
        fpsim's names of the A, B and C/D formats.

    Examples
    --------
    >>> from fpsim.compare.mma import TCGEN05
    >>> i = TCGEN05["f32.e4m3.e5m2"]
    >>> i.ptx, i.mnk, hex(i.idesc)
    ('tcgen05.mma.cta_group::1.kind::f8f6f4', (128, 16, 32), '0x8040410')
    """

    types: str
    kind: str
    a: str
    b: str
    cd: str

    @property
    def ptx(self) -> str:
        """The PTX instruction."""
        return f"tcgen05.mma.cta_group::1.kind::{self.kind}"

    @property
    def mnk(self) -> tuple[int, int, int]:
        """(M, N, K): K is 32 bytes of each input."""
        return 128, 16, 256 // WIDTH[self.a]

    @property
    def shape(self) -> str:
        """The shape, as the PTX shapes are written (``"m128n16k16"``)."""
        m, n, k = self.mnk
        return f"m{m}n{n}k{k}"

    @property
    def key(self) -> str:
        """Its name among the probes (records, reports): ``"tcgen05."`` and D.A.B."""
        return "tcgen05." + self.types

    @property
    def label(self) -> str:
        """How reports name it: the PTX instruction and its types (which the instruction
        descriptor, not the PTX, carries)."""
        return f"{self.ptx} .{self.types}"

    @property
    def sync(self) -> bool:
        """Not a warp's ``mma.sync``."""
        return False

    @property
    def idesc(self) -> int:
        """The 32-bit instruction descriptor (PTX ISA, "Instruction descriptor" of
        tcgen05: D's type at bits 4-5, A's and B's at 7-9 and 10-12, both K-major (bits 15
        and 16 clear), N >> 3 at 17-22, M >> 4 at 24-28)."""
        code = {"fp16": 0, "bf16": 1, "tf32": 2, "fp8_e4m3": 0, "fp8_e5m2": 1}
        m, n, _ = self.mnk
        return (1 << 4) | (code[self.a] << 7) | (code[self.b] << 10) | ((n >> 3) << 17) \
            | ((m >> 4) << 24)

    @property
    def kernel(self) -> str:
        """The name of its kernel."""
        return "probe_tcgen05_" + self.types.replace(".", "_")


TCGEN05: dict[str, Tcgen05] = {i.types: i for i in (
    Tcgen05("f32.f16.f16", "f16", "fp16", "fp16", "fp32"),
    Tcgen05("f32.bf16.bf16", "f16", "bf16", "bf16", "fp32"),
    Tcgen05("f32.tf32.tf32", "tf32", "tf32", "tf32", "fp32"),
    Tcgen05("f32.e4m3.e4m3", "f8f6f4", "fp8_e4m3", "fp8_e4m3", "fp32"),
    Tcgen05("f32.e4m3.e5m2", "f8f6f4", "fp8_e4m3", "fp8_e5m2", "fp32"),
)}
#: A probe: a warp's ``mma.sync``, a warpgroup's ``wgmma`` or Blackwell's ``tcgen05.mma``.
Probe = Instruction | Tcgen05
#: Every probe by its key (``Instruction.key``, ``Tcgen05.key``), in the order they run.
PROBES: dict[str, Probe] = {**{i.key: i for i in INSTRUCTIONS.values()},
                            **{t.key: t for t in TCGEN05.values()}}


def tcgen05_offset(row: np.ndarray, k: np.ndarray, size: int, k_len: int) -> np.ndarray:
    """The byte offset of element (row, k) of a K-major operand of ``tcgen05.mma`` in shared
    memory, no swizzle: core matrices of 8 rows by 16 bytes (128 bytes each), those along K
    at a leading byte offset of 128, each group of 8 rows after the last's (a stride byte
    offset of 128 core matrices along K).

    Examples
    --------
    >>> import numpy as np
    >>> from fpsim.compare.mma import tcgen05_offset
    >>> tcgen05_offset(np.array([0, 1, 0, 8]), np.array([0, 0, 8, 0]), 2, 16).tolist()
    [0, 16, 128, 256]
    """
    per = 16 // size
    offset: np.ndarray = ((row // 8) * (128 * (k_len // per)) + 128 * (k // per)
                          + 16 * (row % 8) + (k % per) * size)
    return offset


def tcgen05_image(bits: np.ndarray) -> np.ndarray:
    """A (problems, M, K) or B transposed (problems, N, K) as the words of its
    shared-memory image (``tcgen05_offset``), (problems, rows K size / 4) uint32."""
    p, rows, k_len = bits.shape
    size = bits.dtype.itemsize
    r, k = np.meshgrid(np.arange(rows), np.arange(k_len), indexing="ij")
    elements = np.zeros((p, rows * k_len), dtype=bits.dtype)
    elements[:, tcgen05_offset(r, k, size, k_len).ravel() // size] = bits.reshape(p, -1)
    words: np.ndarray = np.ascontiguousarray(elements).view("<u4")
    return words.astype(np.uint32)


def tcgen05_arguments(data: dict[str, np.ndarray]) -> tuple[np.ndarray, ...]:
    """A ``tcgen05.mma`` probe's kernel arguments from a probe's encodings (``inputs``):
    A's (P, M, K) and B's (P, K, N) shared-memory images (B transposed to N by K, both
    K-major: ``tcgen05_image``) and C's words, row t of problem p at ``(p * M + t) * N``
    (thread t stores and loads row t).

    Examples
    --------
    >>> import numpy as np
    >>> from fpsim.compare.mma import tcgen05_arguments
    >>> data = {"a": np.zeros((2, 128, 16), np.uint16), "b": np.zeros((2, 16, 16), np.uint16),
    ...         "c": np.zeros((2, 128, 16), np.uint32)}
    >>> [x.shape for x in tcgen05_arguments(data)]
    [(2048,), (256,), (4096,)]
    """
    b_nk = np.ascontiguousarray(np.swapaxes(data["b"], 1, 2))
    return (tcgen05_image(data["a"]).ravel(), tcgen05_image(b_nk).ravel(),
            np.ascontiguousarray(data["c"], dtype=np.uint32).ravel())


def tcgen05_result(d: np.ndarray, instr: Tcgen05) -> np.ndarray:
    """D's words from a ``tcgen05.mma`` probe (``tcgen05_arguments``' order) as (P, M, N)."""
    m, n, _ = instr.mnk
    out: np.ndarray = np.asarray(d, dtype=np.uint32).reshape(-1, m, n)
    return out


def tcgen05_source(instr: Tcgen05) -> str:
    """The CUDA C++ of a ``tcgen05.mma`` probe: a block of 128 threads per problem copies A
    and B's images (``tcgen05_image``) into shared memory, allocates 32 columns of tensor
    memory, stores C there (thread t: row t, ``tcgen05.st.32x32b``), lets one thread issue
    the instruction once (D = A B + D) and commit it to an mbarrier, loads D back
    (``tcgen05.ld.32x32b``) and stores it, row t from thread t. Needs ``sm_100a``.

    Examples
    --------
    >>> from fpsim.compare.mma import TCGEN05, tcgen05_source
    >>> "tcgen05.mma.cta_group::1.kind::f16" in tcgen05_source(TCGEN05["f32.bf16.bf16"])
    True
    """
    m, n, k = instr.mnk
    na, nb = m * k * WIDTH[instr.a] // 32, n * k * WIDTH[instr.b] // 32  # words
    k_bytes = k * WIDTH[instr.a] // 8
    sbo = 128 * (k_bytes // 16)

    def desc(var: str) -> str:
        # Start address >> 4 (bits 0-13), leading byte offset 128 >> 4 (16-29), stride
        # byte offset >> 4 (32-45), the fixed 0b001 (46-48), no swizzle (61-63 clear).
        return (f"(unsigned long long)((__cvta_generic_to_shared({var}) & 0x3FFFF) >> 4)"
                f" | (8ull << 16) | ({sbo // 16}ull << 32) | (1ull << 46)")

    lines = [
        f'extern "C" __global__ void __launch_bounds__(128) {instr.kernel}('
        "const unsigned int* a, const unsigned int* b, const unsigned int* c, "
        "unsigned int* d) {",
        f"    __shared__ __align__(128) unsigned int sa[{na}];",
        f"    __shared__ __align__(128) unsigned int sb[{nb}];",
        "    __shared__ unsigned int tmem_base;",
        "    __shared__ __align__(8) unsigned long long bar;",
        "    const unsigned int tid = threadIdx.x, warp = tid / 32;",
        "    const unsigned long long p = blockIdx.x, t = p * 128 + tid;",
        f"    for (unsigned int i = tid; i < {na}; i += 128) sa[i] = a[p * {na} + i];",
        f"    for (unsigned int i = tid; i < {nb}; i += 128) sb[i] = b[p * {nb} + i];",
        "    const unsigned int bar_addr = (unsigned int)__cvta_generic_to_shared(&bar);",
        "    if (warp == 0) {",
        '        asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], 32;"',
        '            :: "r"((unsigned int)__cvta_generic_to_shared(&tmem_base)) : "memory");',
        '        asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;");',
        "    }",
        '    if (tid == 0) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(bar_addr)'
        ' : "memory");',
        '    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");',
        '    asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");',
        "    __syncthreads();",
        '    asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");',
        "    const unsigned int tmem = tmem_base, row = tmem + ((warp * 32) << 16);",
        *(f"    unsigned int c{i} = c[t * {n} + {i}];" for i in range(n)),
        f'    asm volatile("tcgen05.st.sync.aligned.32x32b.x{n}.b32 [%0], {{'
        + ", ".join(f"%{i + 1}" for i in range(n)) + '};"',
        '        :: "r"(row), ' + ", ".join(f'"r"(c{i})' for i in range(n)) + ' : "memory");',
        '    asm volatile("tcgen05.wait::st.sync.aligned;" ::: "memory");',
        '    asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");',
        "    __syncthreads();",
        '    asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");',
        "    if (tid == 0) {",
        f"        const unsigned long long da = {desc('sa')};",
        f"        const unsigned long long db = {desc('sb')};",
        '        asm volatile("{\\n.reg .pred q;\\nsetp.ne.b32 q, %4, 0;\\n"',
        f'            "{instr.ptx} [%0], %1, %2, %3, q;\\n}}\\n"',
        f'            :: "r"(tmem), "l"(da), "l"(db), "r"({instr.idesc}u), "r"(1) : "memory");',
        '        asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster'
        '.b64 [%0];"',
        '            :: "r"(bar_addr) : "memory");',
        "    }",
        "    unsigned int done = 0;",
        "    while (!done) {",
        '        asm volatile("{\\n.reg .pred q;\\nmbarrier.try_wait.parity.shared::cta.b64 q, '
        '[%1], 0;\\nselp.u32 %0, 1, 0, q;\\n}\\n"',
        '            : "=r"(done) : "r"(bar_addr) : "memory");',
        "    }",
        '    asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");',
        *(f"    unsigned int d{i};" for i in range(n)),
        f'    asm volatile("tcgen05.ld.sync.aligned.32x32b.x{n}.b32 {{'
        + ", ".join(f"%{i}" for i in range(n)) + f'}}, [%{n}];"',
        "        : " + ", ".join(f'"=r"(d{i})' for i in range(n)) + ' : "r"(row) : "memory");',
        '    asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory");',
        *(f"    d[t * {n} + {i}] = d{i};" for i in range(n)),
        '    asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");',
        "    __syncthreads();",
        '    asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");',
        '    if (warp == 0) asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, 32;"'
        ' :: "r"(tmem) : "memory");',
        "}",
    ]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------
# The inputs


def _limits(fmt: str) -> tuple[int, int, int]:
    """(fraction bits, least normal exponent, greatest exponent) of ``fmt``."""
    f = as_format(fmt)
    emax = (1 << (f.exp_bits - 1)) - 1
    if not f.infinities:  # e4m3: the all-ones exponent holds numbers (448 the largest)
        emax += 1
    return f.man_bits, f.emin, emax


def _values(rng: np.random.Generator, fmt: str, shape: tuple[int, ...], lo: int,
            hi: int) -> np.ndarray:
    """Random normal values of ``fmt`` with exponents in [lo, hi] (clipped to its range)."""
    t, emin, emax = _limits(fmt)
    lo, hi = max(lo, emin), min(hi, emax)
    sign = np.where(rng.random(shape) < 0.5, -1.0, 1.0)
    frac = rng.integers(0, 1 << t, shape) / 2.0**t
    values = sign * (1 + frac) * np.exp2(rng.integers(lo, hi + 1, shape))
    return np.asarray(fpsim.round(values, fmt, saturate=True), dtype=np.float64)


def _subnormals(rng: np.random.Generator, fmt: str, shape: tuple[int, ...]) -> np.ndarray:
    t, emin, _ = _limits(fmt)
    sign = np.where(rng.random(shape) < 0.5, -1.0, 1.0)
    return sign * rng.integers(1, 1 << t, shape) * 2.0 ** (emin - t)


def _products(rng: np.random.Generator, instr: Probe, sa: tuple[int, ...],
              sb: tuple[int, ...], lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """A and B whose products have exponents near [lo, hi] (as near as the formats'
    ranges allow, subnormals included)."""
    out = []
    for fmt, shape, share in ((instr.a, sa, 0.5), (instr.b, sb, 0.5)):
        _, emin, emax = _limits(fmt)
        t = as_format(fmt).man_bits
        e = rng.integers(int(lo * share), int(hi * share) + 1, shape)
        e = np.clip(e, emin - t, emax)
        frac = rng.integers(0, 1 << t, shape) / 2.0**t
        sign = np.where(rng.random(shape) < 0.5, -1.0, 1.0)
        out.append(np.asarray(fpsim.round(sign * (1 + frac) * np.exp2(e), fmt), np.float64))
    return out[0], out[1]


def c_format(instr: Probe) -> str | Format:
    """The format C is drawn in: D's, except e8m13 for the fp8 instructions, so the
    13-bit models (MMA-Sim's Ada and Hopper fp8 rules) can take it as their c."""
    return E8M13 if instr.a.startswith("fp8") and instr.cd == "fp32" else instr.cd


def draw(rng: np.random.Generator, cls: str, instr: Probe,
         problems: int = PROBLEMS) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Inputs of one class for ``instr``: A (P, M, K), B (P, K, N), C (P, M, N) as
    float64 values of its formats (tf32 values for tf32).

    Examples
    --------
    >>> import numpy as np
    >>> from fpsim.compare.mma import INSTRUCTIONS, draw
    >>> a, b, c = draw(np.random.default_rng(0), "layout", INSTRUCTIONS["f32.f16.f16.f32"], 2)
    >>> a.shape, b.shape, c.shape, bool((a == np.round(a)).all())
    ((2, 16, 16), (2, 16, 8), (2, 16, 8), True)
    """
    if cls not in CLASSES:
        raise ValueError(f"unknown class of input {cls!r}; the classes are {CLASSES}")
    m, n, k = instr.mnk
    sa, sb, sc = (problems, m, k), (problems, k, n), (problems, m, n)
    ta, emin_a, emax_a = _limits(instr.a)
    tb, emin_b, emax_b = _limits(instr.b)
    cfmt = c_format(instr)
    _, emin_c, emax_c = _limits(instr.cd)
    a, b = _values(rng, instr.a, sa, -3, 3), _values(rng, instr.b, sb, -3, 3)
    c = _values(rng, instr.cd, sc, -3, 3)
    c_sign = np.where(rng.random(sc) < 0.5, -1.0, 1.0)
    if cls == "layout":  # small integers: every instruction's result is exact
        a = rng.integers(-4, 5, sa).astype(np.float64)
        b = rng.integers(-4, 5, sb).astype(np.float64)
        c = rng.integers(-8, 9, sc).astype(np.float64)
    elif cls == "wide":
        a = _values(rng, instr.a, sa, emin_a, emax_a)
        b = _values(rng, instr.b, sb, emin_b, emax_b)
        c = _values(rng, instr.cd, sc, emin_c, emax_c)
    elif cls == "cancel":  # the second half of K cancels the first; some terms scaled down
        h = k // 2
        a[:, :, h:], b[:, h:, :] = -a[:, :, :h], b[:, :h, :]
        a[:, :, ::5] = np.asarray(fpsim.round(a[:, :, ::5] * 2.0**-6, instr.a), np.float64)
        c = np.where(rng.random(sc) < 0.5, 0.0, c * 2.0**-8)
    elif cls == "subnormal":
        a = np.where(rng.random(sa) < 0.5, _subnormals(rng, instr.a, sa),
                     _values(rng, instr.a, sa, emin_a, emin_a + 3))
        b = np.where(rng.random(sb) < 0.3, _subnormals(rng, instr.b, sb),
                     _values(rng, instr.b, sb, -2, 2))
        c = np.where(rng.random(sc) < 0.5, _subnormals(rng, instr.cd, sc),
                     _values(rng, instr.cd, sc, emin_c, emin_c + 3))
    elif cls == "nonfinite":
        for x, fmt in ((a, instr.a), (b, instr.b), (c, instr.cd)):
            special = [np.inf, -np.inf, np.nan] if as_format(fmt).infinities else [np.nan]
            hit = rng.random(x.shape) < 0.02
            x[hit] = rng.choice(special, int(hit.sum()))
    elif cls == "zero factors":  # 0 times the largest value, other products small
        zero = rng.random(sa) < 0.3
        a = np.where(zero, 0.0, _values(rng, instr.a, sa, emin_a // 2, emin_a // 4))
        big = np.exp2(emax_b) * np.where(rng.random(sb) < 0.5, -1.0, 1.0)
        b = np.where(rng.random(sb) < 0.5, big, _values(rng, instr.b, sb, emin_b // 2,
                                                         emin_b // 4))
        c = np.where(rng.random(sc) < 0.6, 0.0, c * 2.0 ** (emin_c // 2))
        if instr.a in ("bf16", "tf32"):  # issue 31's example, in problem 0, D[0, 0]
            a[0, 0, :], b[0, :, 0], c[0, 0, 0] = 0.0, 0.0, 0.0
            a[0, 0, 1], b[0, 0, 0] = float.fromhex("0x1.52p-9"), float.fromhex("0x1.fep+127")
            b[0, 1, 0] = float.fromhex("0x1.1ep-15")
    elif cls == "exponent floor":  # c = 0 and every product below 2**-126 (fp16 D: 2**-21)
        if instr.cd == "fp32":  # products 2**-150 .. 2**-135: kept on -133's grid, not -126's
            a, b = _products(rng, instr, sa, sb, -150, -135)
        else:  # a tie at half fp16's least subnormal, and products that break it or not
            a, b = _products(rng, instr, sa, sb, -60, -47)
            ea = max(-12, emin_a - ta)
            if -25 - ea >= emin_b - tb:  # the tie exists in these formats (not in fp8)
                a[:, :, 0], b[:, 0, :] = 2.0**ea, 2.0 ** (-25 - ea)
        c = 0.0 * c_sign
    elif cls == "overflow":  # same-sign products at the top of the range, c near it
        a = np.abs(_values(rng, instr.a, sa, emax_a - 2, emax_a))
        b = np.abs(_values(rng, instr.b, sb, emax_b - 2, emax_b))
        a *= np.where(rng.random((problems, m, 1)) < 0.5, -1.0, 1.0)
        top = float(np.asarray(fpsim.round(np.inf, instr.cd, saturate=True)))
        c = np.sign(a[:, :, :1]) * top * np.where(rng.random(sc) < 0.5, 1.0, 2.0**-3)
    elif cls == "zero sign":  # c = 0, negative sums below half the least subnormal of D
        top = -153 if instr.cd == "fp32" else -30
        a, b = _products(rng, instr, sa, sb, top - 6, top)
        a = -np.abs(a) * (rng.random(sa) < 2.0 / k)  # about two products a row
        b = np.abs(b)
        c = 0.0 * c_sign
    c = np.asarray(fpsim.round(c, cfmt, "toward_zero"), dtype=np.float64)
    return a, b, c


def encode(values: np.ndarray, fmt: str | Format) -> np.ndarray:
    """Encodings of ``fmt`` values (tf32 and e8m13 in fp32's 32 bits).

    Examples
    --------
    >>> from fpsim.compare.mma import decode, encode
    >>> bits = encode([1.0, -2.0], "tf32")
    >>> [hex(b) for b in bits], decode(bits, "tf32").tolist()
    (['0x3f800000', '0xc0000000'], [1.0, -2.0])
    """
    name = fmt if isinstance(fmt, str) else "fp32"
    bits: np.ndarray = fpsim.to_bits(values, "fp32" if name == "tf32" else name)
    return bits


def inputs(instr: Probe, seed: int = SEED,
           problems: int | None = None) -> dict[str, np.ndarray]:
    """Every class's inputs for ``instr``, as encodings: ``a`` (P, M, K), ``b`` (P, K, N),
    ``c`` (P, M, N) and ``cls`` (P,), the class of each problem (``problems`` a class:
    by default as many as make ``PROBLEMS`` problems of 16 rows)."""
    if problems is None:
        problems = max(1, PROBLEMS * 16 // instr.mnk[0])
    rng = np.random.default_rng([seed, *map(ord, instr.key)])
    parts = [draw(rng, cls, instr, problems) for cls in CLASSES]
    a, b, c = (np.concatenate([p[i] for p in parts]) for i in range(3))
    return {"a": encode(a, instr.a), "b": encode(b, instr.b), "c": encode(c, instr.cd),
            "cls": np.repeat(np.arange(len(CLASSES)), problems)}


def decode(bits: np.ndarray, fmt: str) -> np.ndarray:
    """Values (float64) of encodings of ``fmt`` (tf32 in fp32's 32 bits)."""
    return np.asarray(fpsim.from_bits(bits, "fp32" if fmt == "tf32" else fmt), np.float64)


def exact(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """A @ B + C of finite values, exactly (``fractions.Fraction``), as float64.

    Examples
    --------
    >>> import numpy as np
    >>> from fpsim.compare.mma import exact
    >>> exact(np.array([[[1.0, 2.0**-60]]]), np.array([[[1.0], [1.0]]]),
    ...       np.array([[[-1.0]]])).tolist()
    [[[8.673617379884035e-19]]]
    """
    p, m, k = a.shape
    n = b.shape[2]
    out = np.empty((p, m, n))
    for q in range(p):
        for i in range(m):
            for j in range(n):
                total = Fraction(c[q, i, j]) + sum(
                    (Fraction(a[q, i, t]) * Fraction(b[q, t, j]) for t in range(k)),
                    Fraction(0))
                out[q, i, j] = float(total)
    return out


# ---------------------------------------------------------------------------------------
# fpsim's models


def models(instr: Probe, preset: fpsim.hw.BlockFMA) -> dict[str, fpsim.hw.BlockFMA]:
    """fpsim's model of ``instr`` on the GPU of ``preset`` (first, key ``"preset"``: for
    ``wgmma`` and ``tcgen05.mma`` fp8 the GPU's fp8 preset, ``fpsim.compare.gpu.gemm_model``'s), the
    alternatives of the disagreements (for fp16 output the fp32 floor, fpsim's rule before
    the H100 probe of 2026-11-25), and for fp8 MMA-Sim's Hopper ``wgmma`` and Ada ``mma``
    rules as ``BlockFMA``s."""
    from fpsim.compare.gpu import gemm_model

    fp16_out = instr.cd == "fp16"
    wgmma_fp8 = gemm_model(instr.a, "fp16" if fp16_out else "fp32", preset) \
        if not instr.sync and instr.a.startswith("fp8") else None
    if wgmma_fp8 is not None:  # the GPU's fp8 preset (H100_FP8, H100_FP8_F16)
        base = wgmma_fp8.with_inputs(instr.a, instr.b)
    elif instr.a.startswith("fp8"):  # mma.sync: see hmma_pair for sm_90's lowering
        # Both fp8 formats are exact in fp16; a model reads one input format.
        fmt = instr.a if instr.a == instr.b else "fp16"
        base = preset.with_input(fmt)
        if fp16_out:
            base = dataclasses.replace(base, output="fp16", output_rounding="nearest_even")
    else:
        inputs, compute = {"fp16": ("fp16", "fp32"), "bf16": ("bf16", "fp32"),
                           "tf32": ("fp32", "tf32")}[instr.a]
        if instr.cd == "fp16":
            compute = "fp16"
        found = gemm_model(inputs, compute, preset)
        if found is None:
            return {}
        base = found
    floor = (f"exp_floor={preset.exp_floor} (the fp32 floor, fpsim's before 2026-11-25)"
             if fp16_out else "exp_floor=-126")
    out = {"preset": base,
           floor: dataclasses.replace(base, exp_floor=preset.exp_floor if fp16_out else -126),
           "overflow=saturate": dataclasses.replace(base, overflow="saturate"),
           "zero_sign=signed": dataclasses.replace(base, zero_sign="signed")}
    if instr.a.startswith("fp8"):
        tail = "fp16 nearest" if fp16_out else "e8m13"
        for label, block in ((f"block 32, F 13, {tail} (MMA-Sim's Hopper wgmma rule)", 32),
                             (f"block 16, F 13, {tail} (MMA-Sim's Ada mma rule)", 16)):
            out[label] = fpsim.hw.BlockFMA(
                f"fp8 block {block}", block=block, frac_bits=13,
                exp_floor=-21 if fp16_out else -133, input=instr.a,
                output="fp16" if fp16_out else E8M13,
                output_rounding="nearest_even" if fp16_out else "toward_zero",
                ).with_inputs(instr.a, instr.b)
    return out


# The alternative that each disagreement's class puts against the preset.
ALTERNATIVE = {"exponent floor": "exp_floor=", "overflow": "overflow=saturate",
               "zero sign": "zero_sign=signed"}


def emulate(model: fpsim.hw.BlockFMA, instr: Probe, data: dict[str, np.ndarray]
            ) -> np.ndarray:
    """``model``'s D for the probe's inputs, as encodings of D's format."""
    a, b = decode(data["a"], instr.a), decode(data["b"], instr.b)
    c = decode(data["c"], instr.cd)
    d = np.asarray(fpsim.matmul(a, b, c=c, model=model), dtype=np.float64)
    return encode(d, instr.cd)


# ---------------------------------------------------------------------------------------
# The GPU


class Prober:
    """The probes' kernels on a GPU, compiled once: the ``mma`` ones by CuPy (NVRTC), the
    ``wgmma`` ones by nvcc for ``sm_90a`` (NVRTC's target is the plain ``sm_90``) and the
    ``tcgen05.mma`` ones by nvcc for the Blackwell's own ``sm_100a`` or ``sm_103a``
    (compute capability 10.x only). ``reasons`` says why each probe left out is.

    Parameters
    ----------
    device : fpsim.compare.gpu.CupyDevice
        The GPU.
    """

    def __init__(self, device: Any) -> None:
        self.device = device
        self.reasons: dict[str, str] = {}
        xp = device.xp
        cc = tuple(device.capability)
        for i in INSTRUCTIONS.values():
            if i.wgmma and cc != (9, 0):
                self.reasons[i.key] = "wgmma needs sm_90a (compute capability 9.0)"
            elif cc < i.capability:
                self.reasons[i.key] = f"needs compute capability {i.capability}"
        for t in TCGEN05.values():
            if cc[0] != 10:
                self.reasons[t.key] = ("tcgen05.mma needs a Blackwell data-center GPU "
                                       "(compute capability 10.x: sm_100a, sm_103a)")
        mma = [i for i in INSTRUCTIONS.values() if not i.wgmma and i.key not in self.reasons]
        self.module = xp.RawModule(code=module_source(mma), options=("--std=c++17",))
        wg = [i for i in INSTRUCTIONS.values() if i.wgmma and i.key not in self.reasons]
        self.wg_module = self._nvcc(wg, module_source(wg), "sm_90a")
        tc = [t for t in TCGEN05.values() if t.key not in self.reasons]
        self.tc_module = self._nvcc(tc, "\n".join(tcgen05_source(t) for t in tc),
                                    f"sm_{cc[0]}{cc[1]}a")
        self.instructions: list[Probe] = [i for i in PROBES.values()
                                          if i.key not in self.reasons]

    def _nvcc(self, probes: list[Any], source: str, arch: str) -> Any:
        """The CuPy module of ``source`` compiled by nvcc for ``arch``, or None (no probes,
        or ``reasons`` says why not)."""
        import shutil
        import subprocess
        import tempfile

        if not probes:
            return None
        nvcc = shutil.which("nvcc")
        if nvcc is None:
            self.reasons.update({i.key: f"needs nvcc ({arch}) on PATH" for i in probes})
            return None
        held = tempfile.TemporaryDirectory()  # the cubin outlives the module's loading
        self._dirs = [*getattr(self, "_dirs", []), held]
        cu, cubin = Path(held.name, "probes.cu"), Path(held.name, "probes.cubin")
        cu.write_text(source)
        built = subprocess.run([str(nvcc), f"-arch={arch}", "-cubin", "-o", str(cubin),
                                str(cu)], capture_output=True, text=True)
        if built.returncode != 0:
            last = (built.stderr.strip().splitlines() or ["?"])[-1]
            self.reasons.update({i.key: f"nvcc failed: {last}" for i in probes})
            return None
        return self.device.xp.RawModule(path=str(cubin))

    def run(self, instr: Probe, data: dict[str, np.ndarray]) -> np.ndarray:
        """D (encodings of D's format, (P, M, N)) of ``instr`` on ``data``."""
        xp = self.device.xp
        if isinstance(instr, Tcgen05):
            a_image, b_image, c = (xp.asarray(v) for v in tcgen05_arguments(data))
            d = xp.zeros_like(c)
            assert self.tc_module is not None
            self.tc_module.get_function(instr.kernel)((data["a"].shape[0],), (128,),
                                                      (a_image, b_image, c, d))
            return tcgen05_result(xp.asnumpy(d), instr)
        b = smem_image(data["b"]) if instr.wgmma else fragments(data["b"], instr, "b")
        regs = [xp.asarray(v) for v in (fragments(data["a"], instr, "a"), b,
                                         fragments(data["c"], instr, "c"))]
        d = xp.zeros_like(regs[2])
        problems = data["a"].shape[0]
        module = self.wg_module if instr.wgmma else self.module
        assert module is not None
        threads = 128 if instr.wgmma else 32
        module.get_function(instr.kernel)((problems,), (threads,), (*regs, d))
        return unfragment(xp.asnumpy(d), instr)


def load_records(path: Path = RECORDS) -> dict[str, np.ndarray]:
    """MMA-Sim's recorded outputs (``tests/data/make_mma_probe_records.py``), or {}."""
    if not path.exists():
        return {}
    with np.load(path) as f:
        return {key: f[key] for key in f.files}


def mmasim_outputs(instr: Probe, data: dict[str, np.ndarray],
                   records: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """MMA-Sim's recorded D for these inputs, by its model's name ({} where the record
    is missing or was made for other inputs)."""
    key = instr.key
    if any(f"{key}/{x}" not in records or not np.array_equal(records[f"{key}/{x}"], data[x])
           for x in ("a", "b", "c")):
        return {}
    prefix = f"{key}/mmasim "
    return {name[len(prefix):]: v for name, v in records.items() if name.startswith(prefix)}


@dataclasses.dataclass
class Result:
    """One instruction's probe: inputs, the hardware's D, and each candidate's D."""

    instr: Probe
    data: dict[str, np.ndarray]
    hardware: np.ndarray
    candidates: dict[str, np.ndarray]
    layout_ok: bool


def probe(prober: Prober, instr: Probe, preset: fpsim.hw.BlockFMA,
          records: dict[str, np.ndarray]) -> Result:
    """Run ``instr`` on its inputs and emulate it: a ``Result``."""
    data = inputs(instr)
    hardware = prober.run(instr, data)
    lay = data["cls"] == CLASSES.index("layout")
    expect = exact(*(decode(data[x][lay], f) for x, f in
                     (("a", instr.a), ("b", instr.b), ("c", instr.cd))))
    layout_ok = bool(np.array_equal(hardware[lay], encode(expect, instr.cd)))
    candidates = {f"fpsim {name}": emulate(model, instr, data)
                  for name, model in models(instr, preset).items()}
    if instr.a.startswith("fp8") and instr.sync:
        candidates["fpsim sm_90 lowering: 2 fp16 HMMA on k % 4 halves, then FADD c"] = \
            hmma_pair(instr, data, preset)
    candidates.update({f"MMA-Sim {name}": v
                       for name, v in mmasim_outputs(instr, data, records).items()})
    return Result(instr, data, hardware, candidates, layout_ok)


def share(emulated: np.ndarray, hardware: np.ndarray, fmt: str) -> float:
    """The share of bit-identical elements (any NaN the same as any other)."""
    return float(same(emulated, hardware, fmt).mean())


def same(x: np.ndarray, y: np.ndarray, fmt: str) -> np.ndarray:
    """Elementwise: the same encoding, or both NaN.

    Examples
    --------
    >>> import numpy as np
    >>> from fpsim.compare.mma import same
    >>> same(np.array([0x7FC00000, 0, 0]), np.array([0xFFC00001, 0x80000000, 0]),
    ...      "fp32").tolist()
    [True, False, True]
    """
    nan = np.isnan(decode(x, fmt)) & np.isnan(decode(y, fmt))
    result: np.ndarray = (x == y) | nan
    return result


def sided(result: Result, cls: str) -> str:
    """Which candidate the hardware sided with on the elements of ``cls`` where fpsim's
    preset and the other (the disagreement's alternative, and MMA-Sim) differ."""
    sel = result.data["cls"] == CLASSES.index(cls)
    fmt = result.instr.cd
    others = [n for n in result.candidates if n.startswith("MMA-Sim ")]
    if cls in ALTERNATIVE:
        others += [n for n in result.candidates if n.startswith(f"fpsim {ALTERNATIVE[cls]}")]
    preset = result.candidates["fpsim preset"][sel]
    hw = result.hardware[sel]
    said = []
    for name in others:
        other = result.candidates[name][sel]
        differ = ~same(preset, other, fmt)
        if differ.any():
            said.append(f"vs {name}: {int(differ.sum())} differ, hardware = preset "
                        f"{int(same(hw, preset, fmt)[differ].sum())}, = other "
                        f"{int(same(hw, other, fmt)[differ].sum())}")
    return "; ".join(said) or "-"


def hmma_pair(instr: Probe, data: dict[str, np.ndarray],
              preset: fpsim.hw.BlockFMA) -> np.ndarray:
    """D as sm_90's SASS computes ``mma.sync`` fp8 m16n8k32 (nvcc 13.0, ``-arch=sm_90a``):
    A and B converted to fp16 (F2FP), the products with ``k % 4 < 2`` added by one
    HMMA.16816.F32 from c = 0, those with ``k % 4 >= 2`` by a second chained on it, and
    C added last by FADD (fp32, nearest even): ``fpsim.hw.h100_fp8_mma``, each HMMA one
    block of fpsim's fp16 model of the GPU (``preset``)."""
    a, b = decode(data["a"], instr.a), decode(data["b"], instr.b)
    c = decode(data["c"], instr.cd)
    d = np.asarray(fpsim.hw.h100_fp8_mma(a, b, c=c, hmma=preset), dtype=np.float64)
    return encode(d, instr.cd)


def table(results: list[Result], device: str) -> str:
    """The report (markdown)."""
    lines = [f"# Instruction probes on {device}", "",
             "Share of bit-identical D elements (NaNs as one class); `sided with`: on the "
             "elements where the preset and the disagreement's alternative differ, how many "
             "the hardware matched of each.", ""]
    for r in results:
        fmt = r.instr.cd
        names = list(r.candidates)
        lines += [f"## `{r.instr.label}`", "",
                  f"Layout check (small integers against the exact product): "
                  f"{'passed' if r.layout_ok else 'FAILED: the numerics below are not read'}",
                  "", "| class | elements | " + " | ".join(names) + " | sided with |",
                  "| --- | --- | " + " | ".join("---" for _ in names) + " | --- |"]
        for ci, cls in enumerate(CLASSES):
            sel = r.data["cls"] == ci
            shares = [f"{share(r.candidates[n][sel], r.hardware[sel], fmt):.3f}"
                      for n in names]
            lines.append(f"| {cls} | {r.hardware[sel].size} | " + " | ".join(shares) +
                         f" | {sided(r, cls)} |")
        if r.instr.a in ("bf16", "tf32"):
            sel = np.flatnonzero(r.data["cls"] == CLASSES.index("zero factors"))[0]
            lines += ["", "Issue 31's zero-factor example (`0*0x1.fep+127 + "
                      "0x1.52p-9*0x1.1ep-15`, c = 0): the hardware gives "
                      f"0x{int(r.hardware[sel, 0, 0]):08x} (MMA-Sim January 2026: 0x33800000; "
                      "fpsim and MMA-Sim 2.1.1: 0x33bcce00)."]
        lines.append("")
    return "\n".join(lines)


def cases(device: Any, size: int = 0) -> Iterator[Case | Record]:
    """The probes as cases of ``fpsim compare --suite gpu`` (skipped without CuPy)."""
    if getattr(device.xp, "__name__", "") != "cupy":
        yield skipped("gpu mma probes", getattr(device, "name", "?"),
                      "the instruction probes need CuPy on a GPU")
        return
    prober = Prober(device)
    records = load_records()
    for instr in PROBES.values():
        if instr.key in prober.reasons:
            yield skipped(f"gpu {instr.label}", device.name, prober.reasons[instr.key])
            continue
        r = probe(prober, instr, device.preset, records)
        if not r.layout_ok:
            yield skipped(f"gpu {instr.label}", device.name,
                          "the fragment layout check failed: small integers gave inexact D")
            continue
        fmt = "fp32" if instr.cd == "fp32" else "fp16"
        unit = ("CTA" if isinstance(instr, Tcgen05) else "warpgroup" if instr.wgmma
                else "warp")
        yield Case(f"gpu {instr.label}", f"one {instr.shape} per {unit} on {device.name}",
                   f"fpsim preset {device.preset.name} and MMA-Sim 2.1.1 (recorded)", fmt,
                   decode(r.hardware, fmt),
                   {n: decode(v, fmt) for n, v in r.candidates.items()})


#: What the hardware record keeps of each instruction's probe.
RECORD_FIELDS = ("a", "b", "c", "cls", "hardware")
#: The versions the record keeps from a run's ``about``.
RECORD_VERSIONS = ("capability", "numpy", "cupy", "cuda_runtime", "cuda_driver", "seed",
                   "problems")


def hardware_record(arrays: dict[str, np.ndarray], meta: dict[str, str]
                    ) -> dict[str, np.ndarray]:
    """The part of a probe run that a test of the presets needs.

    Parameters
    ----------
    arrays : dict of str to numpy.ndarray
        A run's arrays (``mma_probes.npz``): ``"<types>/<field>"`` and ``"about"`` (JSON).
    meta : dict of str to str
        What the run's ``about`` lacks: ``"date"`` (required), and versions such as
        ``"driver"``, ``"nvcc"``, ``"python"`` (added to ``versions``).

    Returns
    -------
    dict of str to numpy.ndarray
        ``"<types>/<field>"`` for each instruction and field of ``RECORD_FIELDS``, and
        the strings ``"gpu"``, ``"date"`` and ``"versions"`` (JSON).

    Raises
    ------
    ValueError
        No ``"about"``, no date, an instruction whose record lacks a field, or one whose
        layout check failed.

    Examples
    --------
    >>> import json, numpy as np
    >>> from fpsim.compare.mma import hardware_record
    >>> run = {f"f32.f16.f16.f32/{x}": np.zeros(2) for x in ("a", "b", "c", "cls",
    ...                                                       "hardware", "fpsim preset")}
    >>> run["about"] = np.array(json.dumps({"gpu": "G", "numpy": "2", "layout_ok": {}}))
    >>> rec = hardware_record(run, {"date": "2026-11-25"})
    >>> [k for k in sorted(rec) if "/" not in k], json.loads(str(rec["versions"]))
    (['date', 'gpu', 'versions'], {'numpy': '2'})
    >>> sorted(k.split("/")[1] for k in rec if "/" in k)
    ['a', 'b', 'c', 'cls', 'hardware']
    """
    if "about" not in arrays:
        raise ValueError("the run's arrays have no 'about' (not an mma_probes.npz)")
    if not meta.get("date"):
        raise ValueError("the record needs the run's date (meta['date'])")
    about = json.loads(str(arrays["about"]))
    types = sorted({key.split("/")[0] for key in arrays if "/" in key})
    out: dict[str, np.ndarray] = {}
    for t in types:
        if not about.get("layout_ok", {}).get(t, True):
            raise ValueError(f"{t}: its layout check failed; its numerics are not a record")
        for field in RECORD_FIELDS:
            if f"{t}/{field}" not in arrays:
                raise ValueError(f"{t}: the run has no {field!r}")
            out[f"{t}/{field}"] = np.asarray(arrays[f"{t}/{field}"])
    versions = {k: about[k] for k in RECORD_VERSIONS if k in about}
    versions.update({k: v for k, v in meta.items() if k != "date"})
    out.update(gpu=np.array(str(about.get("gpu", "?"))), date=np.array(meta["date"]),
               versions=np.array(json.dumps(versions)))
    return out


def _trim(full: Path, record: Path, pairs: list[str]) -> int:
    """``--trim FULL --record FILE``: write a run's hardware record (no GPU needed)."""
    meta = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            print(f"fpsim.compare.mma: --meta takes KEY=VALUE, got {pair!r}", file=sys.stderr)
            return 2
        meta[key] = value
    with np.load(full) as f:
        arrays = {key: f[key] for key in f.files}
    try:
        rec: dict[str, Any] = dict(hardware_record(arrays, meta))
    except ValueError as exc:
        print(f"fpsim.compare.mma: {exc}", file=sys.stderr)
        return 2
    np.savez_compressed(record, **rec)
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python3 -m fpsim.compare.mma --out DIR``: run the probes, write the npz and md
    (and ``DIR/mma_record.npz``, the hardware record); ``--trim FULL --record FILE``:
    write the hardware record of an earlier run's npz."""
    from fpsim._optional import MissingDependency
    from fpsim.compare.gpu import NoGPU, find_device

    parser = argparse.ArgumentParser(prog="python3 -m fpsim.compare.mma",
                                     description="tensor-core instruction probes")
    parser.add_argument("--out", type=Path, help="the output folder")
    parser.add_argument("--backend", default="numpy", choices=("numpy", "numba", "cupy"),
                        help="fpsim's backend for the emulations (default numpy: they are "
                             "small, and it compiles nothing)")
    parser.add_argument("--trim", type=Path, help="an earlier run's mma_probes.npz: write "
                        "its hardware record to --record instead of running the probes")
    parser.add_argument("--record", type=Path, help="with --trim: the record's file")
    parser.add_argument("--meta", action="append", default=[], metavar="KEY=VALUE",
                        help="with --trim: the date (date=YYYY-MM-DD) and versions the "
                             "run's npz lacks (driver=..., nvcc=..., python=...)")
    args = parser.parse_args(argv)
    if args.trim is not None:
        if args.record is None:
            parser.error("--trim needs --record FILE")
        return _trim(args.trim, args.record, args.meta)
    if args.out is None:
        parser.error("--out DIR is required (or --trim FULL --record FILE)")
    try:
        device = find_device()
    except (NoGPU, MissingDependency) as exc:
        print(f"fpsim.compare.mma: {exc}", file=sys.stderr)
        return 2
    import cupy

    prober = Prober(device)
    records = load_records()
    with fpsim.backend(args.backend):
        results = [probe(prober, i, device.preset, records) for i in prober.instructions]
    args.out.mkdir(parents=True, exist_ok=True)
    arrays: dict[str, Any] = {}
    for r in results:
        key = r.instr.key
        arrays.update({f"{key}/{x}": v for x, v in r.data.items()})
        arrays[f"{key}/hardware"] = r.hardware
        arrays.update({f"{key}/{n}": v for n, v in r.candidates.items()})
    about = {"gpu": device.name, "capability": device.capability,
             "preset": device.preset.name, "numpy": np.__version__,
             "cupy": cupy.__version__, "cuda_runtime": cupy.cuda.runtime.runtimeGetVersion(),
             "cuda_driver": cupy.cuda.runtime.driverGetVersion(),
             "instructions": [r.instr.label for r in results], "classes": CLASSES,
             "layout_ok": {r.instr.key: r.layout_ok for r in results},
             "skipped": {PROBES[t].label: why for t, why in prober.reasons.items()},
             "mmasim_records": RECORDS.exists(), "seed": SEED, "problems": PROBLEMS,
             "fpsim_backend": args.backend}
    arrays["about"] = np.array(json.dumps(about))
    np.savez_compressed(args.out / "mma_probes.npz", **arrays)
    import datetime
    import platform

    date = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    rec: dict[str, Any] = dict(hardware_record(
        arrays, {"date": date, "python": platform.python_version()}))
    np.savez_compressed(args.out / "mma_record.npz", **rec)
    (args.out / "mma_probes.md").write_text(table(results, device.name))
    print(table(results, device.name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
