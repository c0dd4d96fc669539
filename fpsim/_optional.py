"""Optional dependencies: one import point, one clear error naming the extra to install."""

from __future__ import annotations

import importlib
from types import ModuleType

# What each optional import needs: the pip extra of fpsim that installs it (a package, or a
# subpackage that another distribution adds to a package fpsim needs anyway).
EXTRAS = {
    "distributed": "cluster",
    "dask": "cluster",
    "cupy": "gpu",
    "numba.cuda": "gpu",
    "mkdocs": "docs",
    "torch": "torch",
}
# pip's name for an optional import where it is not the import's name.
DISTRIBUTIONS = {"numba.cuda": "numba-cuda"}


class MissingDependency(ImportError):
    """An optional dependency is not installed; the message names the extra to install.

    Examples
    --------
    >>> issubclass(MissingDependency, ImportError)
    True
    """


def require(module: str, purpose: str) -> ModuleType:
    """Import ``module`` for ``purpose``, or raise ``MissingDependency`` naming its extra.

    Parameters
    ----------
    module : str
        The module to import (``"distributed"``, ``"cupy"``, ...): one of ``EXTRAS`` or
        a module inside one.
    purpose : str
        What needs it, as the error's first words (``"fpsim.sweep with Dask"``).

    Returns
    -------
    module
        The imported module.

    Raises
    ------
    MissingDependency
        When it is not installed: one line, ``"<purpose> needs <package>, which is not
        installed: pip install 'fpsim[<extra>]'"``.
    ValueError
        When ``module`` is not an optional dependency fpsim knows.

    Examples
    --------
    >>> try:
    ...     distributed = require("distributed", "fpsim.sweep on Dask")
    ... except MissingDependency as exc:
    ...     assert "pip install 'fpsim[cluster]'" in str(exc)
    >>> require("numpy", "x")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: 'numpy' is not an optional dependency of fpsim (known: cupy, dask, ...)
    """
    package = next((p for p in EXTRAS if isinstance(module, str)
                    and (module == p or module.startswith(p + "."))), None)
    if package is None:
        known = ", ".join(sorted(EXTRAS))
        raise ValueError(f"{module!r} is not an optional dependency of fpsim (known: {known})")
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        missing = getattr(exc, "name", None) or package
        if missing == package or missing.startswith(package + "."):
            missing = DISTRIBUTIONS.get(package, missing)
        raise MissingDependency(
            f"{purpose} needs {missing}, which is not installed: "
            f"pip install 'fpsim[{EXTRAS[package]}]'") from None


def cuda_driver_missing() -> str | None:
    """Why no CUDA program can run here for want of NVIDIA's driver, or None when it loads.

    Every CUDA runtime (CuPy's, numba-cuda's) loads the driver's library, ``libcuda.so.1``
    (``nvcuda.dll`` on Windows); where it cannot be loaded there is no usable GPU, whatever
    the runtime then reports (CuPy says ``cudaErrorInsufficientDriver``).

    Returns
    -------
    str or None
        ``"no NVIDIA driver (libcuda.so.1 cannot be loaded)"``, or None when it loads.

    Examples
    --------
    >>> cuda_driver_missing() in (None, "no NVIDIA driver (libcuda.so.1 cannot be loaded)",
    ...                           "no NVIDIA driver (nvcuda.dll cannot be loaded)")
    True
    """
    import ctypes
    import sys

    library = "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"
    try:
        ctypes.CDLL(library)
    except OSError:
        return f"no NVIDIA driver ({library} cannot be loaded)"
    return None
