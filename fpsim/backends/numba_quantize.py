"""Block quantization on the Numba backend, in parallel loops over the blocks.

MX: one pass; each block's amax, its scale (``mx_exponent``) and its elements
(``mx_scaled``, the rounding primitive, ``encode``). NVFP4: a pass for the blocks' amax,
then (the tensor's scales known) one for the blocks' scales (``nvfp4_block_scales``) and
one for the elements. The kernels are the shared ones (``fpsim.kernels.blockscale`` and
``core.round_value``), as the NumPy path of ``fpsim.quantize`` runs them on whole arrays.

The loops take the blocks as the rows of a C-contiguous (blocks, block) array: the
quantized axis moved last, each row's last block padded with zeros. ``count`` (blocks to
a row), ``length`` (the axis's length) and ``groups`` (the number of elements that
followed the axis before it moved; 1 for the last axis) recover each element's C-order
index in ``x``, the stochastic stream's counter. Arrays of ``SPECIALISE_FROM`` elements
or more run in a loop compiled for their exact parameters (constants folded) and, for
float32 input, rounding and encoding on the binary32 encoding (``kernels.carrier``), on
all of Numba's threads; shorter ones in one generic loop per family (float64, parameters
as arguments) on the calling thread alone, as the Numba backend's own loops run short
arrays serially. Inside a training step on 2 cores, a parallel region per quantization
contended with the threads BLAS keeps spinning after a product. The kernels are inlined
into both. Compiled lazily, cached on disk (``cache=True``).
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import sys
from collections.abc import Callable
from typing import Any

import numba
import numpy as np
from numba import prange

from fpsim.backends import get_backend, numba_backend
from fpsim.backends._instantiate import clone, instantiate, source_digest
from fpsim.kernels.carrier import BINARY32, spec_for

__all__ = ["kernel_name", "quantize_mx", "quantize_nvfp4"]

# Arrays this large or larger run in a loop compiled for their parameters.
SPECIALISE_FROM = 1 << 20

# Bound per instance (``_loop``): the block size, the parameters' fields (None: an
# argument), whether the random stream is drawn (None: an argument), the rounding, its
# carrier's type (LOAD) and NVFP4's value on it (carrier).
BLOCK = 32
LOAD = float
STOCHASTIC = RULE = EMAX = T = INV_MAX = LOW = HIGH = FP32 = SPEC = CODE = SCALE_CODE = None
MAG = 0x7FFFFFFFFFFFFFFF
TINY = 5e-324  # binary64's smallest subnormal, or binary32's (TINY32) on its carrier
TINY32 = np.float32(2.0**-149)


def _bound_per_instance(*args: Any) -> Any:
    raise NotImplementedError("a kernel bound per instance by numba_quantize")


select = random53 = round_value = carrier = encode = encode_element = _bound_per_instance
f64_bits = bits_f64 = _bound_per_instance
mx_exponent = mx_factors = mx_scaled = pow2_or_nan = _bound_per_instance
nvfp4_block_scales = nvfp4_scaled = _bound_per_instance


def same(y):
    return y


def encode_wide(v, code):
    """``encode`` of a result on the binary64 carrier."""
    return encode(float(v), code)


def widen(y):
    return float(y)


def index(q, j, count, length, groups):
    """The C-order index in ``x`` of element ``j`` of block ``q`` (``count`` blocks to a
    row of ``length``)."""
    r = q // count
    p = r // groups
    return (p * length + (q - r * count) * BLOCK + j) * groups + (r - p * groups)


def filled(q, count, length):
    """How many of block ``q``'s elements are ``x``'s: the last block of a row (``count``
    blocks to a row of ``length``) ends in padding, whose results ``_back`` drops."""
    return min(BLOCK, length - (q - (q // count) * count) * BLOCK)


def block_amax(x, q):
    """The largest magnitude of block ``q`` (NaN if it holds a NaN): the largest encoding
    of a magnitude, an integer maximum (it vectorises, and NaN's encodings are the
    largest)."""
    m = 0
    for j in range(x.shape[1]):  # BLOCK, as a bound LLVM vectorises (unrolled, it did not)
        m = max(m, f64_bits(float(x[q, j])) & MAG)
    return bits_f64(m)


# The loops take the blocks as the rows of a (blocks, BLOCK) array: an inner loop of a
# constant length vectorises (one over a block's range of a longer row does not).
def mx_loop(x, count, length, groups, bits, flags, scale_bits, amaxes, key, stochastic_in,
            rule_in, emax_in, t_in, inv_max_in, low_in, high_in, fp32_in, spec_in, code_in,
            scale_code_in):
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
    for q in prange(x.shape[0]):
        amax = block_amax(x, q)
        amaxes[q] = amax
        s, nan = mx_exponent(amax, rule, emax, t, inv_max, low, high, fp32)
        scale_bits[q] = encode(pow2_or_nan(s, nan), scale_code)
        down, up = mx_factors(s)
        down_c, up_c = LOAD(down), LOAD(up)  # exact: powers of two within binary32's range
        for j in range(filled(q, count, length)):
            y = mx_scaled(LOAD(x[q, j]), down_c, up_c, nan, TINY)
            rnd = random53(key, index(q, j, count, length, groups)) if stochastic else 0
            v, f = round_value(carrier(y), rnd, spec, True)
            bits[q, j] = encode_element(v, code)
            flags[q, j] = f


def amax_loop(x, amaxes):
    for q in prange(x.shape[0]):
        amaxes[q] = block_amax(x, q)


def nvfp4_scales_loop(amaxes, scale_bits, encodes, multiplier, global_decode, e4m3,
                      scale_code):
    # One flat loop over the blocks: it vectorises across them.
    for q in prange(amaxes.size):
        scale, enc = nvfp4_block_scales(amaxes[q], multiplier, global_decode, e4m3)
        scale_bits[q] = encode(scale, scale_code)
        encodes[q] = enc


def nvfp4_loop(x, count, length, groups, bits, flags, encodes, key, stochastic_in, spec_in,
               code_in):
    # The elements' parameters, as mx_loop's.
    stochastic = stochastic_in if STOCHASTIC is None else STOCHASTIC
    spec = spec_in if SPEC is None else SPEC
    code = code_in if CODE is None else CODE
    for q in prange(x.shape[0]):
        enc32 = encodes[q]
        for j in range(filled(q, count, length)):
            y = nvfp4_scaled(np.float32(x[q, j]), enc32)
            rnd = random53(key, index(q, j, count, length, groups)) if stochastic else 0
            v, f = round_value(carrier(y), rnd, spec, True)
            bits[q, j] = encode_element(v, code)
            flags[q, j] = f


_LOOPS: dict[tuple, Any] = {}
_ENCODE32: dict[str, Any] = {}
_DIGEST = source_digest(sys.modules[__name__])


def _loop(template: Any, binary32: bool, **binding: Any) -> Any:
    """``template`` compiled with the Numba backend's kernels inlined and ``binding`` (its
    globals), rounding on the binary32 encoding if ``binary32``; a parallel loop over the
    blocks (``_threads`` says on how many threads it runs)."""
    key = (template.__name__, binary32, *sorted(binding.items()))
    loop = _LOOPS.get(key)
    if loop is None:
        engine = get_backend()
        # The kernels inlined (a specialised loop's constants fold through them, the scale
        # rule's included). Called instead, compiled once each, the generic loop took four to
        # five times as long an element (and compiled in a quarter of the time).
        kernels = engine.kernels  # type: ignore[attr-defined]
        jit = numba.njit(cache=True, inline="always")
        namespace = dict(globals(), **{name: kernels[name] for name in (
            "select", "random53", "encode", "mx_factors", "mx_scaled", "pow2_or_nan",
            "nvfp4_scaled", "f64_bits", "bits_f64", "mx_exponent", "nvfp4_block_scales")})
        for helper in (same, widen, encode_wide, index, filled, block_amax):
            namespace[helper.__name__] = jit(clone(helper, namespace,
                                                   f"{helper.__name__}_{_DIGEST}"))
        # The value each element rounds, on the rounding's carrier: MX scales its elements
        # in the carrier's type, NVFP4's are binary32 products.
        # The elements are encoded on it too.
        if binary32:
            namespace.update(round_value=engine.binary32()["round_value"],  # type: ignore[attr-defined]
                             LOAD=np.float32, TINY=TINY32, carrier=namespace["same"],
                             encode_element=_encode32(engine))
        else:
            namespace.update(round_value=kernels["round_value"], LOAD=float,
                             carrier=namespace["same" if template is mx_loop else "widen"],
                             encode_element=namespace["encode_wide"])
        namespace.update(binding)
        tag = hashlib.sha1(repr(key).encode()).hexdigest()[:12]
        func = clone(template, namespace,
                     f"{template.__name__}_{tag}_{engine.digest}_{_DIGEST}")  # type: ignore[attr-defined]
        # Compiled parallel even where it runs on one thread: so compiled, this loop took a
        # fifth of the time an element that its serial compilation did.
        loop = _LOOPS[key] = numba.njit(parallel=True, cache=True)(func)
    return loop


def _encode32(engine: Any) -> Any:
    """``encode`` compiled on the binary32 encoding (its ``Encoding`` in lane types)."""
    if engine.digest not in _ENCODE32:
        namespace = instantiate(numba_backend.PRIMITIVES_BINARY32,
                                numba.njit(cache=True, inline="always"),
                                suffix=f"_binary32_{engine.digest}", encoding=BINARY32,
                                entry="encode")
        _ENCODE32[engine.digest] = namespace["encode"]
    return _ENCODE32[engine.digest]


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


def _blocks(x: np.ndarray, block: int) -> np.ndarray:
    """The (rows, length) ``x`` as a (blocks, block) array, the last block of each row
    padded with zeros (which change no amax) where ``length`` is not a multiple."""
    rows, length = x.shape
    count = -(-length // block)
    if length % block:
        padded = np.zeros((rows, count * block), x.dtype)
        padded[:, :length] = x
        x = padded
    return x.reshape(rows * count, block)


def _back(out: np.ndarray, width: int, n: int, shape: tuple[int, ...], ax: int,
          groups: int) -> np.ndarray:
    """A result of ``_rows``' and ``_blocks``' layout (``width`` to a row) in the input's
    layout, ``ax`` cut to ``n``: its elements, or its blocks (the scales)."""
    before = math.prod(shape[:ax])
    flat = out.reshape(before * groups, width)
    moved = flat[:, :n].reshape(before, groups, n)
    if groups > 1:
        moved = moved.transpose(0, 2, 1)
    return np.ascontiguousarray(moved).reshape((*shape[:ax], n, *shape[ax + 1:]))


def _elements_back(bits: np.ndarray, flags: np.ndarray, scale_bits: np.ndarray,
                   shape: tuple[int, ...], ax: int, groups: int,
                   block: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bits, flags and scale bits in the input's layout."""
    count = -(-shape[ax] // block)
    return (_back(bits, count * block, shape[ax], shape, ax, groups),
            _back(flags, count * block, shape[ax], shape, ax, groups),
            _back(scale_bits, count, count, shape, ax, groups))


def _run(template: Any, x: np.ndarray, length: int, groups: int, params: Any,
         key: int | None, outputs: tuple[np.ndarray, ...]) -> None:
    """Run ``template`` (``mx_loop``, ``nvfp4_loop``) on the blocks ``x``: specialised and
    on the binary32 carrier for long float32 input, else the generic loop on float64."""
    stochastic = key is not None
    specialise = x.size >= SPECIALISE_FROM
    binary32 = specialise and x.dtype == np.float32
    if binary32:
        params = params._replace(spec=spec_for(params.spec, BINARY32),
                                 code=type(params.code)(*map(np.int32, params.code)))
    if not specialise:
        x = np.asarray(x, np.float64)
    fields = params._asdict()
    if template is nvfp4_loop:
        fields = {"spec": params.spec, "code": params.code}
    binding = dict(BLOCK=x.shape[1])
    if specialise:
        binding.update(STOCHASTIC=stochastic,
                       **{name.upper(): value for name, value in fields.items()})
    loop = _loop(template, binary32, **binding)
    count = -(-length // x.shape[1])
    with _threads(specialise):
        loop(_frozen(x), count, length, groups, *outputs, np.uint64(key or 0), stochastic,
             *fields.values())


def _threads(parallel: bool) -> contextlib.AbstractContextManager[None]:
    """Inside, the loops run on Numba's threads if ``parallel``, else on this one."""
    return contextlib.nullcontext() if parallel else numba_backend.numba_threads(1)


def _frozen(x: np.ndarray) -> np.ndarray:
    """A read-only view (one compiled signature for every input)."""
    view = x.view()
    view.setflags(write=False)
    return view


def kernel_name(x: np.ndarray) -> str:
    """The encoding the elements of ``x`` round on (the kernel column of ``fpsim bench``)."""
    return "binary32" if x.size >= SPECIALISE_FROM and x.dtype == np.float32 else "binary64"


def _outputs(x: np.ndarray) -> tuple[np.ndarray, ...]:
    """Bits and flags per element, scale bits and amax per block."""
    return (np.empty(x.shape, np.uint8), np.empty(x.shape, np.uint8),
            np.empty(x.shape[0], np.uint8), np.empty(x.shape[0], np.float64))


def quantize_mx(arr: np.ndarray, ax: int, params: Any, key: int | None,
                block: int = 32) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """MX quantization of ``arr`` (float32 or float64) along ``ax``: the elements'
    encodings and flags, the scales' encodings, and the input's amax."""
    rows, groups = _rows(arr, ax)
    x = _blocks(rows, block)
    bits, flags, scale_bits, amaxes = _outputs(x)
    if x.size:
        _run(mx_loop, x, arr.shape[ax], groups, params, key, (bits, flags, scale_bits, amaxes))
    amax = float(np.max(amaxes)) if amaxes.size else 0.0
    return (*_elements_back(bits, flags, scale_bits, arr.shape, ax, groups, block), amax)


def quantize_nvfp4(arr: np.ndarray, ax: int, parameters: Callable[[float], Any],
                   key: int | None, block: int = 16
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, Any]:
    """NVFP4 quantization of ``arr`` (float32 or float64) along ``ax``: the elements'
    encodings and flags, the block scales' encodings, the input's amax and the tensor's
    parameters, which ``parameters`` gives for that amax (``fpsim.quantize.nvfp4``'s
    ``nvfp4_parameters``; ``quantize_mx``'s ``params`` are an ``MXParameters``)."""
    rows, groups = _rows(arr, ax)
    x = _blocks(rows, block)
    bits, flags, scale_bits, amaxes = _outputs(x)
    if x.size:
        long = x.size >= SPECIALISE_FROM
        view = x if long else np.asarray(x, np.float64)
        with _threads(long):
            _loop(amax_loop, False, BLOCK=block)(_frozen(view), amaxes)
    amax = float(np.max(amaxes)) if amaxes.size else 0.0
    params = parameters(amax)
    if x.size:
        encodes = np.empty(amaxes.size, np.float32)
        p = params
        with _threads(long):
            _loop(nvfp4_scales_loop, False, BLOCK=block)(
                amaxes, scale_bits, encodes, p.multiplier, p.global_decode, p.e4m3,
                p.scale_code)
        _run(nvfp4_loop, x, arr.shape[ax], groups, params, key, (bits, flags, encodes))
    return (*_elements_back(bits, flags, scale_bits, arr.shape, ax, groups, block), amax,
            params)
