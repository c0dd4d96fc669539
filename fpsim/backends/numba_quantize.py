"""Block quantization on the Numba backend, in parallel loops over the blocks.

MX: three passes; the blocks' amaxes, their scales (``mx_exponent``), and the elements
(``mx_scaled``, the rounding primitive, ``encode``). NVFP4: a pass for the blocks' amax,
then (the tensor's scales known) one for the blocks' scales (``nvfp4_block_scales``) and
one for the elements. The kernels are the shared ones (``fpsim.kernels.blockscale`` and
``core.round_value``), as the NumPy path of ``fpsim.quantize`` runs them on whole arrays.

The loops take the input as a C-contiguous (rows, length) array, the quantized axis moved
last, and run over its blocks, ``count`` to a row, the last one of a row shorter where
``length`` is not a multiple of the block (as if padded with zeros, which change no
amax), in units of up to CHUNK blocks of a row (``span``). ``groups`` (the number of
elements that followed the axis before it moved; 1 for the last axis) recovers each
element's C-order index in ``x``, the stochastic stream's counter (rows of whole blocks
with nothing after the axis run as a row a block). The short calls a training run repeats
(``hot``) also write each element's dequantized value (element times its block's scale,
exact in binary64) beside its encoding, as binary32 when every one is a binary32 value
(the step's BLAS product reads them: ``Quantized._scaled32``), and may leave the flags out
(``flags=False``). Without flags, MX elements in nearest even round and encode by
binary64's own addition (``blockscale.nearest_even_encoded``, where
``nearest_even_applies``): a third of the element's time. Arrays of
``SPECIALISE_FROM`` elements or more run in a parallel loop compiled for their exact
parameters (constants folded), on all of Numba's threads, float32 input rounded and
encoded on the binary32 encoding (``kernels.carrier``). Shorter hot calls run a serial
loop compiled for their parameters; the others one generic loop per family (float64,
parameters as arguments, compiled parallel) on the calling thread alone. Inside a
training step on 2 cores, a parallel region per quantization contended with the threads
BLAS keeps spinning after a product. The kernels are inlined into every loop. Compiled
lazily, cached on disk (``cache=True``).
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
from fpsim.backends.numba_vectors import wide_vectors
from fpsim.kernels.carrier import BINARY32, spec_for
from fpsim.kernels.core import FRAC, MAG
from fpsim.modes import NEAREST_EVEN

__all__ = ["kernel_name", "quantize_mx", "quantize_nvfp4"]

# Arrays this large or larger run in a loop compiled for their parameters.
SPECIALISE_FROM = 1 << 20
# Blocks to a unit of the parallel loops (``span``): a long row runs on every thread.
CHUNK = 256

# Bound per instance (``_loop``): the block size, the parameters' fields (None: an
# argument), whether the random stream is drawn (None: an argument), the rounding, its
# carrier's type (LOAD) and NVFP4's value on it (carrier).
BLOCK = 32
KEEP = True  # whether the loops write each element's dequantized value (binary32)
FLAGS = True  # whether they write each element's flags
NEAREST = False  # whether MX elements round by ``nearest_even_encoded`` (no flags)
LOAD = float
STOCHASTIC = RULE = EMAX = T = INV_MAX = LOW = HIGH = FP32 = SPEC = CODE = SCALE_CODE = None
TINY = 5e-324  # binary64's smallest subnormal, or binary32's (TINY32) on its carrier
TINY32 = np.float32(2.0**-149)
ONE_NAN = np.nan  # the one quiet NaN fpsim gives (0x7FF8000000000000)


def _bound_per_instance(*args: Any) -> Any:
    raise NotImplementedError("a kernel bound per instance by numba_quantize")


select = random53 = round_value = carrier = encode = encode_element = _bound_per_instance
f64_bits = bits_f64 = _bound_per_instance
mx_exponent = mx_factors = mx_scaled = pow2_or_nan = nearest_even_encoded = _bound_per_instance
nvfp4_block_scales = nvfp4_scaled = _bound_per_instance


def same(y):
    return y


def encode_wide(v, code):
    """``encode`` of a result on the binary64 carrier."""
    return encode(float(v), code)


def widen(y):
    return float(y)


def index(r, col, length, groups):
    """The C-order index in ``x`` of element ``col`` of row ``r`` of the (rows, length)
    array (``groups`` elements followed the axis before it moved), all unsigned."""
    if groups == 1:  # no division where the rows are the input's own
        return r * length + col
    g = np.uint64(groups)
    p = r // g
    return (p * length + col) * g + (r - p * g)


def span(unit, units, count):
    """Unit ``unit``'s row and its blocks ``first`` to ``end``, ``units`` units of CHUNK
    blocks to a row of ``count``, unsigned. The loops run over units, not blocks: a block's
    row and column took a division each (10 ns; none for one unit to a row). A signed index
    into ``x`` keeps a wraparound check in the loop over a block's elements, which then
    does not vectorise: the blocks' amaxes took four times as long."""
    u, units, count = np.uint64(unit), np.uint64(units), np.uint64(count)
    if units == 1:
        return u, np.uint64(0), count
    r = u // units
    first = (u - r * units) * np.uint64(CHUNK)
    return r, first, min(first + np.uint64(CHUNK), count)


def block_size(lo, length):
    """The number of elements of a block from column ``lo`` of a row of ``length``, both
    unsigned: BLOCK, or fewer for a row's last block."""
    return min(np.uint64(BLOCK), length - lo)


def block_amax(x, r, lo, n):
    """The largest magnitude of the block of row ``r`` from ``lo``, ``n`` elements (NaN if
    it holds a NaN): the largest encoding of a magnitude, an integer maximum (it
    vectorises, and NaN's encodings are the largest). Elements past a row's end would be
    padding zeros, which change no amax."""
    m = 0
    for j in range(n):
        m = max(m, f64_bits(float(x[r, lo + j])) & MAG)
    return bits_f64(m)


def lost32(y):
    """1 if ``y`` is not a binary32 value (NaN is one), else 0: its binary32 store lost it."""
    return 0 if (float(np.float32(y)) == y) | (y != y) else 1


def binary32_terms(s, nan, emin, t, emax):
    """Whether every value of a format (smallest subnormal ``2**(emin - t)``, all below
    ``2**(emax + 1)``, ``t`` fraction bits) times a block's scale ``2**s`` is a binary32
    value: a multiple of binary32's least subnormal ``2**-149`` of at most 24 bits, no
    larger than its largest; or the scale is NaN (the terms are NaN)."""
    return nan | ((s + emin - t >= -149) & (s + emax <= 127) & (t <= 23))


def product_or_nan(v, scale):
    """An element's value (on its carrier) times its block's scale, exactly in binary64:
    ``fpsim.dequantize``'s term (a NaN scale gives the one quiet NaN)."""
    y = float(v) * scale
    return ONE_NAN if y != y else y


# The loops run over the blocks of a C-contiguous (rows, length) array, ``count`` blocks
# to a row; the last block of a row is shorter where ``length`` is not a multiple of BLOCK.
def mx_loop(x, count, bits, flags, scaled, scale_bits, scales, groups, key, stochastic_in,
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
    length = np.uint64(x.shape[1])
    blocks = x.shape[0] * count
    xf, bf, ff, sf = x.reshape(-1), bits.reshape(-1), flags.reshape(-1), scaled.reshape(-1)
    amaxes = np.empty(blocks, np.float64)
    lost = 0  # dequantized values that are not binary32 values (KEEP)
    exponents = np.empty(blocks, np.int64)
    nans = np.empty(blocks, np.bool_)
    units = -(-count // CHUNK)
    # Three passes: the blocks' amaxes, their scales (one flat loop over the blocks: it
    # vectorises across them), the elements. In one pass, a block's scale held its elements
    # back: 15% longer.
    amax_loop(x, count, amaxes)  # the first pass: inlined, its loop one of this one's
    for q in prange(blocks):
        s, nan = mx_exponent(amaxes[q], rule, emax, t, inv_max, low, high, fp32)
        scale = pow2_or_nan(s, nan)
        scale_bits[q] = encode(scale, scale_code)
        scales[q] = scale
        exponents[q] = s
        nans[q] = nan
    for unit in prange(x.shape[0] * units):
        r, first, end = span(unit, units, count)
        for c in range(first, end):
            q = r * np.uint64(count) + c
            lo = c * np.uint64(BLOCK)
            down, up = mx_factors(exponents[q])
            down_c, up_c = LOAD(down), LOAD(up)  # exact: powers of two in binary32's range
            nan = nans[q]
            scale = scales[q]
            s = exponents[q]
            # Loop-invariant tests, each sparing its elements a check (LLVM takes the
            # test out of the loop): a scale of at most 1 loses nothing of an element
            # (``mx_scaled``'s check), nor does a product of a block whose terms are all
            # binary32 values (``lost32``). About a quarter of the elements' time.
            exact = (s <= 0) & (nan == 0)
            terms32 = binary32_terms(s, nan, spec.emin, t, emax)
            # Unsigned indices from the block's start: no wraparound check (indexing the
            # rows from ``lo`` took half as long again).
            base = r * length + lo
            for j in range(block_size(lo, length)):
                wide_vectors()  # 512-bit vectors where the CPU has them: 10% faster here
                i = base + j
                if exact:
                    y = LOAD(xf[i]) * down_c
                else:
                    y = mx_scaled(LOAD(xf[i]), down_c, up_c, nan, TINY)
                if NEAREST:
                    v, e = nearest_even_encoded(y, spec, code)
                    bf[i] = e
                else:
                    rnd = random53(key, index(r, lo + j, length, groups)) if stochastic else 0
                    v, f = round_value(carrier(y), rnd, spec, FLAGS)
                    bf[i] = encode_element(v, code)
                    if FLAGS:
                        ff[i] = f
                if KEEP:
                    term = product_or_nan(v, scale)
                    sf[i] = np.float32(term)
                    if not terms32:
                        lost += lost32(term)
    return largest(amaxes), lost


def largest(amaxes):
    """The largest of the blocks' amaxes (NaN if any is NaN: an integer maximum of their
    encodings, as ``block_amax``; 0 for none)."""
    m = 0
    for q in range(amaxes.size):
        m = max(m, f64_bits(amaxes[q]))
    return bits_f64(m)


def amax_loop(x, count, amaxes):
    length = np.uint64(x.shape[1])
    units = -(-count // CHUNK)
    for unit in prange(x.shape[0] * units):
        r, first, end = span(unit, units, count)
        for c in range(first, end):
            lo = c * np.uint64(BLOCK)
            amaxes[r * np.uint64(count) + c] = block_amax(x, r, lo, block_size(lo, length))


def nvfp4_scales_loop(amaxes, scale_bits, decodes, encodes, multiplier, global_decode, e4m3,
                      scale_code):
    # One flat loop over the blocks: it vectorises across them.
    for q in prange(amaxes.size):
        scale, enc = nvfp4_block_scales(amaxes[q], multiplier, global_decode, e4m3)
        scale_bits[q] = encode(scale, scale_code)
        decodes[q] = scale
        encodes[q] = enc


def nvfp4_loop(x, count, bits, flags, scaled, decodes, encodes, groups, key, stochastic_in,
               spec_in, code_in):
    # The elements' parameters, as mx_loop's.
    stochastic = stochastic_in if STOCHASTIC is None else STOCHASTIC
    spec = spec_in if SPEC is None else SPEC
    code = code_in if CODE is None else CODE
    length = np.uint64(x.shape[1])
    xf, bf, ff, sf = x.reshape(-1), bits.reshape(-1), flags.reshape(-1), scaled.reshape(-1)
    lost = 0
    units = -(-count // CHUNK)
    for unit in prange(x.shape[0] * units):
        r, first, end = span(unit, units, count)
        for c in range(first, end):
            q = r * np.uint64(count) + c
            lo = c * np.uint64(BLOCK)
            enc32 = encodes[q]
            scale = decodes[q]
            base = r * length + lo
            for j in range(block_size(lo, length)):
                wide_vectors()
                i = base + j
                y = nvfp4_scaled(np.float32(xf[i]), enc32)
                rnd = random53(key, index(r, lo + j, length, groups)) if stochastic else 0
                v, f = round_value(carrier(y), rnd, spec, FLAGS)
                bf[i] = encode_element(v, code)
                if FLAGS:
                    ff[i] = f
                if KEEP:
                    term = product_or_nan(v, scale)
                    sf[i] = np.float32(term)
                    lost += lost32(term)
    return lost


_LOOPS: dict[tuple, Any] = {}
_ENCODE32: dict[str, Any] = {}
_DIGEST = source_digest(sys.modules[__name__])


def _loop(template: Any, binary32: bool, parallel: bool = True, **binding: Any) -> Any:
    """``template`` compiled with the Numba backend's kernels inlined and ``binding`` (its
    globals), rounding on the binary32 encoding if ``binary32``; a parallel loop over the
    blocks if ``parallel`` (``_threads`` says on how many threads it runs)."""
    key = (template.__name__, binary32, parallel, *sorted(binding.items()))
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
            "nvfp4_scaled", "f64_bits", "bits_f64", "mx_exponent", "nvfp4_block_scales",
            "nearest_even_encoded")})
        for helper in (same, widen, encode_wide, index, span, block_size, block_amax, amax_loop,
                       product_or_nan, lost32, binary32_terms, largest):
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
        # A generic loop is compiled parallel even where it runs on one thread: so compiled,
        # it took a seventh of the time an element that its serial compilation did (its
        # parameters are arguments). Compiled for its parameters, the serial loop is as fast
        # as the parallel one on one thread and needs no thread setting around each call
        # (serial compilation also took less time: 5 s against 11 s, the generic loop).
        loop = _LOOPS[key] = numba.njit(parallel=parallel, cache=True)(func)
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


def _back(out: np.ndarray, shape: tuple[int, ...], ax: int, groups: int) -> np.ndarray:
    """A (rows, n) result of ``_rows``' layout in the input's layout, ``ax`` of length
    ``n``: its elements, or its blocks (the scales)."""
    n = out.shape[1]
    if groups == 1:  # nothing but ones after the axis: the layout is the input's
        return out.reshape((*shape[:ax], n, *shape[ax + 1:]))
    moved = out.reshape(math.prod(shape[:ax]), groups, n).transpose(0, 2, 1)
    return np.ascontiguousarray(moved).reshape((*shape[:ax], n, *shape[ax + 1:]))


_PREPARED: dict[tuple, tuple[Any, tuple]] = {}


def _run(template: Any, x: np.ndarray, count: int, block: int, groups: int, params: Any,
         key: int | None, outputs: tuple[np.ndarray, ...], hot: bool) -> Any:
    """Run ``template`` (``mx_loop``, ``nvfp4_loop``) on the rows ``x`` (``count`` blocks
    of ``block`` to a row), writing each element's flags and dequantized value where
    ``outputs`` hold arrays for them (``_outputs``). A long array: compiled for its
    parameters, on all threads, on the binary32 carrier for float32 input. A short one:
    hot, a serial loop compiled for its parameters; else the generic loop on this
    thread."""
    stochastic = key is not None
    long = x.size >= SPECIALISE_FROM
    binary32 = long and x.dtype == np.float32
    if not binary32:
        x = np.asarray(x, np.float64)
    loop, arguments = _prepared(template, params, block, stochastic, specialise=long or hot,
                                binary32=binary32, parallel=long or not hot,
                                keep=outputs[2].shape == x.shape,
                                flags=outputs[1].shape == x.shape)
    with _threads(long or hot):  # a hot short array's loop is serial
        return loop(_frozen(x), count, *outputs, groups, np.uint64(key or 0), stochastic,
                    *arguments)


def _prepared(template: Any, params: Any, block: int, stochastic: bool, *, specialise: bool,
              binary32: bool, parallel: bool, keep: bool,
              flags: bool) -> tuple[Any, tuple]:
    """The loop to run and its parameters' arguments, kept per call kind (a training step's
    short calls spent more time here than in their loops)."""
    # NVFP4's loop takes the elements' parameters alone (the block scales' are arguments).
    known = (params.spec, params.code) if template is nvfp4_loop else params
    memo = (template, known, block, stochastic, specialise, binary32, parallel, keep, flags)
    hit = _PREPARED.get(memo)
    if hit is None:
        fields = ({"spec": params.spec, "code": params.code} if template is nvfp4_loop
                  else params._asdict())
        if binary32:
            fields.update(spec=spec_for(fields["spec"], BINARY32),
                          code=type(fields["code"])(*map(np.int32, fields["code"])))
        binding = dict(BLOCK=block, KEEP=keep, FLAGS=flags,
                       NEAREST=template is mx_loop and specialise and not (binary32 or flags)
                       and not stochastic and nearest_even_applies(params.spec, params.code))
        if specialise:
            binding.update(STOCHASTIC=stochastic,
                           **{name.upper(): value for name, value in fields.items()})
        # A specialised loop's parameters are its constants: its arguments are zeros, which
        # Numba's dispatcher types faster than the tuples (3 us a call against 10).
        arguments = (0,) * len(fields) if specialise else tuple(fields.values())
        hit = _PREPARED[memo] = (_loop(template, binary32, parallel, **binding), arguments)
    return hit


def nearest_even_applies(spec: Any, code: Any) -> bool:
    """Whether ``kernels.blockscale.nearest_even_encoded`` gives an element's rounding and
    encoding: nearest even into a signed, saturating format with subnormals whose zero
    takes a sign (every MX element format under fpsim's default options)."""
    return (spec.mode == NEAREST_EVEN and spec.subnormals == 1 and spec.saturate == 1
            and spec.signed == 1 and code.sign != code.nan and spec.t < FRAC)


def _threads(parallel: bool) -> contextlib.AbstractContextManager[None]:
    """Inside, parallel loops run on Numba's threads if ``parallel``, else on this one
    (a serial loop runs on this one anyway)."""
    return contextlib.nullcontext() if parallel else numba_backend.numba_threads(1)


def _frozen(x: np.ndarray) -> np.ndarray:
    """A read-only view (one compiled signature for every input)."""
    view = x.view()
    view.setflags(write=False)
    return view


def kernel_name(x: np.ndarray) -> str:
    """The encoding the elements of ``x`` round on (the kernel column of ``fpsim bench``)."""
    return "binary32" if x.size >= SPECIALISE_FROM and x.dtype == np.float32 else "binary64"


def kept(size: int, hot: bool) -> bool:
    """Whether a call writes its elements' dequantized values: a training step's short
    ones (a long array's product dequantizes it afterwards, as ``fpsim.quantize``'s)."""
    return hot and size < SPECIALISE_FROM


def _as_blocks(x: np.ndarray, outputs: tuple[np.ndarray, ...], count: int, block: int,
               groups: int) -> tuple[np.ndarray, int, tuple[np.ndarray, ...]]:
    """The loops' view of rows made of whole blocks, with nothing after the axis: a row a
    block (the same elements, C-order indices and outputs), 1 block a row."""
    if groups != 1 or count == 1 or x.shape[1] != count * block:
        return x, count, outputs
    return (x.reshape(-1, block), 1,
            tuple(o.reshape(-1, block) if o.shape == x.shape else o for o in outputs))


def _outputs(x: np.ndarray, count: int, keep: bool,
             flags: bool = True) -> tuple[np.ndarray, ...]:
    """Bits, flags (``flags``) and dequantized value as binary32 (``keep``) per element;
    scale bits and scale (MX) or amax (NVFP4) per block."""
    blocks = x.shape[0] * count
    return (np.empty(x.shape, np.uint8), np.empty(x.shape if flags else (0, 0), np.uint8),
            np.empty(x.shape if keep else (0, 0), np.float32), np.empty(blocks, np.uint8),
            np.empty(blocks, np.float64))


def _binary32_kept(outputs: tuple[np.ndarray, ...], lost: int) -> tuple[np.ndarray, ...]:
    """``outputs`` without the dequantized values if ``lost`` of them were not binary32
    values (``Quantized._scaled`` then computes them in binary64)."""
    if not lost:
        return outputs
    return (*outputs[:2], np.empty((0, 0), np.float32), *outputs[3:])


def _results(outputs: tuple[np.ndarray, ...], count: int, shape: tuple[int, ...], ax: int,
             groups: int) -> tuple[Any, ...]:
    """Bits, flags and dequantized values (each None where not written), scale bits and
    scales in the input's layout."""
    bits, flags, scaled, scale_bits, scales = outputs
    rows = bits.shape[0]
    if groups == 1:  # the rows are the input's own: reshapes
        blocks = (*shape[:ax], count, *shape[ax + 1:])
        return (bits.reshape(shape),
                *(a.reshape(shape) if a.shape == bits.shape else None for a in (flags, scaled)),
                scale_bits.reshape(blocks), scales.reshape(blocks))
    return (_back(bits, shape, ax, groups),
            *(_back(a, shape, ax, groups) if a.shape == bits.shape else None
              for a in (flags, scaled)),
            *(_back(a.reshape(rows, count), shape, ax, groups) for a in (scale_bits, scales)))


def quantize_mx(arr: np.ndarray, ax: int, params: Any, key: int | None, block: int = 32,
                hot: bool = False, flags: bool = True) -> tuple[Any, ...]:
    """MX quantization of ``arr`` (float32 or float64) along ``ax`` in blocks: the
    elements' encodings and flags (None without ``flags``), their dequantized values
    (element times scale), the scales' encodings and values, and the input's amax.
    ``hot``: compiled for these parameters at any size (a training run repeats them), with
    the dequantized values as binary32 where every one is a binary32 value (else None)."""
    x, groups = _rows(arr, ax)
    count = -(-x.shape[1] // block)
    outputs = _outputs(x, count, kept(x.size, hot), flags)
    amax, lost = 0.0, 0
    if x.size:
        view, blocks, outs = _as_blocks(x, outputs, count, block, groups)
        amax, lost = _run(mx_loop, view, blocks, block, groups, params, key, outs, hot)
    return (*_results(_binary32_kept(outputs, lost), count, arr.shape, ax, groups), amax)


def quantize_nvfp4(arr: np.ndarray, ax: int, parameters: Callable[[float], Any],
                   key: int | None, block: int = 16, hot: bool = False,
                   flags: bool = True) -> tuple[Any, ...]:
    """NVFP4 quantization of ``arr`` (float32 or float64) along ``ax`` in blocks:
    as ``quantize_mx`` but the scales' values (the dequantized values without the tensor
    scale; the scales' NaN is ``fpsim.from_bits``' of their encoding), and the tensor's
    parameters, which ``parameters`` gives for the input's amax (``fpsim.quantize.nvfp4``'s
    ``nvfp4_parameters``; ``quantize_mx``'s ``params`` are an ``MXParameters``)."""
    x, groups = _rows(arr, ax)
    count = -(-x.shape[1] // block)
    bits, flag_out, scaled, scale_bits, amaxes = _outputs(x, count, kept(x.size, hot), flags)
    decodes = np.empty(amaxes.size, np.float64)
    long = x.size >= SPECIALISE_FROM
    rows, blocks, (bits_v, flags_v, scaled_v) = _as_blocks(x, (bits, flag_out, scaled), count,
                                                           block, groups)
    if x.size:
        view = rows if long else np.asarray(rows, np.float64)
        with _threads(long):
            _loop(amax_loop, False, BLOCK=block)(_frozen(view), blocks, amaxes)
    amax = float(np.max(amaxes)) if amaxes.size else 0.0
    params = parameters(amax)
    lost = 0
    if x.size:
        encodes = np.empty(amaxes.size, np.float32)
        p = params
        with _threads(long):
            _loop(nvfp4_scales_loop, False, BLOCK=block)(
                amaxes, scale_bits, decodes, encodes, p.multiplier, p.global_decode, p.e4m3,
                p.scale_code)
        lost = _run(nvfp4_loop, rows, blocks, block, groups, params, key,
                    (bits_v, flags_v, scaled_v, decodes, encodes), hot)
    outputs = _binary32_kept((bits, flag_out, scaled, scale_bits, decodes), lost)
    return (*_results(outputs, count, arr.shape, ax, groups)[:4], amax, params)
