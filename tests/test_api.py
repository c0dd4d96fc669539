"""Input handling, errors, dtypes, backends and hand-worked values of the public API."""

import numpy as np
import pytest

import fpsim
from fpsim import ABSORBED, DIVBYZERO, INEXACT, INVALID, OVERFLOW, UNDERFLOW

# --- input handling -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad, message",
    [
        (np.array([2**53 + 1]), "not exactly representable"),
        (np.array([2**64 - 1], dtype=np.uint64), "not exactly representable"),
        (np.array([1 + 2j]), "complex"),
        (np.array([1.0], dtype=object), "dtype object"),
        (np.array([True]), "dtype bool"),
        (True, "boolean"),
        ("1.0", "dtype <U3"),
        (2**60 + 1, "not exactly representable"),
    ],
)
def test_bad_values_are_refused(bad, message):
    with pytest.raises(ValueError, match=message):
        fpsim.round(bad, "fp16")


def test_python_numbers_and_lists():
    assert fpsim.round(3, "fp16") == 3.0
    np.testing.assert_array_equal(fpsim.round([1, 0.1], "fp16"), [1.0, 0.0999755859375])
    assert fpsim.round([1, 2], "fp16").dtype == np.float64


def test_unknown_rounding_mode():
    with pytest.raises(ValueError, match="'nearest'"):
        fpsim.round(1.0, "fp16", "nearest")
    with pytest.raises(ValueError, match="unknown rounding mode"):
        fpsim.add(1.0, 1.0, "fp16", "round_half_up")


def test_shapes_that_do_not_broadcast():
    with pytest.raises(ValueError, match=r"a \(3,\), b \(2,\)"):
        fpsim.add(np.ones(3), np.ones(2), "fp16")


def test_unrepresentable_operand_named():
    with pytest.raises(ValueError, match=r"operand b=.*0\.1.*index \(1,\).*fp16"):
        fpsim.add(np.ones(2), np.array([1.0, 0.1]), "fp16")
    with pytest.raises(ValueError, match="operand c"):
        fpsim.fma(1.0, 1.0, 1e6, "fp16")
    with pytest.raises(ValueError, match="operand a"):
        fpsim.mul(np.inf, 1.0, "fp8_e4m3")


@pytest.mark.parametrize("size", [(1 << 17) + 3, (1 << 20) + 7])
def test_first_unrepresentable_in_large_arrays(backend_name, size):
    """Arrays large enough for the Numba backend's count before the search: the first bad
    element is the one named, wherever it lies; a clean array passes."""
    x = np.ones(size)
    fpsim.to_bits(x, "fp16")
    x[-1] = 0.1
    x[size - 5] = 1e6
    with pytest.raises(ValueError, match=rf"1000000\.0\) \(flat index {size - 5}\)"):
        fpsim.to_bits(x, "fp16")
    x[3] = np.float32(0.1)
    with pytest.raises(ValueError, match=r"flat index 3\)"):
        fpsim.to_bits(x, "fp16")


def test_arithmetic_precision_limit():
    with pytest.raises(ValueError, match="man_bits <= 29"):
        fpsim.add(1.0, 1.0, "fp64")
    assert fpsim.add(1.0, 2.0**-29, fpsim.Format(2, 29)) == 1.0 + 2.0**-29


@pytest.mark.parametrize("bad", [0, 54, 2.5, True])
def test_random_bits_validated(bad):
    with pytest.raises(ValueError, match="random_bits"):
        fpsim.round(0.1, "fp16", "stochastic", seed=1, random_bits=bad)


@pytest.mark.parametrize("bad", [-1, 1.5, "x"])
def test_seed_validated(bad):
    with pytest.raises(ValueError, match="seed"):
        fpsim.round(0.1, "fp16", "stochastic", seed=bad)


def test_unknown_backend():
    with pytest.raises(ValueError, match="'cuda'"):
        fpsim.set_backend("cuda")
    with pytest.raises(ValueError, match="unknown backend 3"):
        fpsim.set_backend(3)


def test_backend_context_restores():
    before = fpsim.get_backend_name()
    with fpsim.backend("numpy"):
        assert fpsim.get_backend_name() == "numpy"
    assert fpsim.get_backend_name() == before


# --- dtypes and shapes -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "dtype, fmt, expected",
    [
        (np.float16, "fp16", np.float16),
        (np.float16, "bf16", np.float32),
        (np.float32, "fp16", np.float32),
        (np.float32, "fp64", np.float64),
        (np.float64, "fp8_e4m3", np.float64),
        (np.float32, fpsim.Format(11, 10), np.float64),
    ],
)
def test_result_dtype(backend_name, dtype, fmt, expected):
    out = fpsim.round(np.ones(4, dtype=dtype), fmt)
    assert out.dtype == expected


def test_scalars_in_scalar_out(backend_name):
    r = fpsim.round(0.1, "fp16")
    assert isinstance(r, np.float64) and r == 0.0999755859375
    r, f = fpsim.add(1.0, 2.0**-11, "fp16", flags=True)
    assert isinstance(f, np.uint8) and r == 1.0


def test_broadcasting(backend_name):
    a = np.array([[1.0], [2.0]])
    b = np.array([0.5, 0.25, 0.125])
    out = fpsim.mul(a, b, "fp16")
    np.testing.assert_array_equal(out, a * b)
    assert out.shape == (2, 3)


def test_noncontiguous_input(backend_name):
    x = np.linspace(-3, 3, 40).reshape(4, 10)[:, ::3]
    np.testing.assert_array_equal(fpsim.round(x, "fp32"), x.astype(np.float32))


def test_empty(backend_name):
    assert fpsim.round(np.zeros((0, 3)), "fp16").shape == (0, 3)
    assert fpsim.add(np.zeros(0), np.zeros(0), "bf16").size == 0


# --- values worked out by hand ------------------------------------------------------------------

MODES = ["nearest_even", "nearest_away", "toward_zero", "up", "down", "odd"]


@pytest.mark.parametrize(
    "mode, positive, negative",
    [
        ("nearest_even", np.inf, -np.inf),
        ("nearest_away", np.inf, -np.inf),
        ("toward_zero", 65504.0, -65504.0),
        ("odd", 65504.0, -65504.0),
        ("up", np.inf, -65504.0),
        ("down", 65504.0, -np.inf),
    ],
)
def test_overflow_rules(backend_name, mode, positive, negative):
    out = fpsim.round(np.array([70000.0, -70000.0]), "fp16", mode)
    np.testing.assert_array_equal(out, [positive, negative])
    sat = fpsim.round(np.array([70000.0, -70000.0, np.inf]), "fp16", mode, saturate=True)
    np.testing.assert_array_equal(sat, [65504.0, -65504.0, 65504.0])


def test_overflow_threshold_is_after_rounding(backend_name):
    # 65519.99 rounds to 65504 with nearest; 65520 is the midpoint with 65536 and ties to even.
    np.testing.assert_array_equal(
        fpsim.round(np.array([65519.99, 65520.0]), "fp16"), [65504.0, np.inf]
    )


def test_e4m3_overflow_and_nan(backend_name):
    out = fpsim.round(np.array([448.0, 464.0, 465.0, 1e4, -1e4, np.inf]), "fp8_e4m3")
    np.testing.assert_array_equal(out[:2], [448.0, 448.0])
    assert np.isnan(out[2:]).all()
    sat = fpsim.round(np.array([465.0, -1e4, -np.inf]), "fp8_e4m3", saturate=True)
    np.testing.assert_array_equal(sat, [448.0, -448.0, -448.0])
    assert fpsim.round(1e4, "fp8_e4m3", "toward_zero") == 448.0


def test_subnormals_off(backend_name):
    tiny = 2.0**-20
    r, f = fpsim.round(np.array([tiny, -tiny]), "fp16", subnormals=False, flags=True)
    np.testing.assert_array_equal(r, [0.0, -0.0])
    assert np.signbit(r[1])
    r, f = fpsim.mul(2.0**-7, -(2.0**-8), "fp16", subnormals=False, flags=True)
    assert r == 0 and np.signbit(r) and f == INEXACT | UNDERFLOW
    # Operands below the smallest normal read as zero: 1 + subnormal is exact.
    r, f = fpsim.add(1.0, 2.0**-20, "fp16", "up", subnormals=False, flags=True)
    assert r == 1.0 and f == 0


@pytest.mark.parametrize(
    "op, args, fmt, mode, value, flags",
    [
        ("add", (1.0, 2.0**-11), "fp16", "nearest_even", 1.0, INEXACT | ABSORBED),
        ("add", (1.0, 2.0**-11), "fp16", "up", 1.0 + 2.0**-10, INEXACT),
        ("add", (1.0, -1.0), "fp16", "down", -0.0, 0),
        ("add", (-0.0, -0.0), "fp16", "nearest_even", -0.0, 0),
        ("sub", (np.inf, np.inf), "fp16", "nearest_even", np.nan, INVALID),
        ("div", (1.0, 0.0), "fp16", "nearest_even", np.inf, DIVBYZERO),
        ("div", (1.0, -0.0), "fp8_e4m3", "nearest_even", np.nan, DIVBYZERO),
        ("div", (0.0, 0.0), "bf16", "nearest_even", np.nan, INVALID),
        ("mul", (np.inf, 0.0), "fp32", "nearest_even", np.nan, INVALID),
        ("mul", (256.0, 256.0), "fp16", "nearest_even", np.inf, OVERFLOW | INEXACT),
        ("sqrt", (-1.0,), "fp16", "nearest_even", np.nan, INVALID),
        ("sqrt", (-0.0,), "fp16", "nearest_even", -0.0, 0),
        ("sqrt", (2.0,), "fp8_e4m3", "nearest_even", 1.375, INEXACT),
        ("fma", (np.inf, 0.0, np.nan), "fp16", "nearest_even", np.nan, INVALID),
        ("fma", (2.0**-12, 2.0**-12, 1.0), "fp16", "nearest_even", 1.0, INEXACT | ABSORBED),
        # Tininess after rounding: (1 - 2**-11) * 2**-14 is tiny though it rounds to 2**-14.
        ("mul", (1 - 2.0**-11, 2.0**-14), "fp16", "nearest_even", 2.0**-14, INEXACT | UNDERFLOW),
        # ... while 2**-14 - 2**-34 rounds up to 2**-14 at full precision too: not tiny.
        ("mul", (1 + 2.0**-10, 2.0**-14 - 2.0**-24), "fp16", "up", 2.0**-14, INEXACT),
        ("mul", (1 + 2.0**-10, 2.0**-14 - 2.0**-24), "fp16", "down", 2.0**-14 - 2.0**-24,
         INEXACT | UNDERFLOW),
    ],
)
def test_hand_worked(backend_name, op, args, fmt, mode, value, flags):
    r, f = getattr(fpsim, op)(*args, fmt, mode, flags=True)
    if np.isnan(value):
        assert np.isnan(r)
    else:
        assert r == value and np.signbit(r) == np.signbit(value)
    assert f == flags, fpsim.flags.describe(f)


def test_sum_of_4096_ones_in_fp16_stalls_at_2048(backend_name):
    s = 0.0
    for _ in range(4096):
        s = fpsim.add(s, 1.0, "fp16")
    assert s == 2048.0


# --- bits ---------------------------------------------------------------------------------------


def test_bits_known_patterns():
    assert fpsim.to_bits(1.0, "fp16") == 0x3C00
    assert fpsim.to_bits(-2.0, "bf16") == 0xC000
    assert fpsim.to_bits(448.0, "fp8_e4m3") == 0x7E
    assert fpsim.to_bits(np.nan, "fp8_e4m3") == 0x7F
    assert fpsim.to_bits(1.0, "tf32") == 0x1FC00
    assert fpsim.to_bits(np.array([1.0]), "tf32").dtype == np.uint32
    assert fpsim.from_bits(0x0001, "fp16") == 2.0**-24
    assert fpsim.from_bits(np.uint8(0x80), "fp8_e5m2") == 0 and np.signbit(
        fpsim.from_bits(np.uint8(0x80), "fp8_e5m2")
    )


def test_bits_errors():
    with pytest.raises(ValueError, match="not representable"):
        fpsim.to_bits(0.1, "fp16")
    with pytest.raises(ValueError, match=r"0\.\.2\*\*19-1"):
        fpsim.from_bits(np.array([1 << 19]), "tf32")
    with pytest.raises(ValueError, match="integer array"):
        fpsim.from_bits(np.array([1.0]), "fp16")


def test_custom_format_bits_round_trip():
    f = fpsim.Format(11, 20)
    x = np.array([f.smallest_subnormal, -f.max, f.smallest_normal, 0.0, -0.0, np.inf])
    back = fpsim.from_bits(fpsim.to_bits(x, f), f)
    np.testing.assert_array_equal(back, x)
    assert np.signbit(back[4])


# --- command line and benchmark smoke tests ----------------------------------------------------


def test_cli_prints_table_and_roundings(capsys):
    from fpsim.cli import main

    assert main(["0.1", "70000", "--formats", "fp16,fp8_e4m3"]) == 0
    out = capsys.readouterr().out
    assert "fp8_e4m3" in out and "0.09997559" in out and "65504" in out


def test_bench_runs_small():
    from fpsim.bench import run

    rows = run(n=2000, repeats=1, backend="numpy")
    names = {r[0] for r in rows}
    assert {"np.copyto", "round nearest_even", "add", "mul", "fma", "ml_dtypes astype"} <= names
    assert all(r[3] > 0 and r[4] > 0 for r in rows)
    assert {r[2] for r in rows if r[0].startswith("round")} == {"binary64"}
    numba_rows = run(n=2000, repeats=1, backend="numba")
    # Each row says which kernel ran: float32 rounded to these formats runs on binary32.
    assert {r[2] for r in numba_rows if r[0].startswith("round")} == {"binary32"}
    assert {r[2] for r in numba_rows if r[0] in ("add", "mul", "fma")} == {"binary64"}


def test_bench_names_the_cpu_and_its_vector_features():
    from fpsim._machine import cpu

    # /proc/cpuinfo as Linux writes it: one block per processor, flags with underscores.
    xeon = ("processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Processor\n"
            "flags\t\t: fpu sse2 avx f16c fma avx2 avx512f avx512_bf16 avx512_fp16 amx_bf16\n\n"
            "processor\t: 1\nmodel name\t: Intel(R) Xeon(R) Processor\nflags\t\t: fpu\n")
    assert cpu(xeon) == "CPU: Intel(R) Xeon(R) Processor; avx2 f16c fma avx512f avx512_fp16 " \
                        "avx512_bf16"
    graviton = "processor\t: 0\nFeatures\t: fp asimd evtstrm fphp asimdhp\nCPU part\t: 0xd40\n"
    assert cpu(graviton).endswith("; asimd")
    assert cpu("").startswith("CPU: ") and ";" not in cpu("")


def test_matmul_bench_runs_small():
    from fpsim.bench import run_matmul

    rows = run_matmul(sizes=(8,), repeats=1, backend="numpy", pause=0)
    assert [r[0] for r in rows][0] == "np.matmul float32" and len(rows) == 5
    assert "fp32 accum, order=any, float64 in" in [r[0] for r in rows]
    assert all(r[2] > 0 and r[3] > 0 for r in rows)


