"""A stand-in for CuPy under Numba's CUDA simulator: NumPy arrays marked as device arrays.

Its ``ndarray`` has ``__cuda_array_interface__``, so fpsim treats it as a GPU array
(computes into arrays of this module and hands them to the kernels as they are),
and the simulator, which takes NumPy arrays, runs the kernels on it. Only what fpsim
calls on CuPy is here; anything else fails loudly.
"""

import numpy as np


class ndarray(np.ndarray):  # noqa: N801 - CuPy's name
    @property
    def __cuda_array_interface__(self):
        return {"shape": self.shape, "typestr": self.dtype.str, "version": 3,
                "data": (self.ctypes.data, False), "strides": self.strides}

    def __array__(self, dtype=None, copy=None):
        # CuPy refuses implicit conversion to NumPy; so does the stand-in.
        raise TypeError("Implicit conversion to a NumPy array is not allowed (fake_cupy)")

    def item(self):
        return self.view(np.ndarray).item()

    @property
    def flags(self):
        return _Flags(self.view(np.ndarray))

    def __repr__(self):
        return "fake_cupy." + repr(self.view(np.ndarray))


def _device(a):
    return np.asarray(a).view(ndarray)


def _host(a):
    return a.view(np.ndarray) if isinstance(a, ndarray) else a


def asarray(a, dtype=None):
    return _device(np.asarray(_host(a), dtype=dtype))


def asnumpy(a):
    return np.array(_host(a))


def ascontiguousarray(a, dtype=None):
    return _device(np.ascontiguousarray(_host(a), dtype=dtype))


def empty(shape, dtype=np.float64):
    return _device(np.empty(shape, dtype))


def zeros(shape, dtype=np.float64):
    return _device(np.zeros(shape, dtype))


class _Flags:
    """CuPy's flags: contiguity and ownership, no writeable flag."""

    def __init__(self, a):
        self.c_contiguous = a.flags.c_contiguous
        self.f_contiguous = a.flags.f_contiguous
        self.owndata = a.flags.owndata

    def __getitem__(self, name):
        return {"C_CONTIGUOUS": self.c_contiguous, "F_CONTIGUOUS": self.f_contiguous,
                "OWNDATA": self.owndata}[name]


def ones(shape, dtype=np.float64):
    return _device(np.ones(shape, dtype))


def broadcast_to(a, shape):
    return _device(np.broadcast_to(_host(a), shape))


def moveaxis(a, source, destination):
    return _device(np.moveaxis(_host(a), source, destination))


def isnan(a):
    return _device(np.isnan(_host(a)))


def empty_like(a):
    return _device(np.empty_like(_host(a)))


def zeros_like(a):
    return _device(np.zeros_like(_host(a)))


def copyto(dst, src, casting="same_kind"):
    np.copyto(_host(dst), _host(src), casting=casting)


def may_share_memory(a, b):
    return np.may_share_memory(_host(a), _host(b))


class _Device:
    def synchronize(self):
        pass


class cuda:  # noqa: N801 - CuPy's name
    Device = _Device
