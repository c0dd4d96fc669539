"""Tensor: values of a format, and reverse-mode differentiation over a dynamic graph.

Every gradient is rounded to the format of the tensor it belongs to, with the
policy of the operation that produced it, so activation gradients underflow
and overflow as they would in that format.
"""

from __future__ import annotations

import contextlib
import numbers
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from fpsim import _device
from fpsim._checks import boolean
from fpsim._inputs import as_float_array
from fpsim.formats import Format, as_format
from fpsim.precision import numerics
from fpsim.precision.policy import Policy, current
from fpsim.rounding import round as round_to

if TYPE_CHECKING:
    from typing import TypeAlias

    import numpy.typing as npt

    #: What a Tensor operation takes: a Tensor, or values (a constant of their dtype's
    #: format).
    TensorLike: TypeAlias = "Tensor | npt.ArrayLike"

_grad_enabled = [True]
# Called as observe(unrounded, rounded, format) after every gradient rounding while
# registered (fpsim.training.monitor.FlushCounter); empty otherwise.
grad_observers: list[Callable[[np.ndarray, np.ndarray, Format], object]] = []

_FORMAT_OF_DTYPE = {np.dtype(np.float16): "fp16", np.dtype(np.float32): "fp32",
                    np.dtype(np.float64): "fp64"}


@contextlib.contextmanager
def no_grad() -> Iterator[None]:
    """Operations inside build no graph (a context manager, as ``torch.no_grad``).

    Yields
    ------
    None

    Examples
    --------
    >>> import fpsim
    >>> w = fpsim.tensor([1.5], requires_grad=True)
    >>> with fpsim.no_grad():
    ...     y = w * 2
    >>> y.requires_grad, (w * 2).requires_grad
    (False, True)
    """
    _grad_enabled.append(False)
    try:
        yield
    finally:
        _grad_enabled.pop()


def grad_enabled() -> bool:
    """Whether operations build a graph now (False inside ``no_grad()``).

    Returns
    -------
    bool

    Examples
    --------
    >>> import fpsim
    >>> with fpsim.no_grad():
    ...     fpsim.autograd.grad_enabled()
    False
    >>> fpsim.autograd.grad_enabled()
    True
    """
    return _grad_enabled[-1]


class Tensor:
    """An array of values of ``format``, with an optional gradient.

    Parameters
    ----------
    data : array_like or Tensor
        The values: floats, integers (exactly representable in float64) or booleans
        (taken as 0.0 and 1.0).
    requires_grad : bool, default False
        Whether ``backward()`` computes this leaf's gradient.
    format : Format or str, optional
        Round the data to this format (nearest even); without it, float16, float32 and
        float64 data are values of fp16, fp32 and fp64, and integers of fp64.
    device : {"cpu", "cuda"}, optional
        Where the values live (NumPy or CuPy arrays); by default where ``data`` is.

    Attributes
    ----------
    data : numpy.ndarray or cupy.ndarray
        The values, all of them values of ``format`` (float64 for an emulated format).
    format : Format
        The format of the values, and of the gradient.
    requires_grad : bool
        Whether a gradient flows to this tensor.
    grad : numpy.ndarray or None
        The gradient accumulated by ``backward()``, rounded to ``format``.
    op : str
        The operation that made this tensor (``"leaf"`` for a leaf).

    Raises
    ------
    ValueError
        If ``data`` is not numbers, or holds integers float64 does not hold exactly, or
        ``device`` is not a device name.
    RuntimeError
        For ``device="cuda"`` where no GPU is usable (the message says what is missing).

    Notes
    -----
    The operators (``+ - * / ** @``, unary ``-``, indexing) and the methods
    ``reshape``, ``transpose``, ``T``, ``sum``, ``mean``, ``relu``, ``tanh``,
    ``sigmoid``, ``exp``, ``log`` and ``to`` are the functions of
    ``fpsim.nn.functional`` (defined in ``fpsim.autograd.pointwise``, ``dot``,
    ``reductions``, ``shape`` and ``cast``): each result is rounded by the current
    precision policy, and so is each gradient.

    Examples
    --------
    >>> import fpsim
    >>> x = fpsim.tensor([0.1, 2.0], requires_grad=True, format="fp16")
    >>> x
    Tensor(array([0.09997559, 2.        ]), format=fp16, requires_grad=True)
    >>> y = (x * x).sum()
    >>> y.backward()
    >>> x.grad
    array([0.19995117, 4.        ])
    """

    __array_priority__ = 100
    __array_ufunc__ = None  # ndarray op Tensor defers to the Tensor's operator

    def __init__(self, data: TensorLike, requires_grad: bool = False, *,
                 format: Format | str | None = None, device: str | None = None) -> None:
        """``data`` (an array, numbers, a Tensor) as a leaf tensor.

        Floats keep their dtype's format unless ``format`` is given; integers and
        booleans become float64 (integers only where float64 holds them exactly). With
        ``format``, the data are rounded to it (nearest even), as ``torch.tensor(...,
        dtype=...)`` rounds: a tensor's values are always values of its format.
        ``device``: where the values live (copied there); by default where ``data`` is.
        """
        if device is not None:
            device = _device.as_device(device)
        if isinstance(data, Tensor):
            data = data.data
        if _booleans(data):
            arr = _device.binary64(_device.array_module(data).asarray(data))
        else:
            arr = as_float_array(data, "data", device=True)
        if device is not None:
            arr = _device.transfer(arr, device)
        if format is None:
            fmt = as_format(_FORMAT_OF_DTYPE[arr.dtype])
        else:
            fmt = as_format(format)
            with _device.kernels(arr):
                arr = _device.array_module(arr).asarray(round_to(arr, fmt))
        self._set(arr, fmt)
        self.requires_grad = boolean(requires_grad, "requires_grad")

    def _set(self, data: np.ndarray, fmt: Format) -> None:
        self.data: np.ndarray = data
        self.format: Format = fmt
        self.requires_grad = False
        self.grad: np.ndarray | None = None
        self._parents: tuple[Tensor, ...] = ()
        self._backward: Callable[[np.ndarray], Sequence[Any]] | None = None
        self._policy: Policy | None = None
        self.op = "leaf"

    @classmethod
    def wrap(cls, data: np.ndarray, fmt: Format) -> Tensor:
        """A tensor of ``data``, which already holds values of ``fmt`` (not checked).

        Parameters
        ----------
        data : numpy.ndarray
            Values of ``fmt``, taken as they are (not copied, not rounded).
        fmt : Format
            Their format.

        Returns
        -------
        Tensor
            A leaf that does not require grad.
        """
        out = cls.__new__(cls)
        out._set(data, fmt)
        return out

    # -- graph -------------------------------------------------------------------------
    @classmethod
    def node(cls, data: np.ndarray, fmt: Format, parents: Sequence[Tensor],
             backward: Callable[[np.ndarray], Sequence[Any]], policy: Policy,
             op: str) -> Tensor:
        """The output of operation ``op``, in the graph when a parent requires grad.

        Parameters
        ----------
        data : numpy.ndarray
            The output's values, already rounded to ``fmt``.
        fmt : Format
            Their format.
        parents : sequence of Tensor
            The operation's inputs.
        backward : callable
            ``backward(g)`` gives a gradient per parent: an array, None for none, or
            ``(gradient, format its values are in)``.
        policy : Policy
            The policy the operation ran under (it rounds the gradients).
        op : str
            The operation's name.

        Returns
        -------
        Tensor
        """
        out = cls.wrap(data, fmt)
        if grad_enabled() and any(p.requires_grad for p in parents):
            out.requires_grad = True
            out._parents = tuple(parents)
            out._backward = backward
            out._policy = policy
            out.op = op
        return out

    def graph(self) -> list[Tensor]:
        """The tensors this one depends on (itself included), inputs before outputs.

        Returns
        -------
        list of Tensor
        """
        order: list[Tensor] = []
        seen: set[int] = set()
        stack: list[tuple[Tensor, bool]] = [(self, False)]
        while stack:
            t, done = stack.pop()
            if done:
                order.append(t)
                continue
            if id(t) in seen:
                continue
            seen.add(id(t))
            stack.append((t, True))
            stack.extend((p, False) for p in t._parents if id(p) not in seen)
        return order

    def backward(self, gradient: npt.ArrayLike | None = None) -> None:
        """Accumulate d(self)/d(leaf) * gradient into every tensor's ``.grad``.

        Parameters
        ----------
        gradient : array_like, optional
            The seed, of this tensor's shape; one by default, for a one-element tensor
            (a loss scale S seeds S instead).

        Raises
        ------
        ValueError
            If this tensor does not require grad, or the seed is missing for (or has
            another shape than) a tensor of more than one element.

        Examples
        --------
        >>> import fpsim
        >>> w = fpsim.tensor([3.0], requires_grad=True)
        >>> (w * w).sum().backward(1024.0)
        >>> w.grad
        array([6144.])
        """
        if not self.requires_grad:
            raise ValueError("backward() on a tensor that does not require grad")
        if gradient is None:
            if self.data.size != 1:
                raise ValueError(
                    f"backward() without a gradient needs a scalar, got shape {self.shape}"
                )
            gradient = 1.0
        given: np.ndarray = as_float_array(gradient, "gradient", device=True)
        # As PyTorch: the gradient has the tensor's shape (a number will do for one element).
        if given.shape != self.shape and not (given.ndim == 0 and self.data.size == 1):
            raise ValueError(f"the gradient has shape {given.shape}, the tensor "
                             f"{self.shape}: they must be the same")
        _device.common("backward", self.data, given)
        xp = _device.array_module(self.data)
        seed = xp.broadcast_to(_device.transfer(_device.binary64(given), self.device),
                               self.shape)
        self.accumulate_grad(seed, self._policy or current())
        for t in reversed(self.graph()):
            if t._backward is None or t.grad is None:
                continue
            grads = t._backward(t.grad)
            for parent, g in zip(t._parents, grads, strict=True):
                if g is None or not parent.requires_grad:
                    continue
                # A gradient passed on unchanged is already a value of t's format; an
                # operation may also say which format its gradient is in: (g, format).
                source = t.format if g is t.grad else None
                if isinstance(g, tuple):
                    g, source = g
                parent.accumulate_grad(g, cast(Policy, t._policy), source)  # set with _backward

    def accumulate_grad(self, g: npt.ArrayLike, policy: Policy,
                        source: Format | None = None) -> None:
        """Add ``g`` (broadcast-reduced to this shape) into ``.grad``, rounded to the format.

        Parameters
        ----------
        g : array_like
            The gradient to add.
        policy : Policy
            The policy whose rounding and reduction format apply.
        source : Format, optional
            The format ``g``'s values are known to lie in.
        """
        total: np.ndarray = g if hasattr(g, "shape") else np.asarray(g)  # type: ignore[assignment]
        if total.shape != self.shape:
            total, summed = reduce_broadcast(total, self.shape, policy, source)
            source = policy.reduce if summed else source
        if self.grad is not None:
            total = self.grad + total
            source = None
        self.grad = numerics.round(total, self.format, policy, source)
        for observe in grad_observers:
            observe(total, self.grad, self.format)

    # -- conveniences ------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        """The shape of ``data``."""
        return self.data.shape

    @property
    def ndim(self) -> int:
        """The number of dimensions of ``data``."""
        return self.data.ndim

    @property
    def size(self) -> int:
        """The number of elements of ``data``."""
        return self.data.size

    @property
    def dtype(self) -> np.dtype:
        """The NumPy dtype holding the values (float64 for an emulated format)."""
        return self.data.dtype

    @property
    def device(self) -> str:
        """Where the values live: ``"cpu"`` (a NumPy array) or ``"cuda"`` (a CuPy array).

        Examples
        --------
        >>> import fpsim
        >>> fpsim.tensor([1.0]).device
        'cpu'
        """
        return _device.device_of(self.data)

    def cpu(self) -> Tensor:
        """``self.to("cpu")``: the values on the host (``self`` if they are there).

        Returns
        -------
        Tensor
        """
        return self.to("cpu")

    def cuda(self) -> Tensor:
        """``self.to("cuda")``: the values on the GPU (``self`` if they are there).

        Returns
        -------
        Tensor

        Raises
        ------
        RuntimeError
            Where no GPU is usable (the message says what is missing).
        """
        return self.to("cuda")

    def numpy(self) -> np.ndarray:
        """The values, as a NumPy array (not a copy on the cpu; copied from the GPU).

        Returns
        -------
        numpy.ndarray

        Examples
        --------
        >>> import fpsim
        >>> fpsim.tensor([0.5, 2.0]).numpy()
        array([0.5, 2. ])
        """
        host: np.ndarray = _device.transfer(self.data, "cpu")
        return host

    def __array__(self, dtype: npt.DTypeLike | None = None,
                  copy: bool | None = None) -> np.ndarray:
        # NumPy's protocol: np.asarray(tensor) is its values (exactly: a narrower dtype is
        # refused, not rounded; round with fpsim.round or .to(format) first); a GPU tensor's
        # values are copied to the host.
        data = self.numpy()
        if dtype is None or np.dtype(dtype) == data.dtype:
            return data.copy() if copy and data is self.data else data
        wide = data.astype(dtype)
        if not np.array_equal(wide.astype(data.dtype), data, equal_nan=True):
            raise ValueError(f"a {self.format.name} tensor's values do not all fit "
                             f"{np.dtype(dtype)}: round them first (tensor.to(format))")
        return wide

    def item(self) -> float:
        """The value of a one-element tensor, as a Python float.

        Returns
        -------
        float

        Raises
        ------
        ValueError
            If the tensor has more than one element.

        Examples
        --------
        >>> import fpsim
        >>> fpsim.tensor([0.1], format="bf16").item()
        0.10009765625
        """
        if self.data.size != 1:
            raise ValueError(f"item() needs a tensor of one element, got shape {self.shape}")
        return float(self.data.reshape(-1)[0].item())  # a GPU value is copied to the host

    def __float__(self) -> float:
        """``float(tensor)``: the value of a one-element tensor (``item()``), as in PyTorch."""
        if self.data.size != 1:
            raise ValueError(f"float() needs a tensor of one element, got shape {self.shape}")
        return self.item()

    def detach(self) -> Tensor:
        """The same values and format, outside the graph (no gradient flows through it).

        Returns
        -------
        Tensor
        """
        return Tensor.wrap(self.data, self.format)

    def __len__(self) -> int:
        return len(self.data)

    def __bool__(self) -> bool:
        """The truth of a one-element tensor's value (as in PyTorch); an error otherwise."""
        if self.data.size != 1:
            raise ValueError(f"the truth value of a tensor of {self.data.size} elements is "
                             "ambiguous")
        return bool(self.data.reshape(-1)[0].item())

    def __repr__(self) -> str:
        grad = ", requires_grad=True" if self.requires_grad else ""
        device = ", device='cuda'" if self.device == "cuda" else ""
        return f"Tensor({self.data!r}, format={self.format.name}{device}{grad})"

    # Operators and .to(format) delegate to the operation modules, bound in
    # fpsim/autograd/__init__.py; their signatures, for type checkers:
    if TYPE_CHECKING:
        def __add__(self, other: TensorLike) -> Tensor: ...
        def __radd__(self, other: TensorLike) -> Tensor: ...
        def __sub__(self, other: TensorLike) -> Tensor: ...
        def __rsub__(self, other: TensorLike) -> Tensor: ...
        def __mul__(self, other: TensorLike) -> Tensor: ...
        def __rmul__(self, other: TensorLike) -> Tensor: ...
        def __truediv__(self, other: TensorLike) -> Tensor: ...
        def __rtruediv__(self, other: TensorLike) -> Tensor: ...
        def __neg__(self) -> Tensor: ...
        def __pow__(self, exponent: float) -> Tensor: ...
        def __matmul__(self, other: TensorLike) -> Tensor: ...
        def __rmatmul__(self, other: TensorLike) -> Tensor: ...
        def __getitem__(self, index: Any) -> Tensor: ...
        def reshape(self, /, *shape: int | Sequence[int]) -> Tensor:
            """``fpsim.nn.functional.reshape(self, *shape)``: exact, the format kept."""
        def transpose(self, /, *axes: int | Sequence[int]) -> Tensor:
            """``fpsim.nn.functional.transpose(self, *axes)``: exact, the format kept."""
        @property
        def T(self) -> Tensor:
            """The axes reversed: ``self.transpose()``."""
        def sum(self, /, axis: int | Sequence[int] | None = None,
                keepdims: bool = False) -> Tensor:
            """``fpsim.nn.functional.sum(self, axis, keepdims)``: accumulated in ``reduce``."""
        def mean(self, /, axis: int | Sequence[int] | None = None,
                 keepdims: bool = False) -> Tensor:
            """``fpsim.nn.functional.mean(self, axis, keepdims)``: computed in ``reduce``."""
        def relu(self, /) -> Tensor:
            """``fpsim.nn.functional.relu(self)``."""
        def tanh(self, /) -> Tensor:
            """``fpsim.nn.functional.tanh(self)``, rounded once to the compute format."""
        def sigmoid(self, /) -> Tensor:
            """``fpsim.nn.functional.sigmoid(self)``, rounded once to the compute format."""
        def exp(self, /) -> Tensor:
            """``fpsim.nn.functional.exp(self)``, rounded once to the compute format."""
        def log(self, /) -> Tensor:
            """``fpsim.nn.functional.log(self)``, rounded once to the compute format."""
        def argmax(self, /, axis: int | None = None, keepdims: bool = False) -> np.ndarray:
            """``fpsim.autograd.reductions.argmax(self, axis, keepdims)``: indices, no gradient."""
        def to(self, /, target: Format | str) -> Tensor:
            """``self`` rounded to a format, or moved to a device (``"cpu"``, ``"cuda"``),
            differentiably (``fpsim.autograd.cast.to``)."""


def _booleans(data: object) -> bool:
    """Whether ``data`` is booleans (masks), which a tensor takes as 0.0 and 1.0."""
    if isinstance(data, (bool, np.bool_)):
        return True
    if _device.device_of(data) == "cuda":
        return bool(data.dtype == np.bool_)  # type: ignore[attr-defined]
    if isinstance(data, (list, tuple, np.ndarray)):
        try:
            return np.asarray(data).dtype == np.bool_
        except ValueError:  # ragged: as_float_array says so
            return False
    return False


def as_tensor(x: TensorLike) -> Tensor:
    """``x`` as a Tensor: itself if it is one, else a constant of its dtype's format.

    Parameters
    ----------
    x : Tensor, array_like or number
        A Python number becomes an fp64 constant; an array (NumPy's, or CuPy's on the
        GPU) keeps its dtype's format.

    Returns
    -------
    Tensor

    Raises
    ------
    TypeError
        For anything that is not numbers (``tensor + None``).

    Examples
    --------
    >>> import numpy as np
    >>> from fpsim.autograd import as_tensor
    >>> as_tensor(3)
    Tensor(array(3.), format=fp64)
    >>> as_tensor(np.float16(0.5)).format.name
    'fp16'
    """
    if isinstance(x, Tensor):
        return x
    if _device.device_of(x) == "cuda":  # a CuPy array: a constant on the GPU
        return Tensor(x)
    if not isinstance(x, (numbers.Real, np.ndarray, np.generic, list, tuple)) or isinstance(
            x, str):
        raise TypeError(f"a Tensor operand must be a Tensor, an array or numbers, got "
                        f"{type(x).__name__} {x!r}")
    if isinstance(x, numbers.Real) and not isinstance(x, (np.generic, bool)):
        return Tensor(np.asarray(as_float_array(x, "operand"), dtype=np.float64))
    return Tensor(x)


def tensor(data: TensorLike, requires_grad: bool = False, *,
           format: Format | str | None = None, device: str | None = None) -> Tensor:
    """A leaf Tensor (float data keeps its dtype's format; integers become float64).

    Parameters
    ----------
    data : array_like or Tensor
        The values: floats, integers (exactly representable in float64) or booleans.
    requires_grad : bool, default False
        Whether ``backward()`` computes this leaf's gradient.
    format : Format or str, optional
        Round the data to this format (nearest even); without it, float16, float32 and
        float64 data are values of fp16, fp32 and fp64.
    device : {"cpu", "cuda"}, optional
        Where the values live; by default where ``data`` is (the host for NumPy data).

    Returns
    -------
    Tensor
        A new leaf.

    Raises
    ------
    ValueError
        If ``data`` is not numbers, or integers that float64 does not hold exactly, or
        ``device`` is not a device name.
    RuntimeError
        For ``device="cuda"`` where no GPU is usable: the message says what is missing
        (``fpsim.backends.gpu_missing()``).

    Examples
    --------
    >>> import numpy as np
    >>> import fpsim
    >>> fpsim.tensor([0.1, 1.0], format="fp16")
    Tensor(array([0.09997559, 1.        ]), format=fp16)
    >>> fpsim.tensor(np.float32([0.5, 2.0])).format.name
    'fp32'
    """
    return Tensor(data, requires_grad, format=format, device=device)


def reduce_broadcast(g: np.ndarray, shape: tuple[int, ...], policy: Policy,
                     source: Format | None = None) -> tuple[np.ndarray, bool]:
    """``(g summed over the axes broadcasting added to shape, whether it was summed)``.

    The sum is a reduction (``precision.numerics.sum``): its values are in ``reduce``.
    """
    if g.shape == shape:
        return g, False
    xp = _device.array_module(g)
    if g.ndim < len(shape):
        return xp.broadcast_to(g, shape), False
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, n in enumerate(shape) if n == 1 and g.shape[lead + i] != 1
    )
    if not axes:
        return xp.broadcast_to(g, shape), False
    total = numerics.sum(g, axes, policy, keepdims=True, source=source)
    return total.reshape(shape), True

