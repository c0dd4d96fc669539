"""The shared kernels' exp, log and tanh (fpsim.kernels.transcendental): within a unit or
a few in the last place of the C library's, exact where the value is known, the same bits
on every backend (the CUDA one: tests/test_devices.py's simulated device), and the engine
evaluating them so."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fpsim
from fpsim.precision import Policy, numerics

FUNCTIONS = {"exp": math.exp, "log": math.log, "tanh": math.tanh}
# Units in the last place allowed against the C library's (itself within one of exact).
ULPS = {"exp": 1, "log": 1, "tanh": 4}


def evaluate(name, x, backend="numba"):
    with fpsim.backend(backend):
        return numerics.elementary(name, np.asarray(x, dtype=np.float64), Policy())


def libm(name, v):
    try:
        return FUNCTIONS[name](v)
    except OverflowError:
        return math.inf
    except ValueError:  # log of a negative number or of zero
        return -math.inf if v == 0 else math.nan


def inputs(rng):
    wide = rng.standard_normal(4000) * np.exp2(rng.integers(-70, 10, 4000))
    edges = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0**-1074, 2.0**-1022, 1e-300,
             709.782712893384, 709.79, -745.1332191019411, -745.14, -708.4, 22.0, 0.5, 0.549,
             1.0 - 2.0**-53, 1.0 + 2.0**-52, np.finfo(np.float64).max, 2.0**-56, 2.0**-54]
    return np.concatenate([rng.uniform(-750, 712, 4000), wide, edges, -np.array(edges)])


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_within_a_few_ulps_of_the_c_library_and_its_special_values(name):
    x = inputs(np.random.default_rng(1))
    got = evaluate(name, x)
    for v, g in zip(x.tolist(), got.tolist(), strict=True):
        want = libm(name, v)
        if math.isnan(want) or math.isinf(want) or want == 0:
            assert (math.isnan(g) and math.isnan(want)) or (
                g == want and math.copysign(1, g) == math.copysign(1, want)), (name, v, g)
        else:
            assert abs(g - want) <= ULPS[name] * math.ulp(want), (name, v, g, want)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_every_backend_gives_the_same_bits(name, backend):
    x = inputs(np.random.default_rng(2))
    a = evaluate(name, x, "numpy").view(np.int64)
    b = evaluate(name, x, backend).view(np.int64)
    np.testing.assert_array_equal(a, b)


def test_exact_values():
    assert evaluate("exp", [0.0, -0.0]).tolist() == [1.0, 1.0]
    assert evaluate("log", [1.0]).tolist() == [0.0]
    assert np.signbit(evaluate("tanh", [-0.0])[0])
    # exp(k ln 2) is 2**k within the approximation; exactly at the range's ends it is:
    assert evaluate("exp", [-745.2, 710.0]).tolist() == [0.0, math.inf]
    assert evaluate("log", [2.0**-1074])[0] == pytest.approx(-1074 * math.log(2), rel=2e-16)
    assert evaluate("tanh", [30.0, -30.0]).tolist() == [1.0, -1.0]


@settings(max_examples=200, deadline=None)
@given(st.floats(-50, 50, allow_nan=False))
def test_tanh_is_odd_and_bounded(v):
    t, u = evaluate("tanh", [v, -v]).tolist()
    assert t == -u and -1.0 <= t <= 1.0
    assert abs(t - math.tanh(v)) <= 4 * math.ulp(math.tanh(v) or 2.0**-1074)


@settings(max_examples=200, deadline=None)
@given(st.floats(2.0**-1074, 1e300, allow_nan=False, allow_infinity=False))
def test_log_of_exp_comes_back_and_log_is_monotone(v):
    y = evaluate("log", [v, np.nextafter(v, np.inf)])
    assert y[0] <= y[1]
    if 1.0 <= v < 700:  # log is well conditioned there: the two errors add
        assert abs(evaluate("log", evaluate("exp", [v]))[0] - v) <= 4 * math.ulp(v)


def test_the_engine_evaluates_them_so():
    """An emulated policy's exp, log, tanh, sigmoid and softmax use the shared kernels
    (rounded once to the compute format); a native one keeps the array module's."""
    from fpsim.nn import functional as F

    x = np.linspace(-3.0, 3.0, 41)
    half = fpsim.precision.parse("compute=fp16")
    with half:
        for name, f in (("exp", F.exp), ("tanh", F.tanh)):
            got = f(fpsim.tensor(x)).numpy()
            want = fpsim.round(evaluate(name, fpsim.round(x, "fp16")), "fp16")
            np.testing.assert_array_equal(got, want)
        got = F.log(fpsim.tensor(x[x > 0])).numpy()
        want = fpsim.round(evaluate("log", fpsim.round(x[x > 0], "fp16")), "fp16")
        np.testing.assert_array_equal(got, want)
    native = fpsim.precision.parse("native_fp16")
    with native:
        got = F.exp(fpsim.tensor(x)).numpy()
    np.testing.assert_array_equal(got, np.exp(x.astype(np.float16)))


def test_unknown_names_are_refused():
    with pytest.raises(ValueError, match="unknown function 'sin'; known: exp, log, tanh"):
        numerics.elementary("sin", np.ones(2), Policy())
