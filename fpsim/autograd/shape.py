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

    def backward(g: np.ndarray) -> Any:
        xp = _device.array_module(g)
        out = xp.zeros(x.shape, dtype=g.dtype)
        if basic and x.device != "cpu":
            out[index] = g  # each element picked once: nothing to add
        elif x.device == "cpu":
            np.add.at(out, index, g)
        else:  # the elements picked, by position, their gradients added in np.add.at's order
            picked = xp.arange(x.size).reshape(x.shape)[index]
            add_at(out.reshape(-1, 1), picked.reshape(-1), g.reshape(-1, 1))
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
    _device.common("embedding", w.data, ids)
    xp = _device.array_module(w.data)
    rows: Any = xp.asarray(ids) if _device.device_of(ids) == "cuda" else np.asarray(ids)
    if rows.dtype.kind not in "iu":
        raise ValueError(f"embedding ids must be integers, got dtype {rows.dtype}")
    if rows.size:
        # On a GPU, checked with a training step's one read (out of range: row 0 till then).
        inside = (rows >= 0) & (rows < w.shape[0])
        _device.require(inside.all(), f"embedding ids must lie in 0..{w.shape[0] - 1}")
        if xp is not np:
            rows = xp.where(inside, rows, 0)

    def backward(g: np.ndarray) -> Any:
        out = xp.zeros(w.shape, dtype=np.float64)
        add_at(out, rows.reshape(-1), _device.binary64(g.reshape(-1, w.shape[1])))
        return (numerics.round(out, p.reduce, p),)

    return Tensor.node(w.data[rows], p.compute, (w,), backward, p, "embedding")


def add_at(out: Any, ids: Any, rows: Any) -> None:
    """``np.add.at(out, ids, rows)``, its bits on either device: ``rows`` (L, D) added to
    the rows of ``out`` (R, D) that the integers ``ids`` (L,) name, each row's terms added
    one by one in the order of ``ids`` to its value, as NumPy does.

    On the host, NumPy's own. On a GPU, where a scatter-add of repeated ids adds in no
    fixed order: the terms sorted by (id, position), each id's run summed by one addition
    per repeat (as many steps as the most repeated id; that count is read on the host),
    and the run's sum added to its row.

    Examples
    --------
    >>> import numpy as np
    >>> out = np.zeros((3, 1))
    >>> add_at(out, np.array([2, 0, 2]), np.array([[1.0], [2.0], [3.0]]))
    >>> out.ravel().tolist()
    [2.0, 0.0, 4.0]
    """
    xp = _device.array_module(out)
    if xp is np:
        np.add.at(out, ids, rows)
        return
    n = ids.shape[0]
    if n == 0:
        return
    order = xp.argsort(ids.astype(np.int64) * n + xp.arange(n))  # unique keys: one order
    sorted_ids = ids[order]
    terms = rows[order]
    first = xp.searchsorted(sorted_ids, sorted_ids, side="left")
    repeat = xp.arange(n) - first  # how many of its id come before
    partial = out[sorted_ids] + terms  # the first term added to the row's value
    for r in range(1, int(repeat.max()) + 1):  # the one read: the most repeats
        step = (repeat == r)[:, None]
        partial = xp.where(step, xp.concatenate([partial[:1], partial[:-1]]) + terms, partial)
    last = xp.concatenate([sorted_ids[1:] != sorted_ids[:-1], xp.ones(1, dtype=bool)])
    # Each id's run ends once: a spare row takes the other positions' (discarded) writes.
    spare = xp.concatenate([out, xp.zeros((1,) + out.shape[1:], out.dtype)])
    spare[xp.where(last, sorted_ids, out.shape[0])] = partial
    out[...] = spare[:-1]
