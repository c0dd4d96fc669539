"""What PyTorch and NumPy users expect of a Tensor: float(), argmax (issue 30 item 8)."""

import numpy as np
import pytest

import fpsim


def test_float_of_a_one_element_tensor():
    assert float(fpsim.tensor([0.1], format="bf16")) == 0.10009765625
    assert float(fpsim.tensor(np.float16(3.5))) == 3.5
    loss = (fpsim.tensor([[2.0]], requires_grad=True) * 3).sum()
    assert float(loss) == 6.0
    assert np.isnan(float(fpsim.tensor([np.nan])))


@pytest.mark.parametrize("shape", [(2,), (0,), (2, 3)])
def test_float_of_other_tensors_is_an_error(shape):
    with pytest.raises(ValueError, match=rf"one element, got shape \({shape[0]}"):
        float(fpsim.tensor(np.ones(shape)))


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("keepdims", [False, True])
def test_argmax_is_numpys(axis, keepdims):
    values = np.array([[0.5, 2.0, 2.0, np.nan], [3.0, -1.0, 3.0, -np.inf], [1.0, 1.0, 0.0, 7.0]])
    t = fpsim.tensor(values, requires_grad=True, format="fp16")
    got = t.argmax(axis=axis, keepdims=keepdims)
    expected = np.argmax(fpsim.round(values, "fp16"), axis=axis, keepdims=keepdims)
    assert got.dtype == np.intp and not isinstance(got, fpsim.Tensor)
    np.testing.assert_array_equal(got, expected)
    assert got.shape == np.shape(expected)


def test_argmax_rejects_bad_axes():
    t = fpsim.tensor([[1.0, 2.0]])
    with pytest.raises(np.exceptions.AxisError):
        t.argmax(axis=2)
    with pytest.raises(TypeError, match="integer axis"):
        t.argmax(axis=1.0)
    with pytest.raises(TypeError, match="integer axis"):
        t.argmax(axis=True)
    with pytest.raises(ValueError, match="keepdims"):
        t.argmax(keepdims="yes")
