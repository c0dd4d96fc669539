"""2-D convolution whose inner products use the accumulation machinery."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, overload

import numpy as np

from fpsim._checks import integer_pair
from fpsim._device import array_module
from fpsim._inputs import as_float_array
from fpsim.accumulation.matmul import matmul

if TYPE_CHECKING:
    from fpsim._typing import FloatArray, Values
    from fpsim.accumulation.stats import AccumulationStats

Pair = tuple[int, int]


def pad2d(x: np.ndarray, top: int, bottom: int, left: int, right: int) -> np.ndarray:
    """``x`` (N, C, H, W) with zeros added above, below, left and right (``np.pad``'s
    zeros), on ``x``'s device."""
    n, ch, h, w = x.shape
    padded: np.ndarray = array_module(x).zeros((n, ch, h + top + bottom, w + left + right),
                                               x.dtype)
    padded[:, :, top:top + h, left:left + w] = x
    return padded


def im2col(x: np.ndarray, kh: int, kw: int, stride: Pair, padding: Pair) -> np.ndarray:
    """Patches of ``x`` (N, C, H, W) as rows (N, OH*OW, C*KH*KW), K running over (c, kh, kw);
    on ``x``'s device (NumPy's or CuPy's arrays)."""
    n, ch, h, w = x.shape
    (sh, sw), (ph, pw) = stride, padding
    padded = pad2d(x, ph, ph, pw, pw)
    oh = (h + 2 * ph - kh) // sh + 1
    ow = (w + 2 * pw - kw) // sw + 1
    xp = array_module(x)
    # Channels last (one pass over the input), then each kernel offset's strided slice
    # (N, OH, OW, C) stacked last: (N, OH, OW, C, KH*KW), C-contiguous, so that the rows
    # need no gather (a product's operand reads them as a matrix).
    last = xp.ascontiguousarray(padded.transpose(0, 2, 3, 1))
    shifted = [last[:, i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw, :]
               for i in range(kh) for j in range(kw)]
    patches: np.ndarray = xp.stack(shifted, axis=-1).reshape(n, oh * ow, ch * kh * kw)
    return patches


def check(x: np.ndarray, w: np.ndarray, stride: int | Pair,
          padding: int | Pair) -> tuple[Pair, Pair]:
    """Validate a convolution's shapes; returns ``(stride, padding)`` as pairs."""
    if x.ndim != 4 or w.ndim != 4:
        raise ValueError(
            f"conv2d needs x (N, C, H, W) and w (O, C, KH, KW), got {x.shape} and {w.shape}"
        )
    if x.shape[1] != w.shape[1]:
        raise ValueError(f"channels differ: x has {x.shape[1]}, w has {w.shape[1]}")
    if 0 in w.shape[2:]:
        raise ValueError(f"the kernel must be at least 1x1, got {w.shape[2]}x{w.shape[3]}")
    strides = integer_pair(stride, "stride", 1)
    pads = integer_pair(padding, "padding", 0)
    if any(x.shape[2 + i] + 2 * pads[i] < w.shape[2 + i] for i in range(2)):
        raise ValueError(f"kernel {w.shape[2:]} larger than the padded input {x.shape[2:]}")
    return strides, pads


def correlate(x: np.ndarray, w: np.ndarray, stride: Pair, padding: Pair,
              product: Callable[[np.ndarray, np.ndarray], Any]) -> tuple[np.ndarray, np.ndarray]:
    """``(y (N, O, OH, OW), patches (N, OH*OW, C*KH*KW))``: each output the inner product
    of a patch with a kernel, computed as ``product(patches, kernels)`` (a matmul)."""
    o, ch, kh, kw = w.shape
    n, _, h, wd = x.shape
    oh = (h + 2 * padding[0] - kh) // stride[0] + 1
    ow = (wd + 2 * padding[1] - kw) // stride[1] + 1
    cols = im2col(x, kh, kw, stride, padding)
    value = product(cols, w.reshape(o, ch * kh * kw).T)
    xp = array_module(value)
    return xp.ascontiguousarray(value.reshape(n, oh, ow, o).transpose(0, 3, 1, 2)), cols


def weight_gradient(g: np.ndarray, cols: np.ndarray, w_shape: tuple[int, ...],
                    product: Callable[[np.ndarray, np.ndarray], Any]) -> Any:
    """d(conv)/dw of the gradient ``g`` (N, O, OH, OW), the forward's patches ``cols``
    (N, OH*OW, K): each kernel element's inner product over (n, oh, ow) in C order,
    computed as ``product(g as (O, N*OH*OW), patches as (N*OH*OW, K))``; (O, C, KH, KW)."""
    o = g.shape[1]
    value = product(g.transpose(1, 0, 2, 3).reshape(o, -1), cols.reshape(-1, cols.shape[-1]))
    return value.reshape(w_shape)


def input_gradient(g: np.ndarray, w: np.ndarray, x_shape: tuple[int, ...], stride: Pair,
                   padding: Pair, product: Callable[[np.ndarray, np.ndarray], Any]) -> Any:
    """d(conv)/dx of the gradient ``g`` (N, O, OH, OW): the full correlation of the
    stride-dilated gradient with the flipped kernel, so that each input's gradient is an
    inner product over (o, kh, kw) in C order of the flipped kernel, computed as
    ``product(patches (M, O*KH*KW), kernels (O*KH*KW, C))``; (N, C, H, W), on ``g``'s
    device."""
    n, o, oh, ow = g.shape
    _, c, kh, kw = w.shape
    h, wd = x_shape[2:]
    xp = array_module(g)
    dilated = xp.zeros((n, o, (oh - 1) * stride[0] + 1, (ow - 1) * stride[1] + 1), g.dtype)
    dilated[:, :, :: stride[0], :: stride[1]] = g
    # Pad so that the full correlation covers the padded input, then crop the padding off.
    extra = ((h + 2 * padding[0] - kh) % stride[0], (wd + 2 * padding[1] - kw) % stride[1])
    padded = pad2d(dilated, kh - 1, kh - 1 + extra[0], kw - 1, kw - 1 + extra[1])
    flipped = xp.ascontiguousarray(w[:, :, ::-1, ::-1].transpose(1, 0, 2, 3))
    full, _ = correlate(padded, flipped, (1, 1), (0, 0), product)
    return full[:, :, padding[0]: padding[0] + h, padding[1]: padding[1] + wd]


@overload
def conv2d(x: Values, w: Values, *, stride: int | Pair = ..., padding: int | Pair = ...,
           stats: Literal[False] = ..., **options: Any) -> FloatArray: ...
@overload
def conv2d(x: Values, w: Values, *, stride: int | Pair = ..., padding: int | Pair = ...,
           stats: Literal[True], **options: Any) -> tuple[FloatArray, AccumulationStats]: ...
@overload
def conv2d(x: Values, w: Values, *, stride: int | Pair = ..., padding: int | Pair = ...,
           stats: bool = ...,
           **options: Any) -> FloatArray | tuple[FloatArray, AccumulationStats]: ...
def conv2d(x: Values, w: Values, *, stride: int | Pair = 1, padding: int | Pair = 0,
           **options: Any) -> Any:
    """2-D convolution with an emulated accumulator (a cross-correlation, as in PyTorch).

    Each output is the inner product of a patch of ``x`` with a kernel, over
    (c, kh, kw) in C order, computed by ``fpsim.matmul`` with ``options``.

    Parameters
    ----------
    x : array_like
        The input, (N, C, H, W): float32 values.
    w : array_like
        The kernels, (O, C, KH, KW): float32 values.
    stride : int or (int, int), default 1
        The step between patches, vertically and horizontally (at least 1).
    padding : int or (int, int), default 0
        Zeros added above and below, left and right (at least 0).
    **options
        ``matmul``'s keyword arguments: ``accum``, ``rounding``, ``order``,
        ``products``, ``out``, ``model``, ``subnormals``, ``saturate``, ``seed``,
        ``random_bits``, ``stats``.

    Returns
    -------
    numpy.ndarray or cupy.ndarray
        The output, (N, O, OH, OW), OH = (H + 2 * padding - KH) // stride + 1; a GPU
        array where an input is one (the ``cupy`` backend).
    stats : AccumulationStats
        Only with ``stats=True``, as ``(result, stats)``.

    Raises
    ------
    ValueError
        Inputs that are not 4-D, channels that differ, an empty kernel or one
        larger than the padded input, a bad ``stride`` or ``padding``; anything
        ``matmul`` refuses.

    Examples
    --------
    >>> import numpy as np
    >>> import fpsim
    >>> fpsim.conv2d(np.ones((1, 1, 3, 3)), np.ones((1, 1, 2, 2)), accum="fp16").tolist()
    [[[[4.0, 4.0], [4.0, 4.0]]]]
    >>> images, kernels = np.ones((2, 3, 8, 8)), np.ones((4, 3, 3, 3))
    >>> fpsim.conv2d(images, kernels, stride=2, padding=1, accum="fp16").shape
    (2, 4, 4, 4)
    """
    xs: np.ndarray = as_float_array(x, "x", device=True)
    ws: np.ndarray = as_float_array(w, "w", device=True)
    strides, pads = check(xs, ws, stride, padding)
    counts: list[AccumulationStats] = []

    def product(a: np.ndarray, b: np.ndarray) -> Any:
        result = matmul(a, b, **options)
        if options.get("stats"):
            counts.append(result[1])
            return result[0]
        return result

    value, _ = correlate(xs, ws, strides, pads, product)
    return (value, counts[0]) if options.get("stats") else value
