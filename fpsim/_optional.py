"""Optional dependencies: one import point, one clear error naming the extra to install."""

from __future__ import annotations

import importlib
from types import ModuleType

# What each optional import needs: the pip extra of fpsim that installs it.
EXTRAS = {
    "distributed": "cluster",
    "dask": "cluster",
    "cupy": "gpu",
    "mkdocs": "docs",
    "torch": "torch",
}


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
        The module to import (``"distributed"``, ``"cupy"``, ...); its top-level package
        must be one of ``EXTRAS``.
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
    ValueError: numpy is not an optional dependency of fpsim (known: cupy, dask, ...)
    """
    package = module.partition(".")[0]
    if package not in EXTRAS:
        known = ", ".join(sorted(EXTRAS))
        raise ValueError(f"{package} is not an optional dependency of fpsim (known: {known})")
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        missing = getattr(exc, "name", None) or package
        raise MissingDependency(
            f"{purpose} needs {missing}, which is not installed: "
            f"pip install 'fpsim[{EXTRAS[package]}]'") from None
