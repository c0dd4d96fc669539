"""tests/numba_shared_cache.py: two processes wanting one cached function compile it once."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("fcntl")

HERE = Path(__file__).resolve().parent

MODULE = """
import numba


@numba.njit(cache=True)
def inner(x):
    return x * 2.0 + 1.0


@numba.njit(cache=True)
def outer(x):
    return inner(x) - 3.0
"""

# argv: role ("first" or "second"), the folder of the signal files.
RUNNER = """
import json, os, sys, time

sys.path[:0] = [{tests!r}, {folder!r}]
import numba_shared_cache
from numba.core import event

numba_shared_cache.install()
role, folder = sys.argv[1], sys.argv[2]
calling = os.path.join(folder, "calling")


def wait_for(path):
    deadline = time.monotonic() + 60
    while not os.path.exists(path):
        assert time.monotonic() < deadline, path
        time.sleep(0.02)


class Slow(event.Listener):
    # The first process, compiling outer: tell the second one, then wait for it to call.
    def on_start(self, ev):
        if ev.data["dispatcher"].py_func.__name__ == "outer":
            open(os.path.join(folder, "compiling"), "w").close()
            wait_for(calling)
            time.sleep(2)

    def on_end(self, ev):
        pass


if role == "first":
    event.register("numba:compile", Slow())
import cached

if role == "second":
    wait_for(os.path.join(folder, "compiling"))
    open(calling, "w").close()
value = cached.outer(1.5)
stats = cached.outer.stats
print(json.dumps(dict(value=value, compiled=sum(stats.cache_misses.values()),
                      loaded=sum(stats.cache_hits.values()))))
"""


def test_a_second_process_loads_the_first_ones_compile(tmp_path):
    (tmp_path / "cached.py").write_text(MODULE)
    runner = tmp_path / "runner.py"
    runner.write_text(RUNNER.format(tests=str(HERE), folder=str(tmp_path)))
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"), TMPDIR=str(tmp_path))
    env.pop("NUMBA_DISABLE_JIT", None)
    runs = [subprocess.Popen([sys.executable, str(runner), role, str(tmp_path)], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for role in ("first", "second")]
    results = []
    for run in runs:
        out, err = run.communicate(timeout=300)
        assert run.returncode == 0, err[-3000:]
        results.append(json.loads(out.splitlines()[-1]))
    first, second = results
    assert first == dict(value=1.0, compiled=1, loaded=0)
    # Without the lock the second process finds no cache entry yet and compiles too.
    assert second == dict(value=1.0, compiled=0, loaded=1)
    assert (tmp_path / "fpsim-pytest-numba-locks").is_dir()
