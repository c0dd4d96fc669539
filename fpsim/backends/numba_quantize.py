"""Block quantization on the Numba backend, in parallel loops over the blocks.

MX: one pass; each block's amax, its scale (``mx_exponent``) and its elements
(``mx_scaled``, the rounding primitive, ``encode``). NVFP4: a pass for the blocks' amax,
the tensor's scales, then a pass for each block's scales (``nvfp4_block_scales``) and
elements. The kernels are the shared ones (``fpsim.kernels.blockscale`` and
``core.round_value``), as the NumPy path of ``fpsim.quantize`` runs them on whole arrays.

The loops take a C-contiguous (rows, length) array with the blocks along its rows: the
quantized axis moved last. ``groups``: the number of trailing elements the axis had before
it moved (1 for the last axis), from which the loop recovers each element's C-order index
in ``x`` (the stochastic stream's counter). Arrays of ``SPECIALISE_FROM`` elements or more
run in a loop compiled for their exact parameters (constants folded) and, for float32
input, rounding on the binary32 encoding (``kernels.carrier``); shorter ones in one
generic loop per family (float64, parameters as arguments). Compiled lazily, cached on
disk (``cache=True``).
"""

from __future__ import annotations

import hashlib
import math
import sys
from typing import Any

import numba
import numpy as np
from numba import prange

from fpsim.backends import get_backend, numba_backend
from fpsim.backends._instantiate import clone, instantiate, source_digest
from fpsim.kernels import blockscale
from fpsim.kernels.carrier import BINARY32, spec_for
from fpsim.quantize.mx import MXParameters
from fpsim.quantize.nvfp4 import nvfp4_parameters
from fpsim.quantize.schemes import Scheme

__all__ = ["kernel_name", "quantize_mx", "quantize_nvfp4"]

# Arrays this large or larger run in a loop compiled for their parameters.
SPECIALISE_FROM = 1 << 20

# Bound per instance (``_loop``): the block size, the parameters' fields (None: an
# argument), whether the random stream is drawn (None: an argument), the rounding and
# its carrier.
BLOCK = 32
STOCHASTIC = RULE = EMAX = T = INV_MAX = LOW = HIGH = FP32 = SPEC = CODE = SCALE_CODE = None
MULTIPLIER = GLOBAL_DECODE = E4M3 = None
LOAD = float
NAN = math.nan
TINY32 = np.float32(2.0**-149)


def _bound_per_instance(*args: Any) -> Any:
    raise NotImplementedError("a kernel bound per instance by numba_quantize")


select = random53 = round_value = carrier = encode = _bound_per_instance
mx_exponent = mx_scaled = pow2_or_nan = nvfp4_block_scales = nvfp4_scaled = _bound_per_instance


def to_binary32(y):
    """The binary64 ``y`` on the binary32 carrier: itself where binary32 holds it; else (a
    magnitude below binary32's normals) the smallest binary32 subnormal of its sign, which
    rounds to any element format as ``y`` does, in every mode (``mx_scaled``'s argument)."""
    w = np.float32(y)
    return select(np.float64(w) == y, w, select(y < 0.0, -TINY32, TINY32))


def same(y):
    return y


def widen(y):
    return float(y)


def index(r, j, length, groups):
    """The C-order index in ``x`` of element ``j`` of row ``r``."""
    p = r // groups
    return (p * length + j) * groups + (r - p * groups)


def block_amax(x, length, r, b):
    """The largest magnitude of block ``b`` of row ``r`` (NaN if it holds a NaN)."""
    m = 0.0
    bad = False
    for j in range(b * BLOCK, min(b * BLOCK + BLOCK, length)):
        v = abs(float(x[r, j]))
        bad = bad | (v != v)
        m = max(m, v)
    return select(bad, NAN, m)


def mx_loop(x, groups, bits, flags, scale_bits, amaxes, key, stochastic_in, rule_in, emax_in,
            t_in, inv_max_in, low_in, high_in, fp32_in, spec_in, code_in, scale_code_in):
    # The parameters (MXParameters' fields): the arguments, or the constants of a loop
    # specialised to them (a parallel loop takes no nested tuple).
    stochastic = stochastic_in if STOCHASTIC is None else STOCHASTIC
    rule = rule_in if RULE is None else RULE
    emax = emax_in if EMAX is None else EMAX
    t = t_in if T is None else T
    inv_max = inv_max_in if INV_MAX is None else INV_MAX
    low = low_in if LOW is None else LOW
    high = high_in if HIGH is None else HIGH
    fp32 = fp32_in if FP32 is None else FP32
    spec = spec_in if SPEC is None else SPEC
    code = code_in if CODE is None else CODE
    scale_code = scale_code_in if SCALE_CODE is None else SCALE_CODE
    rows, length = x.shape
    count = amaxes.shape[1]
    for job in prange(rows * count):
        r = job // count
        b = job - r * count
        amax = block_amax(x, length, r, b)
        amaxes[r, b] = amax
        s, nan = mx_exponent(amax, rule, emax, t, inv_max, low, high, fp32)
        scale_bits[r, b] = encode(pow2_or_nan(s, nan), scale_code)
        for j in range(b * BLOCK, min(b * BLOCK + BLOCK, length)):
            y = mx_scaled(float(x[r, j]), s, nan)
            rnd = random53(key, index(r, j, length, groups)) if stochastic else 0
            v, f = round_value(carrier(y), rnd, spec, True)
            bits[r, j] = encode(float(v), code)
            flags[r, j] = f


def amax_loop(x, amaxes):
    rows, length = x.shape
    count = amaxes.shape[1]
    for job in prange(rows * count):
        r = job // count
        b = job - r * count
        amaxes[r, b] = block_amax(x, length, r, b)


def nvfp4_loop(x, groups, bits, flags, scale_bits, amaxes, key, stochastic_in, multiplier_in,
               global_decode_in, fp32_in, e4m3_in, spec_in, code_in, scale_code_in):
    # NVFP4Parameters' fields, as mx_loop's.
    stochastic = stochastic_in if STOCHASTIC is None else STOCHASTIC
    multiplier = multiplier_in if MULTIPLIER is None else MULTIPLIER
    global_decode = global_decode_in if GLOBAL_DECODE is None else GLOBAL_DECODE
    fp32 = fp32_in if FP32 is None else FP32
    e4m3 = e4m3_in if E4M3 is None else E4M3
    spec = spec_in if SPEC is None else SPEC
    code = code_in if CODE is None else CODE
    scale_code = scale_code_in if SCALE_CODE is None else SCALE_CODE
    rows, length = x.shape
    count = amaxes.shape[1]
    for job in prange(rows * count):
        r = job // count
        b = job - r * count
        scale, enc = nvfp4_block_scales(amaxes[r, b], multiplier, global_decode, fp32, e4m3)
        scale_bits[r, b] = encode(scale, scale_code)
        enc32 = np.float32(enc)
        for j in range(b * BLOCK, min(b * BLOCK + BLOCK, length)):
            y = nvfp4_scaled(np.float32(x[r, j]), enc32)
            rnd = random53(key, index(r, j, length, groups)) if stochastic else 0
            v, f = round_value(carrier(y), rnd, spec, True)
            bits[r, j] = encode(float(v), code)
            flags[r, j] = f


_LOOPS: dict[tuple, Any] = {}
_BLOCK_KERNELS: dict[tuple, Any] = {}
_CALLED: dict[str, dict] = {}
_DIGEST = source_digest(sys.modules[__name__])


def _loop(template: Any, binary32: bool, **binding: Any) -> Any:
    """``template`` compiled with the Numba backend's kernels and ``binding`` (its globals),
    rounding on the binary32 encoding if ``binary32``."""
    key = (template.__name__, binary32, *sorted(binding.items()))
    loop = _LOOPS.get(key)
    if loop is None:
        engine = get_backend()
        # A specialised loop inlines the kernels (its constants fold through them); the
        # generic one calls them, compiled once each, which LLVM may inline (Numba's own
        # inlining multiplies the compile time of a loop that calls this many).
        kernels = engine.kernels if len(binding) > 1 else _called(engine)  # type: ignore[attr-defined]
        jit = numba.njit(cache=True, inline="always")
        namespace = dict(globals(), **{name: kernels[name] for name in (
            "select", "random53", "encode", "mx_scaled", "pow2_or_nan", "nvfp4_scaled")})
        # Once per block: called, not inlined (each inlines roundings; compiled once).
        for name in ("mx_exponent", "nvfp4_block_scales"):
            namespace[name] = _per_block(name, _called(engine), engine.digest)  # type: ignore[attr-defined]
        for helper in (to_binary32, same, widen, index, block_amax):
            namespace[helper.__name__] = jit(clone(helper, namespace,
                                                   f"{helper.__name__}_{_DIGEST}"))
        # The value each element rounds, on the rounding's carrier: MX's is binary64,
        # NVFP4's binary32.
        if binary32:
            namespace["round_value"] = engine.binary32()["round_value"]  # type: ignore[attr-defined]
            namespace["carrier"] = namespace["to_binary32" if template is mx_loop else "same"]
        else:
            namespace["round_value"] = kernels["round_value"]
            namespace["carrier"] = namespace["same" if template is mx_loop else "widen"]
        namespace.update(binding)
        tag = hashlib.sha1(repr(key).encode()).hexdigest()[:12]
        func = clone(template, namespace,
                     f"{template.__name__}_{tag}_{engine.digest}_{_DIGEST}")  # type: ignore[attr-defined]
        loop = _LOOPS[key] = numba.njit(parallel=True, cache=True)(func)
    return loop


def _called(engine: Any) -> dict:
    """The kernels compiled each on its own (not inlined into their callers)."""
    if engine.digest not in _CALLED:
        _CALLED[engine.digest] = instantiate(numba_backend.PRIMITIVES, numba.njit(cache=True),
                                             suffix=f"_called_{engine.digest}")
    return _CALLED[engine.digest]


def _per_block(name: str, kernels: dict, digest: str) -> Any:
    """The kernel ``name`` of ``fpsim.kernels.blockscale`` compiled on its own, calling the
    backend's ``kernels``."""
    key = (name, digest)
    if key not in _BLOCK_KERNELS:
        func = getattr(blockscale, name)
        _BLOCK_KERNELS[key] = numba.njit(cache=True)(clone(func, kernels, f"{name}_{digest}"))
    return _BLOCK_KERNELS[key]


def _rows(arr: np.ndarray, ax: int) -> tuple[np.ndarray, int]:
    """``arr`` as a C-contiguous (rows, length) array with ``ax`` last, and the number of
    elements that followed ``ax`` (``groups``)."""
    shape = arr.shape
    before, length = math.prod(shape[:ax]), shape[ax]
    groups = math.prod(shape[ax + 1:])
    moved = arr.reshape(before, length, groups)
    if groups > 1:
        moved = moved.transpose(0, 2, 1)
    return np.ascontiguousarray(moved).reshape(before * groups, length), groups


def _back(rows: np.ndarray, shape: tuple[int, ...], ax: int, groups: int) -> np.ndarray:
    """A (rows, n) result of ``_rows``'s layout in the input's layout, ``ax`` cut to n."""
    before = math.prod(shape[:ax])
    out = rows.reshape(before, groups, rows.shape[1])
    if groups > 1:
        out = np.ascontiguousarray(out.transpose(0, 2, 1))
    return out.reshape((*shape[:ax], rows.shape[1], *shape[ax + 1:]))


def _run(template: Any, x: np.ndarray, groups: int, block: int, params: Any,
         key: int | None, outputs: tuple[np.ndarray, ...]) -> None:
    """Run ``template`` on ``x`` (rows, length): specialised and on the binary32 carrier
    for long float32 input, else the generic loop on float64."""
    stochastic = key is not None
    specialise = x.size >= SPECIALISE_FROM
    binary32 = specialise and x.dtype == np.float32
    if binary32:
        params = params._replace(spec=spec_for(params.spec, BINARY32))
    if not specialise:
        x = np.asarray(x, np.float64)
    binding = dict(BLOCK=block)
    if specialise:
        binding.update(STOCHASTIC=stochastic,
                       **{name.upper(): value for name, value in params._asdict().items()})
    loop = _loop(template, binary32, **binding)
    view = x.view()
    view.setflags(write=False)
    loop(view, groups, *outputs, np.uint64(key or 0), stochastic, *params)


def kernel_name(x: np.ndarray) -> str:
    """The encoding the elements of ``x`` round on (the kernel column of ``fpsim bench``)."""
    return "binary32" if x.size >= SPECIALISE_FROM and x.dtype == np.float32 else "binary64"


def _outputs(x: np.ndarray, block: int) -> tuple[np.ndarray, ...]:
    rows, length = x.shape
    count = -(-length // block)
    return (np.empty(x.shape, np.uint8), np.empty(x.shape, np.uint8),
            np.empty((rows, count), np.uint8), np.empty((rows, count), np.float64))


def quantize_mx(arr: np.ndarray, ax: int, params: MXParameters, key: int | None,
                block: int = 32) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """MX quantization of ``arr`` (float32 or float64) along ``ax``: the elements'
    encodings and flags, the scales' encodings, and the input's amax."""
    x, groups = _rows(arr, ax)
    bits, flags, scale_bits, amaxes = _outputs(x, block)
    if x.size:
        _run(mx_loop, x, groups, block, params, key, (bits, flags, scale_bits, amaxes))
    amax = float(np.max(amaxes)) if amaxes.size else 0.0
    return (_back(bits, arr.shape, ax, groups), _back(flags, arr.shape, ax, groups),
            _back(scale_bits, arr.shape, ax, groups), amax)


def quantize_nvfp4(arr: np.ndarray, ax: int, scheme: Scheme, spec: Any, key: int | None,
                   block: int = 16) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, Any]:
    """NVFP4 quantization of ``arr`` (float32 or float64) along ``ax``: the elements'
    encodings and flags, the block scales' encodings, the input's amax and the tensor's
    ``NVFP4Parameters``."""
    x, groups = _rows(arr, ax)
    bits, flags, scale_bits, amaxes = _outputs(x, block)
    if x.size:
        view = x if x.size >= SPECIALISE_FROM else np.asarray(x, np.float64)
        _loop(amax_loop, False, BLOCK=block)(view, amaxes)
    amax = float(np.max(amaxes)) if amaxes.size else 0.0
    params = nvfp4_parameters(scheme, amax, spec)
    if x.size:
        _run(nvfp4_loop, x, groups, block, params, key, (bits, flags, scale_bits, amaxes))
    return (_back(bits, arr.shape, ax, groups), _back(flags, arr.shape, ax, groups),
            _back(scale_bits, arr.shape, ax, groups), amax, params)
