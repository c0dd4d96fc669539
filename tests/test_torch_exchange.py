"""fpsim.torch's exchange: torch tensors and fpsim's arrays on the same memory (DLPack),
both ways; checked by the data pointers and by writes seen through the other side."""

import pytest

torch = pytest.importorskip("torch")

import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
from torch_cuda import skip_without_cuda  # noqa: E402

from fpsim.torch import to_array, to_tensor  # noqa: E402

DTYPES = [(torch.float16, np.float16), (torch.bfloat16, ml_dtypes.bfloat16),
          (torch.float32, np.float32), (torch.float64, np.float64)]


@pytest.mark.parametrize("tdtype, npdtype", DTYPES)
def test_a_cpu_tensor_is_a_numpy_array_on_its_memory(tdtype, npdtype):
    t = torch.arange(6, dtype=tdtype).reshape(2, 3)
    a = to_array(t)
    assert type(a) is np.ndarray and a.dtype == np.dtype(npdtype) and a.shape == (2, 3)
    assert a.ctypes.data == t.data_ptr()
    a[1, 2] = 7.5
    assert t[1, 2].item() == 7.5
    np.testing.assert_array_equal(a.astype(np.float64), t.double().numpy())


@pytest.mark.parametrize("tdtype, npdtype", DTYPES)
def test_an_array_is_a_tensor_on_its_memory(tdtype, npdtype):
    a = np.arange(6, dtype=np.float64).astype(npdtype).reshape(3, 2)
    t = to_tensor(a)
    assert t.dtype == tdtype and t.device.type == "cpu" and tuple(t.shape) == (3, 2)
    assert t.data_ptr() == a.ctypes.data
    t[0, 1] = -2.0
    assert float(a[0, 1]) == -2.0


def test_strides_zero_d_empty_and_grad_carry_over():
    t = torch.arange(12.0).reshape(3, 4).t()  # not contiguous
    a = to_array(t)
    assert a.strides == tuple(4 * s for s in t.stride()) and a.ctypes.data == t.data_ptr()
    np.testing.assert_array_equal(a, t.numpy())
    assert to_array(torch.tensor(2.5)).shape == () and float(to_array(torch.tensor(2.5))) == 2.5
    assert to_array(torch.zeros(0, 3)).shape == (0, 3)
    w = torch.ones(2, requires_grad=True)  # detached: the array is outside autograd
    assert to_array(w).ctypes.data == w.data_ptr()
    back = to_tensor(to_array(t))
    assert back.stride() == t.stride() and back.data_ptr() == t.data_ptr()


@pytest.mark.parametrize("bad", [[1.0, 2.0], np.zeros(2), 1.0, None])
def test_to_array_takes_tensors_only(bad):
    with pytest.raises(TypeError, match="must be a torch.Tensor"):
        to_array(bad)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8, torch.bool,
                                   torch.complex64])
def test_to_array_takes_float_tensors_only(dtype):
    with pytest.raises(TypeError, match="floating-point tensor"):
        to_array(torch.zeros(2, dtype=dtype))


def test_to_array_refuses_sparse_tensors():
    with pytest.raises(TypeError, match="torch.sparse_coo tensor; fpsim.torch takes dense"):
        to_array(torch.eye(3).to_sparse())


def test_to_array_refuses_other_devices():
    with pytest.raises(ValueError, match="device meta"):
        to_array(torch.empty(2, device="meta"))


def test_to_tensor_refuses_what_is_not_an_array():
    for bad in ([1.0], 2.0, torch.zeros(2).tolist()):
        with pytest.raises(TypeError, match="expected a NumPy or CuPy array"):
            to_tensor(bad)
    read_only = np.zeros(2)
    read_only.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        to_tensor(read_only)
    with pytest.raises(ValueError, match="float8_e4m3fn cannot be a torch tensor"):
        to_tensor(np.zeros(2, dtype=ml_dtypes.float8_e4m3fn))


@pytest.mark.gpu
def test_a_cuda_tensor_is_a_cupy_array_on_its_memory():
    skip_without_cuda()
    import cupy

    t = torch.arange(6, dtype=torch.float32, device="cuda")
    a = to_array(t)
    assert isinstance(a, cupy.ndarray) and a.data.ptr == t.data_ptr()
    back = to_tensor(a)
    assert back.device == t.device and back.data_ptr() == t.data_ptr()
    with pytest.raises(TypeError, match="CuPy has no bfloat16"):
        to_array(t.bfloat16())
