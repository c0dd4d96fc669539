"""Berkeley TestFloat conformance vectors: reader and runner for fpsim.

The vectors are gzip text files ``<function>.<rounding>.txt.gz`` (or ``<function>.txt.gz``),
one case a line, ``<operands> <result> <flags>``, all hexadecimal bit patterns. See
``../shared/testfloat/README.md``. Only fpsim's public API is used.

Command line (what CI runs)::

    python tests/testfloat.py [DIR] [--backend NAME]

prints a table per file and a last line ``N passed, M failed`` (files); the exit status is 1 if
any file fails and 2 if the vector folder is missing.
"""

from __future__ import annotations

import argparse
import gzip
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ENV_VAR = "FPSIM_TESTFLOAT_DIR"
REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DIR = REPO_ROOT.parent / "shared" / "testfloat"
MAX_EXAMPLES = 10

# TestFloat rounding suffix -> fpsim rounding name.
ROUNDINGS = {
    "near_even": "nearest_even",
    "near_maxMag": "nearest_away",
    "minMag": "toward_zero",
    "min": "down",
    "max": "up",
    "odd": "odd",
}

# TestFloat type prefix -> (fpsim format name, exponent bits, fraction bits, bit-pattern dtype).
TYPES: dict[str, tuple[str, int, int, type[np.unsignedinteger]]] = {
    "f16": ("fp16", 5, 10, np.uint16),
    "bf16": ("bf16", 8, 7, np.uint16),
    "f32": ("fp32", 8, 23, np.uint32),
    "f64": ("fp64", 11, 52, np.uint64),
}

# TestFloat operation -> (fpsim function, number of operands).
OPS = {
    "add": ("add", 2),
    "sub": ("sub", 2),
    "mul": ("mul", 2),
    "div": ("div", 2),
    "sqrt": ("sqrt", 1),
    "mulAdd": ("fma", 3),
}

# The flags TestFloat knows: inexact, underflow, overflow, divide-by-zero, invalid. fpsim's
# extra ABSORBED flag (32) is not an IEEE flag and is masked off before comparing.
IEEE_FLAGS = 0x1F

_HEX_LUT = np.full(256, 255, dtype=np.uint8)
for _i, _c in enumerate(b"0123456789abcdef"):
    _HEX_LUT[_c] = _i
    _HEX_LUT[bytes([_c]).upper()[0]] = _i


@dataclass(frozen=True)
class Signature:
    """What a TestFloat function computes."""

    function: str
    kind: str  # "op" (arithmetic), "convert" (rounding conversion) or "widen" (exact)
    op: str | None  # fpsim function name for kind "op"
    operand_types: tuple[str, ...]
    result_type: str


@dataclass
class Vectors:
    """The parsed cases of one vector file."""

    name: str
    signature: Signature
    rounding: str | None  # fpsim rounding name; None for exact widenings
    operands: tuple[np.ndarray, ...]
    expected: np.ndarray
    flags: np.ndarray

    def __len__(self) -> int:
        return len(self.expected)


@dataclass
class FileResult:
    """Outcome of running one vector file through fpsim."""

    name: str
    cases: int = 0
    value_mismatches: int = 0
    flag_mismatches: int = 0
    skipped: int = 0  # cases whose flags were not compared (signalling-NaN operand)
    examples: list[dict[str, str]] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None and self.value_mismatches == 0 and self.flag_mismatches == 0

    def describe(self) -> str:
        """Human-readable summary with the first mismatching cases."""
        if self.error is not None:
            return f"{self.name}: error: {self.error}"
        lines = [
            f"{self.name}: {self.cases} cases, {self.value_mismatches} value mismatches, "
            f"{self.flag_mismatches} flag mismatches, {self.skipped} flags skipped"
        ]
        for ex in self.examples:
            lines.append(
                f"  [{ex['index']}] {ex['operands']} -> expected {ex['expected']} "
                f"flags {ex['expected_flags']}, got {ex['got']} flags {ex['got_flags']} "
                f"({ex['kind']})"
            )
        return "\n".join(lines)


def find_vector_dir(path: str | os.PathLike[str] | None = None) -> Path | None:
    """The vector folder: `path`, else $FPSIM_TESTFLOAT_DIR, else <repo>/../shared/testfloat."""
    if path is None:
        path = os.environ.get(ENV_VAR) or DEFAULT_DIR
    p = Path(path)
    return p if p.is_dir() else None


def list_vector_files(directory: str | os.PathLike[str]) -> list[Path]:
    """All ``*.txt.gz`` vector files in `directory`, sorted by name."""
    return sorted(Path(directory).glob("*.txt.gz"))


def split_name(name: str) -> tuple[str, str | None]:
    """``'f16_add.near_even.txt.gz'`` -> ``('f16_add', 'nearest_even')``; no suffix -> None."""
    base = Path(name).name.removesuffix(".gz").removesuffix(".txt")
    function, _, suffix = base.partition(".")
    if not suffix:
        return function, None
    if suffix not in ROUNDINGS:
        raise ValueError(f"unknown rounding suffix {suffix!r} in {name!r}")
    return function, ROUNDINGS[suffix]


def signature(function: str) -> Signature:
    """Operand and result types of a TestFloat function name."""
    if "_to_" in function:
        src, dst = function.split("_to_")
        if src not in TYPES or dst not in TYPES:
            raise ValueError(f"unsupported conversion {function!r}")
        widen = TYPES[dst][1] >= TYPES[src][1] and TYPES[dst][2] >= TYPES[src][2]
        return Signature(function, "widen" if widen else "convert", None, (src,), dst)
    prefix, _, op = function.partition("_")
    if prefix not in TYPES or op not in OPS:
        raise ValueError(f"unsupported function {function!r}")
    name, arity = OPS[op]
    return Signature(function, "op", name, (prefix,) * arity, prefix)


def parse_text(data: bytes) -> np.ndarray:
    """Parse whitespace-separated hex columns into an (n, columns) uint64 array."""
    lines_end = data.find(b"\n")
    first = data if lines_end < 0 else data[:lines_end]
    words = first.split()
    if not words:
        if data.strip():
            raise ValueError("vector file starts with an empty line")
        return np.zeros((0, 0), dtype=np.uint64)
    fast = _parse_fixed_width(data, first, words)
    return fast if fast is not None else _parse_tokens(data, len(words))


def _parse_fixed_width(data: bytes, first: bytes, words: list[bytes]) -> np.ndarray | None:
    # Every TestFloat line has the same layout (zero-padded hex, single spaces), so the file is
    # a byte matrix and the hex digits can be decoded column by column. None: layout differs.
    if not data.endswith(b"\n"):
        data += b"\n"
    width = len(first) + 1
    if len(data) % width:
        return None
    rows = np.frombuffer(data, dtype=np.uint8).reshape(-1, width)
    if not (rows[:, -1] == ord("\n")).all():
        return None
    out = np.empty((len(rows), len(words)), dtype=np.uint64)
    start = 0
    for j, w in enumerate(words):
        if len(w) > 16:
            return None
        end = start + len(w)
        if end < width - 1 and not (rows[:, end] == ord(" ")).all():
            return None
        digits = _HEX_LUT[rows[:, start:end]]
        if (digits == 255).any():
            return None
        acc = np.zeros(len(rows), dtype=np.uint64)
        for k in range(len(w)):
            acc = (acc << np.uint64(4)) | digits[:, k]
        out[:, j] = acc
        start = end + 1
    if start != width:
        return None
    return out


def _parse_tokens(data: bytes, columns: int) -> np.ndarray:
    rows = [line.split() for line in data.splitlines() if line.strip()]
    for i, r in enumerate(rows):
        if len(r) != columns:
            raise ValueError(f"line {i + 1}: expected {columns} fields, got {len(r)}")
    flat = [int(w, 16) for r in rows for w in r]
    return np.array(flat, dtype=np.uint64).reshape(len(rows), columns)


def read_vectors(path: str | os.PathLike[str]) -> Vectors:
    """Read and parse one gzip vector file into typed bit-pattern arrays."""
    path = Path(path)
    function, rounding = split_name(path.name)
    sig = signature(function)
    with gzip.open(path, "rb") as f:
        table = parse_text(f.read())
    ncols = len(sig.operand_types) + 2
    if table.size == 0:
        table = np.zeros((0, ncols), dtype=np.uint64)
    if table.shape[1] != ncols:
        raise ValueError(f"{path.name}: expected {ncols} columns, got {table.shape[1]}")
    operands = tuple(table[:, i].astype(TYPES[t][3]) for i, t in enumerate(sig.operand_types))
    return Vectors(
        name=path.name,
        signature=sig,
        rounding=rounding,
        operands=operands,
        expected=table[:, -2].astype(TYPES[sig.result_type][3]),
        flags=table[:, -1].astype(np.uint8),
    )


def is_nan_bits(bits: np.ndarray, type_name: str) -> np.ndarray:
    """True where `bits` is a NaN pattern of the TestFloat type."""
    _, e, m, _ = TYPES[type_name]
    b = bits.astype(np.uint64)
    exp = (b >> np.uint64(m)) & np.uint64((1 << e) - 1)
    frac = b & np.uint64((1 << m) - 1)
    return (exp == (1 << e) - 1) & (frac != 0)


def is_snan_bits(bits: np.ndarray, type_name: str) -> np.ndarray:
    """True where `bits` is a signalling NaN (top fraction bit clear)."""
    m = TYPES[type_name][2]
    quiet = (bits.astype(np.uint64) >> np.uint64(m - 1)) & np.uint64(1)
    return is_nan_bits(bits, type_name) & (quiet == 0)


def _hex(value: int, type_name: str) -> str:
    return f"{int(value):0{(1 + TYPES[type_name][1] + TYPES[type_name][2]) // 4}X}"


def compare(
    vec: Vectors, got: np.ndarray, got_flags: np.ndarray, max_examples: int = MAX_EXAMPLES
) -> FileResult:
    """Compare result bits and flags against the expected ones (any NaN matches any NaN)."""
    sig = vec.signature
    got = np.asarray(got).astype(vec.expected.dtype).reshape(vec.expected.shape)
    got_flags = np.asarray(got_flags).astype(np.uint8).reshape(vec.flags.shape) & IEEE_FLAGS
    exp_nan = is_nan_bits(vec.expected, sig.result_type)
    value_bad = np.where(exp_nan, ~is_nan_bits(got, sig.result_type), got != vec.expected)
    snan = np.zeros(len(vec), dtype=bool)
    for ops, t in zip(vec.operands, sig.operand_types, strict=True):
        snan |= is_snan_bits(ops, t)
    flag_bad = (got_flags != vec.flags) & ~snan
    result = FileResult(
        name=vec.name,
        cases=len(vec),
        value_mismatches=int(value_bad.sum()),
        flag_mismatches=int(flag_bad.sum()),
        skipped=int(snan.sum()),
    )
    for i in np.flatnonzero(value_bad | flag_bad)[:max_examples]:
        kind = "+".join(k for k, bad in (("value", value_bad[i]), ("flags", flag_bad[i])) if bad)
        result.examples.append(
            {
                "index": str(i),
                "operands": " ".join(
                    _hex(o[i], t) for o, t in zip(vec.operands, sig.operand_types, strict=True)
                ),
                "expected": _hex(vec.expected[i], sig.result_type),
                "got": _hex(got[i], sig.result_type),
                "expected_flags": f"{int(vec.flags[i]):02X}",
                "got_flags": f"{int(got_flags[i]):02X}",
                "kind": kind,
            }
        )
    return result


def compute(vec: Vectors) -> tuple[np.ndarray, np.ndarray]:
    """Run the cases through fpsim (current backend): result bits and flags."""
    import fpsim

    sig = vec.signature
    out_fmt = TYPES[sig.result_type][0]
    if sig.kind == "op":
        args = [
            fpsim.from_bits(b, TYPES[t][0])
            for b, t in zip(vec.operands, sig.operand_types, strict=True)
        ]
        fn = getattr(fpsim, sig.op)
        res, flags = fn(*args, out_fmt, rounding=vec.rounding, flags=True)
    elif sig.kind == "convert":
        src = sig.operand_types[0]
        view = {"f32": np.float32, "f64": np.float64}.get(src)
        if view is None:
            x = fpsim.from_bits(vec.operands[0], TYPES[src][0])
        else:
            # As a user holds them: binary32 sources are float32 arrays (the Numba
            # backend rounds those on the binary32 encoding).
            x = vec.operands[0].view(view)
        res, flags = fpsim.round(x, out_fmt, rounding=vec.rounding, flags=True)
    else:
        # Exact widening: decode in the narrow format, encode in the wide one; no flags.
        res = fpsim.from_bits(vec.operands[0], TYPES[sig.operand_types[0]][0])
        flags = np.zeros(len(vec), dtype=np.uint8)
    return np.asarray(fpsim.to_bits(res, out_fmt)), np.asarray(flags)


def run_vectors(vec: Vectors, max_examples: int = MAX_EXAMPLES) -> FileResult:
    """Run one parsed vector file through fpsim and compare."""
    t0 = time.perf_counter()
    got, got_flags = compute(vec)
    result = compare(vec, got, got_flags, max_examples)
    result.seconds = time.perf_counter() - t0
    return result


def run_file(path: str | os.PathLike[str], max_examples: int = MAX_EXAMPLES) -> FileResult:
    """Read and run one vector file; a failure to parse or compute is reported as an error."""
    t0 = time.perf_counter()
    try:
        result = run_vectors(read_vectors(path), max_examples)
    except Exception as exc:  # reported per file; the run goes on
        result = FileResult(name=Path(path).name, error=f"{type(exc).__name__}: {exc}")
    result.seconds = time.perf_counter() - t0
    return result


def main(argv: list[str] | None = None) -> int:
    """Run every vector file, print a table and ``N passed, M failed``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "dir", nargs="?", help=f"vector folder (default: ${ENV_VAR} or <repo>/../shared/testfloat)"
    )
    parser.add_argument("--backend", help="fpsim backend (default: fpsim's default)")
    parser.add_argument("-k", dest="pattern", help="only files whose name contains this")
    args = parser.parse_args(argv)

    directory = find_vector_dir(args.dir)
    if directory is None:
        where = args.dir or os.environ.get(ENV_VAR) or DEFAULT_DIR
        print(f"TestFloat vector folder not found: {where} (set {ENV_VAR})", file=sys.stderr)
        return 2
    files = [p for p in list_vector_files(directory) if not args.pattern or args.pattern in p.name]
    if not files:
        print(f"no *.txt.gz vector files in {directory}", file=sys.stderr)
        return 2

    try:
        import fpsim
    except ImportError:  # run from a checkout without installing
        sys.path.insert(0, str(REPO_ROOT))
        import fpsim
    if args.backend:
        fpsim.set_backend(args.backend)

    header = f"{'file':<34} {'cases':>8} {'bad value':>10} {'bad flags':>10} {'skipped':>8}"
    print(header + f" {'seconds':>8}")
    print("-" * (len(header) + 9))
    results = []
    t0 = time.perf_counter()
    for path in files:
        r = run_file(path)
        results.append(r)
        status = "" if r.ok else ("  ERROR" if r.error else "  FAIL")
        print(
            f"{r.name.removesuffix('.txt.gz'):<34} {r.cases:>8} {r.value_mismatches:>10} "
            f"{r.flag_mismatches:>10} {r.skipped:>8} {r.seconds:>8.2f}{status}",
            flush=True,
        )
    failed = [r for r in results if not r.ok]
    if failed:
        print("\nmismatches (operands -> expected / got, hex):")
        for r in failed:
            print(r.describe())
    total = sum(r.cases for r in results)
    print(f"\n{total} cases in {time.perf_counter() - t0:.1f} s")
    print(f"{len(results) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
