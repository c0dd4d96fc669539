"""Numba's on-disk cache shared by the processes of one test run (pytest-xdist's workers).

Two locks, both on files in the temporary folder, so that they hold across processes:

- ``cache_files``: Numba (0.68) writes each cache file atomically, but adds a signature in
  three steps (read the index, write the index, write the numbered data file): two
  processes adding different signatures of one function at once can take the same data
  file, and the index of one then names the other's code. The workers hold one lock file
  while they add (exclusive) or load (shared) a cache entry.
- ``compile_once``: a process about to compile a cached function for a signature first
  takes a lock of its own for that function and signature. A second process wanting the
  same waits, then finds the first one's cache entry and loads it instead of compiling it
  again (Numba writes the entry only once the compile is over, so without the lock both
  compile: on a cold cache the workers start on the same kernels).

The locks are taken in the order the compiles nest (a function before the functions it
calls), inside Numba's own compiler lock, so that neither threads nor processes can wait on
each other in a circle.
"""

import contextlib
import fcntl
import functools
import hashlib
import os
import tempfile

LOCKS = os.path.join(tempfile.gettempdir(), "fpsim-pytest-numba-locks")
# One lock for every cache entry's files (its path as before, shared with older checkouts).
CACHE_FILES = os.path.join(tempfile.gettempdir(), "fpsim-pytest-numba-cache.lock")


def install() -> None:
    """Both locks, in this process. A function whose cache file Numba does not name where
    expected is compiled without the second."""
    os.makedirs(LOCKS, exist_ok=True)
    cache_files()
    compile_once()


@contextlib.contextmanager
def _locked(path: str, mode: int):
    """Hold ``flock(path, mode)``."""
    with open(path, "a") as lock:
        fcntl.flock(lock, mode)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def cache_files() -> None:
    """Adding a cache entry excludes loading one, in every process."""
    from numba.core import caching

    cache_file = getattr(caching, "IndexDataCacheFile", None)
    if cache_file is None or not all(hasattr(cache_file, m) for m in ("save", "load")):
        return
    path = CACHE_FILES

    def locked(method, mode):
        @functools.wraps(method)
        def run(self, *args, **kwargs):
            with _locked(path, mode):
                return method(self, *args, **kwargs)
        return run

    cache_file.save = locked(cache_file.save, fcntl.LOCK_EX)
    cache_file.load = locked(cache_file.load, fcntl.LOCK_SH)


def compile_once() -> None:
    """A cached function is compiled for a signature by one process at a time; the others
    wait and load its cache entry."""
    from numba.core import dispatcher, sigutils
    from numba.core.compiler_lock import global_compiler_lock

    cls = dispatcher.Dispatcher
    original = cls.compile
    if getattr(original, "_fpsim_compile_once", False):
        return
    held: set[str] = set()  # this process's locks (a compile may nest in another)

    @functools.wraps(original)
    def compile(self, sig):
        index = getattr(getattr(getattr(self, "_cache", None), "_cache_file", None),
                        "_index_path", None)
        if index is None:  # not cached on disk: nothing to share
            return original(self, sig)
        with global_compiler_lock:
            args, _ = sigutils.normalize_signature(sig)
            name = hashlib.sha1(f"{index}\0{args}".encode()).hexdigest()
            if tuple(args) in self.overloads or name in held:
                return original(self, sig)
            with _locked(os.path.join(LOCKS, name), fcntl.LOCK_EX):
                held.add(name)
                try:
                    return original(self, sig)
                finally:
                    held.discard(name)

    compile._fpsim_compile_once = True
    cls.compile = compile
