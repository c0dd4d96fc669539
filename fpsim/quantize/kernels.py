"""The block-scaling kernels (``fpsim.kernels``) on whole host arrays: the NumPy backend's
instance, whichever backend is in force (quantize takes host arrays; the elements'
rounding alone goes to the backend in force)."""

from __future__ import annotations

from typing import Any

from fpsim.backends import backend, get_backend

__all__ = ["array_kernels"]


def array_kernels() -> dict[str, Any]:
    """The kernels of ``fpsim.kernels``, evaluated by NumPy on whole arrays."""
    with backend("numpy"):
        kernels: dict[str, Any] = get_backend().kernels  # type: ignore[attr-defined]
    return kernels
