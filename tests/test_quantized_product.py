"""fpsim.matmul of block-scaled operands (fpsim.quantize.product) against an exact
reference: each term element * element * scale * scale formed from the Quantized's own
values and scales by repetition here, the terms added by tests/accumulation_reference.py,
an NVFP4 tensor scale applied in Fractions and rounded once."""

from fractions import Fraction

import numpy as np
import pytest
from accumulation_reference import ref_matmul
from hypothesis import given, settings
from hypothesis import strategies as st
from reference import assert_same_bits as check
from reference import ref_round

import fpsim
from fpsim.quantize import scheme as scheme_of

MX = ["mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp6_e3m2", "mxfp4_e2m1"]


def wide(rng, shape, spread=12):
    return rng.standard_normal(shape) * np.exp2(rng.integers(-spread, spread, shape))


def per_element(q, k_axis):
    """Each element's block scale, by repeating the scales along the blocked axes."""
    sch = q.scheme
    if sch.rows > 1:
        s = np.repeat(np.repeat(q.scales, sch.rows, axis=-2), sch.block, axis=-1)
        return s[..., :q.shape[-2], :q.shape[-1]]
    return np.take(np.repeat(q.scales, sch.block, axis=k_axis),
                   np.arange(q.shape[k_axis]), axis=k_axis)


def reference(qa, qb, **options):
    a = qa.values * per_element(qa, qa.values.ndim - 1)
    b = qb.values * per_element(qb, qb.values.ndim - 2)
    acc = ref_matmul(a, b, **options)
    if qa.tensor_scale is None and qb.tensor_scale is None:
        return acc
    alpha = ref_round(Fraction(qa.tensor_scale or 1.0) * Fraction(qb.tensor_scale or 1.0),
                      "fp32")[0]
    accum = options.get("accum", "fp32")
    # A zero or non-finite acc times the positive alpha keeps its sign and class.
    return np.array([ref_round(Fraction(float(v)) * Fraction(alpha), accum)[0]
                     if np.isfinite(v) and v != 0 else v * alpha
                     for v in acc.ravel()]).reshape(acc.shape)


@pytest.mark.parametrize("scheme_a,scheme_b", [(s, s) for s in MX] + [
    ("mxfp8_e4m3", "mxfp8_e5m2"), ("mxfp4_e2m1", "mxfp6_e3m2"), ("nvfp4", "nvfp4"),
    ("nvfp4_16x16", "nvfp4")])
@pytest.mark.parametrize("accum,rounding,order", [
    ("fp32", "nearest_even", "sequential"), ("bf16", "toward_zero", "pairwise"),
    ("fp16", "up", "sequential")])
def test_every_term_exact_and_added_as_the_reference(scheme_a, scheme_b, accum, rounding,
                                                     order):
    rng = np.random.default_rng(len(scheme_a) + len(accum))
    spread = 12 if accum != "fp16" else 3
    x, y = wide(rng, (3, 64), spread), wide(rng, (64, 5), spread)
    qa = fpsim.quantize(x, scheme_a, pad=True)
    qb = (fpsim.quantize(y, scheme_b, pad=True) if scheme_b == "nvfp4_16x16"
          else fpsim.quantize(y, scheme_b, axis=0))
    got = fpsim.matmul(qa, qb, accum=accum, rounding=rounding, order=order)
    check(got, reference(qa, qb, accum=accum, rounding=rounding, order=order),
          f"{scheme_a} x {scheme_b} {accum} {rounding} {order}")


def test_scales_beyond_binary32_and_the_any_order():
    """MX scales reach 2**127 and 2**-127: the terms are still exact (binary64), and
    order="any" adds them sequentially when they are no float32 values."""
    rng = np.random.default_rng(9)
    x = wide(rng, (2, 32)) * 2.0**120
    y = wide(rng, (32, 2)) * 2.0**-125
    qa, qb = fpsim.quantize(x, "mxfp8_e4m3"), fpsim.quantize(y, "mxfp8_e4m3", axis=0)
    assert qa.scales.max() > 2.0**100 and qb.scales.min() < 2.0**-120
    check(fpsim.matmul(qa, qb, order="any"), reference(qa, qb), "any, wide scales")
    big = fpsim.quantize(np.full((1, 32), 2.0**127), "mxfp8_e4m3")
    check(fpsim.matmul(big, fpsim.quantize(np.full((32, 1), 4.0), "mxfp8_e4m3", axis=0)),
          np.array([[np.inf]]), "overflow")


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(MX + ["nvfp4"]), st.integers(-160, 140), st.integers(0, 60),
       st.integers(0, 2**32))
def test_the_scales_proof_of_binary32_terms_never_errs(scheme, low, spread, seed):
    """order="any" hands the terms' factors to BLAS as float32 when the scales prove each
    element times its scale a binary32 value (``_binary32_by_scales``): whenever they do,
    every such value converts to float32 exactly; and ordinary data is proven so."""
    from fpsim.quantize.product import _binary32_by_scales

    rng = np.random.default_rng(seed)
    x = rng.standard_normal((4, 64)) * 2.0 ** rng.integers(low, low + spread + 1, (4, 1))
    x[0, :32] = 0.0  # a zero block (NVFP4: a zero scale)
    x[1, 40] = np.nan  # a NaN block (MX: a NaN scale)
    with np.errstate(over="ignore", invalid="ignore"):
        q = fpsim.quantize(x, scheme)
    terms = q._scaled
    if _binary32_by_scales(q):
        with np.errstate(over="ignore"):
            assert np.array_equal(terms.astype(np.float32).astype(np.float64), terms,
                                  equal_nan=True)
    if -100 <= low and low + spread <= 100:
        assert _binary32_by_scales(q)


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(MX + ["nvfp4"]), st.integers(1, 3), st.integers(1, 4),
       st.integers(0, 3), st.sampled_from(["nearest_even", "toward_zero", "down", "odd"]),
       st.integers(0, 2**32))
def test_shapes_and_modes(scheme, m, n, blocks, rounding, seed):
    rng = np.random.default_rng(seed)
    k = blocks * scheme_of(scheme).block
    x, y = wide(rng, (m, k)), wide(rng, (k, n))
    qa, qb = fpsim.quantize(x, scheme), fpsim.quantize(y, scheme, axis=0)
    got, stats = fpsim.matmul(qa, qb, rounding=rounding, stats=True)
    check(got, reference(qa, qb, rounding=rounding), f"{scheme} {m}x{k}x{n} {rounding}")
    assert stats.additions == m * n * k


def test_nan_blocks_and_batches():
    x = np.ones((2, 3, 32))
    x[0, 1, 5] = np.nan
    y = np.ones((2, 32, 4))
    qa, qb = fpsim.quantize(x, "mxfp8_e4m3"), fpsim.quantize(y, "mxfp8_e4m3", axis=-2)
    got = fpsim.matmul(qa, qb)
    assert got.shape == (2, 3, 4)
    assert np.isnan(got[0, 1]).all() and not np.isnan(got[1]).any()
    check(got, reference(qa, qb), "batched, a NaN block")


@pytest.mark.parametrize("make,match", [
    (lambda: (fpsim.quantize(np.ones((2, 32)), "mxfp8_e4m3"), np.ones((32, 2))),
     "needs both quantized"),
    (lambda: (fpsim.quantize(np.ones((2, 32)), "mxfp8_e4m3"),
              fpsim.quantize(np.ones((32, 2)), "mxfp8_e4m3", axis=1, pad=True)),
     "blocks run along axis 1"),
    (lambda: (fpsim.quantize(np.ones((2, 32)), "mxfp8_e4m3"),
              fpsim.quantize(np.ones((32, 2)), "nvfp4", axis=0)), "span 32 elements"),
    (lambda: (fpsim.quantize(np.ones((2, 32)), "mxfp8_e4m3"),
              fpsim.quantize(np.ones((64, 2)), "mxfp8_e4m3", axis=0)), "inner dimensions"),
    (lambda: (fpsim.quantize(np.ones((2, 128)), "fp8_block1x128"),
              fpsim.quantize(np.ones((128, 2)), "fp8_block1x128", axis=0)), "binary32 scales"),
    (lambda: (fpsim.quantize(np.ones(32), "mxfp8_e4m3"),
              fpsim.quantize(np.ones((32, 2)), "mxfp8_e4m3", axis=0)), "2 dimensions"),
])
def test_products_that_cannot_be_formed_are_refused(make, match):
    qa, qb = make()
    with pytest.raises(ValueError, match=match):
        fpsim.matmul(qa, qb)


def test_options_a_block_scaled_product_refuses():
    qa = fpsim.quantize(np.ones((2, 16)), "nvfp4")
    qb = fpsim.quantize(np.ones((16, 2)), "nvfp4", axis=0)
    # A BlockFMA reads unscaled values; the block-scaled instructions are tested in
    # test_block_scaled_presets.py.
    with pytest.raises(ValueError, match="takes a block-scaled instruction"):
        fpsim.matmul(qa, qb, model=fpsim.hw.B200)
    with pytest.raises(ValueError, match="tensor scale"):
        fpsim.matmul(qa, qb, c=1.0)
    with pytest.raises(ValueError, match="unknown order"):
        fpsim.matmul(qa, qb, order="random")
    with pytest.raises(ValueError):
        fpsim.matmul(qa, qb, accum="fp99")
