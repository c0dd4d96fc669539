"""What a new user of fpsim meets (issue 30, items 7, 8 and 12): fpsim.testing's messages,
tracebacks and strategies; NumPy dtypes as formats; Policy's keyword arguments; seeds that
do nothing; axes of 0-d arrays; masked arrays; repeated policy keys."""

import subprocess
import sys
import textwrap
from fractions import Fraction
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings

import fpsim
import fpsim.testing as ft
from fpsim.precision import parse

# --- fpsim.testing ---------------------------------------------------------------------------


def failure(call) -> str:
    with pytest.raises(AssertionError) as info:
        call()
    return str(info.value)


def test_a_wrong_rounding_shows_the_input_the_mode_and_both_encodings():
    message = failure(lambda: ft.assert_correctly_rounded([0.33349609375], [Fraction(1, 3)],
                                                          "fp16"))
    assert message.splitlines() == [
        "1 of 1 elements are not correctly rounded to nearest_even (fp16):",
        "  at [0]: exact 1/3 (~0.3333333333333333): actual 0.33349609375 [0x3556], "
        "desired 0.333251953125 [0x3555]",
    ]
    # An input number shows with its encoding in its own dtype (0.1 in binary32 is
    # 0x3dcccccd); options that are not the defaults are named.
    x = np.array([np.float32(0.1), np.float32(1e30)])
    message = failure(lambda: ft.assert_correctly_rounded([0.0999755859375, np.inf], x, "fp16",
                                                          "nearest_even", saturate=True))
    assert message.splitlines() == [
        "1 of 2 elements are not correctly rounded to nearest_even (fp16, saturate=True):",
        "  at [1]: exact 1.0000000150474662e+30 (float32 0x7149f2ca): actual inf [0x7c00], "
        "desired 65504.0 [0x7bff]",
    ]


def test_a_wrong_stochastic_rounding_shows_both_neighbours():
    message = failure(lambda: ft.assert_correctly_rounded([0.5], [0.3], "fp16", "stochastic"))
    assert message.splitlines()[1] == (
        "  at [0]: exact 0.3 (float64 0x3fd3333333333333): actual 0.5 [0x3800], "
        "desired 0.2998046875 [0x34cc] or 0.300048828125 [0x34cd]")


def test_a_fraction_beyond_binary64_rounds_as_it_should():
    """10**400 / 3 is finite: toward zero it is the largest value, not an infinity."""
    huge = Fraction(-10**400, 3)
    ft.assert_correctly_rounded([-65504.0], [huge], "fp16", "toward_zero")
    ft.assert_correctly_rounded([-np.inf], [huge], "fp16")
    ft.assert_correctly_rounded([-65504.0], [huge], "fp16", saturate=True)
    ft.assert_correctly_rounded([np.inf], [-huge], "e11m10", "up")
    message = failure(lambda: ft.assert_correctly_rounded([0.0], [huge], "fp16"))
    assert "exact -10000000000000000000000...0000000000000000000000/3: actual 0.0" in message


def test_pytest_shows_the_callers_line_not_fpsims_insides(tmp_path):
    (tmp_path / "test_user.py").write_text(textwrap.dedent("""
        import fpsim.testing as ft

        def test_rounded():
            ft.assert_correctly_rounded([0.5], [0.3], "fp16")

        def test_bits():
            ft.assert_bits_equal([0.5], [0.25], "fp16")

        def test_ulp():
            ft.assert_ulp_close([0.5], [0.25], "fp16", max_ulp=1)

        def test_not_a_value():
            ft.assert_bits_equal([0.1], [0.1], "fp16")
    """))
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--tb=long",
                          "test_user.py"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120)
    assert "4 failed" in run.stdout, run.stdout + run.stderr
    assert "test_user.py:5: AssertionError" in run.stdout
    assert "actual[0] = 0.1 is not a value of fp16" in run.stdout
    package = str(Path(fpsim.__file__).parent)
    assert package not in run.stdout and "assertions.py" not in run.stdout, run.stdout


def test_arrays_come_in_the_narrowest_dtype_that_holds_the_format_or_the_one_asked():
    seen = {}

    @settings(max_examples=20, deadline=None)
    @given(ft.arrays("fp32"), ft.arrays("fp16", 2), ft.arrays("bf16", 3), ft.arrays("fp64", 1),
           ft.arrays("fp32", (2, 2), dtype=np.float64),
           ft.arrays("bf16", 4, dtype=ml_dtypes.bfloat16, finite=False),
           ft.arrays("fp8_e4m3", 4, dtype=np.float32, exclude_zero=True))
    def draw(fp32, fp16, bf16, fp64, wide, native, fp8):
        seen.update(fp32=fp32.dtype, fp16=fp16.dtype, bf16=bf16.dtype, fp64=fp64.dtype,
                    wide=wide.dtype, native=native.dtype, fp8=fp8.dtype)
        assert wide.shape == (2, 2) and native.shape == (4,)
        for a, fmt in ((fp32, "fp32"), (bf16, "bf16"), (native, "bf16"), (fp8, "fp8_e4m3")):
            ft.assert_bits_equal(fpsim.round(a, fmt), a, fmt)
        assert np.all(fp8 != 0)

    draw()
    assert seen == dict(fp32=np.float32, fp16=np.float16, bf16=np.float32, fp64=np.float64,
                        wide=np.float64, native=ml_dtypes.bfloat16, fp8=np.float32)


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.int32, np.complex128])
def test_arrays_refuse_a_dtype_that_cannot_hold_the_format(dtype):
    with pytest.raises(ValueError, match="does not hold every value of fp32"):
        ft.arrays("fp32", dtype=dtype)


def test_arrays_name_themselves_for_an_unknown_option():
    with pytest.raises(TypeError, match=r"^arrays\(\) got an unexpected keyword argument"):
        ft.arrays("fp32", dtpye=np.float32)
    with pytest.raises(ValueError, match="dtype: not a NumPy dtype: 'bogus'"):
        ft.arrays("fp32", dtype="bogus")


# --- formats, policies -----------------------------------------------------------------------


@pytest.mark.parametrize("dtype, name", [
    (np.float16, "fp16"), (np.float32, "fp32"), (np.float64, "fp64"),
    (np.dtype(np.float16), "fp16"), (np.dtype(">f4"), "fp32"), (np.dtype("float64"), "fp64"),
    (ml_dtypes.bfloat16, "bf16"), (np.dtype(ml_dtypes.float8_e4m3fn), "fp8_e4m3"),
    (ml_dtypes.float8_e5m2, "fp8_e5m2"),
])
def test_a_numpy_float_type_or_dtype_is_a_format(dtype, name):
    assert fpsim.formats.as_format(dtype) is fpsim.PRESETS[name]
    assert fpsim.round(0.1, dtype) == fpsim.round(0.1, name)
    assert fpsim.Policy(compute=dtype).compute is fpsim.PRESETS[name]
    assert fpsim.tensor([0.1], format=dtype).format is fpsim.PRESETS[name]


@pytest.mark.parametrize("dtype", [np.int8, np.dtype(np.complex128), np.longdouble,
                                   ml_dtypes.float8_e4m3b11fnuz, np.bool_])
def test_a_dtype_of_no_format_is_refused_by_name(dtype):
    with pytest.raises(ValueError, match=f"dtype {np.dtype(dtype)} is not one of fpsim's formats"):
        fpsim.round(0.1, dtype)
    with pytest.raises(ValueError, match=f"^compute: dtype {np.dtype(dtype)} is not one"):
        fpsim.Policy(compute=dtype)


@pytest.mark.parametrize("args", [("mixed",), ("fp16",), ("compute=fp16",), (np.float16,)])
def test_a_policy_takes_keywords_and_points_to_parse_for_text(args):
    with pytest.raises(TypeError, match=r"Policy takes keyword arguments only .* is read by "
                                        r"fpsim\.precision\.parse"):
        fpsim.Policy(*args)
    assert "parse('mixed')" in str(pytest.raises(TypeError, fpsim.Policy, "mixed").value)


def test_help_shows_a_policys_keyword_arguments():
    import inspect

    parameters = inspect.signature(fpsim.Policy).parameters
    assert list(parameters)[:6] == ["params", "compute", "accum", "reduce", "output", "rounding"]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in parameters.values())


def test_policies_still_pickle_copy_and_replace():
    import copy
    import pickle

    policy = parse("mixed,seed=3,softmax.compute=fp32,exp.rounding=stochastic")
    assert pickle.loads(pickle.dumps(policy)) == policy
    assert copy.deepcopy(policy) == policy
    assert policy.replace(accum="fp16").accum is fpsim.PRESETS["fp16"]


@pytest.mark.parametrize("text, message", [
    ("compute=fp99,compute=fp16", "^compute: unknown format 'fp99'"),
    ("compute=fp99,mixed", "^compute: unknown format 'fp99'"),
    ("rounding=bogus,rounding=up", "^rounding: unknown rounding mode 'bogus'"),
    ("accum_rounding=x,fp32", "^accum_rounding: unknown rounding mode 'x'"),
    ("order=bogus,order=any", "^order: unknown order 'bogus'"),
    ("compute=fp16,compute=fp16", "^policy key 'compute' is given twice"),
    ("mixed,accum=fp16,seed=1,accum=fp32", "^policy key 'accum' is given twice "
                                          r"\('accum=fp16' and 'accum=fp32'\)"),
    ("softmax.compute=fp32,softmax.compute=bf16", "^policy key 'softmax.compute' is given twice"),
])
def test_parse_checks_every_value_and_refuses_a_repeated_key(text, message):
    with pytest.raises(ValueError, match=message):
        parse(text)


def test_parse_still_applies_presets_then_keys_and_overrides_apart():
    assert parse("mixed,compute=bf16").compute is fpsim.PRESETS["bf16"]
    policy = parse("compute=fp16,softmax.compute=fp32")
    assert policy.for_op("softmax").compute is fpsim.PRESETS["fp32"]
    assert parse(str(policy)) == policy


# --- seeds, axes, masks ----------------------------------------------------------------------


@pytest.mark.parametrize("call", [
    lambda seed: fpsim.round(0.1, "fp16", seed=seed),
    lambda seed: fpsim.round([0.1, 0.2], "bf16", "toward_zero", seed=seed),
    lambda seed: fpsim.add(0.5, 2.0**-12, "fp16", "up", seed=seed),
    lambda seed: fpsim.sqrt(np.array([2.0]), "fp16", "odd", seed=seed),
    lambda seed: fpsim.sum(np.full(8, 0.5), accum="fp16", seed=seed),
    lambda seed: fpsim.matmul(np.ones((2, 3)), np.ones((3, 2)), accum="bf16",
                              rounding="toward_zero", seed=seed),
    lambda seed: fpsim.dot(np.ones(3), np.ones(3), accum="fp16", order="pairwise", seed=seed),
], ids=["round", "round toward_zero", "add up", "sqrt odd", "sum", "matmul", "dot"])
def test_a_seed_without_stochastic_rounding_is_warned_about_where_it_is_given(call):
    with pytest.warns(UserWarning, match="seed does nothing with rounding '[a-z_]+', which "
                                         "draws no random bits") as caught:
        result = call(7)
    assert [w.filename for w in caught] == [__file__]  # the caller's line, not fpsim's
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no seed, no warning; and the result is the same
        assert np.array_equal(call(None), result)


def test_a_seed_with_stochastic_rounding_or_none_warns_nothing():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a = fpsim.round(np.full(64, 0.1), "bf16", "stochastic", seed=7)
        assert np.array_equal(fpsim.round(np.full(64, 0.1), "bf16", "stochastic", seed=7), a)
        fpsim.round(0.1, "bf16")


@pytest.mark.parametrize("seed", [-1, 2**64, 1.5, "3", True])
def test_a_bad_seed_is_named_whatever_the_mode(seed):
    for mode in ("stochastic", "nearest_even"):
        with pytest.raises(ValueError, match=r"^seed must be an integer in 0\.\.2\*\*64-1"):
            fpsim.round(0.1, "fp16", mode, seed=seed)
        with pytest.raises(ValueError, match=r"^seed must be an integer in 0\.\.2\*\*64-1"):
            fpsim.matmul(np.ones((1, 2)), np.ones((2, 1)), accum="fp16", rounding=mode,
                         seed=seed)


@pytest.mark.parametrize("x, axis", [(np.array(1.0), 0), (np.array(1.0), -1), (2.5, 0),
                                     (np.array(1.0), 1), (np.ones(3), 1), (np.ones(3), -2),
                                     (np.ones((2, 0)), 2)])
def test_an_axis_out_of_range_is_numpys_axis_error(x, axis):
    with pytest.raises(np.exceptions.AxisError) as fpsim_error:
        fpsim.sum(x, axis)
    with pytest.raises(np.exceptions.AxisError) as numpy_error:
        np.mean(x, axis=axis)  # np.sum lets a 0-d array have axis 0 and -1; np.mean does not
    assert str(fpsim_error.value) == str(numpy_error.value)
    assert isinstance(fpsim_error.value, ValueError)


def test_sums_along_an_axis_in_range_are_unchanged():
    x = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    assert fpsim.sum(x, 0).tolist() == [5.0, 7.0, 9.0]
    assert fpsim.sum(x, -1).tolist() == [6.0, 15.0]
    assert fpsim.sum(np.ones(3), 0) == 3.0
    assert fpsim.sum(np.array(4.0)) == 4.0  # axis None: every element, of a 0-d array too


MASKED = np.ma.array([1e9, 1.0], mask=[True, False])


@pytest.mark.parametrize("call, name", [
    (lambda: fpsim.round(MASKED, "fp16"), "x"),
    (lambda: fpsim.add(1.0, MASKED, "fp16"), "b"),
    (lambda: fpsim.fma(MASKED, 1.0, 1.0, "fp16"), "a"),
    (lambda: fpsim.sum(MASKED), "x"),
    (lambda: fpsim.sum([1.0, 2.0], c=np.ma.array(0.0, mask=True)), "c"),
    (lambda: fpsim.dot(MASKED, [1.0, 1.0]), "a"),
    (lambda: fpsim.matmul([[1.0, 1.0]], MASKED.reshape(2, 1)), "B"),
    (lambda: fpsim.conv2d(MASKED.reshape(1, 1, 1, 2), np.ones((1, 1, 1, 1))), "x"),
    (lambda: fpsim.to_bits(MASKED, "fp32"), "x"),
    (lambda: fpsim.tensor(MASKED), "data"),
    (lambda: fpsim.tensor([1.0, 2.0]) + MASKED, "data"),
    (lambda: ft.assert_bits_equal(MASKED, [1.0, 1.0], "fp32"), "actual"),
    (lambda: fpsim.from_bits(np.ma.array([0x3C00, 0x7C00], mask=[False, True]), "fp16"),
     "bits"),
])
def test_a_masked_array_with_masked_elements_is_refused_not_unmasked(call, name):
    with pytest.raises(ValueError, match=rf"^{name}: a masked array \(numpy\.ma\) with 1 masked "
                                         r"element; fpsim applies no masks: fill them"):
        call()


def test_masked_among_listed_values_is_refused_and_an_unmasked_array_is_its_values():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NumPy's own: "converting a masked element to nan"
        with pytest.raises(ValueError, match="^x: numpy.ma.masked among the values"):
            fpsim.round([1.0, np.ma.masked], "fp16")
    plain = np.ma.array([0.1, 1e9])  # no mask: nothing is dropped
    assert fpsim.round(plain, "fp16").tolist() == [0.0999755859375, np.inf]
    assert fpsim.sum(np.ma.array([1.0, 2.0], mask=[False, False])) == 3.0


@pytest.mark.parametrize("call", [
    lambda: fpsim.nn.manual_seed(-1),
    lambda: __import__("fpsim.data", fromlist=["load_digits"]).load_digits(seed=-1),
    lambda: list(__import__("fpsim.data", fromlist=["batches"]).batches(
        np.ones((4, 2)), np.ones(4), batch_size=2, seed=-1)),
    lambda: __import__("fpsim.data", fromlist=["synthetic"]).synthetic.make_regression(8, seed=-1),
], ids=["manual_seed", "load_digits", "batches", "synthetic"])
def test_a_negative_seed_is_named(call):
    with pytest.raises(ValueError, match=r"^seed must be (a non-negative integer|an integer "
                                         r"in 0\.\.inf)(, | or None, )got -1$"):
        call()


@pytest.mark.parametrize("name", ["e8m0", "ue4m3", "fp4_e2m1", "fp6_e2m3", "fp6_e3m2"])
def test_values_draws_only_what_each_block_scaled_format_holds(name):
    """fpsim.testing.values on the block-scaled formats: every draw is a value of the
    format (no NaN where it has none, nothing negative where it is unsigned, no zero in
    E8M0), and each class shows up (the format's largest value and its smallest normal)."""
    from fractions import Fraction

    from hypothesis import given, settings

    fmt = fpsim.formats.as_format(name)
    drawn = []

    @settings(max_examples=300, deadline=None, database=None)
    @given(ft.values(fmt, finite=False))
    def check(v):
        drawn.append(v)
        assert v == v or fmt.nan
        if v == v:
            assert fpsim.round(v, fmt) == v and Fraction(v) == Fraction(fpsim.round(v, fmt))
            assert fmt.signed or not np.signbit(v)
            assert v != 0 or fmt.man_bits > 0

    check()
    assert fmt.max in drawn and fmt.smallest_normal in drawn
