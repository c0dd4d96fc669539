"""Operations that move values without arithmetic: nothing to round."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from fpsim import _device
from fpsim.autograd.cast import compute, op_policy, same_device
from fpsim.autograd.tensor import Tensor, as_tensor
from fpsim.precision import numerics

if TYPE_CHECKING:
    import numpy.typing as npt

    from fpsim.autograd.tensor import TensorLike


def _move(name: str, x: TensorLike, forward: Callable[[np.ndarray], np.ndarray],
          backward: Callable[[np.ndarray], np.ndarray], exact: bool = True) -> Tensor:
    """``exact``: the backward moves values without adding any (they stay in the format)."""
    x = as_tensor(x)
    p = op_policy(name)

    def grads(g: np.ndarray) -> tuple[Any, ...]:
        return ((backward(g), x.format) if exact else backward(g),)

    return Tensor.node(forward(x.data), x.format, (x,), grads, p, name)


def reshape(x: TensorLike, *shape: int | Sequence[int]) -> Tensor:
    """``x`` with a new shape, as ``numpy.reshape`` (exact: the format is kept).

    Parameters
    ----------
    x : Tensor or array_like
        The input (its format is kept: moving values is exact).
    *shape : int or tuple of int
        The new shape, as integers or one tuple (-1 allowed).

    Returns
    -------
    Tensor
        Of ``x``'s format.

    Examples
    --------
    >>> import fpsim
    >>> from fpsim.nn import functional as F
    >>> F.reshape(fpsim.tensor([1.0, 2.0, 3.0, 4.0], format="fp16"), 2, 2)
    Tensor(array([[1., 2.],
                  [3., 4.]]), format=fp16)
    """
    shape = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
    x = as_tensor(x)
    return _move("reshape", x, lambda v: v.reshape(shape), lambda g: g.reshape(x.shape))


def transpose(x: TensorLike, *axes: int | Sequence[int]) -> Tensor:
    """Axes permuted (reversed when none are given), as ``numpy.transpose``.

    Parameters
    ----------
    x : Tensor or array_like
        The input (its format is kept: moving values is exact).
    *axes : int or tuple of int
        A permutation of the axes, as integers or one tuple.

    Returns
    -------
    Tensor
        Of ``x``'s format.

    Raises
    ------
    ValueError
        If ``axes`` is not a permutation of ``x``'s dimensions.

    Examples
    --------
    >>> import fpsim
    >>> from fpsim.nn import functional as F
    >>> F.transpose(fpsim.tensor([[1.0, 2.0]])).shape
    (2, 1)
    """
    axes = tuple(axes[0]) if len(axes) == 1 and isinstance(axes[0], (tuple, list)) else axes
    x = as_tensor(x)
    perm: tuple[int, ...] = tuple(axes) if axes else tuple(reversed(range(x.ndim)))  # type: ignore[arg-type]
    if sorted(perm) != list(range(x.ndim)):
        raise ValueError(f"axes {axes} are not a permutation of {x.ndim} dimensions")
    inverse = tuple(np.argsort(perm))
    return _move("transpose", x, lambda v: v.transpose(perm), lambda g: g.transpose(inverse))


def getitem(x: TensorLike, index: Any) -> Tensor:
    """``x[index]`` (``Tensor.__getitem__``): NumPy's basic and integer-array indexing.

    Parameters
    ----------
    x : Tensor or array_like
        The input (its format is kept: moving values is exact).
    index : int, slice, tuple or array of int
        As NumPy takes it (not a Tensor).

    Returns
    -------
    Tensor
        Of ``x``'s format; the gradient of repeated elements is summed.

    Raises
    ------
    ValueError
        If ``index`` is a Tensor.

    Examples
    --------
    >>> import fpsim
    >>> x = fpsim.tensor([1.0, 2.0, 3.0], requires_grad=True)
    >>> x[[0, 0, 2]].sum().backward()
    >>> x.grad
    array([2., 0., 1.])
    """
    x = as_tensor(x)
    if isinstance(index, Tensor):
        raise ValueError("index with integer arrays, not Tensors")
    basic = _basic(index)
    if x.device != "cpu" and not basic:
        raise NotImplementedError(
            "indexing a tensor on device 'cuda' with integer arrays is not supported yet: its "
            "gradient adds repeated elements, in an order CuPy does not fix")

    def backward(g: np.ndarray) -> Any:
        out = _device.array_module(g).zeros(x.shape, dtype=g.dtype)
        if basic and x.device != "cpu":
            out[index] = g  # each element picked once: nothing to add
        else:
            np.add.at(out, index, g)
        return out

    return _move("getitem", x, lambda v: v[index], backward, exact=False)


def _basic(index: Any) -> bool:
    """Whether ``index`` picks each element at most once: NumPy's basic indexing
    (integers, slices, None, Ellipsis), or one boolean mask."""
    if getattr(index, "dtype", None) == np.bool_:
        return True
    parts = index if isinstance(index, tuple) else (index,)
    return all(isinstance(i, (int, np.integer, slice, type(None), type(Ellipsis)))
               and not isinstance(i, bool) for i in parts)


def cat(tensors: Sequence[TensorLike], axis: int = 0) -> Tensor:
    """Concatenation along ``axis`` (the tensors are first brought to one format).

    Parameters
    ----------
    tensors : sequence of Tensor or array_like
        At least one; of different formats, they are
        cast to the compute format first.
    axis : int, default 0
        The axis to join along.

    Returns
    -------
    Tensor
        Of the tensors' common format, or the compute format.

    Raises
    ------
    ValueError
        If ``tensors`` is empty.

    Examples
    --------
    >>> import fpsim
    >>> from fpsim.nn import functional as F
    >>> F.cat([fpsim.tensor([1.0]), fpsim.tensor([2.0, 3.0])])
    Tensor(array([1., 2., 3.]), format=fp64)
    """
    if not tensors:
        raise ValueError("cat needs at least one tensor")
    p = op_policy("cat")
    xs = [as_tensor(t) for t in tensors]
    fmt = xs[0].format
    if any(t.format != fmt for t in xs):
        xs = [compute(t, p) for t in xs]
        fmt = p.compute
    xs = list(same_device("cat", *xs))
    xp = _device.array_module(xs[0].data)
    data = xp.concatenate([t.data for t in xs], axis=axis)
    bounds = np.cumsum([t.shape[axis] for t in xs])[:-1].tolist()
    return Tensor.node(data, fmt, xs, lambda g: xp.split(g, bounds, axis=axis), p, "cat")


def stack(tensors: Sequence[TensorLike], axis: int = 0) -> Tensor:
    """The tensors stacked along a new ``axis``.

    Parameters
    ----------
    tensors : sequence of Tensor or array_like
        At least one, all of one shape.
    axis : int, default 0
        The position of the new axis.

    Returns
    -------
    Tensor
        As ``cat`` gives it.

    Raises
    ------
    ValueError
        If ``tensors`` is empty.

    Examples
    --------
    >>> import fpsim
    >>> from fpsim.nn import functional as F
    >>> F.stack([fpsim.tensor([1.0, 2.0]), fpsim.tensor([3.0, 4.0])]).shape
    (2, 2)
    """
    xs = [as_tensor(t) for t in tensors]
    if not xs:
        raise ValueError("stack needs at least one tensor")
    return cat([reshape(t, t.shape[:axis % (t.ndim + 1)] + (1,) + t.shape[axis % (t.ndim + 1):])
                for t in xs], axis=axis)


def embedding(ids: npt.ArrayLike, weight: TensorLike) -> Tensor:
    """Rows of ``weight`` (num, dim) picked by integer ``ids`` (any shape), in compute format.

    Parameters
    ----------
    ids : array_like of int
        Row numbers in 0..num-1, of any shape.
    weight : Tensor or array_like
        The table, (num, dim), cast to the compute format.

    Returns
    -------
    Tensor
        Of shape ``ids.shape + (dim,)``; the gradient is summed per row in ``reduce``.

    Raises
    ------
    ValueError
        If ``ids`` are not integers, or not row numbers.

    Examples
    --------
    >>> import fpsim
    >>> from fpsim.nn import functional as F
    >>> half = fpsim.precision.parse("compute=fp16")
    >>> import numpy as np
    >>> table = fpsim.tensor([[0.1, 1.0], [2.0, 3.0]])
    >>> with half:
    ...     F.embedding(np.array([1, 0]), table)
    Tensor(array([[2.        , 3.        ],
                  [0.09997559, 1.        ]]), format=fp16)
    """
    p = op_policy("embedding")
    w = compute(weight, p)
    if w.device != "cpu" or _device.device_of(ids) != "cpu":
        raise NotImplementedError(
            "embedding is not supported on device 'cuda' yet: its gradient adds the rows "
            "of repeated ids, in an order CuPy does not fix")
    ids = np.asarray(ids)
    if ids.dtype.kind not in "iu":
        raise ValueError(f"embedding ids must be integers, got dtype {ids.dtype}")
    if ids.size and (ids.min() < 0 or ids.max() >= w.shape[0]):
        raise ValueError(f"embedding ids must lie in 0..{w.shape[0] - 1}")

    def backward(g: np.ndarray) -> Any:
        out = np.zeros(w.shape, dtype=np.float64)
        np.add.at(out, ids.reshape(-1), g.reshape(-1, w.shape[1]).astype(np.float64))
        return (numerics.round(out, p.reduce, p),)

    return Tensor.node(w.data[ids], p.compute, (w,), backward, p, "embedding")
