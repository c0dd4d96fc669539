"""Launch the cupy backend's kernels without numba-cuda's dispatcher (``FPSIM_CUDA_LAUNCH``).

numba-cuda's dispatcher types and marshals every argument on every call, about
280 us of Python on an H100 whatever the size. Here each kernel is compiled once
per signature by numba-cuda itself (contraction off: ``cuda_contraction``; its
on-disk cache), its machine code loaded once per device as a CuPy module and
launched with one ``cuLaunchKernel`` (CuPy's driver API), the arguments packed
into a buffer of 64-bit slots as numba-cuda's kernel ABI lays them out, checked
against the parameters of the PTX entry:

- an array is ``meminfo, parent, nitems, itemsize, data, shape..., strides...``
  (meminfo and parent are null on the device);
- a tuple (the format's ``Spec``, a ``BlockSpec``) is its fields, one parameter
  each; packed once per value and kept;
- an integer, a float and a bool are one parameter of their width.

This is the default (``FPSIM_CUDA_LAUNCH=raw`` or unset): on an H100 every kernel variant
gave the dispatcher's bits and the whole GPU test suite passed through it (docs/performance.md).
``FPSIM_CUDA_LAUNCH=numba`` keeps numba-cuda's dispatcher. Under
numba-cuda's simulator (``NUMBA_ENABLE_CUDASIM=1``) there is no PTX: the
dispatcher path is always used there.
"""

from __future__ import annotations

import ctypes
import os
import re
import struct
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from fpsim.backends.cuda_contraction import no_contraction

MODES = ("numba", "raw")
ENVIRONMENT = "FPSIM_CUDA_LAUNCH"
# At most this many distinct tuple arguments (specs) are kept packed.
PACKED_TUPLES = 1024
# Parameters a raw launch takes at most (CUDA's limit is 4 KiB of them; 64-bit slots).
MAX_PARAMETERS = 512

_ENTRY = re.compile(r"\.entry\s+([A-Za-z_$][\w$]*)\s*\(([^)]*)\)", re.S)
_PARAM = re.compile(r"\.param\s+\.(\w+)\s+([\w$]+)")


def launch_mode(value: str | None = None) -> str:
    """The launch path the cupy backend uses: ``FPSIM_CUDA_LAUNCH`` ("raw" if unset).

    Examples
    --------
    >>> launch_mode("raw")
    'raw'
    >>> launch_mode("")
    'raw'
    """
    if value is None:
        value = os.environ.get(ENVIRONMENT, "")
    mode = value.strip().lower() or "raw"
    if mode not in MODES:
        raise ValueError(f"{ENVIRONMENT}={value!r}: expected one of {', '.join(MODES)}")
    return mode


def entry_parameters(ptx: str) -> tuple[str, list[str]]:
    """The name of the one kernel entry of ``ptx`` and its parameters' PTX types, in order.

    Examples
    --------
    >>> entry_parameters(".visible .entry k(\\n .param .u64 k_0,\\n .param .f64 k_1\\n)\\n{")
    ('k', ['u64', 'f64'])
    """
    entries = _ENTRY.findall(ptx)
    if len(entries) != 1:
        raise ValueError(f"expected one .entry in the PTX, found {len(entries)}")
    name, params = entries[0]
    return name, [kind for kind, _ in _PARAM.findall(params)]


def _scalar_dtype(ty: Any) -> np.dtype:
    """The NumPy type of one scalar parameter of numba type ``ty``."""
    name = str(ty)
    if name == "bool":
        return np.dtype(np.uint8)
    try:
        return np.dtype(name)
    except TypeError:
        raise TypeError(f"a kernel argument of type {ty} has no raw launch") from None


def parameter_dtypes(argtypes: Sequence[Any]) -> list[np.dtype]:
    """The kernel's parameters for arguments of numba types ``argtypes``: numba-cuda's
    kernel ABI, flattened, each as the NumPy type packed for it.

    Examples
    --------
    >>> from numba.cuda import types
    >>> [str(d) for d in parameter_dtypes([types.float32[::1], types.boolean])]
    ['uint64', 'uint64', 'int64', 'int64', 'uint64', 'int64', 'int64', 'uint8']
    """
    out: list[np.dtype] = []
    for ty in argtypes:
        ndim = getattr(ty, "ndim", None)
        if ndim is not None and hasattr(ty, "layout"):
            out += [np.dtype(np.uint64)] * 2 + [np.dtype(np.int64)] * 2 + [np.dtype(np.uint64)]
            out += [np.dtype(np.int64)] * (2 * ndim)
        elif hasattr(ty, "types") and hasattr(ty, "count"):  # a tuple: its fields
            out += parameter_dtypes(list(ty.types))
        else:
            out.append(_scalar_dtype(ty))
    return out


# PTX parameter types that hold each packed NumPy type (numba-cuda declares an integer
# by its width, signed or not).
PTX_TYPES = {"uint64": ("u64", "s64", "b64"), "int64": ("u64", "s64", "b64"),
             "uint32": ("u32", "s32", "b32"), "int32": ("u32", "s32", "b32"),
             "uint8": ("u8", "s8", "b8"), "int8": ("u8", "s8", "b8"),
             "uint16": ("u16", "s16", "b16"), "int16": ("u16", "s16", "b16"),
             "float64": ("f64",), "float32": ("f32",)}


def matches_entry(dtypes: Sequence[np.dtype], ptx_types: Sequence[str]) -> list[str]:
    """Where the packed parameters ``dtypes`` disagree with the PTX entry's (empty: none)."""
    problems = []
    if len(dtypes) != len(ptx_types):
        problems.append(f"{len(dtypes)} parameters packed, the entry declares {len(ptx_types)}")
    for i, (d, p) in enumerate(zip(dtypes, ptx_types, strict=False)):
        if p not in PTX_TYPES.get(str(d), ()):
            problems.append(f"parameter {i}: packed {d}, the entry declares .{p}")
    return problems


_cupy_ndarray: list[type] = []
# numba-cuda's device arrays (the backend's own buffers, host inputs copied over), whose
# pointer and shape never change, are read once through their interface: id -> (weak
# reference, key, parameters). Any other array is read on every launch.
_numba_arrays: list[type] = []
_foreign: dict[int, tuple[Any, tuple[Any, ...], list[int]]] = {}
FOREIGN_ARRAYS = 256


# Argument types that are never arrays: the kernels' scalars (and any tuple).
_SCALARS = frozenset({bool, int, float, np.bool_, np.uint64, np.int64, np.int32,
                      np.uint32, np.float64, np.float32, np.uint8})


def device_array(x: Any) -> tuple[tuple[Any, ...], list[int]] | None:
    """For a device array, what numba-cuda's typing reads of it (dtype, dimensions,
    layout) and its parameters (``pack``); None for anything else.

    Examples
    --------
    >>> device_array(np.uint64(3)) is None
    True
    """
    kind = type(x)
    if kind in _SCALARS or isinstance(x, tuple):
        return None
    if _cupy_ndarray and kind is _cupy_ndarray[0]:
        a: Any = x
        # CuPy's own contiguity fields: ``a.flags`` builds an object on every read.
        c = getattr(a, "_c_contiguous", None)
        if c is None:
            flags = a.flags
            c, f = flags.c_contiguous, flags.f_contiguous
        else:
            f = a._f_contiguous
        return ((a.dtype, a.ndim, c, f),
                [0, 0, a.size, a.itemsize, a.data.ptr, *a.shape, *a.strides])
    found = _foreign.get(id(x))
    if found is not None and found[0]() is x:
        return found[1], found[2]
    if not hasattr(x, "__cuda_array_interface__"):
        return None
    cai = x.__cuda_array_interface__
    shape = tuple(cai["shape"])
    itemsize = np.dtype(cai["typestr"]).itemsize
    strides = cai.get("strides")
    key = (cai["typestr"], len(shape), strides, cai["data"][1])
    if strides is None:  # C-contiguous
        strides, step = [], itemsize
        for extent in reversed(shape):
            strides.insert(0, step)
            step *= extent
    size = int(np.prod(shape, dtype=np.int64))
    params = [0, 0, size, itemsize, cai["data"][0], *shape, *strides]
    if not (_numba_arrays and isinstance(x, _numba_arrays[0])):
        return key, params
    ref = weakref.ref(x)
    if len(_foreign) >= FOREIGN_ARRAYS:
        _foreign.clear()
    _foreign[id(x)] = (ref, key, params)
    return key, params


def signature_key(args: Sequence[Any], arrays: Sequence[Any] | None = None) -> tuple[Any, ...]:
    """A key that tells apart the arguments numba-cuda types differently (``arrays``: each
    argument's ``device_array``, when already read)."""
    key: list[Any] = []
    for i, a in enumerate(args):
        array = device_array(a) if arrays is None else arrays[i]
        if array is not None:
            key.append(array[0])
        elif isinstance(a, tuple):
            key.append((type(a), *(type(v) for v in a)))
        else:
            key.append(type(a))
    return tuple(key)


def slot(value: Any, dtype: np.dtype) -> int:
    """``value`` as a parameter of NumPy type ``dtype`` in a 64-bit slot: its bits, as a
    signed integer (the driver reads a parameter's own width from the slot's first bytes).

    Examples
    --------
    >>> slot(2**64 - 1, np.dtype(np.uint64)), slot(-2, np.dtype(np.int64))
    (-1, -2)
    >>> slot(1.0, np.dtype(np.float64)) == 0x3FF0000000000000, slot(True, np.dtype(np.uint8))
    (True, 1)
    """
    kind = dtype.kind
    if kind == "f":
        code = {8: "d", 4: "f"}[dtype.itemsize]
        return int.from_bytes(struct.pack("<" + code, value), "little", signed=True)
    x = int(value)
    if kind == "u" and x >= 1 << 63:
        x -= 1 << 64
    return x


def pack(argtypes: Sequence[Any], args: Sequence[Any],
         tuples: dict[Any, list[int]] | None = None,
         arrays: Sequence[Any] | None = None) -> list[int]:
    """The kernel's parameters for ``args`` of numba types ``argtypes``, in the order of
    the PTX entry (``parameter_dtypes``), each as its 64-bit slot (``slot``). ``tuples``
    keeps packed tuple arguments by value; ``arrays``: each argument's ``device_array``,
    when already read.

    Examples
    --------
    >>> from numba.cuda import types
    >>> pack([types.uint64, types.UniTuple(types.int64, 2), types.boolean],
    ...      [np.uint64(7), (1, -2), True])
    [7, 1, -2, 1]
    """
    out: list[int] = []
    for i, (ty, a) in enumerate(zip(argtypes, args, strict=True)):
        array = device_array(a) if arrays is None else arrays[i]
        if array is not None:
            out += array[1]
        elif isinstance(a, tuple):
            # A Spec and a BlockSpec of equal fields are not one, nor are equal fields of
            # other types (a binary32 lane's float32 fields pack unlike float64's).
            tag = (type(a), a, tuple(type(v) for v in a))
            packed = None if tuples is None else tuples.get(tag)
            if packed is None:
                packed = pack(list(ty.types), list(a))
                if tuples is not None:
                    if len(tuples) >= PACKED_TUPLES:
                        tuples.clear()
                    tuples[tag] = packed
            out += packed
        elif isinstance(a, (bool, np.bool_)):
            out.append(1 if a else 0)
        else:
            out.append(slot(a, _scalar_dtype(ty)))
    return out


class _Slots(threading.local):
    """A thread's parameter buffer: ``MAX_PARAMETERS`` 64-bit slots and the array of their
    addresses that ``cuLaunchKernel`` reads (it copies the values before it returns)."""

    def __init__(self) -> None:
        self.values = (ctypes.c_int64 * MAX_PARAMETERS)()
        base = ctypes.addressof(self.values)
        self.pointers = (ctypes.c_uint64 * MAX_PARAMETERS)(
            *(base + 8 * i for i in range(MAX_PARAMETERS)))
        self.address = ctypes.addressof(self.pointers)
        self.ready = False  # the device's context made current on this thread


class RawLauncher:
    """Compiles each kernel once per signature and launches it through CuPy's driver API.

    ``build(dispatcher, argtypes, cc)`` gives a kernel's PTX and machine code
    (default: ``build_kernel``).
    """

    def __init__(self, build: Callable[..., tuple[str, bytes]] | None = None) -> None:
        self._build_kernel = build or build_kernel
        self._lock = threading.Lock()
        self._kernels: dict[Any, tuple[Any, ...]] = {}
        self._tuples: dict[Any, list[int]] = {}
        self._devices: dict[int, tuple[int, tuple[int, int], int]] = {}
        self._slots = _Slots()

    def device(self) -> tuple[int, tuple[int, int], int]:
        """(id, compute capability, multiprocessors) of CuPy's current device."""
        import cupy

        if not _cupy_ndarray:
            from numba.cuda.cudadrv.devicearray import DeviceNDArrayBase

            _numba_arrays.append(DeviceNDArrayBase)
            _cupy_ndarray.append(cupy.ndarray)
        index = cupy.cuda.runtime.getDevice()
        found = self._devices.get(index)
        if found is None:
            dev = cupy.cuda.Device(index)
            cc = str(dev.compute_capability)
            found = self._devices[index] = (
                index, (int(cc[:-1]), int(cc[-1])), dev.attributes["MultiProcessorCount"])
        return found

    def kernel(self, name: Any, dispatcher: Any, args: Sequence[Any],
               arrays: Sequence[Any] | None = None) -> tuple[Any, ...]:
        """(CuPy module, its function, numba argument types, the parameters' ``struct``
        layout) of ``dispatcher`` for ``args`` on the current device."""
        index, cc, _ = self.device()
        key = (name, index, signature_key(args, arrays))
        found = self._kernels.get(key)
        if found is None:
            with self._lock:
                found = self._kernels.get(key)
                if found is None:
                    found = self._kernels[key] = self._load(dispatcher, args, cc)
        return found

    def _load(self, dispatcher: Any, args: Sequence[Any],
              cc: tuple[int, int]) -> tuple[Any, ...]:
        import cupy
        from numba.cuda.typing.typeof import Purpose, typeof

        # As numba-cuda's dispatcher types its arguments (CUDADispatcher.typeof_pyval).
        argtypes = tuple(typeof(a, Purpose.argument) for a in args)
        ptx, image = self._build_kernel(dispatcher, argtypes, cc)
        entry, ptx_types = entry_parameters(ptx)
        problems = matches_entry(parameter_dtypes(argtypes), ptx_types)
        if len(ptx_types) > MAX_PARAMETERS:
            problems.append(f"{len(ptx_types)} parameters, at most {MAX_PARAMETERS} launch")
        if problems:
            raise RuntimeError(f"raw launch of {entry}: " + "; ".join(problems[:3]))
        module = cupy.cuda.function.Module()
        module.load(image)
        layout = struct.Struct(f"<{len(ptx_types)}q")
        return module, module.get_function(entry), argtypes, layout

    def __call__(self, name: Any, dispatcher: Any, n: int, args: Sequence[Any],
                 threads: int, blocks_per_sm: int) -> None:
        """Launch ``dispatcher``'s kernel (named ``name``) over ``n`` work items in
        grid-stride loops, on the legacy default stream as numba-cuda does."""
        import cupy

        _, _, sms = self.device()
        arrays = [device_array(a) for a in args]
        _, function, argtypes, layout = self.kernel(name, dispatcher, args, arrays)
        blocks = max(1, min(-(-n // threads), blocks_per_sm * sms))
        slots = self._slots
        if not slots.ready:  # cudaFree(0): the runtime's context, current on this thread
            cupy.cuda.runtime.free(0)
            slots.ready = True
        layout.pack_into(slots.values, 0, *pack(argtypes, args, self._tuples, arrays))
        cupy.cuda.driver.launchKernel(function.ptr, blocks, 1, 1, threads, 1, 1, 0, 0,
                                      slots.address, 0)


def build_kernel(dispatcher: Any, argtypes: tuple[Any, ...],
                 cc: tuple[int, int]) -> tuple[str, bytes]:
    """PTX and machine code of ``dispatcher``'s kernel for ``argtypes``: numba-cuda's own
    compilation (contraction off, its on-disk cache) and linking, so that both launch
    paths run the same machine code."""
    with no_contraction():
        library = dispatcher.compile(argtypes)._codelibrary
        return library.get_asm_str(cc=cc), cubin_bytes(library.get_cubin(cc=cc))


def cubin_bytes(cubin: Any) -> bytes:
    """The machine code numba-cuda's linker returns: bytes, or (numba-cuda 0.30 with
    cuda-core 1.x, as on the H100 of 2026-11-25) a ``cuda.core`` ``ObjectCode`` whose
    ``code`` holds them."""
    return bytes(getattr(cubin, "code", cubin))
