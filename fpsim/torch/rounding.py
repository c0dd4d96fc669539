"""Differentiable rounding: ``fpsim.round`` as a ``torch.autograd.Function`` and a module.

The forward rounds exactly, as ``fpsim.round`` does, on the tensor's own memory
(``fpsim.torch.exchange``). The backward, as QPyTorch's ``quantizer(forward_number,
backward_number, ...)``: the gradient passes straight through (``backward=None``), or is
rounded to its own format and mode (a ``Rounding``; stochastic included, with its own seed).

The result has the input's dtype and device. fpsim computes it in float32 (float64 for a
float64 input or a format wider than binary32) on memory shared with the result; a
float16 or bfloat16 input's result is then converted to its dtype by torch, which is exact
(a value rounded to the format from one of the dtype is again one of the dtype) except
where the format reaches beyond the dtype's range: there the dtype's conversion gives
infinity (as ``t.to(torch.bfloat16).to(torch.float16)`` does).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, cast, overload

import numpy as np
import torch
from torch.autograd.function import once_differentiable

from fpsim.autograd.tensor import grad_observers
from fpsim.backends import backend
from fpsim.flags import NAMES
from fpsim.formats import Format, as_format
from fpsim.kernels.spec import make_spec
from fpsim.rounding import round as fpsim_round
from fpsim.torch.exchange import float_tensor, to_array, to_tensor

if TYPE_CHECKING:
    from fpsim._typing import FormatLike


@dataclass(frozen=True)
class Rounding:
    """A rounding to a format, as ``fpsim.round`` takes it: format, mode and options.

    Checked when made (fpsim's own errors for an unknown format or mode).

    Parameters
    ----------
    fmt : Format or str
        The format, or a preset name (``"fp16"``, ``"bf16"``, ``"fp8_e5m2"``, ...).
    rounding : str, default "nearest_even"
        One of ``fpsim.ROUNDING_MODES``.
    subnormals, saturate, seed, random_bits
        As ``fpsim.round``'s (``seed`` and ``random_bits``: stochastic rounding only; the
        same seed gives the same random stream at every call, None fresh entropy).

    Examples
    --------
    >>> Rounding("fp8_e5m2", "stochastic", seed=1).fmt.name
    'fp8_e5m2'
    >>> Rounding("fp16", "sideways")
    Traceback (most recent call last):
    ...
    ValueError: unknown rounding mode 'sideways'; known modes: nearest_even, ...
    """

    fmt: Format
    rounding: str = "nearest_even"
    subnormals: bool = True
    saturate: bool = False
    seed: int | None = None
    random_bits: int | None = None

    def __init__(self, fmt: FormatLike, rounding: str = "nearest_even", *,
                 subnormals: bool = True, saturate: bool = False, seed: int | None = None,
                 random_bits: int | None = None) -> None:
        fmt = as_format(fmt)
        make_spec(fmt, rounding, subnormals, saturate, random_bits)  # fpsim's checks
        for name, value in (("fmt", fmt), ("rounding", rounding), ("subnormals", subnormals),
                            ("saturate", saturate), ("seed", seed),
                            ("random_bits", random_bits)):
            object.__setattr__(self, name, value)

    def apply(self, t: torch.Tensor, flags: bool = False
              ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``t`` rounded (outside autograd), and the flags of each element if asked.

        Parameters
        ----------
        t : torch.Tensor
            A floating-point tensor on the CPU or a CUDA device (CUDA: the ``cupy``
            backend).
        flags : bool, default False
            Also return the IEEE flags of each element (``fpsim.round``'s).

        Returns
        -------
        values : torch.Tensor
            Of ``t``'s shape, dtype and device (contiguous).
        flags : torch.Tensor of uint8 or None
            With ``flags=True``: each element's flags, on ``t``'s device.

        Examples
        --------
        >>> import torch
        >>> values, flags = Rounding("fp16").apply(torch.tensor([0.5, 0.1]), flags=True)
        >>> values.tolist(), flags.tolist()
        ([0.5, 0.0999755859375], [0, 1])
        """
        t = float_tensor(t).detach()
        wide = t.dtype == torch.float64 or not np.can_cast(self.fmt.dtype, np.float32)
        work = torch.float64 if wide else torch.float32
        cuda = t.device.type == "cuda"
        if cuda:
            result = torch.empty(t.shape, dtype=work, device=t.device)
            out = to_array(result)
        else:
            # NumPy's memory, which NumPy asks the kernel to back with huge pages: writing a
            # fresh torch.empty's 4 KiB pages for the first time costs more than the rounding.
            out = np.empty(tuple(t.shape), dtype=np.float64 if wide else np.float32)
            result = to_tensor(out)
        source = t.float() if cuda and t.dtype == torch.bfloat16 else t  # CuPy: no bfloat16
        with backend("cupy") if cuda else contextlib.nullcontext():
            got = fpsim_round(to_array(source), self.fmt, self.rounding,
                              subnormals=self.subnormals, saturate=self.saturate,
                              seed=self.seed, random_bits=self.random_bits, flags=flags,
                              out=out)
        raised = to_tensor(got[1]) if flags else None
        return (result if result.dtype == t.dtype else result.to(t.dtype)), raised


class FlagCapture:
    """Where a rounding records the flags of its last forward and backward.

    Attributes
    ----------
    flags : torch.Tensor or None
        The last forward's flags, one uint8 per element (``fpsim.INEXACT``, ...).
    grad_flags : torch.Tensor or None
        The last backward's, where the backward rounds the gradient.

    Examples
    --------
    >>> import torch
    >>> capture = FlagCapture()
    >>> capture.flags = torch.tensor([1, 5, 0], dtype=torch.uint8)
    >>> capture.counts()
    {'inexact': 2, 'overflow': 1}
    """

    def __init__(self) -> None:
        self.flags: torch.Tensor | None = None
        self.grad_flags: torch.Tensor | None = None

    def counts(self, grad: bool = False) -> dict[str, int]:
        """How many elements raised each flag, by name (flags none raised are left out).

        Parameters
        ----------
        grad : bool, default False
            Count the last backward's flags instead of the forward's.

        Examples
        --------
        >>> FlagCapture().counts()
        {}
        """
        flags = self.grad_flags if grad else self.flags
        if flags is None:
            return {}
        counted = {name: int((flags & bit).ne(0).sum()) for bit, name in NAMES.items()}
        return {name: n for name, n in counted.items() if n}


class RoundFunction(torch.autograd.Function):
    """The autograd function under ``round``: ``RoundFunction.apply(t, forward, backward,
    capture)`` with ``Rounding`` s (``backward`` None: straight through) and a
    ``FlagCapture`` or None.

    Examples
    --------
    >>> import torch
    >>> t = torch.tensor([0.1], requires_grad=True)
    >>> RoundFunction.apply(t, Rounding("bf16"), None, None).tolist()
    [0.10009765625]
    """

    @staticmethod
    def forward(ctx: Any, t: torch.Tensor, forward: Rounding,
                backward: Rounding | None, capture: FlagCapture | None) -> torch.Tensor:
        """The forward: ``t`` rounded by ``forward`` (its flags into ``capture``)."""
        values, flags = forward.apply(t, flags=capture is not None)
        if capture is not None:
            capture.flags = flags
        ctx.backward_rounding = backward
        ctx.capture = capture
        return values

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: torch.Tensor
                 ) -> tuple[torch.Tensor, None, None, None]:
        """The backward: ``grad`` as it is, or rounded by the backward ``Rounding`` (each
        rounding shown to fpsim's gradient observers, ``fpsim.training.FlushCounter``)."""
        rounding: Rounding | None = ctx.backward_rounding
        if rounding is None:
            return grad, None, None, None
        capture: FlagCapture | None = ctx.capture
        values, flags = rounding.apply(grad, flags=capture is not None)
        if capture is not None:
            capture.grad_flags = flags
        if grad_observers:  # fpsim.training.FlushCounter and the like
            seen = [to_array(v.float() if v.is_cuda and v.dtype == torch.bfloat16 else v)
                    for v in (grad, values)]
            for observe in grad_observers:
                observe(seen[0], seen[1], rounding.fmt)
        return values, None, None, None


# torch.autograd.Function.apply is unannotated: its type here is RoundFunction's.
_apply = cast(Callable[[torch.Tensor, Rounding, "Rounding | None", "FlagCapture | None"],
                       torch.Tensor], RoundFunction.apply)


def backward_rounding(backward: Rounding | FormatLike | None) -> Rounding | None:
    """A ``backward=`` argument as a ``Rounding`` (None: straight through); TypeError for
    anything but None, a format or a ``Rounding``."""
    if backward is None or isinstance(backward, Rounding):
        return backward
    if isinstance(backward, (str, Format)):
        return Rounding(backward)
    raise TypeError("backward must be None (straight through), a format or a Rounding, got "
                    f"{type(backward).__name__}")


@overload
def round(t: torch.Tensor, fmt: FormatLike, rounding: str = ..., *, subnormals: bool = ...,
          saturate: bool = ..., seed: int | None = ..., random_bits: int | None = ...,
          backward: Rounding | FormatLike | None = ..., flags: Literal[False] = ...
          ) -> torch.Tensor: ...
@overload
def round(t: torch.Tensor, fmt: FormatLike, rounding: str = ..., *, subnormals: bool = ...,
          saturate: bool = ..., seed: int | None = ..., random_bits: int | None = ...,
          backward: Rounding | FormatLike | None = ..., flags: Literal[True]
          ) -> tuple[torch.Tensor, torch.Tensor]: ...
def round(
    t: torch.Tensor,
    fmt: FormatLike,
    rounding: str = "nearest_even",
    *,
    subnormals: bool = True,
    saturate: bool = False,
    seed: int | None = None,
    random_bits: int | None = None,
    backward: Rounding | FormatLike | None = None,
    flags: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Round a tensor to a format, differentiably: ``fpsim.round`` forward, a chosen backward.

    Parameters
    ----------
    t : torch.Tensor
        A float16, bfloat16, float32 or float64 tensor on the CPU or a CUDA device (CUDA:
        computed by fpsim's ``cupy`` backend). Any strides: a non-contiguous tensor is read
        as it is (fpsim makes its one contiguous copy of it); the result is contiguous.
    fmt : Format or str
        The format, or a preset name (``"fp16"``, ``"bf16"``, ``"fp8_e4m3"``, ...).
    rounding : str, default "nearest_even"
        One of ``fpsim.ROUNDING_MODES``, stochastic included.
    subnormals, saturate, seed, random_bits
        As ``fpsim.round``'s.
    backward : None, Format, str or Rounding, default None
        None: the gradient passes straight through (unchanged, as ``t`` had not been
        rounded). A format: the gradient rounded to it, to nearest even. A ``Rounding``:
        the gradient rounded by it (its own mode, stochastic with its own seed).
    flags : bool, default False
        True: also return the forward's IEEE flags, one uint8 per element.

    Returns
    -------
    torch.Tensor
        ``t`` rounded, of its shape, dtype and device.
    flags : torch.Tensor of uint8
        Only with ``flags=True``, as ``(values, flags)``.

    Raises
    ------
    TypeError
        ``t`` is not a tensor, or not of a floating-point dtype; ``backward`` of another type.
    ValueError
        An unknown format or rounding mode, or an option out of range (fpsim's own errors);
        ``t`` on a device other than the CPU and CUDA.

    Examples
    --------
    >>> import torch
    >>> import fpsim.torch
    >>> t = torch.tensor([0.1, 1e-8, 70000.0], requires_grad=True)
    >>> y = fpsim.torch.round(t, "fp16")
    >>> y.tolist()
    [0.0999755859375, 0.0, inf]
    >>> y.sum().backward()  # straight through
    >>> t.grad.tolist()
    [1.0, 1.0, 1.0]
    >>> t = torch.tensor([1.0], requires_grad=True)
    >>> y = fpsim.torch.round(t, "bf16", backward="fp8_e5m2")
    >>> (y * 0.3).sum().backward()  # the gradient 0.3 rounded to fp8_e5m2
    >>> t.grad.tolist()
    [0.3125]
    """
    forward = Rounding(fmt, rounding, subnormals=subnormals, saturate=saturate, seed=seed,
                       random_bits=random_bits)
    capture = FlagCapture() if flags else None
    values = _apply(float_tensor(t), forward, backward_rounding(backward), capture)
    if capture is not None:
        assert capture.flags is not None
        return values, capture.flags
    return values


class Round(torch.nn.Module):
    """A layer that rounds its input: ``round`` with fixed options, as an ``nn.Module``.

    Parameters
    ----------
    fmt, rounding, subnormals, saturate, seed, random_bits, backward
        As ``round``'s.
    capture_flags : bool, default False
        Keep the flags of the last forward (and of the last backward, where it rounds) in
        ``capture``.

    Attributes
    ----------
    forward_rounding : Rounding
        What the forward does.
    backward_rounding : Rounding or None
        What the backward does (None: straight through).
    capture : FlagCapture or None
        The last flags, with ``capture_flags=True``.

    Examples
    --------
    >>> import torch
    >>> import fpsim.torch
    >>> layer = fpsim.torch.Round("fp16", capture_flags=True)
    >>> layer(torch.tensor([0.5, 0.1, 1e5])).tolist()
    [0.5, 0.0999755859375, inf]
    >>> layer.capture.counts()
    {'inexact': 2, 'overflow': 1}
    """

    def __init__(self, fmt: FormatLike, rounding: str = "nearest_even", *,
                 subnormals: bool = True, saturate: bool = False, seed: int | None = None,
                 random_bits: int | None = None, backward: Rounding | FormatLike | None = None,
                 capture_flags: bool = False) -> None:
        super().__init__()
        self.forward_rounding = Rounding(fmt, rounding, subnormals=subnormals,
                                         saturate=saturate, seed=seed, random_bits=random_bits)
        self.backward_rounding = backward_rounding(backward)
        self.capture = FlagCapture() if capture_flags else None

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        """``t`` rounded (see ``round``)."""
        return _apply(float_tensor(t), self.forward_rounding, self.backward_rounding,
                      self.capture)

    def extra_repr(self) -> str:
        """The formats and modes, for ``repr``."""
        f, b = self.forward_rounding, self.backward_rounding
        back = "straight-through" if b is None else f"{b.fmt.name}, {b.rounding!r}"
        return f"{f.fmt.name}, {f.rounding!r}, backward={back}"
