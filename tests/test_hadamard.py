"""The random Hadamard transform (fpsim.quantize.hadamard) against exact references:
Sylvester's recursion for the matrix, the exact accumulation reference
(tests/accumulation_reference.py) for every sum, and exact round trips."""

import numpy as np
import pytest
from accumulation_reference import ref_matmul
from hypothesis import given, settings
from hypothesis import strategies as st
from reference import assert_same_bits as check

import fpsim
from fpsim.quantize import hadamard_matrix, hadamard_transform, random_signs


def sylvester(n):
    """H_1 = [1]; H_2m = [[H, H], [H, -H]] (the definition, built by Kronecker products)."""
    h = np.ones((1, 1))
    while h.shape[0] < n:
        h = np.kron(np.array([[1.0, 1.0], [1.0, -1.0]]), h)
    return h


@pytest.mark.parametrize("n", [1, 4, 16, 64, 256])
def test_the_matrix_is_sylvesters_and_orthogonal(n):
    h = hadamard_matrix(n)
    np.testing.assert_array_equal(h, sylvester(n))
    np.testing.assert_array_equal(h @ h.T, n * np.eye(n))


def test_the_signs_are_the_documented_stream():
    bits = np.random.default_rng(12345).integers(0, 2, 16)
    np.testing.assert_array_equal(random_signs(12345), 1.0 - 2.0 * bits)
    assert set(random_signs(7, 64).tolist()) == {1.0, -1.0}


def fp32_values(rng, shape, spread=20):
    return (rng.standard_normal(shape) * np.exp2(rng.integers(-spread, spread, shape))
            ).astype(np.float32).astype(np.float64)


@pytest.mark.parametrize("order", ["sequential", "pairwise"])
@pytest.mark.parametrize("accum,rounding", [("fp32", "nearest_even"), ("bf16", "toward_zero"),
                                            ("fp16", "up")])
def test_every_sum_is_the_exact_references(order, accum, rounding):
    rng = np.random.default_rng(3)
    x = fp32_values(rng, (5, 48), spread=4 if accum != "fp32" else 20)
    if accum != "fp32":
        x = np.asarray(fpsim.round(x, accum))
    signs = random_signs(11)
    q = signs[:, None] * sylvester(16) / 4
    got = hadamard_transform(x, seed=11, accum=accum, rounding=rounding, order=order)
    want = ref_matmul(x.reshape(-1, 16), q, accum=accum, rounding=rounding,
                      order=order).reshape(x.shape)
    check(got, want, f"{accum} {rounding} {order}")
    back = hadamard_transform(x, seed=11, inverse=True, accum=accum, rounding=rounding,
                              order=order)
    check(back, ref_matmul(x.reshape(-1, 16), q.T, accum=accum, rounding=rounding,
                           order=order).reshape(x.shape), "inverse")


def test_an_axis_other_than_the_last_and_a_tensor_core():
    rng = np.random.default_rng(4)
    x = fp32_values(rng, (32, 3))
    q = random_signs(5)[:, None] * sylvester(16) / 4
    got = hadamard_transform(x, seed=5, axis=0)
    want = np.moveaxis(ref_matmul(np.moveaxis(x, 0, -1).reshape(-1, 16), q)
                       .reshape(3, 32), -1, 0)
    check(got, want, "axis 0")
    x = np.asarray(fpsim.round(x / 2.0**10, "fp16"))  # the H100 model reads fp16
    hw = hadamard_transform(x, seed=5, axis=0, model=fpsim.hw.H100)
    blocks = np.moveaxis(x, 0, -1).reshape(-1, 16)
    check(hw, np.moveaxis(np.asarray(fpsim.matmul(blocks, q, model=fpsim.hw.H100))
                          .reshape(3, 32), -1, 0), "H100")


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(-2**10, 2**10), min_size=16, max_size=16),
       st.integers(-20, 20), st.integers(0, 2**64 - 1))
def test_a_round_trip_is_exact_when_every_sum_is(ints, shift, seed):
    """Integers below 2**10 times 2**shift: every partial sum of +-x/4 is exact in fp32,
    so the inverse gives x back bit for bit (and the transform keeps the sum of squares)."""
    x = np.array(ints, dtype=np.float64) * 2.0**shift
    y = hadamard_transform(x, seed=seed)
    np.testing.assert_array_equal(hadamard_transform(y, seed=seed, inverse=True), x)
    assert float(np.sum(y.astype(np.float64) ** 2)) == float(np.sum(x**2))


def test_nonfinite_values_and_empty_shapes():
    x = np.zeros((2, 16))
    x[0, 3] = np.inf
    x[1, 0] = np.nan
    y = hadamard_transform(x, seed=1)
    assert np.all(np.isinf(y[0])) and np.all(np.isnan(y[1]))
    assert hadamard_transform(np.zeros((0, 16)), seed=1).shape == (0, 16)
    assert hadamard_transform(np.zeros((16, 0)), seed=1, axis=0).shape == (16, 0)


@pytest.mark.parametrize("kwargs,message", [
    (dict(size=8), "power of 4"),
    (dict(size=0), "size must be an integer in 1..inf"),
    (dict(size=True), "size must be an integer"),
    (dict(size=2.0**4), "size must be an integer"),
    (dict(seed=None), "exactly one of seed"),
    (dict(signs=[1.0] * 16), "exactly one of seed"),
    (dict(seed=-1), "seed must be an integer in 0"),
    (dict(seed=2**64), "seed must be an integer in 0"),
    (dict(seed=float("nan")), "seed must be an integer"),
    (dict(axis=2), "axis 2 is out of bounds"),
    (dict(axis="0"), "axis must be an integer"),
    (dict(inverse="yes"), "inverse"),
    (dict(accum="fp99"), "fp99"),
    (dict(order="random"), "unknown order"),
])
def test_bad_arguments_are_refused_by_name(kwargs, message):
    options = dict(seed=1)
    options.update(kwargs)
    if "signs" in kwargs:
        options["seed"] = 1
    if options.get("seed", 0) is None:
        del options["seed"]
    with pytest.raises(ValueError, match=message):
        hadamard_transform(np.zeros((2, 16)), **options)


@pytest.mark.parametrize("signs,message", [
    ([1.0] * 15, r"signs must be 16 values, each \+1 or -1; got shape \(15,\)"),
    ([1.0] * 15 + [0.5], r"each \+1 or -1"),
    ([1.0] * 15 + [np.nan], r"each \+1 or -1"),
    ("+-", "signs"),
])
def test_bad_signs_are_refused(signs, message):
    with pytest.raises(ValueError, match=message):
        hadamard_transform(np.zeros(16), signs=signs)


def test_inputs_the_transform_cannot_take():
    with pytest.raises(ValueError, match="not a multiple of the block 16"):
        hadamard_transform(np.zeros((2, 24)), seed=0)
    with pytest.raises(ValueError, match="at least one dimension"):
        hadamard_transform(1.0, seed=0)
    with pytest.raises(ValueError, match="float32"):
        hadamard_transform(np.full(16, 0.1), seed=0)  # 0.1 is no float32 value
    with pytest.raises(ValueError):
        hadamard_transform(["a"] * 16, seed=0)
