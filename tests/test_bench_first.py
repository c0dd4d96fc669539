"""fpsim bench first: the first calls on a new array, in fresh processes."""

import numpy as np

from fpsim import bench


def test_child_times_each_kind_of_call():
    times = bench.first_calls_child("bf16", "nearest_even", 5000, calls=3)
    assert list(times) == ["copy", "round, out=", "round"]
    assert all(len(t) == 3 and all(ms > 0 for ms in t) for t in times.values())


def test_rows_from_fresh_processes(monkeypatch, capsys):
    monkeypatch.setattr(bench, "FIRST_CALLS", (("fp16", "toward_zero"),))
    rows = bench.run_first_calls(n=5000, processes=1, warm_up=False)
    assert [r[:3] for r in rows] == [("x.copy()", "fp16", "toward_zero"),
                                     ("round, out=", "fp16", "toward_zero"),
                                     ("round", "fp16", "toward_zero")]
    for _, _, _, first, steady, ratio, calls in rows:
        assert first == calls[0] > 0 and steady == np.median(calls[1:]) > 0
        assert np.isclose(ratio, first / steady)
    monkeypatch.setattr(bench, "run_first_calls", lambda n: rows)  # timed above
    assert bench.main(["first", "-n", "3000"]) == 0
    out = capsys.readouterr().out
    assert "first calls on a new array, n=3,000 float32" in out
    assert out.count("round, out=") == 1  # one format, as patched


def test_gpu_rows_without_cupy_name_the_extra(monkeypatch):
    import sys

    import pytest

    from fpsim._optional import MissingDependency

    monkeypatch.setitem(sys.modules, "cupy", None)
    with pytest.raises(MissingDependency, match=r"pip install 'fpsim\[gpu\]'"):
        bench.run(n=8, repeats=1, backend="cupy")
