"""A stand-in for CuPy under Numba's CUDA simulator: NumPy arrays marked as device arrays.

Its ``ndarray`` has ``__cuda_array_interface__``, so fpsim treats it as a GPU array
(computes into arrays of this module and hands them to the kernels as they are),
and the simulator, which takes NumPy arrays, runs the kernels on it.

Strict as CuPy is about the host: ``__array__`` refuses implicit conversion, and a
ufunc or NumPy function given a stand-in array and a host array of more than zero
dimensions raises TypeError (CuPy's "Unsupported type"). Any other NumPy function is
forwarded (``fake_cupy.exp``, ``fake_cupy.stack``, ...): it takes stand-in arrays and
returns them, and each forwarded call's name is recorded in ``calls`` (a test can see
that no reduction of CuPy's own ran).

Like CuPy, whose kernels are compiled with ``-ftz=true`` (found on an H200: a binary32
subnormal read or written by CuPy's own kernels is flushed to zero), the stand-in flushes
binary32 subnormals to zeros of their sign wherever its own operations read or write
float32: ufuncs and the arithmetic NumPy functions (``ARITHMETIC``) on float32 operands or
results, and every conversion between float32 and another float dtype (``astype``,
``asarray``, ``ascontiguousarray``, ``copyto``, item assignment). And a float32 result of
its arithmetic has the GPU's one binary32 NaN, ``0x7fffffff``, for every NaN. The
kernels fpsim compiles itself (numba-cuda, no ``ftz``) keep subnormals: only what fpsim
leaves to CuPy is flushed.
"""

import numpy as np

reads = 0
"""Device-to-host reads so far: ``item``, ``tolist``, ``get``, ``asnumpy`` and the
conversions ``float``, ``int``, ``bool``, ``complex`` and ``operator.index`` of a stand-in
array (each a synchronisation on a GPU). ``__array__`` is refused outright."""

calls: list[str] = []
"""The names of the NumPy functions forwarded so far (``__getattr__``) and of the ufunc
methods other than calls (``add.reduce`` ...), in order."""

# What CuPy takes beside its arrays: scalars, and 0-d host arrays.
_SCALARS = (int, float, complex, bool, np.generic)
F32 = np.dtype(np.float32)
GPU_NAN32 = np.uint32(0x7FFFFFFF)  # the binary32 NaN the GPU's arithmetic gives
# The NumPy functions that CuPy computes with arithmetic (its reductions and products).
ARITHMETIC = frozenset({"max", "min", "amax", "amin", "nanmax", "nanmin", "sum", "nansum",
                        "prod", "mean", "cumsum", "dot", "abs", "absolute", "maximum",
                        "minimum", "clip", "fmax", "fmin", "linalg.norm", "square", "sqrt"})


def flushed(a):
    """A host array with its binary32 subnormals flushed to zeros of their sign (CuPy's
    ``-ftz=true``); other dtypes as they are."""
    if isinstance(a, np.float32):
        a = np.asarray(a)
    if not isinstance(a, np.ndarray) or a.dtype != F32:
        return a
    tiny = (np.abs(a.view(np.ndarray)) < np.finfo(np.float32).tiny) & (a != 0)
    if not tiny.any():
        return a
    out = np.array(a.view(np.ndarray))
    out[tiny] = np.copysign(np.float32(0), out[tiny])
    return out


def _gpu_result(a):
    """A float32 result of CuPy's arithmetic: flushed, each NaN the GPU's."""
    a = flushed(a)
    if isinstance(a, np.ndarray) and a.dtype == F32:
        nan = np.isnan(a)
        if nan.any():
            a = np.array(a)
            a.view(np.uint32)[nan] = GPU_NAN32
    return a


def converted(a, dtype):
    """``a`` converted to ``dtype`` by CuPy: a binary32 side flushed."""
    a = np.asarray(a)
    dtype = a.dtype if dtype is None else np.dtype(dtype)
    if dtype == a.dtype:
        return a
    out = flushed(a).astype(dtype)
    return flushed(out) if dtype == F32 else out


def _refuse_host(values):
    """TypeError for a host array of more than zero dimensions among ``values``."""
    for v in values:
        if isinstance(v, (list, tuple)):
            _refuse_host(v)
        elif isinstance(v, np.ndarray) and not isinstance(v, ndarray) and v.ndim > 0:
            raise TypeError(f"Unsupported type {type(v)} (fake_cupy: a host array "
                            "mixed with device arrays)")


def _unwrap(v):
    if isinstance(v, (list, tuple)):
        return type(v)(_unwrap(x) for x in v)
    return _host(v)


def _wrap(v):
    if isinstance(v, tuple):
        return tuple(_wrap(x) for x in v)
    if isinstance(v, list):
        return [_wrap(x) for x in v]
    if isinstance(v, (np.ndarray, *_SCALARS)) and not isinstance(v, ndarray):
        return _device(v)  # CuPy returns 0-d arrays where NumPy returns scalars
    return v


class ndarray(np.ndarray):  # noqa: N801 - CuPy's name
    @property
    def __cuda_array_interface__(self):
        return {"shape": self.shape, "typestr": self.dtype.str, "version": 3,
                "data": (self.ctypes.data, False), "strides": self.strides}

    def __array__(self, dtype=None, copy=None):
        # CuPy refuses implicit conversion to NumPy; so does the stand-in.
        raise TypeError("Implicit conversion to a NumPy array is not allowed (fake_cupy)")

    def item(self):
        _read()
        return self.view(np.ndarray).item()

    def tolist(self):
        _read()
        return self.view(np.ndarray).tolist()

    def get(self):
        _read()
        return np.array(self.view(np.ndarray))

    def __float__(self):
        _read()
        return float(self.view(np.ndarray))

    def __int__(self):
        _read()
        return int(self.view(np.ndarray))

    def __bool__(self):
        _read()
        return bool(self.view(np.ndarray))

    def __complex__(self):
        _read()
        return complex(self.view(np.ndarray))

    def __index__(self):
        _read()
        return self.view(np.ndarray).__index__()

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        _refuse_host(inputs)
        _refuse_host(kwargs.get("out", ()))
        if method != "__call__":
            calls.append(f"{ufunc.__name__}.{method}")  # a reduction of CuPy's own
        outs = kwargs.pop("out", None)
        result = getattr(ufunc, method)(*(flushed(x) for x in _unwrap(inputs)), **kwargs)
        if method == "at":
            return None
        result = tuple(_gpu_result(r) for r in result) if isinstance(result, tuple) else (
            _gpu_result(result))
        if outs is not None:
            for o, r in zip(outs, result if isinstance(result, tuple) else (result,), strict=True):
                if o is not None:
                    np.copyto(_host(o), converted(r, o.dtype), casting="unsafe")
            return outs[0] if len(outs) == 1 else outs
        return _wrap(result)

    def __array_function__(self, func, types, args, kwargs):
        _refuse_host(args)
        _refuse_host(kwargs.values())
        args, kwargs = _unwrap(args), {k: _unwrap(v) for k, v in kwargs.items()}
        if func.__name__ in ARITHMETIC:
            args = tuple(flushed(a) for a in args)
            return _wrap(_gpu_result(func(*args, **kwargs)))
        return _wrap(func(*args, **kwargs))

    def astype(self, dtype, *args, **kwargs):
        return _device(converted(self.view(np.ndarray), dtype))

    def __setitem__(self, key, value):
        value = _unwrap(value)
        if isinstance(value, np.ndarray):
            value = converted(value, self.dtype)
        self.view(np.ndarray)[key] = value

    @property
    def flags(self):
        return _Flags(self.view(np.ndarray))

    def __repr__(self):
        return "fake_cupy." + repr(self.view(np.ndarray))


def _read():
    global reads
    reads += 1


def _device(a):
    return np.asarray(a).view(ndarray)


def _host(a):
    return a.view(np.ndarray) if isinstance(a, ndarray) else a


def asarray(a, dtype=None):
    return _device(converted(_host(a), dtype))


def asnumpy(a):
    if isinstance(a, ndarray):
        _read()
    return np.array(_host(a))


def ascontiguousarray(a, dtype=None):
    return _device(np.ascontiguousarray(converted(_host(a), dtype)))


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
    src = _host(src)
    np.copyto(_host(dst), converted(src, dst.dtype) if isinstance(src, np.ndarray) else src,
              casting=casting)


def may_share_memory(a, b):
    return np.may_share_memory(_host(a), _host(b))


__version__ = "0+fake"


class _Device:
    id = 0

    def synchronize(self):
        pass


class _Runtime:
    """What fpsim reads of the GPU (its name and versions, for records and cache keys)."""

    @staticmethod
    def getDeviceProperties(device):  # noqa: N802 - CuPy's name
        return {"name": b"fake_cupy (CUDA simulator)", "major": 0, "minor": 0}

    @staticmethod
    def runtimeGetVersion():  # noqa: N802 - CuPy's name
        return 0

    @staticmethod
    def driverGetVersion():  # noqa: N802 - CuPy's name
        return 0


class cuda:  # noqa: N801 - CuPy's name
    Device = _Device
    runtime = _Runtime


def matmul(a, b):
    """CuPy's matmul: float16 operands as cuBLAS's fp16 GEMM takes them (fp32 compute,
    the result rounded to float16; the tensor core's order of additions is not
    modelled here), others as NumPy's."""
    calls.append("matmul")
    _refuse_host((a, b))
    a, b = _host(a), _host(b)
    if a.dtype == np.float16 and b.dtype == np.float16:
        return _device(np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(np.float16))
    return _device(np.matmul(a, b))


def __getattr__(name):
    """Any other NumPy function, on stand-in arrays (recorded in ``calls``)."""
    func = getattr(np, name)
    if not callable(func) or isinstance(func, type):
        raise AttributeError(f"fake_cupy has no {name!r}")

    def forwarded(*args, **kwargs):
        calls.append(name)
        _refuse_host(args)
        args, kwargs = _unwrap(args), {k: _unwrap(v) for k, v in kwargs.items()}
        if name in ARITHMETIC:
            return _wrap(_gpu_result(func(*(flushed(a) for a in args), **kwargs)))
        return _wrap(func(*args, **kwargs))

    forwarded.__name__ = name
    return forwarded
