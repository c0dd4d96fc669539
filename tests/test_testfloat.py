"""IEEE 754 conformance: Berkeley TestFloat vectors, on every CPU backend.

The vectors live outside the repository (``$FPSIM_TESTFLOAT_DIR``, else
``<repo>/../shared/testfloat``); without them the conformance tests skip.
"""

from __future__ import annotations

import functools
import gzip
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest


def _load_harness():
    # tests/ is not a package; load the harness by path so any pytest import mode works.
    name = "fpsim_testfloat_harness"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, Path(__file__).with_name("testfloat.py")
        )
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up while executing
        spec.loader.exec_module(module)
    return sys.modules[name]


tf = _load_harness()

VECTOR_DIR = tf.find_vector_dir()
VECTOR_FILES = tf.list_vector_files(VECTOR_DIR) if VECTOR_DIR else []
MISSING = (
    f"TestFloat vectors not found: set {tf.ENV_VAR} to the folder of *.txt.gz files "
    f"(default {tf.DEFAULT_DIR})"
)


@functools.cache
def _vectors(name: str):
    """Parsed once per session, shared by both backends."""
    return tf.read_vectors(VECTOR_DIR / name)


@pytest.mark.parametrize(
    "name",
    [pytest.param(p.name, id=p.name.removesuffix(".txt.gz")) for p in VECTOR_FILES]
    or [pytest.param(None, id="vectors-missing", marks=pytest.mark.skip(reason=MISSING))],
)
def test_testfloat_vectors(name: str, backend_name: str) -> None:
    result = tf.run_vectors(_vectors(name))
    assert result.cases > 0
    assert result.value_mismatches == 0 and result.flag_mismatches == 0, (
        f"[{backend_name}] " + result.describe()
    )


# --- harness self-tests (need no vectors) ---------------------------------------------------


def _write_gz(path: Path, text: str) -> Path:
    with gzip.open(path, "wb") as f:
        f.write(text.encode())
    return path


def test_parse_two_line_file(tmp_path: Path) -> None:
    p = _write_gz(tmp_path / "f16_add.near_even.txt.gz", "87FF E850 E850 01\n0000 857f 857F 00\n")
    v = tf.read_vectors(p)
    assert v.signature.op == "add" and v.rounding == "nearest_even" and len(v) == 2
    assert [o.dtype for o in v.operands] == [np.uint16, np.uint16]
    assert v.operands[0].tolist() == [0x87FF, 0x0000]
    assert v.operands[1].tolist() == [0xE850, 0x857F]
    assert v.expected.tolist() == [0xE850, 0x857F] and v.expected.dtype == np.uint16
    assert v.flags.tolist() == [1, 0] and v.flags.dtype == np.uint8


def test_parse_wide_and_irregular_layouts(tmp_path: Path) -> None:
    text = "FFF0000000000001 7FC00000 10\nB68FFFF8000000FF 80000000 03\n"
    v = tf.read_vectors(_write_gz(tmp_path / "f64_to_f32.min.txt.gz", text))
    assert v.signature.kind == "convert" and v.rounding == "down"
    assert v.operands[0].dtype == np.uint64
    assert v.operands[0].tolist() == [0xFFF0000000000001, 0xB68FFFF8000000FF]
    assert v.expected.tolist() == [0x7FC00000, 0x80000000] and v.flags.tolist() == [16, 3]
    # Unpadded fields, CRLF and extra blanks take the slow path and give the same numbers.
    ragged = "FFF0000000000001  7FC00000 10\r\nB68FFFF8000000FF 80000000 3\r\n"
    w = tf.read_vectors(_write_gz(tmp_path / "f64_to_f32.min.txt.gz", ragged))
    assert w.operands[0].tolist() == v.operands[0].tolist()
    assert w.expected.tolist() == v.expected.tolist() and w.flags.tolist() == v.flags.tolist()


def test_parse_rejects_bad_input(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        tf.read_vectors(_write_gz(tmp_path / "f16_sqrt.max.txt.gz", "3C00 3C00 00\n3C00 3C00\n"))
    with pytest.raises(ValueError):
        tf.read_vectors(_write_gz(tmp_path / "f16_sqrt.max.txt.gz", "3C00 3C00 00 00\n"))
    with pytest.raises(ValueError):
        tf.read_vectors(_write_gz(tmp_path / "f16_sqrt.max.txt.gz", "3C0G 3C00 00\n"))
    with pytest.raises(ValueError):
        tf.split_name("f16_add.nearest.txt.gz")
    with pytest.raises(ValueError):
        tf.signature("f16_rem")


def test_names_and_signatures() -> None:
    assert tf.split_name("f16_mulAdd.near_maxMag.txt.gz") == ("f16_mulAdd", "nearest_away")
    assert tf.split_name("f16_to_f32.txt.gz") == ("f16_to_f32", None)
    assert [tf.split_name(f"x.{s}.txt.gz")[1] for s in ("minMag", "min", "max", "odd")] == [
        "toward_zero",
        "down",
        "up",
        "odd",
    ]
    fma = tf.signature("f32_mulAdd")
    assert (fma.kind, fma.op, fma.operand_types, fma.result_type) == (
        "op",
        "fma",
        ("f32",) * 3,
        "f32",
    )
    assert tf.signature("bf16_to_f32").kind == "widen"
    assert tf.signature("f32_to_bf16").kind == "convert"
    assert tf.signature("f64_to_f16").result_type == "f16"


def test_compare_nan_and_signalling_rules(tmp_path: Path) -> None:
    # 7D00 is a signalling NaN (flags skipped), 7E00 a quiet one; 7C00 is +inf, not a NaN.
    text = "7D00 3C00 7E00 10\n7E00 3C00 7E00 00\n3C00 3C00 4000 00\n3C00 7C00 7C00 00\n"
    v = tf.read_vectors(_write_gz(tmp_path / "f16_add.near_even.txt.gz", text))
    got = np.array([0x7FFF, 0xFE01, 0x4000, 0x7C00], dtype=np.uint16)
    r = tf.compare(v, got, np.array([0, 0, 0x20, 0], dtype=np.uint8))  # ABSORBED is ignored
    assert (r.cases, r.value_mismatches, r.flag_mismatches, r.skipped) == (4, 0, 0, 1) and r.ok
    got = np.array([0x3C00, 0x7E00, 0x4001, 0x7C01], dtype=np.uint16)
    r = tf.compare(v, got, np.array([0, 1, 0, 0], dtype=np.uint8))
    assert (r.value_mismatches, r.flag_mismatches, r.skipped) == (3, 1, 1) and not r.ok
    assert [e["kind"] for e in r.examples] == ["value", "flags", "value", "value"]
    assert r.examples[2] == {
        "index": "2",
        "operands": "3C00 3C00",
        "expected": "4000",
        "got": "4001",
        "expected_flags": "00",
        "got_flags": "00",
        "kind": "value",
    }
    assert "4001" in r.describe()
    assert len(tf.compare(v, got, np.zeros(4, np.uint8), max_examples=2).examples) == 2


def test_vector_dir_lookup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(tf.ENV_VAR, str(tmp_path))
    assert tf.find_vector_dir() == tmp_path
    monkeypatch.setenv(tf.ENV_VAR, str(tmp_path / "absent"))
    assert tf.find_vector_dir() is None
    assert tf.main([str(tmp_path / "absent")]) == 2
    assert tf.main([str(tmp_path)]) == 2  # no vector files
