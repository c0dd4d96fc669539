"""Rounding float32 input on the binary32 encoding (fpsim.kernels.carrier, Numba backend).

The binary32 instance of ``core.round_value`` must give the bits and flags of the
binary64 one (itself checked against exact rational arithmetic and TestFloat,
whose binary32 conversions now run on this path too): on every value, midpoint and
neighbour of the small formats, on random binary32 encodings of every class, in every
mode, with subnormals on and off, saturating or not, with and without flags, in the
generic loop and the one compiled for a format. FPSIM_EXHAUSTIVE_FLOAT32=1 also
rounds all 2**32 binary32 encodings to fp16 and bf16 (minutes).
"""

import os

import numpy as np
import pytest

import fpsim
from fpsim.backends import get_backend, numba_backend
from fpsim.kernels.carrier import BINARY32, fits_binary32
from fpsim.kernels.spec import make_spec

FITS = ["fp16", "bf16", "tf32", "fp32", "fp8_e4m3", "fp8_e5m2"]
CUSTOM = [fpsim.Format(8, 3), fpsim.Format(6, 9), fpsim.Format(3, 2, infinities=False),
          fpsim.Format(8, 22)]


@pytest.mark.parametrize("fmt, fits", [
    *((f, True) for f in FITS + CUSTOM),
    ("fp64", False), (fpsim.Format(9, 3), False), (fpsim.Format(8, 3, infinities=False), False),
    (fpsim.Format(5, 24), False), (fpsim.Format(11, 10), False),
])
def test_which_formats_binary32_carries(fmt, fits):
    import warnings

    spec = make_spec(fpsim.formats.as_format(fmt), "nearest_even", True, False, None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a format beyond binary32's range: no overflow warning
        assert fits_binary32(spec) is fits


def float32_inputs(fmt, rng, n=60_000) -> np.ndarray:
    """Every class of binary32 value (``n`` random encodings), and values at, between and
    beside ``fmt``'s: all of them for a format of up to 16 bits, ``n`` random ones of a
    wider format."""
    codes = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    random_encodings = codes.view(np.float32)  # NaN payloads, subnormals, infinities
    f = fpsim.formats.as_format(fmt)
    encodings = (np.arange(2**f.bits, dtype=np.uint64) if f.bits <= 16
                 else rng.integers(0, 2**f.bits, n, dtype=np.uint64))
    values = np.asarray(fpsim.from_bits(encodings, f))
    values = values[np.isfinite(values)]
    ulp = np.exp2(np.maximum(np.floor(np.log2(np.abs(values) + (values == 0))), f.emin)
                  - f.man_bits)
    with np.errstate(all="ignore"):
        near = np.concatenate([values, values + ulp / 2, values - ulp / 2]).astype(np.float32)
    beside = np.concatenate([np.nextafter(near, np.float32(np.inf)),
                             np.nextafter(near, np.float32(-np.inf))])
    edges = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, f.max, -f.max, f.smallest_normal,
                      f.smallest_subnormal, f.smallest_subnormal / 2, 3.4028235e38, 1e-45],
                     dtype=np.float32)
    return np.concatenate([random_encodings, near, beside, edges]).astype(np.float32)


def both(x, fmt, mode, **options):
    """Numba (binary32 for float32 input) and the NumPy reference backend."""
    with fpsim.backend("numba"):
        got = fpsim.round(x, fmt, mode, **options)
    with fpsim.backend("numpy"):
        want = fpsim.round(x, fmt, mode, **options)
    return got, want


def assert_same(got, want, what):
    """The same encodings, NaN for NaN (SPEC: a NaN's sign and payload are free, and
    loops compiled for a format may fold a negated NaN constant either way)."""
    g, w = (r if isinstance(r, tuple) else (r,) for r in (got, want))
    assert g[0].dtype == w[0].dtype == np.float32, what
    nan = np.isnan(w[0])
    assert np.array_equal(np.isnan(g[0]), nan), what
    assert np.array_equal(g[0][~nan].view(np.uint32), w[0][~nan].view(np.uint32)), what
    if len(g) > 1:
        assert np.array_equal(g[1], w[1]), f"{what}: flags"


@pytest.mark.parametrize("fmt", FITS + CUSTOM, ids=str)
def test_binary32_rounding_matches_binary64(fmt):
    rng = np.random.default_rng(7)
    x = float32_inputs(fmt, rng)
    for mode in fpsim.ROUNDING_MODES:
        for subnormals in (True, False):
            for saturate in (False, True):
                options = dict(subnormals=subnormals, saturate=saturate,
                               seed=11 if mode == "stochastic" else None)
                what = f"{fmt} {mode} subnormals={subnormals} saturate={saturate}"
                got, want = both(x, fmt, mode, flags=True, **options)
                assert_same(got, want, what + " flags")
                with fpsim.backend("numba"):  # the loop without flags: the same values
                    assert_same(fpsim.round(x, fmt, mode, **options), want[0], what)


def test_the_loop_compiled_for_a_format_agrees_too():
    """Arrays of 2**20 elements and more run in a loop compiled for their format."""
    rng = np.random.default_rng(3)
    x = np.resize(float32_inputs("bf16", rng), numba_backend.SPECIALISE_FROM)
    for fmt, mode in (("bf16", "nearest_even"), ("fp16", "stochastic"), ("fp8_e4m3", "odd")):
        seed = 5 if mode == "stochastic" else None
        assert_same(*both(x, fmt, mode, seed=seed, flags=True), f"{fmt} {mode}")


def loops_used(call) -> set:
    """The encodings of the elementwise loops ``call`` runs (the Numba backend's)."""
    backend = get_backend()
    backend._loops.clear()  # compiled loops stay cached on disk
    backend._choices.clear()
    call()
    return {dict(k[2:]).get("ENCODING") for k in backend._loops
            if isinstance(k[0], str) and k[0] == "loop"}


def test_the_binary32_encoding_is_used_for_float32_in_and_out_only():
    with fpsim.backend("numba"):
        x32 = np.linspace(-3, 3, 1001, dtype=np.float32)
        assert loops_used(lambda: fpsim.round(x32, "bf16", "up")) == {BINARY32.name}
        assert loops_used(lambda: fpsim.round(x32.astype(np.float64), "bf16", "up")) == {
            "binary64"}
        # A format finer than binary32 keeps binary64 (and the float64 result it needs).
        assert loops_used(lambda: fpsim.round(x32, "fp64", "up")) == {"binary64"}
        # Arithmetic carries its exact results in binary64.
        h = np.asarray(fpsim.round(x32, "fp16"))
        assert loops_used(lambda: fpsim.add(h, h, "fp16")) == {"binary64"}


@pytest.mark.skipif(os.environ.get("FPSIM_EXHAUSTIVE_FLOAT32") != "1",
                    reason="all 2**32 binary32 inputs take minutes: FPSIM_EXHAUSTIVE_FLOAT32=1")
@pytest.mark.parametrize("fmt", ["fp16", "bf16"])
@pytest.mark.parametrize("mode", ["nearest_even", "toward_zero", "odd", "stochastic"])
def test_every_binary32_encoding(fmt, mode):
    """Binary32 against the binary64 instance (float64 input) of the same backend."""
    step = 1 << 26
    for start in range(0, 1 << 32, step):
        codes = np.arange(start, start + step, dtype=np.uint64).astype(np.uint32)
        x32 = codes.view(np.float32)
        with fpsim.backend("numba"):
            got = fpsim.round(x32, fmt, mode, seed=9, flags=True)
            want = fpsim.round(x32.astype(np.float64), fmt, mode, seed=9, flags=True)
        same = got[0].view(np.uint32) == np.asarray(want[0], np.float32).view(np.uint32)
        same &= got[1] == want[1]
        # float64 input keeps a binary32 sNaN's quiet bit clear only where NumPy's cast does.
        nan = np.isnan(x32)
        assert same[~nan].all(), f"{fmt} {mode}: first at {codes[~same & ~nan][:3]}"


@pytest.mark.parametrize("fmt, mode", [("bf16", "nearest_even"), ("bf16", "toward_zero"),
                                       ("fp8_e4m3", "odd"), ("fp16", "up")])
def test_the_binary32_rounding_computes_in_32_bit_integers(fmt, mode):
    """numba_lanes: no 64-bit integer operation left in the compiled rounding (Numba
    widens int32 operations to int64, which halves the lanes of a vector)."""
    import re

    import numba

    from fpsim.backends._instantiate import instantiate
    from fpsim.kernels.carrier import spec_for

    kernels = instantiate(numba_backend.PRIMITIVES_BINARY32, numba.njit(inline="always"),
                          "_lanes_test", BINARY32)
    spec = spec_for(make_spec(fpsim.formats.as_format(fmt), mode, True, False, None), BINARY32)
    round_value = kernels["round_value"]

    @numba.njit
    def rounded(x):
        return round_value(x, 0, spec, False)[0]

    assert rounded(np.float32(1.5)) == fpsim.round(np.float32(1.5), fmt, mode)
    ir = rounded.inspect_llvm(rounded.signatures[0])
    ops = re.findall(r"= (?:add|sub|mul|and|or|xor|shl|ashr|lshr|icmp \w+)(?: \w+)* (i\d+) ", ir)
    assert "i32" in ops and "i64" not in ops, sorted(set(ops))


def test_the_loop_compiled_for_a_format_folds_its_spec_in_32_bit_lanes():
    """A specialised binary32 loop (long arrays) binds the spec in the encoding's lane
    types: with the binary64 spec's int64 fields folded in, LLVM computed the
    rounding's grid and carry in 64-bit lanes (bf16 nearest_even: 25% slower)."""
    from fpsim.kernels.carrier import spec_for

    backend = numba_backend.Backend()
    spec = make_spec(fpsim.formats.as_format("bf16"), "nearest_even", True, False, None)
    x = np.ones(numba_backend.SPECIALISE_FROM, dtype=np.float32)
    out = np.empty_like(x)
    backend.apply("round_value", [x], out, None, spec, None)
    (choice,) = [c for c in backend._choices if c[3] == spec]
    loop = backend._choices[choice][2]
    bound = loop.py_func.__globals__["SPEC"]
    assert bound == spec_for(spec, BINARY32)
    assert all(type(v) in (np.int32, np.float32) for v in bound), bound
    assert (out == 1).all()
