"""Zero-copy exchange between torch tensors and fpsim's arrays: DLPack, both ways.

A CPU tensor is read as a NumPy array on its memory, a CUDA tensor as a CuPy array (what
fpsim's ``cupy`` backend computes on); an array becomes a torch tensor on its memory the
same way. bfloat16, for which NumPy has no dtype (and which NumPy's DLPack import
refuses), travels as its 16 bits (int16) and is viewed as ``ml_dtypes.bfloat16`` on the
host: still the same memory. CuPy has no bfloat16: a CUDA bfloat16 tensor is refused here
(``fpsim.torch.round`` widens it to float32 on the device first).
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import torch
from torch.utils.dlpack import from_dlpack

from fpsim._optional import require

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
"""The tensor dtypes fpsim.torch takes: torch's floating-point dtypes."""

DEVICES = ("cpu", "cuda")
"""The tensor devices fpsim.torch takes: ``"cpu"`` (NumPy) and ``"cuda"`` (CuPy)."""

_BFLOAT16 = np.dtype(ml_dtypes.bfloat16)


def float_tensor(t: object, name: str = "t") -> torch.Tensor:
    """``t`` if it is a dense floating-point torch tensor on a device fpsim takes; else a
    TypeError (not a tensor, not of a float dtype, sparse) or ValueError (another device).

    Examples
    --------
    >>> import torch
    >>> float_tensor(torch.zeros(2)).dtype
    torch.float32
    >>> float_tensor([1.0])
    Traceback (most recent call last):
    ...
    TypeError: t must be a torch.Tensor, got list
    """
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{name} must be a floating-point tensor (float16, bfloat16, float32 or "
                        f"float64), got {t.dtype}")
    if t.layout != torch.strided:
        raise TypeError(f"{name} is a {t.layout} tensor; fpsim.torch takes dense (strided) "
                        "tensors: convert it with .to_dense() first")
    if t.device.type not in DEVICES:
        raise ValueError(f"{name} is on device {t.device}; fpsim.torch takes CPU and CUDA "
                         "tensors")
    return t


def to_array(t: torch.Tensor) -> Any:
    """The memory of a tensor as an array: NumPy for a CPU tensor, CuPy for a CUDA one.

    No copy: the array is a view of the tensor's storage (DLPack), with its shape and
    strides, and writing to one writes to the other. The tensor is detached first (the
    array is outside autograd).

    Parameters
    ----------
    t : torch.Tensor
        A float16, bfloat16, float32 or float64 tensor on the CPU or a CUDA device.

    Returns
    -------
    numpy.ndarray or cupy.ndarray
        Of the tensor's dtype (``ml_dtypes.bfloat16`` for bfloat16 on the CPU).

    Raises
    ------
    TypeError
        ``t`` is not a tensor, or not of a floating-point dtype; a CUDA bfloat16 tensor
        (CuPy has no bfloat16).
    ValueError
        ``t`` is on another device (``"meta"``, ``"mps"``, ...).

    Examples
    --------
    >>> import torch
    >>> t = torch.tensor([1.0, 2.0])
    >>> a = to_array(t)
    >>> a[0] = 5.0
    >>> t.tolist(), a.ctypes.data == t.data_ptr()
    ([5.0, 2.0], True)
    """
    t = float_tensor(t).detach()
    if t.device.type == "cuda":
        if t.dtype == torch.bfloat16:
            raise TypeError("a CUDA bfloat16 tensor has no CuPy array (CuPy has no bfloat16): "
                            "convert it with .float() first")
        return require("cupy", "fpsim.torch on CUDA tensors").from_dlpack(t)
    if t.dtype == torch.bfloat16:
        return np.from_dlpack(t.view(torch.int16)).view(_BFLOAT16)
    return np.from_dlpack(t)


def to_tensor(a: Any) -> torch.Tensor:
    """An array as a torch tensor on its memory: a NumPy array as a CPU tensor, a CuPy array
    as a CUDA tensor (DLPack; ``ml_dtypes.bfloat16`` arrays as bfloat16 tensors).

    No copy: the tensor is a view of the array's memory.

    Parameters
    ----------
    a : numpy.ndarray or cupy.ndarray
        A writeable array of a dtype torch has (float16, bfloat16, float32, float64,
        integers, bool, ...).

    Returns
    -------
    torch.Tensor
        On the array's device, of its dtype, shape and strides.

    Raises
    ------
    TypeError
        ``a`` is not an array that supports DLPack (a list, a scalar, ...).
    ValueError
        ``a`` is read-only (torch tensors are writeable), or of a dtype torch lacks.

    Examples
    --------
    >>> import numpy as np
    >>> a = np.array([1.0, 2.0], dtype=np.float32)
    >>> t = to_tensor(a)
    >>> t.dtype, t.data_ptr() == a.ctypes.data
    (torch.float32, True)
    """
    if not hasattr(a, "__dlpack__"):
        raise TypeError(f"expected a NumPy or CuPy array, got {type(a).__name__}")
    if isinstance(a, np.ndarray):
        if not a.flags.writeable:
            raise ValueError("the array is read-only: a tensor on its memory would be "
                             "writeable (copy it first)")
        if a.dtype == _BFLOAT16:
            return from_dlpack(a.view(np.int16)).view(torch.bfloat16)
    try:
        return from_dlpack(a)
    except (BufferError, RuntimeError) as exc:
        raise ValueError(f"an array of dtype {a.dtype} cannot be a torch tensor: {exc}") from None
