"""2-D convolution whose inner products use the accumulation machinery."""

from __future__ import annotations

import numpy as np

from fpsim._checks import integer_pair
from fpsim._inputs import as_float_array
from fpsim.accumulation.matmul import matmul


def im2col(x: np.ndarray, kh: int, kw: int, stride: tuple, padding: tuple) -> np.ndarray:
    """Patches of ``x`` (N, C, H, W) as rows (N, OH*OW, C*KH*KW), K running over (c, kh, kw)."""
    n, ch, h, w = x.shape
    (sh, sw), (ph, pw) = stride, padding
    padded = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    oh = (h + 2 * ph - kh) // sh + 1
    ow = (w + 2 * pw - kw) // sw + 1
    windows = np.lib.stride_tricks.sliding_window_view(padded, (kh, kw), axis=(2, 3))
    windows = windows[:, :, ::sh, ::sw][:, :, :oh, :ow]  # (N, C, OH, OW, KH, KW)
    return windows.transpose(0, 2, 3, 1, 4, 5).reshape(n, oh * ow, ch * kh * kw)


def check(x: np.ndarray, w: np.ndarray, stride, padding) -> tuple[tuple, tuple]:
    """Validate a convolution's shapes; returns ``(stride, padding)`` as pairs."""
    if x.ndim != 4 or w.ndim != 4:
        raise ValueError(
            f"conv2d needs x (N, C, H, W) and w (O, C, KH, KW), got {x.shape} and {w.shape}"
        )
    if x.shape[1] != w.shape[1]:
        raise ValueError(f"channels differ: x has {x.shape[1]}, w has {w.shape[1]}")
    if 0 in w.shape[2:]:
        raise ValueError(f"the kernel must be at least 1x1, got {w.shape[2]}x{w.shape[3]}")
    stride = integer_pair(stride, "stride", 1)
    padding = integer_pair(padding, "padding", 0)
    if any(x.shape[2 + i] + 2 * padding[i] < w.shape[2 + i] for i in range(2)):
        raise ValueError(f"kernel {w.shape[2:]} larger than the padded input {x.shape[2:]}")
    return stride, padding


def correlate(x: np.ndarray, w: np.ndarray, stride: tuple, padding: tuple, product):
    """``(y (N, O, OH, OW), patches (N, OH*OW, C*KH*KW))``: each output the inner product
    of a patch with a kernel, computed as ``product(patches, kernels)`` (a matmul)."""
    o, ch, kh, kw = w.shape
    n, _, h, wd = x.shape
    oh = (h + 2 * padding[0] - kh) // stride[0] + 1
    ow = (wd + 2 * padding[1] - kw) // stride[1] + 1
    cols = im2col(x, kh, kw, stride, padding)
    value = product(cols, w.reshape(o, ch * kh * kw).T)
    return np.ascontiguousarray(value.reshape(n, oh, ow, o).transpose(0, 3, 1, 2)), cols


def conv2d(x, w, *, stride=1, padding=0, **options):
    """Cross-correlation of ``x`` (N, C, H, W) with ``w`` (O, C, KH, KW), NCHW out.

    Each output is an inner product over (c, kh, kw) in C order, computed by
    ``fpsim.matmul`` with ``options`` (accum, rounding, order, products, model, ...).
    """
    x = as_float_array(x, "x")
    w = as_float_array(w, "w")
    stride, padding = check(x, w, stride, padding)
    counts = []

    def product(a, b):
        result = matmul(a, b, **options)
        if options.get("stats"):
            counts.append(result[1])
            return result[0]
        return result

    value, _ = correlate(x, w, stride, padding, product)
    return (value, counts[0]) if options.get("stats") else value
