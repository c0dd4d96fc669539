"""``fpsim reproduce`` and ``fpsim.sweep`` check everything before they make anything: a
missing Dask is one line naming ``fpsim[cluster]``, bad arguments leave no output folder,
and a reproduction says how many runs came from the cache (issue 30)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest
from test_sweep import tiny

from fpsim._optional import MissingDependency
from fpsim.reproduce import command, tasks
from fpsim.reproduce.tasks import Budget
from fpsim.sweep import DaskExecutor, sweep

MISSING = ("training on a Dask cluster needs distributed, which is not installed: "
           "pip install 'fpsim[cluster]'")
# `python -m fpsim ARGS` in a Python where Dask cannot be imported.
WITHOUT_DASK = ("import runpy, sys; sys.modules['distributed'] = sys.modules['dask'] = None; "
                "sys.argv[0] = 'fpsim'; runpy.run_module('fpsim', run_name='__main__')")


@pytest.fixture
def no_dask(monkeypatch):
    """Dask as if it were not installed (a None entry makes its import fail)."""
    for name in ("distributed", "dask"):
        monkeypatch.setitem(sys.modules, name, None)


def test_fpsim_reproduce_on_dask_without_dask_is_one_line(tmp_path):
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-c", WITHOUT_DASK, "reproduce", "--quick",
                           "--scheduler", "local:2", "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines()[-1] == f"fpsim reproduce: error: {MISSING}"
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert not out.exists()


def test_the_command_checks_dask_before_making_its_folder(no_dask, tmp_path, capsys):
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exc:
        command.main(["--scheduler", "tcp://127.0.0.1:8786", "--out", str(out)])
    assert exc.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"fpsim reproduce: error: {MISSING}"
    assert not out.exists()


@pytest.mark.parametrize("executor", ["local:2", "tcp://127.0.0.1:8786"])
def test_a_sweep_on_dask_without_dask_names_the_extra(no_dask, tmp_path, executor):
    with pytest.raises(MissingDependency) as info:
        sweep(tiny(), ["fp32"], 1, cache=tmp_path / "cache", executor=executor)
    assert str(info.value) == MISSING
    assert not (tmp_path / "cache").exists()
    with pytest.raises(MissingDependency, match=r"pip install 'fpsim\[cluster\]'$"):
        DaskExecutor(executor)


@pytest.mark.parametrize("argv, message", [
    (["--seeds", "-1"], "seeds must be at least 1, got -1"),
    (["--jobs", "0"], "jobs must be at least 1, got 0"),
    (["--scheduler", "nowhere"], "scheduler 'nowhere' is neither local:N"),
])
def test_bad_arguments_leave_no_output_folder(tmp_path, capsys, argv, message):
    out = tmp_path / "X"
    with pytest.raises(SystemExit) as exc:
        command.main([*argv, "--out", str(out)])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_a_sweep_with_bad_arguments_leaves_no_cache_folder(tmp_path):
    with pytest.raises(ValueError, match="neither local:N nor a Dask scheduler"):
        sweep(tiny(), ["fp32"], 1, cache=tmp_path / "cache", executor="nowhere")
    with pytest.raises(ValueError, match="seeds must be an integer in 1"):
        sweep(tiny(), ["fp32"], -1, cache=tmp_path / "cache")
    assert not (tmp_path / "cache").exists()


def test_a_reproduction_says_how_many_runs_came_from_the_cache(tmp_path, monkeypatch,
                                                               capsys):
    t = tasks.TASKS["digits_mlp"]
    monkeypatch.setitem(tasks.TASKS, "digits_mlp", dataclasses.replace(
        t, budgets={"quick": Budget(4, 2)}, hyperparameters=dict(t.hyperparameters, hidden=8)))
    argv = ["--only", "final_metrics", "--tasks", "digits_mlp", "--policies", "fp32", "mixed",
            "--seeds", "2", "--jobs", "1", "--out", str(tmp_path)]
    assert command.main(argv) == 0
    first = capsys.readouterr()
    assert len(list((tmp_path / "cache" / "runs").glob("*.json"))) == 4
    assert command.main(argv) == 0
    again = capsys.readouterr()
    counts = [[line for line in out.err.splitlines() if "from the cache" in line]
              for out in (first, again)]
    assert counts == [["0 runs from the cache, 4 to train"], ["4 runs from the cache, 0 to train"]]
    assert "from the cache" not in first.out + again.out  # progress goes to stderr
    # what was written goes to stdout, as in fpsim compare
    for out in (first, again):
        assert out.out.startswith(f"wrote {tmp_path / 'results.md'}, results.json and figures")
        assert "wrote" not in out.err


def test_an_unreachable_scheduler_is_one_line_and_leaves_no_folder(tmp_path, capsys,
                                                                  monkeypatch):
    address = "tcp://127.0.0.1:8786"

    def unreachable(executor):
        raise ConnectionError(f"cannot reach the Dask scheduler at {address}: timed out")

    monkeypatch.setattr(DaskExecutor, "client", unreachable)  # no 20 s wait for a refusal
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exc:
        command.main(["--scheduler", address, "--out", str(out)])
    assert exc.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"fpsim reproduce: error: cannot reach the Dask scheduler at {address}: timed out")
    assert not out.exists()
