"""``fpsim bench train`` holds freed memory in its process (glibc's malloc), so that no row
of its table pays page faults that another row's history spared it."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = """
import resource, sys
import numpy as np
from fpsim import bench
held = bench.hold_freed_memory() if sys.argv[1] == "hold" else False
faults = []
for _ in range(3):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    a = np.ones(1 << 20)  # 8 MiB, every page touched, then freed
    del a
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(held, *faults)
"""


def faults(mode: str) -> tuple[str, list[int]]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("MALLOC_MMAP_THRESHOLD_", None)
    env.pop("MALLOC_TRIM_THRESHOLD_", None)
    out = subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True,
                         env=env, check=True).stdout.split()
    return out[0], [int(v) for v in out[1:]]


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
                    reason="mallopt is glibc's")
def test_held_memory_is_reused_without_page_faults():
    held, counts = faults("hold")
    assert held == "True"
    # The first array faults its pages in (8 MiB: hundreds of faults, several pages
    # each), the next ones reuse them.
    assert counts[0] > 200 and counts[1] + counts[2] < 50, counts
    # By default glibc maps the second array afresh (its threshold rises only once one
    # such array has been freed): the setting is what spares it.
    held, counts = faults("default")
    assert held == "False" and counts[1] > 200, counts
