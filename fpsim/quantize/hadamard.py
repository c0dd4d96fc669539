"""The random Hadamard transform of the NVFP4 recipe: blocks of an axis times a signed,
normalised Hadamard matrix, each product accumulated as fpsim's ``matmul`` does.

NVIDIA's NVFP4 training recipe (NVIDIA 2025, "Pretraining Large Language Models with
NVFP4"; TransformerEngine's ``NVFP4Quantizer(with_rht=True)``) multiplies the weight
gradient's inputs, in blocks of 16 along the reduction axis, by ``Q = diag(s) H / 4``:
``H`` the 16 x 16 Sylvester Hadamard matrix, ``s`` a fixed vector of random signs. ``Q``
is orthogonal (``Q Q^T = I``), so the product of two transformed operands is unchanged in
exact arithmetic; the transform spreads a block's outliers over its 16 elements before
they are quantized. Here the size is any power of 4 (the normalisation ``1/sqrt(size)``
is then a power of two and ``Q``'s entries are exact), and every sum is rounded as the
accumulator chosen says (``fpsim.matmul``: format, rounding, order, or a tensor core).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from numpy.lib.array_utils import normalize_axis_index

from fpsim._checks import boolean, integer
from fpsim._device import array_module
from fpsim._inputs import as_float_array
from fpsim.accumulation.matmul import matmul

if TYPE_CHECKING:
    from fpsim._typing import FormatLike, Values
    from fpsim.hw import BlockFMA

__all__ = ["hadamard_matrix", "hadamard_transform", "random_signs"]

# TransformerEngine's block (the NVFP4 recipe's).
SIZE = 16


def _power_of_four(size: Any) -> int:
    n = integer(size, "size", 1)
    if n & (n - 1) or (n.bit_length() - 1) % 2:
        raise ValueError(f"size must be a power of 4 (1, 4, 16, 64, ...) so that 1/sqrt(size) "
                         f"is exact, got {n}")
    return n


def hadamard_matrix(size: int = SIZE) -> npt.NDArray[np.float64]:
    """The Sylvester Hadamard matrix of order ``size`` (a power of 4): entries +-1, rows
    orthogonal; ``H[i, j] = (-1)**popcount(i & j)``.

    Parameters
    ----------
    size : int, default 16
        The order: a power of 4 (1, 4, 16, 64, ...).

    Returns
    -------
    numpy.ndarray of float64
        ``(size, size)``.

    Raises
    ------
    ValueError
        ``size`` is not a power of 4.

    Examples
    --------
    >>> hadamard_matrix(4).astype(int).tolist()
    [[1, 1, 1, 1], [1, -1, 1, -1], [1, 1, -1, -1], [1, -1, -1, 1]]
    """
    n = _power_of_four(size)
    i = np.arange(n)
    ones = np.array([bin(v).count("1") for v in range(n)])
    return np.where(ones[i[:, None] & i[None, :]] % 2, -1.0, 1.0)


def random_signs(seed: int, size: int = SIZE) -> npt.NDArray[np.float64]:
    """``size`` random signs (+1.0 or -1.0) from ``seed``: NumPy's PCG64 stream,
    ``numpy.random.default_rng(seed).integers(0, 2, size)``, 0 read as +1 and 1 as -1.

    Parameters
    ----------
    seed : int
        0..2**64-1.
    size : int, default 16
        How many signs: a power of 4.

    Returns
    -------
    numpy.ndarray of float64

    Raises
    ------
    ValueError
        ``seed`` out of range or not an integer; ``size`` not a power of 4.

    Examples
    --------
    >>> random_signs(0, 4).tolist()
    [-1.0, -1.0, -1.0, 1.0]
    """
    key = integer(seed, "seed", 0, 2**64 - 1)
    bits = np.random.default_rng(key).integers(0, 2, _power_of_four(size))
    return np.where(bits == 1, -1.0, 1.0)


def _signs(seed: int | None, signs: Values | None, size: int) -> npt.NDArray[np.float64]:
    if (seed is None) == (signs is None):
        raise ValueError("give exactly one of seed (random signs) and signs (the vector)")
    if signs is None:
        return random_signs(seed, size)  # type: ignore[arg-type]
    s = np.asarray(as_float_array(signs, "signs"), dtype=np.float64)
    if s.shape != (size,) or not np.all(np.abs(s) == 1.0):
        raise ValueError(f"signs must be {size} values, each +1 or -1; got shape {s.shape}"
                         + ("" if s.shape != (size,) else f": {s.tolist()}"))
    return s


def hadamard_transform(
    x: Values,
    *,
    seed: int | None = None,
    signs: Values | None = None,
    size: int = SIZE,
    axis: int = -1,
    inverse: bool = False,
    accum: FormatLike = "fp32",
    rounding: str = "nearest_even",
    order: str = "sequential",
    model: BlockFMA | None = None,
) -> npt.NDArray[Any]:
    """The random Hadamard transform of ``x`` along ``axis``, in blocks of ``size``.

    Each block ``v`` (``size`` consecutive elements along ``axis``) becomes ``v @ Q`` with
    ``Q = diag(s) @ H / sqrt(size)`` (``hadamard_matrix``; ``s`` the signs), or, with
    ``inverse``, ``v @ Q.T``, which undoes it. ``Q``'s entries are +-2**-k, so every
    product is exact; the ``size`` products of each output are added as
    ``fpsim.matmul`` adds them with ``accum``, ``rounding`` and ``order`` (or the tensor
    core ``model``): the result is exactly what that arithmetic gives.

    Parameters
    ----------
    x : array_like
        float32 values (fp32, bf16, fp16, fp8 all are); ``axis`` a multiple of ``size``.
        A CuPy array under the ``cupy`` backend: transformed on the device.
    seed : int, optional
        The signs' seed (``random_signs``); exactly one of ``seed`` and ``signs``.
    signs : array_like, optional
        The ``size`` signs themselves (+1 or -1), e.g. a recipe's fixed vector.
    size : int, default 16
        The block, a power of 4 (the NVFP4 recipe's 16).
    axis : int, default -1
        The axis cut into blocks (the reduction axis of the product that follows).
    inverse : bool, default False
        Apply ``Q.T`` (the inverse) instead of ``Q``.
    accum, rounding, order, model
        How each block's sums are accumulated (``fpsim.matmul``'s options).

    Returns
    -------
    numpy.ndarray
        The transformed values, in ``x``'s shape (values of ``accum``, or of the model's
        output).

    Raises
    ------
    ValueError
        A size that is not a power of 4, an axis not a multiple of it (it is not padded),
        both or neither of ``seed`` and ``signs``, signs other than +-1, inputs that are
        not float32 values, or an accumulator ``fpsim.matmul`` refuses.

    Examples
    --------
    >>> from fpsim.quantize import hadamard_transform
    >>> x = [8.0, 0.0, 0.0, 0.0]
    >>> hadamard_transform(x, signs=[1, 1, 1, 1], size=4).tolist()
    [4.0, 4.0, 4.0, 4.0]
    >>> y = hadamard_transform(x, seed=3, size=4)
    >>> hadamard_transform(y, seed=3, size=4, inverse=True).tolist()
    [8.0, 0.0, 0.0, 0.0]
    """
    n = _power_of_four(size)
    s = _signs(seed, signs, n)
    inverse = boolean(inverse, "inverse")
    arr = as_float_array(x, "x", device=True)
    xp = array_module(arr)
    if arr.ndim == 0:
        raise ValueError("x must have at least one dimension")
    ax = normalize_axis_index(integer(axis, "axis"), arr.ndim)
    length = arr.shape[ax]
    if length % n:
        raise ValueError(f"axis {ax} has {length} elements, not a multiple of the block {n} "
                         "(the transform does not pad)")
    q = s[:, None] * hadamard_matrix(n) * 2.0 ** -((n.bit_length() - 1) // 2)
    if xp is not np:
        q = xp.asarray(q)  # the constant matrix, copied to the device
    moved = xp.moveaxis(arr, ax, -1)
    blocks = moved.reshape(-1, n)
    options: dict[str, Any] = {"model": model} if model is not None else dict(
        accum=accum, rounding=rounding, order=order)
    out = matmul(blocks, q.T if inverse else q, **options)
    result: npt.NDArray[Any] = xp.moveaxis(xp.asarray(out).reshape(moved.shape), -1, ax)
    return result
