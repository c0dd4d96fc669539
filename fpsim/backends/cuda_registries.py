"""Load numba-cuda's lowering registries under NumPy 2.5 and later.

On the first CUDA compilation numba-cuda imports its array implementations, and
``numba/cuda/np/arrayobj.py`` (numba-cuda 0.30) registers an overload of
``np.row_stack`` at import time. NumPy 2.5 removed that alias of ``np.vstack``, so the
import raises ``AttributeError`` and no kernel compiles at all. ``load()`` performs
that import once with the alias standing in for the duration, then removes it again:
NumPy's namespace is left as it was, and fpsim's kernels never call ``row_stack``.
"""

from __future__ import annotations

import threading

import numpy as np

_lock = threading.Lock()
_loaded: list[bool] = []


def load() -> None:
    """Load numba-cuda's target registries, once per process."""
    with _lock:
        if _loaded:
            return
        from numba.cuda.descriptor import cuda_target

        missing = not hasattr(np, "row_stack")
        if missing:
            setattr(np, "row_stack", np.vstack)  # noqa: B010 (NumPy 2.5's stubs lack it)
        try:
            cuda_target.target_context.refresh()
        finally:
            if missing:
                delattr(np, "row_stack")
        _loaded.append(True)
