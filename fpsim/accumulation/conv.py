"""2-D convolution whose inner products use the accumulation machinery."""

from __future__ import annotations

import numpy as np

from fpsim._inputs import as_float_array
from fpsim.accumulation.matmul import matmul


def _pair(v, name: str) -> tuple[int, int]:
    pair = (v, v) if np.ndim(v) == 0 else tuple(v)
    if len(pair) != 2 or any(int(p) != p or p < 0 for p in pair):
        raise ValueError(f"{name} must be a non-negative integer or a pair of them, got {v!r}")
    return int(pair[0]), int(pair[1])


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


def conv2d(x, w, *, stride=1, padding=0, **options):
    """Cross-correlation of ``x`` (N, C, H, W) with ``w`` (O, C, KH, KW), NCHW out.

    Each output is an inner product over (c, kh, kw) in C order, computed by
    ``fpsim.matmul`` with ``options`` (accum, rounding, order, products, model, ...).
    """
    x = as_float_array(x, "x")
    w = as_float_array(w, "w")
    if x.ndim != 4 or w.ndim != 4:
        raise ValueError(
            f"conv2d needs x (N, C, H, W) and w (O, C, KH, KW), got {x.shape} and {w.shape}"
        )
    if x.shape[1] != w.shape[1]:
        raise ValueError(f"channels differ: x has {x.shape[1]}, w has {w.shape[1]}")
    stride = _pair(stride, "stride")
    padding = _pair(padding, "padding")
    if 0 in stride:
        raise ValueError("stride must be positive")
    o, ch, kh, kw = w.shape
    n, _, h, wd = x.shape
    oh = (h + 2 * padding[0] - kh) // stride[0] + 1
    ow = (wd + 2 * padding[1] - kw) // stride[1] + 1
    if oh < 1 or ow < 1:
        raise ValueError(f"kernel {(kh, kw)} larger than the padded input {(h, wd)}")
    cols = im2col(x, kh, kw, stride, padding)
    weights = w.reshape(o, ch * kh * kw).T
    result = matmul(cols, weights, **options)
    value, counts = result if options.get("stats") else (result, None)
    value = value.reshape(n, oh, ow, o).transpose(0, 3, 1, 2)
    value = np.ascontiguousarray(value)
    return (value, counts) if options.get("stats") else value
