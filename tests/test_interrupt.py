"""An interrupt loses nothing: a real SIGINT to ``fpsim reproduce`` and to a sweep on a Dask
LocalCluster keeps every finished run in the cache, stops the workers at once and exits
within seconds (issue 30); runs that finish while the interrupt is handled, and a run
being cached when it comes, are kept too."""

from __future__ import annotations

import concurrent.futures
import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from test_sweep import tiny

from fpsim.sweep import (
    Cache,
    DaskExecutor,
    LocalExecutor,
    Run,
    ablation,
    cache,
    engine,
    local,
    train_missing,
)

TESTS = Path(__file__).resolve().parent
# The budget of an exit after SIGINT, the bound.
EXIT_SECONDS = 10


def _start(args: list[str], tmp_path: Path) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(TESTS), *filter(None, [os.environ.get("PYTHONPATH")])]))
    return subprocess.Popen([sys.executable, str(TESTS / "stalling.py"), *args], cwd=tmp_path,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)


def _wait_for(condition, process: subprocess.Popen, seconds: float = 240) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if process.poll() is not None:
            raise AssertionError(f"exited early ({process.returncode}):\n"
                                 f"{process.communicate()[1]}")
        if time.monotonic() > deadline:
            raise AssertionError("the runs did not reach the expected state in time")
        time.sleep(0.2)


def _interrupt(process: subprocess.Popen, markers: Path, cache: Path,
               group: bool) -> tuple[float, str, list[psutil.Process]]:
    """Wait until seeds 0 and 1 are cached and 2 and 3 stall, send SIGINT (to the process,
    or to its whole group as Ctrl-C does) and give back how long the exit took, standard
    error, and the processes the process had started before the signal."""
    try:
        _wait_for(lambda: (len(list(cache.glob("*.json"))) == 2
                           and len(list(markers.glob("stalled-*"))) == 2), process)
        children = psutil.Process(process.pid).children(recursive=True)
        assert children, "no worker process was started"
        (markers / "go").write_text("")  # the stalled runs go on RESUME_SECONDS from now
        sent = time.monotonic()
        if group:
            os.killpg(process.pid, signal.SIGINT)
        else:
            process.send_signal(signal.SIGINT)
        try:
            _, err = process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            err = ""
        took = time.monotonic() - sent
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    return took, err, children


def _check(took: float, err: str, children: list[psutil.Process], markers: Path,
           cache: Path) -> None:
    """The exit came within seconds, no process it started lives on, and every run
    that finished (seeds 0 and 1 before the signal; none after) is in the cache."""
    assert took < EXIT_SECONDS, f"the exit took {took:.0f}s:\n{err}"
    _, alive = psutil.wait_procs(children, timeout=3)
    assert [p for p in alive if p.status() != psutil.STATUS_ZOMBIE] == []
    finished = sorted(p.name.split("-")[1] for p in markers.glob("finished-*"))
    cached = sorted(p.name.split("-")[2].removeprefix("seed") for p in cache.glob("*.json"))
    assert finished == cached == ["0", "1"], err


def test_sigint_to_reproduce_keeps_finished_runs_and_stops_the_workers(tmp_path):
    """The issue's case: SIGINT to the process alone, as ``kill -INT`` sends it."""
    markers = tmp_path / "markers"
    markers.mkdir()
    out = tmp_path / "out"
    process = _start(["reproduce", str(markers), "--out", str(out), "--jobs", "2",
                      "--only", "final_metrics", "--tasks", "digits_mlp", "--policies", "fp32",
                      "--seeds", "4"], tmp_path)
    took, err, children = _interrupt(process, markers, out / "cache" / "runs", group=False)
    _check(took, err, children, markers, out / "cache" / "runs")
    assert process.returncode == 130
    assert "interrupted; finished runs are kept" in err and "Traceback" not in err


def test_ctrl_c_to_a_sweep_on_a_local_cluster_keeps_finished_runs(tmp_path):
    """Ctrl-C as a terminal sends it, to the whole process group (the Dask workers too)."""
    pytest.importorskip("distributed")
    markers = tmp_path / "markers"
    markers.mkdir()
    cache = tmp_path / "cache"
    process = _start(["sweep", str(markers), str(cache), "local:2", "4"], tmp_path)
    took, err, children = _interrupt(process, markers, cache / "runs", group=True)
    _check(took, err, children, markers, cache / "runs")
    assert process.returncode == -signal.SIGINT and err.endswith("KeyboardInterrupt\n")


def _runs(count: int) -> list[Run]:
    return [Run(tiny(), ablation("fp32"), seed) for seed in range(count)]


def _cached(store: Cache, runs: list[Run]) -> list[int]:
    return [r.seed for r in runs if store.load("runs", r.config(), r.label) is not None]


def test_runs_that_finish_while_ctrl_c_is_handled_are_kept(tmp_path, monkeypatch):
    """The interrupt comes after the first run was yielded, when the others had
    finished too: all are cached, none is lost with the workers."""
    real = local.futures.as_completed

    def interrupted_when_all_are_done(fs):
        fs = list(fs)
        yield next(real(fs))
        concurrent.futures.wait(fs)
        raise KeyboardInterrupt

    monkeypatch.setattr(local.futures, "as_completed", interrupted_when_all_are_done)
    runs, store = _runs(3), Cache(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        train_missing(store, runs, LocalExecutor(2), stream=io.StringIO())
    assert _cached(store, runs) == [0, 1, 2]


def test_dask_runs_that_finish_while_ctrl_c_is_handled_are_kept(tmp_path, monkeypatch):
    distributed = pytest.importorskip("distributed")
    real = distributed.as_completed

    def interrupted_when_all_are_done(fs):
        yield next(iter(real(fs)))
        distributed.wait(fs)
        raise KeyboardInterrupt

    monkeypatch.setattr(distributed, "as_completed", interrupted_when_all_are_done)
    runs, store = _runs(3), Cache(tmp_path)
    with DaskExecutor("local:1") as executor, pytest.raises(KeyboardInterrupt):
        train_missing(store, runs, executor, stream=io.StringIO())
    assert _cached(store, runs) == [0, 1, 2]


def test_a_run_being_cached_when_ctrl_c_comes_is_cached_whole(tmp_path, monkeypatch):
    """SIGINT while the first record is being written: it is written, then the
    interrupt stops the rest."""
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # Python's own
    save = cache.Cache.save

    def interrupted(self, *args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)
        return save(self, *args, **kwargs)

    monkeypatch.setattr(cache.Cache, "save", interrupted)
    runs, store = _runs(3), Cache(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        train_missing(store, runs, LocalExecutor(1), stream=io.StringIO())
    assert _cached(store, runs) == [0]
    assert [p.name for p in tmp_path.rglob("*") if p.is_file()] == [
        store.path("runs", runs[0].config(), runs[0].label).name]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_ctrl_c_between_two_runs_keeps_the_run_in_hand(tmp_path, monkeypatch):
    """SIGINT after the executor handed over a run and before it is being cached (the
    interrupt is raised in the sweep, not in the executor): that run is cached too."""
    held = engine._held_interrupts
    entered = []

    def interrupted_on_the_first_entry():
        entered.append(len(entered))
        if len(entered) == 1:
            raise KeyboardInterrupt
        return held()

    monkeypatch.setattr(engine, "_held_interrupts", interrupted_on_the_first_entry)
    runs, store = _runs(3), Cache(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        train_missing(store, runs, LocalExecutor(1), stream=io.StringIO())
    assert _cached(store, runs) == [0] and entered == [0, 1]
