"""Regressions of issue 17: each defect found by throwing bad input at the public API.

Silently wrong results first, then crashes on legal input, then unclear messages.
"""

import json
import math
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fpsim
from fpsim import nn, optim
from fpsim.compare import ulp_distance
from fpsim.precision import Policy, parse
from fpsim.precision.policy import OPERATIONS
from fpsim.training import DynamicLossScale, StaticLossScale
from fpsim.training.monitor import GradientCounts

HERE = Path(__file__).resolve().parent

# --- 1-12: silently wrong results --------------------------------------------------------


def test_fractions_are_not_rounded_twice():
    with pytest.raises(ValueError, match="not exactly representable in float64"):
        fpsim.round([Fraction(2**80 - 1, 2**80)], "fp16", "toward_zero")
    with pytest.raises(ValueError, match="rational"):
        fpsim.round(Fraction(1, 3), "fp16")
    assert fpsim.round(Fraction(3, 4), "fp16") == 0.75  # exact in binary64: taken


@pytest.mark.parametrize("value", [2**64, 2**70, -1, 1.0, "3", True, np.float64(2.0)])
def test_seeds_outside_their_range_are_refused(value):
    with pytest.raises(ValueError, match="seed must be an integer in 0..2\\*\\*64-1"):
        fpsim.round(0.1, "fp16", "stochastic", seed=value)


def test_the_largest_seed_is_its_own_stream():
    x = np.full(256, 0.1)
    top = fpsim.round(x, "fp16", "stochastic", seed=2**64 - 1)
    assert not np.array_equal(top, fpsim.round(x, "fp16", "stochastic", seed=0))


@pytest.mark.parametrize("seed", ["x", 1.5, -1, 2**32, True])
def test_policy_seeds_are_checked(seed):
    with pytest.raises(ValueError, match="seed must be an integer"):
        Policy(seed=seed)


@pytest.mark.parametrize("changes, match", [
    (dict(input="fp64"), "input format fp64 has 52 fraction bits"),
    (dict(output="fp64"), "output format fp64 has 52 fraction bits"),
    (dict(exp_floor=-132.5), "exp_floor must be an integer"),
    (dict(exp_floor="low"), "exp_floor must be an integer"),
    (dict(block=0), "block must be an integer in 1"),
    (dict(block=4.0), "block must be an integer"),
    (dict(block=2**40), "block must be an integer in 1"),
    (dict(frac_bits=41), "frac_bits must be an integer in 1..40"),
    (dict(frac_bits=True), "frac_bits must be an integer"),
    (dict(output_rounding="up"), "output_rounding must be one of"),
    (dict(input=3), "input must be a format"),
    (dict(name=""), "name must be a non-empty string"),
])
def test_block_fma_models_are_validated_at_construction(changes, match):
    fields = dict(name="m", block=4, frac_bits=23, exp_floor=None)
    with pytest.raises(ValueError, match=match):
        fpsim.hw.BlockFMA(**{**fields, **changes})


def test_a_custom_input_format_survives_with_input():
    e4m3 = fpsim.Format(4, 3, infinities=False, name="mine")
    m = fpsim.hw.H100.with_input(e4m3)
    a = np.array([[1.5, 2.0]])
    b = np.array([[1.0], [0.25]])
    assert fpsim.matmul(a, b, model=m)[0, 0] == 2.0


@pytest.mark.parametrize("option", [dict(accum="fp16"), dict(accum="fp32"),
                                    dict(rounding="nearest_even"), dict(order="pairwise"),
                                    dict(products="rounded"), dict(subnormals=True),
                                    dict(saturate=False), dict(seed=1), dict(random_bits=8)])
def test_matmul_refuses_options_a_model_overrides(option):
    with pytest.raises(ValueError, match="fixes how the products are added up"):
        fpsim.matmul([[1.0]], [[1.5]], model=fpsim.hw.H100, **option)
    assert fpsim.matmul([[1.0]], [[1.5]], model=fpsim.hw.H100)[0, 0] == 1.5


def test_a_tensors_values_are_values_of_its_format():
    t = fpsim.tensor([0.1], format="fp16")
    assert t.data[0] == 0.0999755859375
    with fpsim.precision.parse("fp16"):
        assert nn.functional.relu(t).data[0] == 0.0999755859375


@pytest.mark.parametrize("data", [[2**53 + 1], np.array([2**64 - 1], dtype=np.uint64),
                                  np.array([2**63 - 1]), [Fraction(1, 3)],
                                  # among floats, NumPy would round the integer silently
                                  [0.5, 2**53 + 1], [[0.5, 1.0], [np.int64(2**60 + 1), 2.0]]])
def test_tensors_refuse_what_round_refuses(data):
    with pytest.raises(ValueError, match="not exactly representable"):
        fpsim.tensor(data)
    with pytest.raises(ValueError, match="not exactly representable"):
        fpsim.round(data, "fp16")
    with pytest.raises(ValueError, match="not exactly representable"):
        fpsim.tensor([1.0]) + data


def test_tensors_take_integers_and_booleans_exactly():
    assert fpsim.tensor([2**53, -3]).data.tolist() == [2.0**53, -3.0]
    assert fpsim.tensor(np.array([True, False])).data.tolist() == [1.0, 0.0]


@pytest.mark.parametrize("other", [None, "a", object(), {1: 2}])
def test_tensor_operators_refuse_what_is_not_numbers(other):
    t = fpsim.tensor([1.0])
    for op in (lambda: t + other, lambda: other + t, lambda: t * other, lambda: t @ other):
        with pytest.raises(TypeError, match="Tensor operand"):
            op()


def test_truthiness_follows_pytorch():
    assert bool(fpsim.tensor([0.0])) is False
    assert bool(fpsim.tensor(2.0)) is True
    for t in (fpsim.tensor([0.0, 1.0]), fpsim.tensor(np.zeros((0,)))):
        with pytest.raises(ValueError, match="ambiguous"):
            bool(t)
    with pytest.raises(ValueError, match="one element"):
        fpsim.tensor([1.0, 2.0]).item()


NAN = math.nan


@pytest.mark.parametrize("make", [
    lambda p: optim.SGD(p, lr=NAN), lambda p: optim.SGD(p, lr=0.1, momentum=NAN),
    lambda p: optim.SGD(p, lr=0.1, weight_decay=NAN), lambda p: optim.SGD(p, lr=0.1, dampening=NAN),
    lambda p: optim.Adam(p, lr=NAN), lambda p: optim.Adam(p, eps=NAN),
    lambda p: optim.Adam(p, betas=(NAN, 0.9)), lambda p: optim.Adam(p, weight_decay=NAN),
    lambda p: DynamicLossScale(growth_factor=NAN), lambda p: DynamicLossScale(backoff_factor=NAN),
    lambda p: DynamicLossScale(scale=NAN), lambda p: DynamicLossScale(min_scale=NAN),
    lambda p: StaticLossScale(NAN), lambda p: optim.SGD(p, lr=math.inf),
])
def test_nan_hyperparameters_are_refused(make):
    with pytest.raises(ValueError, match="must be"):
        make(nn.Linear(2, 2).parameters())


@pytest.mark.parametrize("call", [
    lambda: fpsim.round(0.1, "fp16", subnormals="no"),
    lambda: fpsim.round(0.1, "fp16", saturate="no"),
    lambda: fpsim.add(1.0, 1.0, "fp16", flags="no"),
    lambda: fpsim.matmul([[1.0]], [[1.0]], stats="no"),
    lambda: fpsim.Format(5, 2, infinities="no"),
    lambda: Policy(subnormals="no"),
    lambda: Policy(native="no"),
    lambda: fpsim.tensor([1.0], requires_grad="no"),
    lambda: nn.Linear(2, 2, bias="no"),
    lambda: optim.SGD(nn.Linear(2, 2).parameters(), lr=0.1, momentum=0.9, nesterov="no"),
])
def test_flags_must_be_booleans(call):
    with pytest.raises(ValueError, match="must be True or False"):
        call()


def test_policy_strings_round_trip_with_overrides():
    p = parse("mixed,softmax.subnormals=false,exp.seed=2,exp.rounding=stochastic,seed=5")
    assert parse(str(p)) == p
    assert "softmax.subnormals=false" in str(p) and "exp.seed=2" in str(p)


formats = st.sampled_from([*fpsim.PRESETS.values(), fpsim.Format(6, 9),
                           fpsim.Format(4, 3, infinities=False, name="custom")])
modes = st.sampled_from(fpsim.ROUNDING_MODES)


@st.composite
def policies(draw):
    fields = dict(params=draw(formats), compute=draw(formats), accum=draw(formats),
                  reduce=draw(formats), output=draw(formats), rounding=draw(modes),
                  accum_rounding=draw(modes), order=draw(st.sampled_from(["sequential",
                                                                          "pairwise", "any"])),
                  subnormals=draw(st.booleans()),
                  seed=draw(st.none() | st.integers(0, 2**32 - 1)))
    overrides = {}
    for op in draw(st.lists(st.sampled_from(OPERATIONS), max_size=4, unique=True)):
        changes = draw(st.fixed_dictionaries({}, optional=dict(
            compute=formats, rounding=modes, subnormals=st.booleans(),
            seed=st.none() | st.integers(0, 2**32 - 1), accum=formats)))
        overrides[op] = Policy(**{**fields, **changes})
    return Policy(**fields, overrides=overrides)


@settings(max_examples=300, deadline=None)
@given(policies())
def test_every_policy_parses_back_from_its_string(policy):
    assert parse(str(policy)) == policy


@pytest.mark.parametrize("text, match", [
    ("sofmax.compute=fp16", "unknown operation 'sofmax'.*known operations: add"),
    ("compute=fp16,exp.colour=red", "unknown policy key 'colour'"),
    ("seed=abc", "seed takes an integer"),
    ("mixed,subnormals=maybe", "subnormals takes true or false"),
])
def test_policy_strings_name_what_is_wrong(text, match):
    with pytest.raises(ValueError, match=match):
        parse(text)


def test_policy_overrides_name_known_operations():
    with pytest.raises(ValueError, match="unknown operation 'sofmax'"):
        Policy(overrides={"sofmax": Policy()})


def _stochastic_draws(policy, op):
    from fpsim.autograd.cast import op_policy
    from fpsim.precision import numerics

    with policy:
        p = op_policy(op)
        return numerics.round(np.full(4096, 0.1), fpsim.format("fp16"), p)


def test_override_streams_are_their_own():
    # The override changes nothing that matters for these values: with the parent's
    # stream it would round them exactly as the parent does.
    text = "compute=fp16,rounding=stochastic,seed=3,exp.subnormals=false"
    parent, override = _stochastic_draws(parse(text), "add"), _stochastic_draws(parse(text), "exp")
    agree = np.mean(parent == override)
    assert 0.4 < agree < 0.65  # independent draws: 0.4**2 + 0.6**2 = 0.52
    assert np.array_equal(_stochastic_draws(parse(text), "exp"), override)  # reproducible


def test_the_dynamic_scale_follows_pytorchs_trajectories():
    """Trajectories recorded from torch._amp_update_scale_ (tests/data/*.py made them)."""
    document = json.loads((HERE / "data" / "gradscaler_trajectories.json").read_text())
    assert document["source"].startswith("torch ")
    for case in document["cases"]:
        s = DynamicLossScale(scale=case["scale"], growth_factor=case["growth_factor"],
                             backoff_factor=case["backoff_factor"],
                             growth_interval=case["growth_interval"])
        got = []
        for overflow in case["overflows"]:
            s.update(overflow)
            got.append(int(np.float32(s.scale).view(np.uint32)))
            assert float(np.float32(s.scale)) == s.scale  # always a binary32 value
        assert got == case["scale_bits"], case["name"]


# --- 13-18: crashes and hangs on legal input --------------------------------------------


@pytest.mark.parametrize("options", [dict(), dict(order="pairwise"), dict(accum="fp16"),
                                     dict(model=fpsim.hw.H100), dict(stats=True)])
def test_zero_size_batches(options, backend_name):
    out = fpsim.matmul(np.zeros((0, 3, 4)), np.zeros((0, 4, 5)), **options)
    value = out[0] if options.get("stats") else out
    assert value.shape == (0, 3, 5)


def test_empty_axes_sum_to_zero(backend_name):
    assert fpsim.sum(np.zeros((0, 3)), axis=0).tolist() == [0.0, 0.0, 0.0]
    assert fpsim.sum(np.zeros((3, 0)), axis=1, accum="fp16").tolist() == [0.0] * 3
    assert fpsim.sum(np.empty((0, 2**40)), axis=1).shape == (0,)  # nothing allocated


def test_empty_products_with_a_huge_inner_dimension_return_at_once(backend_name):
    out = fpsim.matmul(np.empty((0, 2**40)), np.empty((2**40, 0)), accum="fp16")
    assert out.shape == (0, 0)


def test_empty_layers():
    layer = nn.Linear(0, 2)
    y = layer(fpsim.tensor(np.zeros((3, 0))))
    assert y.shape == (3, 2) and np.array_equal(y.data, np.broadcast_to(layer.bias.data, (3, 2)))
    with pytest.raises(ValueError, match="kernel_size must be an integer in 1"):
        nn.Conv2d(3, 2, 0)
    with pytest.raises(ValueError, match="in_features must be an integer in 0"):
        nn.Linear(-1, 2)


def test_gradient_counts_take_a_format_name():
    counts = GradientCounts.of([np.array([0.0, 1e-6, np.inf, 1.0])], "fp16")
    assert (counts.total, counts.zero, counts.subnormal, counts.overflow) == (4, 1, 1, 1)


def test_ulp_distance_of_negative_fp64_values():
    x = fpsim.to_bits(np.array([-1.0, -1.0, 1.0, -0.0, -np.inf]), "fp64")
    y = fpsim.to_bits(np.array([-1.0, np.nextafter(-1.0, 0.0), -1.0, 0.0, np.inf]), "fp64")
    d = ulp_distance(x, y, "fp64")
    assert d[:2].tolist() == [0.0, 1.0] and d[3] == 0.0
    assert d[2] == 2.0 * 0x3FF0000000000000 and d[4] == 2.0 * 0x7FF0000000000000


# --- 19-20: the command line and messages ------------------------------------------------


def cli(*args):
    return subprocess.run([sys.executable, "-m", "fpsim", *args], capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("args, message", [
    (["reproduce", "--out", "/dev/null/x"], "cannot make the output folder"),
    (["reproduce", "--out", "/proc/x"], "cannot make the output folder"),
    (["bench", "elementwise", "-n", "-5"], "-n must be at least 1"),
    (["bench", "matmul", "--sizes", "abc"], "--sizes takes matrix sizes"),
    (["bench", "matmul", "--sizes", "-3"], "--sizes must be positive"),
    (["bench", "--repeats", "0"], "--repeats must be at least 1"),
    (["compare", "--out", "/dev/null/x"], "cannot make the output folder"),
])
def test_the_command_line_refuses_with_a_message(args, message):
    result = cli(*args)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr


def test_negative_values_on_the_command_line():
    result = cli("-1e-7", "--formats", "fp16")
    assert result.returncode == 0, result.stderr
    assert "-1e-07" in result.stdout


@pytest.mark.parametrize("call, match", [
    (lambda: fpsim.sum(np.zeros(3), axis="x"), "axis must be an integer"),
    (lambda: fpsim.sum(np.zeros(3), axis=1.0), "axis must be an integer"),
    (lambda: fpsim.conv2d(np.zeros((1, 1, 3, 3)), np.ones((1, 1, 2, 2)), stride="x"),
     "stride must be an integer"),
    (lambda: fpsim.conv2d(np.zeros((1, 1, 3, 3)), np.ones((1, 1, 2, 2)), padding=(1, 2, 3)),
     "padding must be an integer or a pair"),
    (lambda: fpsim.conv2d(np.zeros((1, 1, 3, 3)), np.ones((1, 1, 2, 2)), stride=0),
     "stride must be an integer in 1"),
    (lambda: fpsim.conv2d(np.zeros((1, 1, 3, 3)), np.ones((1, 1, 0, 0))),
     "kernel must be at least 1x1"),
    (lambda: optim.Adam(nn.Linear(2, 2).parameters(), betas=(0.9,)), "betas must be a pair"),
    (lambda: optim.Adam(nn.Linear(2, 2).parameters(), betas="ab"), "betas must be a pair"),
    (lambda: fpsim.round(2**2000, "fp16"), "beyond float64's range"),
    (lambda: fpsim.round(1 + 2j, "fp16"), "expected real values"),
    (lambda: fpsim.format("e99m99"), "exp_bits=99 is out of the supported range"),
])
def test_messages_name_the_parameter(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# --- found by tests/test_fuzz.py and by hand after the list ----------------------------


def test_an_operand_below_the_grid_is_refused_not_divided_by(backend_name):
    with pytest.raises(ValueError, match="not representable in fp16"):
        fpsim.div([0.0], [5e-324], "fp16")


def test_a_huge_block_runs_without_padding_k_to_it(backend_name):
    model = fpsim.hw.BlockFMA("huge", block=2**40, frac_bits=1, exp_floor=None,
                              output="fp16", output_rounding="nearest_even")
    # Products 3 and 8 aligned to 8 = 2**3 with one fraction bit: 3 is cut to 0.
    assert fpsim.matmul([[1.0, 2.0]], [[3.0], [4.0]], model=model)[0, 0] == 8.0


def test_autograd_messages():
    x = fpsim.tensor(np.zeros((2, 4)))
    with pytest.raises(ValueError, match="exponent must be a real number"):
        x ** "a"
    with pytest.raises(ValueError, match="batch_norm got 4 channels"):
        nn.BatchNorm1d(3)(x)
    # Found by mypy (issue 19): one running statistic without the other crashed (training)
    # or normalized by an object array of None (inference).
    for training in (True, False):
        with pytest.raises(ValueError, match="running_mean and running_var together"):
            nn.functional.batch_norm(x, np.zeros(4), None, training=training)
    t = fpsim.tensor([1.0], requires_grad=True)
    with pytest.raises(ValueError, match="the gradient has shape \\(3,\\)"):
        (t * 2.0).backward(np.ones(3))
    (t * 2.0).backward(1.0)  # a number will do for one element
    assert t.grad.tolist() == [2.0]
