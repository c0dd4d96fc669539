"""What every cached run also depends on: fpsim's version and source, and NumPy.

A worker that reports another ``identity()`` than the client's computes with another
fpsim or NumPy; its results must not be mixed with the client's.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np

from fpsim.sweep.cache import digest


def version() -> str:
    """fpsim's version string."""
    from fpsim import __version__

    return __version__


@functools.lru_cache(maxsize=1)
def package_code() -> str:
    """A digest of fpsim's own source: results cached by another fpsim are not reused.

    Returns
    -------
    str
        16 hexadecimal digits over the path and bytes of every ``.py`` file of fpsim.
    """
    import fpsim

    root = Path(fpsim.__file__).parent
    return digest(*(part for path in sorted(root.rglob("*.py"))
                    for part in (path.relative_to(root).as_posix().encode(),
                                 path.read_bytes())))


def identity() -> dict[str, str]:
    """fpsim's version and source digest and NumPy's version, in this process.

    Returns
    -------
    dict
        ``{"version": ..., "code": ..., "numpy": ...}``; part of every run's cache key.

    Examples
    --------
    >>> import numpy as np
    >>> sorted(identity()), identity()["numpy"] == np.__version__
    (['code', 'numpy', 'version'], True)
    """
    return dict(version=version(), code=package_code(), numpy=np.__version__)


def mismatch(theirs: dict[str, Any], ours: dict[str, str]) -> str | None:
    """What differs between two ``identity()`` results, in words, or None.

    Examples
    --------
    >>> mismatch({"version": "1", "code": "a", "numpy": "2.0"},
    ...          {"version": "1", "code": "b", "numpy": "2.0"})
    'fpsim source digest a (here b)'
    """
    names = {"version": "fpsim version", "code": "fpsim source digest", "numpy": "NumPy version"}
    differ = [f"{names.get(k, k)} {theirs.get(k)} (here {ours[k]})" for k in ours
              if theirs.get(k) != ours[k]]
    return ", ".join(differ) or None


class ProvenanceMismatch(RuntimeError):
    """A worker runs another fpsim or NumPy than the client: its results are refused."""


def check_worker(worker: str, theirs: dict[str, Any] | None) -> None:
    """Refuse a worker whose ``identity()`` differs from this process's.

    Parameters
    ----------
    worker : str
        The worker's address, for the message.
    theirs : dict
        Its ``identity()``.

    Raises
    ------
    ProvenanceMismatch
        Naming the worker and what differs.
    """
    differ = mismatch(theirs or {}, identity())
    if differ:
        raise ProvenanceMismatch(
            f"worker {worker} runs another fpsim or NumPy: {differ}; refusing it, since "
            "its results must not enter the cache (install the same fpsim and NumPy on "
            "every worker)")
