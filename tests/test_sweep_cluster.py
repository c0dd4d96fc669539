"""fpsim.sweep on a real Dask LocalCluster (2 worker processes, 1 thread each): the same
records as the local executor, a killed worker loses nothing, a worker running another
fpsim is refused, a resumed sweep trains only the missing runs, Ctrl-C cancels the rest."""

from __future__ import annotations

import functools
import io
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_sweep import build_tiny, tiny, without_time

import fpsim.sweep.cluster
from fpsim.sweep import DaskExecutor, ProvenanceMismatch, Setup, Task, sweep

distributed = pytest.importorskip("distributed")  # the test extra installs it

ABLATIONS = ["fp32", "mixed"]


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as cluster, \
            distributed.Client(cluster) as client:
        client.wait_for_workers(2)
        yield client


@pytest.fixture(scope="module")
def local_records(tmp_path_factory):
    """The reference: the runs trained in this process by the local executor."""
    cache = tmp_path_factory.mktemp("local")
    return sweep(tiny(), ABLATIONS, seeds=3, cache=cache, jobs=1, stream=io.StringIO()).records


def build_or_die(marker: str, seed: int) -> Setup:
    """``build_tiny``, but the first run of seed 2 kills its worker process mid-run."""
    setup = build_tiny(seed)
    if seed != 2 or os.path.exists(marker):
        return setup

    def batches():
        for step, batch in enumerate(setup.batches):
            if step == 3:
                Path(marker).write_text(str(os.getpid()))
                os.kill(os.getpid(), signal.SIGKILL)
            yield batch

    return Setup(setup.model, setup.optimizer, batches(), setup.loss, setup.evaluate)


def test_a_cluster_gives_the_local_executors_records_bit_for_bit(client, local_records,
                                                                 tmp_path):
    with DaskExecutor(client) as executor:
        result = sweep(tiny(), ABLATIONS, seeds=3, cache=tmp_path, executor=executor,
                       stream=io.StringIO())
    assert len(result.trained) == 6
    assert without_time(result.records) == without_time(local_records)
    assert not client.status == "closed"  # a Client passed in is the caller's to close


def test_a_killed_worker_loses_and_duplicates_nothing(client, local_records, tmp_path):
    marker = tmp_path / "killed"
    task = Task("tiny", functools.partial(build_or_die, str(marker)), steps=6, eval_every=3,
                metric="accuracy (%)")
    workers = set(client.run(os.getpid).values())
    result = sweep(task, ABLATIONS, seeds=3, cache=tmp_path / "cache",
                   executor=DaskExecutor(client), stream=io.StringIO())
    assert int(marker.read_text()) in workers  # a worker process died mid-run
    assert result.failures == [] and sorted(result.trained) == sorted(
        f"tiny-{p}-seed{s}" for p in ABLATIONS for s in range(3))
    assert without_time(result.records) == without_time(local_records)
    files = sorted(p.name for p in (tmp_path / "cache" / "runs").iterdir())
    assert len(files) == 6 and all(f.startswith("tiny-") and f.endswith(".json") for f in files)
    client.wait_for_workers(2)  # the nanny restarted it


def test_a_resumed_sweep_trains_only_the_missing_runs(client, tmp_path):
    sweep(tiny(), ABLATIONS, seeds=[0, 2], cache=tmp_path, jobs=1, stream=io.StringIO())
    result = sweep(tiny(), ABLATIONS, seeds=3, cache=tmp_path, executor=DaskExecutor(client),
                   stream=io.StringIO())
    assert sorted(result.trained) == ["tiny-fp32-seed1", "tiny-mixed-seed1"]
    assert len(list((tmp_path / "runs").iterdir())) == 6


def test_ctrl_c_keeps_finished_runs_and_cancels_the_rest(client, tmp_path, monkeypatch):
    real = distributed.as_completed

    def interrupted_after_the_first(futures):
        yield next(iter(real(futures)))
        raise KeyboardInterrupt

    monkeypatch.setattr(distributed, "as_completed", interrupted_after_the_first)
    with pytest.raises(KeyboardInterrupt):
        sweep(tiny(steps=30), ABLATIONS, seeds=4, cache=tmp_path,
              executor=DaskExecutor(client), stream=io.StringIO())
    # the first, and any that finished beside it while the interrupt was handled
    assert 1 <= len(list((tmp_path / "runs").iterdir())) <= 2

    def tasks_left(dask_scheduler):
        return len(dask_scheduler.tasks)

    deadline = time.monotonic() + 20
    while client.run_on_scheduler(tasks_left) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert client.run_on_scheduler(tasks_left) == 0


def test_a_worker_running_another_fpsim_is_refused(client, tmp_path):
    """A third worker imports a copy of fpsim with one changed line."""
    root = Path(fpsim.sweep.cluster.__file__).resolve().parents[2]
    shutil.copytree(root / "fpsim", tmp_path / "fpsim",
                    ignore=shutil.ignore_patterns("__pycache__"))
    with open(tmp_path / "fpsim" / "__init__.py", "a") as f:
        f.write("# another fpsim\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    worker = subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_worker", client.scheduler.address,
         "--nthreads", "1", "--no-nanny", "--no-dashboard", "--name", "foreign"],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        client.wait_for_workers(3, timeout=60)
        foreign = [a for a, w in client.scheduler_info()["workers"].items()
                   if w["name"] == "foreign"][0]
        with pytest.raises(ProvenanceMismatch, match=f"worker {foreign} runs another fpsim"
                                                     r".*fpsim source digest"):
            sweep(tiny(), ABLATIONS, seeds=1, cache=tmp_path / "cache",
                  executor=DaskExecutor(client), stream=io.StringIO())
        assert not (tmp_path / "cache" / "runs").exists()  # nothing entered the cache
    finally:
        worker.terminate()
        worker.wait(30)
    deadline = time.monotonic() + 30
    while len(client.scheduler_info()["workers"]) > 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(client.scheduler_info()["workers"]) == 2


def test_local_n_starts_and_closes_its_own_cluster(tmp_path):
    executor = DaskExecutor("local:1")
    assert repr(executor) == "DaskExecutor('local:1')"
    result = sweep(tiny(), ["fp32"], seeds=1, cache=tmp_path, executor="local:1",
                   stream=io.StringIO())
    assert result.trained == ["tiny-fp32-seed0"] and not result.failures


def test_fpsim_reproduce_on_the_cluster_writes_the_local_results(client, tmp_path,
                                                                  monkeypatch):
    """The command's --scheduler: the built-in tasks (here shortened: a task travels to
    the workers whole) give the results.json runs of the local executor."""
    import dataclasses
    import json

    from fpsim.reproduce import command, tasks
    from fpsim.reproduce.tasks import Budget

    t = tasks.TASKS["digits_mlp"]
    monkeypatch.setitem(tasks.TASKS, "digits_mlp",
                        dataclasses.replace(t, budgets={"quick": Budget(12, 6)}))
    argv = ["--only", "final_metrics", "--tasks", "digits_mlp", "--policies", "fp32", "mixed",
            "--seeds", "2"]
    assert command.main([*argv, "--out", str(tmp_path / "local"), "--jobs", "1"]) == 0
    assert command.main([*argv, "--out", str(tmp_path / "dask"),
                         "--scheduler", client.scheduler.address]) == 0
    local, dask = (json.loads((tmp_path / name / "results.json").read_text())
                   for name in ("local", "dask"))
    assert [r["steps"] for r in dask["runs"]] == [12] * 4
    assert without_time(dask["runs"]) == without_time(local["runs"])
    assert dask["studies"]["final_metrics"]["rows"] == local["studies"]["final_metrics"]["rows"]
    assert client.status == "running"  # the command closes only what it started
