"""fpsim.sweep on the local executor: the API's checks, records, table and verdicts,
the cache and resuming, failed runs, the executors' names, and docs/sweeps.md's example."""

from __future__ import annotations

import functools
import io
import itertools
import json
import math
import re
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from fpsim import nn, no_grad, optim
from fpsim.data import batches, load_digits
from fpsim.nn import functional as F
from fpsim.precision import parse
from fpsim.reproduce import command
from fpsim.sweep import (
    ABLATIONS,
    Ablation,
    DaskExecutor,
    LocalExecutor,
    Setup,
    Task,
    as_executor,
    check_run,
    local,
    sweep,
)
from fpsim.sweep.cluster import parse_scheduler
from fpsim.sweep.task import source_digest

ROOT = Path(__file__).resolve().parent.parent


@functools.lru_cache(maxsize=1)
def digits():
    return load_digits(seed=0, standardize=True)


def build_tiny(seed: int, lr: float = 0.1, fail_on: int | None = None) -> Setup:
    """A small MLP on the digits: the user's own task, as a function of the seed."""
    if seed == fail_on:
        raise RuntimeError(f"seed {seed} is broken")
    data = digits()
    nn.manual_seed(seed)
    model = nn.Sequential(nn.Linear(64, 8), nn.ReLU(), nn.Linear(8, 10))
    stream = itertools.chain.from_iterable(
        batches(data.x_train, data.y_train, batch_size=16, seed=seed * 100 + epoch)
        for epoch in itertools.count())

    def loss(model, batch):
        return F.cross_entropy(model(batch[0]), batch[1])

    def evaluate(model, policy):
        with policy, no_grad():
            logits = np.asarray(model(data.x_test).data, dtype=np.float64)
        return float(np.mean(logits.argmax(axis=1) == data.y_test) * 100)

    return Setup(model, optim.SGD(model.parameters(), lr=lr, momentum=0.9), stream, loss,
                 evaluate)


def tiny(name: str = "tiny", steps: int = 6, **kwargs) -> Task:
    build = functools.partial(build_tiny, **kwargs) if kwargs else build_tiny
    return Task(name, build, steps=steps, eval_every=3, metric="accuracy (%)",
                config=dict(kwargs))


def quiet() -> io.StringIO:
    return io.StringIO()


def without_time(records: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "seconds"} for r in records]


def test_a_sweep_gives_records_a_table_and_verdicts(tmp_path):
    custom = Ablation("bf16_sr", "bf16,params=bf16,rounding=stochastic,seed=0")
    result = sweep(tiny(), ["mixed", "no_loss_scaling", custom], seeds=2, cache=tmp_path,
                   jobs=1, reference="mixed", stream=quiet())
    assert [(r["task"], r["policy"], r["seed"]) for r in result.records] == [
        ("tiny", p, s) for p in ("mixed", "no_loss_scaling", "bf16_sr") for s in (0, 1)]
    for r in result.records:
        check_run(r)
        assert r["steps"] == 6 and not r["diverged"] and 0 <= r["value"] <= 100
    assert len(result.trained) == 6 and result.failures == []
    mixed = [r["value"] for r in result.records if r["policy"] == "mixed"]
    row = result.table[0]
    assert (row["task"], row["policy"], row["seeds"], row["failed"]) == ("tiny", "mixed", 2, 0)
    assert row["mean"] == pytest.approx(np.mean(mixed))
    assert row["spread"] == pytest.approx(np.std(mixed, ddof=1))
    assert [(v["policy"], v["reference"]) for v in result.verdicts] == [
        ("no_loss_scaling", "mixed"), ("bf16_sr", "mixed")]
    assert all(v["verdict"] for v in result.verdicts)
    lines = result.markdown().splitlines()
    assert len(lines) == 5 and lines[2].startswith("| tiny | mixed | ")
    # The same sweep again: every run from the cache, the same records.
    again = sweep(tiny(), ["mixed", "no_loss_scaling", custom], seeds=2, cache=tmp_path,
                  jobs=1, reference="mixed", stream=quiet())
    assert again.trained == [] and again.records == result.records
    assert len(list((tmp_path / "runs").glob("*.json"))) == 6


def test_an_interrupted_sweep_keeps_its_runs_and_resumes(tmp_path, monkeypatch):
    calls = []
    execute = local.execute

    def interrupted_after_two(run, progress=None):
        if len(calls) == 2:
            raise KeyboardInterrupt
        calls.append(run.label)
        return execute(run, progress)

    monkeypatch.setattr(local, "execute", interrupted_after_two)
    with pytest.raises(KeyboardInterrupt):
        sweep(tiny(), ["fp32", "mixed"], seeds=2, cache=tmp_path, jobs=1, stream=quiet())
    assert len(list((tmp_path / "runs").glob("*.json"))) == 2
    monkeypatch.undo()
    result = sweep(tiny(), ["fp32", "mixed"], seeds=2, cache=tmp_path, jobs=1, stream=quiet())
    assert sorted(result.trained) == ["tiny-mixed-seed0", "tiny-mixed-seed1"]
    assert calls == ["tiny-fp32-seed0", "tiny-fp32-seed1"]


def test_a_run_that_raises_is_a_failed_record_and_the_rest_go_on(tmp_path):
    stream = quiet()
    result = sweep(tiny(fail_on=1), ["fp32"], seeds=3, cache=tmp_path, jobs=1, stream=stream)
    failed, = result.failures
    assert (failed["seed"], failed["value"], failed["diverged"]) == (1, None, False)
    assert "RuntimeError: seed 1 is broken" in failed["error"]
    assert "Traceback" in failed["error"]
    check_run(failed)
    assert [r["seed"] for r in result.records if not r.get("failed")] == [0, 2]
    assert (result.table[0]["seeds"], result.table[0]["failed"]) == (2, 1)
    assert "(1 failed)" in result.markdown()
    assert "tiny-fp32-seed1 failed: RuntimeError: seed 1 is broken" in stream.getvalue()
    # A failed run is not cached: the next sweep tries it again.
    assert len(list((tmp_path / "runs").glob("*.json"))) == 2
    assert sweep(tiny(fail_on=1), ["fp32"], seeds=3, cache=tmp_path, jobs=1,
                 stream=quiet()).failures[0]["seed"] == 1


def test_a_diverged_run_is_a_record_and_a_worse_verdict(tmp_path):
    result = sweep([tiny(lr=1e9, steps=30)], ["fp32", "no_loss_scaling"], seeds=2,
                   cache=tmp_path, jobs=1, stream=quiet())
    blown = [r for r in result.records if r["policy"] == "no_loss_scaling"]
    assert all(r["diverged"] and r["value"] is None for r in blown)
    assert result.table[1]["diverged"] == 2


def test_parallel_local_workers_give_the_same_records(tmp_path):
    one = sweep(tiny(), ["mixed", "bf16"], seeds=2, cache=tmp_path / "one", jobs=1,
                stream=quiet())
    two = sweep(tiny(), ["mixed", "bf16"], seeds=2, cache=tmp_path / "two",
                executor=LocalExecutor(2), stream=quiet())
    assert without_time(two.records) == without_time(one.records)


def test_the_cache_key_covers_the_task_its_source_and_the_ablation():
    from fpsim.sweep import Run

    base = Run(tiny(), ABLATIONS["mixed"], 0).config()
    assert base["task_code"] == source_digest(build_tiny)
    for other in (Run(tiny(), ABLATIONS["mixed"], 1), Run(tiny(steps=9), ABLATIONS["mixed"], 0),
                  Run(tiny(lr=0.2), ABLATIONS["mixed"], 0),
                  Run(tiny(), ABLATIONS["no_master"], 0),
                  Run(tiny(), Ablation("mixed", "mixed", 2.0**10), 0),
                  Run(tiny(), Ablation("mixed", "mixed", "dynamic",
                                       update="mixed,rounding=stochastic"), 0)):
        assert other.config() != base
    assert source_digest(build_tiny) != source_digest(tiny)  # another function, same file


def test_an_update_policy_rounds_the_weight_update_only(monkeypatch):
    """``update=``: the optimizer's ``w - u`` under its own policy; the passes keep the run's."""
    from fpsim.optim import optimizer
    from fpsim.sweep.train import train

    seen = []
    real = optimizer.numerics.round

    def spy(value, fmt, policy, *args, **kwargs):
        seen.append(policy.rounding)
        return real(value, fmt, policy, *args, **kwargs)

    # The optimizer's roundings only: its module's name for the numerics.
    namespace = types.SimpleNamespace(**vars(optimizer.numerics))
    namespace.round = spy
    monkeypatch.setattr(optimizer, "numerics", namespace)
    plain = Ablation("p", "bf16,params=bf16")
    stochastic = Ablation("s", "bf16,params=bf16",
                          update="bf16,params=bf16,rounding=stochastic,seed=3")
    records = [train(tiny(steps=4), a, 0) for a in (plain, stochastic, stochastic)]
    assert set(seen[:len(seen) // 3]) == {"nearest_even"}
    assert set(seen[len(seen) // 3:]) == {"stochastic"}
    assert without_time(records[1:2]) == without_time(records[2:])  # seeded: repeatable
    assert records[0]["curve"] != records[1]["curve"]
    assert Ablation("a", "mixed", update=parse("bf16")).update == str(parse("bf16"))


@pytest.mark.parametrize("make, message", [
    (lambda p: sweep(tiny(), ["nonsense"], 1, cache=p), "unknown policy 'nonsense'"),
    (lambda p: sweep(tiny(), ["mixed", "mixed"], 1, cache=p), "two ablations are called 'mixed'"),
    (lambda p: sweep([tiny(), tiny()], ["mixed"], 1, cache=p), "two tasks are called 'tiny'"),
    (lambda p: sweep(build_tiny, ["mixed"], 1, cache=p), "tasks must be fpsim.sweep.Task"),
    (lambda p: sweep(tiny(), [], 1, cache=p), "at least one ablation"),
    (lambda p: sweep(tiny(), ["mixed"], 0, cache=p), r"seeds must be an integer in 1\.\."),
    (lambda p: sweep(tiny(), ["mixed"], [0, -1], cache=p), r"a seed must be an integer in 0\.\."),
    (lambda p: sweep(tiny(), ["mixed"], [2**32], cache=p), "a seed must be an integer"),
    (lambda p: sweep(tiny(), ["mixed"], [1, 1], cache=p), "seeds repeat"),
    (lambda p: sweep(tiny(), ["mixed"], "3", cache=p), "seeds must be a count"),
    (lambda p: sweep(tiny(), ["mixed"], 1, cache=p, reference="fp32"), "reference 'fp32'"),
    (lambda p: sweep(tiny(), ["mixed"], 1, cache=p, jobs=0), "jobs must be an integer"),
    (lambda p: sweep(tiny(), ["mixed"], 1, cache=p, executor=42), "executor must be"),
    (lambda p: sweep(tiny(), ["mixed"], 1, cache=p, executor="local:x"), "local:N needs N"),
    (lambda p: sweep(tiny(), ["mixed"], 1, cache=p, executor="local:0"), "local:N needs N"),
    (lambda p: sweep(tiny(), ["mixed"], 1, cache=p / "runs.txt"), "not a folder"),
    (lambda p: Task("t", 3, steps=5, eval_every=1), "task 't': build must be a function"),
    (lambda p: Task("", build_tiny, steps=5, eval_every=1), "non-empty string"),
    (lambda p: Task("t", build_tiny, steps=0, eval_every=1), "steps must be an integer"),
    (lambda p: Task("t", build_tiny, steps=5, eval_every=6), r"eval_every must be .* 1\.\.5"),
    (lambda p: Task("t", build_tiny, 5, 1, clip_norm=math.nan), "clip_norm must be a positive"),
    (lambda p: Task("t", build_tiny, 5, 1, config={"lr": math.nan}), "finite numbers only"),
    (lambda p: Task("t", build_tiny, 5, 1, config={"seed": 1}), "may not use the key"),
    (lambda p: Task("t", build_tiny, 5, 1, higher_is_better="yes"), "True or False"),
    (lambda p: Ablation("a", "mixed", math.nan), "loss_scale must be a positive"),
    (lambda p: Ablation("a", "mixed", "static"), "None, 'dynamic' or a number"),
    (lambda p: Ablation("a", "mixed,compute=fp99"), "ablation 'a': "),
    (lambda p: Ablation(" ", "mixed"), "non-empty string"),
    (lambda p: Ablation("a", "mixed", update="mixed,rounding=sideways"), "ablation 'a': update: "),
    (lambda p: Ablation("a", "mixed", update=3), "update must be a policy string"),
])
def test_bad_input_is_an_error_naming_the_problem(tmp_path, make, message):
    (tmp_path / "runs.txt").write_text("")
    with pytest.raises(ValueError, match=message):
        make(tmp_path)


@pytest.mark.parametrize("address, parsed", [
    ("local:2", 2), ("tcp://10.0.0.5:8786", "tcp://10.0.0.5:8786"),
    ("scheduler.cluster:8786", "scheduler.cluster:8786"), ("tls://[::1]:8786", "tls://[::1]:8786"),
])
def test_scheduler_addresses(address, parsed):
    assert parse_scheduler(address) == parsed
    assert isinstance(as_executor(address), DaskExecutor)


@pytest.mark.parametrize("address", ["local:x", "local:0", "local:-1", "local:", "nowhere",
                                     "tcp://", "http://host:8786", "host:port"])
def test_malformed_scheduler_addresses_are_refused(address):
    with pytest.raises(ValueError, match="local:N"):
        parse_scheduler(address)


def test_the_command_refuses_a_malformed_scheduler(capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        command.main(["--out", str(tmp_path), "--scheduler", "local:x"])
    assert exc.value.code == 2
    assert "local:N needs N" in capsys.readouterr().err


def test_the_documented_example_runs(tmp_path):
    """docs/sweeps.md's example, as a user runs it: a script, in a fresh process."""
    text = (ROOT / "docs" / "sweeps.md").read_text()
    script = re.search(r"```python\n(\"\"\"A small model of my own.*?)```", text, re.S).group(1)
    (tmp_path / "my_sweep.py").write_text(script)
    env = dict(PYTHONPATH=str(ROOT), PATH="/usr/bin:/bin")
    out = subprocess.run([sys.executable, "my_sweep.py"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    rows = [line for line in out.stdout.splitlines() if line.startswith("| blobs_mlp |")]
    assert [row.split(" | ")[1] for row in rows] == ["mixed", "no_loss_scaling", "bf16_sr"]
    assert all(re.search(r"\d+\.\d{3} ± \d+\.\d{3}", row) for row in rows)
    assert len(list((tmp_path / "my-sweep" / "runs").glob("blobs_mlp-*.json"))) == 9
    verdicts = dict(line.split(" ", 1) for line in out.stdout.splitlines()[-2:])
    assert set(verdicts) == {"no_loss_scaling", "bf16_sr"}
    config = json.loads(next((tmp_path / "my-sweep" / "runs").glob("*bf16_sr*")).read_text())[
        "config"]
    assert config["precision"] == "bf16,params=bf16"
    assert config["update"] == "bf16,params=bf16,rounding=stochastic,seed=0"


def test_a_worker_with_another_numpy_or_fpsim_is_named_and_refused():
    from fpsim.sweep import ProvenanceMismatch, identity
    from fpsim.sweep.provenance import check_worker

    check_worker("tcp://w:1", identity())
    ours = identity()["numpy"]
    with pytest.raises(ProvenanceMismatch, match=rf"worker tcp://w:1 .*NumPy version 1\.0 "
                                                 rf"\(here {re.escape(ours)}\)"):
        check_worker("tcp://w:1", dict(identity(), numpy="1.0"))
    with pytest.raises(ProvenanceMismatch, match="fpsim version 0.0 .*fpsim source digest"):
        check_worker("tcp://w:2", dict(identity(), version="0.0", code="0" * 16))
    with pytest.raises(ProvenanceMismatch, match="fpsim source digest None"):
        check_worker("tcp://w:3", None)


@pytest.mark.parametrize("name", ["ablation", "provenance", "cluster", "local", "executor",
                                  "task", "statistics", "records", "train", "engine"])
def test_docstring_examples(name):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(f"fpsim.sweep.{name}"))
    assert result.attempted >= 1 and result.failed == 0
