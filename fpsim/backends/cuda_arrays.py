"""The shared kernels as functions of whole device arrays, on the cupy backend: the
device's ``fpsim.backends.array_kernels``.

The array code that runs a kernel's steps itself (block quantization: ``fpsim.quantize``'s
scales and scaled elements, ``encode``) calls a kernel on whole arrays. On the host the
NumPy backend evaluates it on them; here each call launches ``cuda_loops.array_kernel``, a
grid-stride loop that calls the kernel (the cupy backend's CUDA instance of the same
source) once per element. A call's leading device arrays are the kernel's per-element operands
(broadcast together); the arguments after them are passed to every call as they are
(scalars, ``Spec``s, ``Encoding``s). The results' dtypes are those the NumPy backend's
kernel gives on one element of the operands' dtypes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
from numba import cuda

from fpsim.backends import cuda_loops
from fpsim.backends._instantiate import clone, spread
from fpsim.backends.cuda_contraction import KERNEL_OPTIONS, no_contraction
from fpsim.backends.protocol import is_device_array

__all__ = ["DeviceKernels"]

# The most array operands a kernel on device arrays takes (``cuda_loops.array_kernel``).
MAX_OPERANDS = 4


class DeviceKernels(Mapping[str, Any]):
    """The kernels of ``fpsim.kernels`` as functions of whole device arrays (a kernel
    name's value), and their constants (as the host's ``array_kernels`` holds them)."""

    def __init__(self, backend: Any, host: Mapping[str, Any]) -> None:
        self.backend, self.host = backend, host
        self._loops: dict[tuple[str, int, int, int], Any] = {}
        self._dtypes: dict[tuple[Any, ...], list[np.dtype[Any]]] = {}

    def __getitem__(self, name: str) -> Any:
        value = self.host[name]
        if not callable(value) or isinstance(value, type):  # a constant, a NamedTuple
            return value
        if name not in self.backend.kernels:
            raise KeyError(f"{name}: no CUDA instance of this kernel")

        def on_device(*args: Any) -> Any:
            return self.call(name, *args)

        return on_device

    def __iter__(self) -> Iterator[str]:
        return iter(self.host)

    def __len__(self) -> int:
        return len(self.host)

    def loop(self, name: str, operands: int, results: int, params: int) -> Any:
        """``cuda_loops.array_kernel`` compiled for kernel ``name`` with ``params``
        parameters after its operands (lazily; cached on disk on a GPU)."""
        key = (name, operands, results, params)
        if key not in self._loops:
            namespace = dict(vars(cuda_loops), KERNEL=self.backend.kernels[name],
                             OPERANDS=operands, RESULTS=results)
            tag = hashlib.sha1(repr(key).encode()).hexdigest()[:12]
            func = clone(cuda_loops.array_kernel, namespace,  # type: ignore[arg-type]
                         f"array_kernel_{name}_{tag}_{self.backend.digest}",
                         spread(cuda_loops.array_kernel,  # type: ignore[arg-type]
                                "params", params))
            options = {} if self.backend.simulator else dict(KERNEL_OPTIONS, cache=True)
            self._loops[key] = cuda.jit(func, **options)  # type: ignore[no-untyped-call]
        return self._loops[key]

    def result_dtypes(self, name: str, dtypes: list[np.dtype[Any]],
                      params: tuple[Any, ...]) -> list[np.dtype[Any]]:
        """The dtypes of kernel ``name``'s results: the host kernel's on one element of
        each operand's dtype (kept per dtypes and parameter types)."""
        key = (name, *dtypes, *(type(p) for p in params))
        if key not in self._dtypes:
            with np.errstate(all="ignore"):
                sample = self.host[name](*(np.zeros(1, dt) for dt in dtypes), *params)
            results = sample if isinstance(sample, tuple) else (sample,)
            self._dtypes[key] = [np.asarray(r).dtype for r in results]
        return self._dtypes[key]

    def call(self, name: str, *args: Any) -> Any:
        """Kernel ``name`` on the leading device arrays of ``args``, element by element."""
        count = 0
        while count < len(args) and is_device_array(args[count]):
            count += 1
        if not 1 <= count <= MAX_OPERANDS:
            raise ValueError(f"{name}: a kernel on device arrays takes 1 to {MAX_OPERANDS} "
                             f"of them first, got {count}")
        arrays, params = args[:count], tuple(args[count:])
        xp = _module(arrays[0])
        shape = np.broadcast_shapes(*(a.shape for a in arrays))
        flat = [xp.ascontiguousarray(xp.broadcast_to(a, shape)).reshape(-1) for a in arrays]
        dtypes = self.result_dtypes(name, [a.dtype for a in arrays], params)
        outs = [xp.empty(flat[0].size, dt) for dt in dtypes]
        if flat[0].size:
            inputs, results = launch_arrays(flat, outs, xp)
            loop = self.loop(name, count, len(outs), len(params))
            blocks, threads = self.backend.grid(flat[0].size)
            if self.backend.simulator:  # it copies arguments back: the inputs are read-only
                inputs = [cuda.In(a) for a in inputs]  # type: ignore[attr-defined]
            with no_contraction():
                loop[blocks, threads](*inputs, *results, params)
        shaped = tuple(o.reshape(shape) for o in outs)
        return shaped if len(shaped) > 1 else shaped[0]


def launch_arrays(operands: list[Any], outs: list[Any], xp: Any) -> tuple[list[Any], list[Any]]:
    """``array_kernel``'s array arguments: the operands padded to ``MAX_OPERANDS`` (with
    the first), and its two result arrays (with one result, a distinct array in the
    second's place: the simulator copies each argument back, and a repeated one would
    overwrite the results)."""
    second = outs[1] if len(outs) > 1 else xp.empty(1, outs[0].dtype)
    return operands + [operands[0]] * (MAX_OPERANDS - len(operands)), [outs[0], second]


def _module(x: Any) -> Any:
    """CuPy (the module the cupy backend's device arrays come from; under the CUDA
    simulator, the stand-in registered as ``cupy``)."""
    import cupy

    return cupy
