"""Batched products: each batch element equals the 2-D product of its slices, bit for bit."""

import numpy as np
import pytest

import fpsim
from fpsim import hw

SHAPES = [
    ((2, 3, 5, 7), (3, 7, 4)),
    ((2, 1, 5, 7), (3, 7, 4)),
    ((5, 7), (2, 7, 4)),
    ((2, 5, 7), (7, 4)),
    ((1, 5, 7), (1, 7, 4)),
]


@pytest.mark.parametrize("shape_a, shape_b", SHAPES)
@pytest.mark.parametrize("options", [
    {"accum": "fp16"},
    {"accum": "bf16", "order": "pairwise", "c": 0.5},
    {"model": hw.H100},
])
def test_batch_elements_are_slice_products(backend_name, shape_a, shape_b, options):
    rng = np.random.default_rng(len(shape_a) * 10 + len(shape_b))
    a = fpsim.round(rng.standard_normal(shape_a), "fp16")
    b = fpsim.round(rng.standard_normal(shape_b), "fp16")
    out = fpsim.matmul(a, b, **options)
    batch = np.broadcast_shapes(shape_a[:-2], shape_b[:-2])
    assert out.shape == batch + (shape_a[-2], shape_b[-1])
    for index in np.ndindex(*batch):
        ia = tuple(i if s > 1 else 0 for i, s in zip(index[-len(shape_a[:-2]):], shape_a[:-2],
                                                      strict=True)) if shape_a[:-2] else ()
        ib = tuple(i if s > 1 else 0 for i, s in zip(index[-len(shape_b[:-2]):], shape_b[:-2],
                                                      strict=True)) if shape_b[:-2] else ()
        expected = fpsim.matmul(a[ia], b[ib], **options)
        np.testing.assert_array_equal(out[index], expected)


@pytest.mark.parametrize("options", [{"accum": "bf16", "rounding": "toward_zero"},
                                     {"model": hw.H100}])
def test_read_only_inputs_share_the_loops_of_writeable_ones(options):
    """Read-only inputs (np.broadcast_to views, frozen arrays) give the bits of writeable
    copies, from the loops compiled for those: no loop is compiled again for them."""
    from fpsim.backends import backend, get_backend

    rng = np.random.default_rng(4)
    a = np.asarray(fpsim.round(rng.standard_normal((6, 40)), "bf16"))
    b = np.asarray(fpsim.round(rng.standard_normal((40, 5)), "bf16"))
    frozen = a.copy()
    frozen.flags.writeable = False
    with backend("numba"):
        loops = get_backend()._loops
        want = fpsim.matmul(a, b, **options)
        compiled = {id(loop): len(loop.signatures) for loop in loops.values()}
        got = fpsim.matmul(frozen, np.broadcast_to(b, b.shape), **options)
        assert {id(loop): len(loop.signatures) for loop in loops.values()} == compiled
    assert np.array_equal(np.asarray(got).view(np.int64), np.asarray(want).view(np.int64))
