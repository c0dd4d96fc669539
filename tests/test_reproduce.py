"""fpsim reproduce: the results schema, divergence recording, caching and resuming, the
command line, and a miniature run of every study."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
import types

import numpy as np
import pytest

from fpsim.reproduce import command, results, session, tasks
from fpsim.reproduce.ablations import ABLATIONS, ablation, shrunk
from fpsim.reproduce.runs import train
from fpsim.reproduce.session import Session
from fpsim.reproduce.tasks import Budget
from fpsim.sweep import local, provenance
from fpsim.training import Trainer

TINY = {"quick": Budget(6, 3), "full": Budget(8, 4)}
EXECUTE = local.execute


@pytest.fixture
def tiny_tasks(monkeypatch):
    """Every task with a few steps and a small language model."""
    for name, t in list(tasks.TASKS.items()):
        hp = dict(t.hyperparameters)
        if name == "char_lstm":
            hp.update(hidden=12, embedding=6, eval_chars=300, seq_len=6, batch_size=5)
        monkeypatch.setitem(tasks.TASKS, name, dataclasses.replace(t, budgets=TINY,
                                                                    hyperparameters=hp))
    return tasks.TASKS


def test_a_run_record_follows_the_schema(tiny_tasks):
    run = train(tiny_tasks["digits_mlp"], ablation("mixed"), seed=0)
    results.check_run(run)
    assert (run["task"], run["policy"], run["seed"], run["steps"]) == ("digits_mlp", "mixed", 0, 6)
    assert not run["diverged"] and run["diverged_at"] is None
    assert 0 <= run["value"] <= 100
    assert [p["step"] for p in run["curve"]] == [3, 6]
    assert run["curve"][-1]["metric"] == run["value"]
    assert run["loss_scale_changes"][0] == [1, 2.0**16]
    json.dumps(run, allow_nan=False)


@pytest.mark.parametrize("bad, message", [
    (dict(value=float("nan")), "value"),
    (dict(diverged=True), "a diverged run says why in divergence"),
    (dict(value=None), "a run that did not diverge has a number"),
    (dict(divergence="blew up"), "any other has divergence null"),
    (dict(seed="0"), "integers"),
    (dict(curve=[{"step": 1}]), "curve point lacks"),
])
def test_schema_errors_name_the_problem(tiny_tasks, bad, message):
    run = train(tiny_tasks["digits_mlp"], ablation("fp32"), seed=0)
    with pytest.raises(ValueError, match=message):
        results.check_run({**run, **bad})
    missing = dict(run)
    del missing["curve"]
    with pytest.raises(ValueError, match="lacks curve"):
        results.check_run(missing)
    with pytest.raises(ValueError, match="'runs' and 'studies'"):
        results.check_results({"runs": []})


def _exploding(t):
    return dataclasses.replace(t, hyperparameters=dict(t.hyperparameters, lr=1e9))


def test_a_diverging_run_is_recorded_not_raised(tiny_tasks):
    """Without a loss scale the first inf gradient reaches the weights; the run stops
    there and says so."""
    t = dataclasses.replace(_exploding(tiny_tasks["digits_mlp"]),
                            budgets={"quick": Budget(40, 5)})
    run = train(t, ablation("no_loss_scaling"), seed=0)
    results.check_run(run)
    assert run["diverged"] and run["value"] is None
    assert run["steps"] == run["diverged_at"] < 40
    assert run["curve"][-1]["step"] == run["diverged_at"]


def test_a_dynamic_scale_that_cannot_recover_is_diverged(tiny_tasks):
    t = dataclasses.replace(_exploding(tiny_tasks["digits_mlp"]),
                            budgets={"quick": Budget(200, 50)})
    run = train(t, ablation("mixed"), seed=0)
    assert run["diverged"]
    assert run["skipped_steps"] >= 25
    assert run["loss_scale_changes"][-1][1] < 2.0**16


def _spy(monkeypatch, fail_after=None):
    calls = []

    def spy(run, progress=None):
        if fail_after is not None and len(calls) == fail_after:
            raise RuntimeError("interrupted")
        calls.append((run.task.name, run.ablation.name, run.seed))
        return EXECUTE(run, progress)

    monkeypatch.setattr(local, "execute", spy)
    return calls


def test_runs_are_cached_and_an_interrupted_sweep_resumes(tiny_tasks, tmp_path, monkeypatch):
    s = Session(out=tmp_path, seeds=2, tasks=("digits_mlp",), policies=("fp32", "mixed"))
    specs = s.specs()
    calls = _spy(monkeypatch, fail_after=3)
    with pytest.raises(RuntimeError, match="interrupted"):
        s.ensure(specs)
    assert len(calls) == 3
    assert sum(s.cached_run(spec) is not None for spec in specs) == 3
    calls = _spy(monkeypatch)
    records = s.runs(specs)
    assert calls == [specs[3]]  # only the run that was interrupted
    assert [(r["task"], r["policy"], r["seed"]) for r in records] == specs
    calls = _spy(monkeypatch)
    assert s.runs(specs) == records and calls == []


def test_a_damaged_or_foreign_cache_file_is_retrained(tiny_tasks, tmp_path, monkeypatch):
    s = Session(out=tmp_path, seeds=1, tasks=("digits_mlp",), policies=("fp32",))
    spec = s.specs()[0]
    s.ensure([spec])
    run = session.run_of(spec, "quick")
    path = s.cache.path("runs", run.config(), run.label)
    assert path.name.startswith("digits_mlp-fp32-seed0-")
    path.write_text(path.read_text()[:50])  # half a file
    assert s.cached_run(spec) is None
    calls = _spy(monkeypatch)
    s.ensure([spec])
    assert calls == [spec] and s.cached_run(spec) is not None


def test_the_cache_key_covers_the_configuration(tiny_tasks):
    spec = ("digits_mlp", "mixed", 0)
    base = session.run_of(spec, "quick").config()
    assert session.run_of(spec, "full").config() != base
    assert session.run_of(("digits_mlp", "mixed", 1), "quick").config() != base
    assert session.run_of(("digits_mlp", "no_master", 0), "quick").config() != base
    assert base["data"] == tasks.task("digits_mlp").data_digest()
    assert tasks.task("char_lstm").data_digest() != base["data"]


def test_the_cache_key_covers_the_data_and_the_code(monkeypatch):
    spec = ("char_lstm", "mixed", 0)
    base = session.run_of(spec, "quick").config()
    assert base["code"] == provenance.package_code() and len(base["code"]) == 16
    assert base["task_code"] != base["code"]  # the task's module, beside all of fpsim
    monkeypatch.setattr(tasks, "_corpus_digest", lambda: "another python")
    assert session.run_of(spec, "quick").config() != base
    monkeypatch.undo()
    monkeypatch.setattr(provenance, "package_code", lambda: "another fpsim")
    assert session.run_of(spec, "quick").config() != base


def test_a_study_edited_since_its_result_was_cached_is_computed_again(tmp_path, monkeypatch):
    source = tmp_path / "edited_study.py"
    source.write_text("NAME = 'edited_study'\n")
    module = types.ModuleType("fpsim.experiments.edited_study")
    module.__file__ = str(source)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    s = Session(out=tmp_path / "out", tasks=("digits_mlp",), policies=("fp32",))
    computed = []

    def compute():
        computed.append(len(computed))
        return {"value": len(computed)}

    assert s.cached("edited_study", {"n": 1}, compute) == {"value": 1}
    assert s.cached("edited_study", {"n": 1}, compute) == {"value": 1}  # cached
    source.write_text("NAME = 'edited_study'  # changed\n")
    assert s.cached("edited_study", {"n": 1}, compute) == {"value": 2}
    assert s.cached("edited_study", {"n": 2}, compute) == {"value": 3}
    assert computed == [0, 1, 2]


def test_shrunk_gradients_are_named_checked_and_flushed(tiny_tasks):
    a = ablation("no_loss_scaling@2^-12")
    assert a == shrunk(-12) and a.loss_scale == 2.0**-12 and a.policy == "mixed"
    assert session.run_of(("digits_mlp", a.name, 0), "quick").config()["loss_scale"] == 2.0**-12
    for bad in ("no_loss_scaling@2^0", "no_loss_scaling@2^3", "no_loss_scaling@2^-03",
                "no_loss_scaling@2^-x", "mixed@2^-4"):
        with pytest.raises(ValueError, match="unknown policy"):
            ablation(bad)
    for bad in (0, 2, -1.5):
        with pytest.raises(ValueError, match="negative integer"):
            shrunk(bad)
    t = tiny_tasks["digits_mlp"]
    flushed = [train(t, ablation(name), seed=0)["curve"][-1]["flushed"]
               for name in ("no_loss_scaling", "no_loss_scaling@2^-16", "no_loss_scaling@2^-40")]
    assert flushed[0] < flushed[1] < flushed[2] == 1.0  # 2^-40: below every fp16 number
    # Every gradient flushed: the weights do not move; at 2^-1 (all normal) they do.
    for exponent, moves in ((-40, False), (-1, True)):
        model, optimizer = t.build(0)
        a = shrunk(exponent)
        trainer = Trainer(model, optimizer, a.precision(), loss_scale=a.loss_scale)
        before = [w.data.copy() for w in model.parameters()]
        batch = next(t.batches(0))
        trainer.step(lambda batch=batch, model=model: t.loss(model, batch))
        changed = [not np.array_equal(b, w.data)
                   for b, w in zip(before, model.parameters(), strict=True)]
        assert all(changed) if moves else not any(changed)


def test_parallel_workers_fill_the_same_cache(tmp_path):
    """Two processes (which see the real tasks): the smallest real runs."""
    s = Session(out=tmp_path, seeds=2, tasks=("digits_mlp",), policies=("fp32",), jobs=2)
    s.ensure(s.specs())
    runs = [s.cached_run(spec) for spec in s.specs()]
    assert all(r is not None and not r["diverged"] for r in runs)
    assert runs[0]["value"] > 80 and runs[0]["steps"] == tasks.TASKS["digits_mlp"].budgets[
        "quick"].steps


def test_an_interrupted_parallel_sweep_starts_no_queued_run(tmp_path, monkeypatch):
    s = Session(out=tmp_path, seeds=10, tasks=("digits_mlp",), policies=("fp32",), jobs=2)
    as_completed = local.futures.as_completed

    def interrupted_after_the_first(fs):
        yield next(as_completed(fs))
        raise KeyboardInterrupt

    monkeypatch.setattr(local.futures, "as_completed", interrupted_after_the_first)
    with pytest.raises(KeyboardInterrupt):
        s.ensure(s.specs())
    finished = sum(s.cached_run(spec) is not None for spec in s.specs())
    # The first, the two running beside it and at most one the pool had queued.
    assert 1 <= finished <= 4


def test_every_study_runs_in_miniature(tiny_tasks, tmp_path, monkeypatch):
    from fpsim.experiments import accumulation_error, gradient_scale

    monkeypatch.setattr(accumulation_error, "SIZES", (1, 2, 16, 2048, 4096))
    monkeypatch.setitem(accumulation_error.TRIALS, "quick", 3)
    s = Session(out=tmp_path, seeds=2)
    document = command.reproduce(s, list(command.STUDIES))
    saved = json.loads((tmp_path / "results.json").read_text())
    results.check_results(saved)
    assert saved == json.loads(json.dumps(document))
    assert set(saved["studies"]) == set(command.STUDIES)
    sweep = len(gradient_scale.EXPONENTS["quick"])
    assert len(saved["runs"]) == len(tasks.TASKS) * (len(ABLATIONS) + sweep) * 2
    markdown = (tmp_path / "results.md").read_text()
    for name in command.STUDIES:
        module = command.study(name)
        assert f"## {module.TITLE}" in markdown
        for f in saved["studies"][name]["figures"]:
            assert (tmp_path / f).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
            assert f"]({f})" in markdown
    table = saved["studies"]["final_metrics"]
    assert {(r["task"], r["policy"]) for r in table["rows"]} == {
        (t, p) for t in tasks.TASKS for p in ABLATIONS}
    # The tiny language model blows up without master weights: labelled, listed apart.
    assert "- char_lstm/no_master, seed 0: final training loss" in markdown
    assert {(d["task"], d["policy"]) for d in table["diverged"]} == {("char_lstm", "no_master")}
    hist = saved["studies"]["gradient_histograms"]["tasks"]["digits_mlp"]["weight"]
    assert sum(hist["counts"]) + hist["zeros"] == hist["total"] > 0
    assert hist["flushed"] == sorted(hist["flushed"], reverse=True)  # scaling only helps
    scaled = saved["studies"]["gradient_scale"]
    assert [r["exponent"] for r in scaled["rows"] if r["task"] == "digits_mlp"] == [0, -4, -8]
    assert set(scaled["mixed"]) == set(tasks.TASKS)
    assert all("verdict" in r and r["seeds"] == 2 for r in scaled["rows"])
    from fpsim.experiments import gradient_error

    errors = saved["studies"]["gradient_error"]["tasks"]
    for name, t in tasks.TASKS.items():
        rows = errors[name]["rows"]
        batch = t.hyperparameters["batch_size"]
        assert [(r["policy"], r["batch"]) for r in rows] == [
            (p, batch * m) for m in gradient_error.MULTIPLES["quick"]
            for p, _, _ in gradient_error.POLICIES]
        # Every policy rounds in fp16 somewhere: never the binary64 gradient exactly.
        assert all(0 < r["error"] < 1 and r["worst_error"] >= r["error"] * 0.999 for r in rows)
    # Studies reuse the cache: a second reproduction trains nothing.
    calls = _spy(monkeypatch)
    command.reproduce(s, ["final_metrics", "loss_scale"])
    assert calls == []


def test_a_gradient_snapshot_is_that_batch_gradient_alone(tiny_tasks, tmp_path, monkeypatch):
    """Gradients left over from the training step must not add into the snapshot."""
    from fpsim.experiments import gradient_histograms as study

    real_train = study.train

    def train_leaving_large_gradients(t, ab, seed, budget, on_step, device="cpu"):
        def look(step, trainer, report, batch):
            for p in trainer.model.parameters():
                p.grad = np.full(p.data.shape, 2.0**20)
            on_step(step, trainer, report, batch)

        return real_train(t, ab, seed, budget, on_step=look, device=device)

    monkeypatch.setattr(study, "train", train_leaving_large_gradients)
    weight = study._collect(Session(out=tmp_path), "digits_mlp")["weight"]
    assert weight["total"] > 0
    assert weight["counts"][-1] == 0  # no value at 2^(HI - 1) or above


def test_every_study_copes_with_policies_it_does_not_use(tiny_tasks, tmp_path, monkeypatch):
    from fpsim.experiments import accumulation_error

    monkeypatch.setattr(accumulation_error, "SIZES", (1, 16))
    monkeypatch.setitem(accumulation_error.TRIALS, "quick", 2)
    s = Session(out=tmp_path, seeds=2, tasks=("digits_mlp",), policies=("fp32", "bf16"))
    command.reproduce(s, list(command.STUDIES))
    saved = json.loads((tmp_path / "results.json").read_text())
    assert set(saved["studies"]) == set(command.STUDIES)
    assert saved["studies"]["loss_scale"]["figures"] == []
    assert saved["studies"]["lost_updates"]["figures"] == []
    assert "No run with a dynamic loss scale" in (tmp_path / "results.md").read_text()


def test_gradient_error_takes_the_last_finite_weights_of_a_diverging_run(tiny_tasks, tmp_path,
                                                                         monkeypatch):
    from fpsim.experiments import gradient_error

    t = tasks.TASKS["digits_mlp"]
    blowing_up = dataclasses.replace(t, hyperparameters=dict(t.hyperparameters, lr=1e9))
    monkeypatch.setitem(tasks.TASKS, "digits_mlp", blowing_up)
    assert train(blowing_up, ablation("fp32"), 0)["diverged"]
    s = Session(out=tmp_path, seeds=1, tasks=("digits_mlp",), policies=("fp32",))
    command.reproduce(s, ["gradient_error"])
    rows = json.loads((tmp_path / "results.json").read_text())["studies"][
        "gradient_error"]["tasks"]["digits_mlp"]["rows"]
    assert len(rows) == len(gradient_error.POLICIES) * len(gradient_error.MULTIPLES["quick"])
    assert all(r["error"] is None or 0 <= r["error"] < math.inf for r in rows)
    assert gradient_error._relative_error([np.ones(2)], [np.zeros(2)]) is None
    assert gradient_error._relative_error([np.array([np.inf])], [np.ones(1)]) is None


def test_accumulation_errors_respect_the_deterministic_bounds(monkeypatch):
    from fpsim.experiments import accumulation_error as study

    for data in study.DATA:
        for n in (1, 2, 3, 100, 1000, 2047):
            errors = study._errors(data, n, trials=5, seed=1)
            b = study.bounds(n)
            assert errors["fp16 sequential"]["max"] <= b["fp16 sequential (deterministic)"]
            assert errors["fp16 pairwise"]["max"] <= b["fp16 pairwise (deterministic)"]
            assert errors["fp32 sequential"]["max"] <= b["fp32 sequential (deterministic)"]
    one = study._errors("normal (0, 1)", 1, trials=4, seed=0)
    assert one["fp32 sequential"]["max"] == 0  # a product of fp16 values is an fp32 value
    assert 0 < one["fp16 sequential"]["max"] <= 2.0**-11 / (1 + 2.0**-11)


def test_bound_formulas():
    from fpsim.experiments import accumulation_error as study

    u = 2.0**-11
    assert study.gamma(10, u) == 10 * u / (1 - 10 * u)
    assert study.gamma(2048, u) is None and study.bounds(2048)["fp16 sequential (deterministic)"] \
        is None
    lam = math.sqrt(2 * math.log(2 * 100 / 0.01)) / (1 - u)
    assert study.probabilistic(100, u) == pytest.approx(math.expm1(lam * math.sqrt(100) * u
                                                                   + 100 * u * u / (1 - u)))
    # The probabilistic bound is the smaller one for large n.
    assert study.probabilistic(2000, u) < study.gamma(1999, u)


@pytest.mark.parametrize("a, b, higher, verdict", [
    (dict(mean=90.0, spread=0.5), dict(mean=97.0, spread=0.4), True, "worse"),
    (dict(mean=97.2, spread=0.5), dict(mean=97.0, spread=0.4), True, "within noise"),
    (dict(mean=3.5, spread=0.01), dict(mean=3.2, spread=0.02), False, "worse"),
    (dict(mean=3.0, spread=0.01), dict(mean=3.2, spread=0.02), False, "better"),
    (dict(mean=3.0, spread=None, seeds=1), dict(mean=3.2, spread=0.02), False,
     "undecided: 1 seed, the spread rule needs 3"),
    (dict(mean=3.0, spread=0.01, seeds=2), dict(mean=3.2, spread=0.02), False,
     "undecided: 2 seeds, the spread rule needs 3"),
])
def test_compare_in_units_of_seed_spread(a, b, higher, verdict):
    def summary(d, diverged=0):
        return dict(dict(seeds=3), diverged=diverged, min=d["mean"], max=d["mean"], **d)

    assert results.compare(summary(a), summary(b), higher)["verdict"] == verdict
    diverged = summary(dict(mean=None, spread=None), diverged=3)
    assert results.compare(diverged, summary(b), higher)["verdict"] == "diverged in 3 of 3"


def test_diverged_runs_are_the_verdict_whatever_the_rest():
    """The full run's language model without master weights, as the old rule saw it: two
    runs stopped, one finished (at 7726 bits per character, now labelled too)."""
    mixed = dict(seeds=3, diverged=0, mean=3.07, spread=0.018, min=3.05, max=3.09)
    blown = dict(seeds=3, diverged=2, mean=7726.2, spread=None, min=7726.2, max=7726.2)
    assert results.compare(blown, mixed, False)["verdict"] == "diverged in 2 of 3"
    lucky = dict(blown, mean=3.06, min=3.06, max=3.06)
    assert results.compare(lucky, mixed, False)["verdict"] == "diverged in 2 of 3"


def test_a_diverged_run_is_never_left_out_of_a_verdict():
    mixed = dict(seeds=3, diverged=0, mean=3.07, spread=0.018, min=3.05, max=3.09)
    one = dict(seeds=4, diverged=1, mean=2.90, spread=0.01, min=2.89, max=2.91)
    assert results.compare(one, mixed, False)["verdict"] == (
        "diverged in 1 of 4; the other 3: better")
    close = dict(one, mean=3.07, min=3.06, max=3.08)
    assert results.compare(close, mixed, False)["verdict"] == (
        "diverged in 1 of 4; the other 3: within noise")
    assert results.compare(mixed, close, False)["verdict"] == (
        "within noise (reference: diverged in 1 of 4)")
    assert results.compare(mixed, mixed, False)["verdict"] == "within noise"
    assert results.compare(dict(close, seeds=3), mixed, False)["verdict"] == "diverged in 1 of 3"


@pytest.mark.parametrize("document", [{"runs": [], "fpsim": "0.1"}, {"studies": {}, "x": 1},
                                      [], {"runs": []}])
def test_a_results_document_without_runs_and_studies_is_refused(document):
    with pytest.raises(ValueError, match="'runs' and 'studies'"):
        results.check_results(document)


def test_summary_counts_diverged_runs_apart():
    runs = [dict(task="t", policy="p", seed=i, value=v, diverged=v is None)
            for i, v in enumerate([1.0, 2.0, None, 3.0])]
    s = results.summary(runs, "t", "p")
    assert (s["seeds"], s["diverged"], s["mean"], s["min"], s["max"]) == (4, 1, 2.0, 1.0, 3.0)
    assert s["spread"] == pytest.approx(np.std([1.0, 2.0, 3.0], ddof=1))


def test_command_line_rejects_bad_arguments(capsys, tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    for argv in (["--only", "nonsense"], ["--seeds", "0"], ["--jobs", "0"],
                 ["--tasks", "imagenet"], ["--quick", "--full"], ["--out", str(a_file)]):
        with pytest.raises(SystemExit) as exc:
            command.main(argv)
        assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "nonsense" in err and "seeds must be at least 1" in err and "imagenet" in err
    assert f"{str(a_file)!r} exists and is not a folder" in err


def test_unknown_names_are_errors():
    with pytest.raises(ValueError, match="unknown task 'x'; known tasks: digits_mlp"):
        tasks.task("x")
    with pytest.raises(ValueError, match="unknown policy 'y'"):
        ablation("y")
    with pytest.raises(ValueError, match="unknown study 'z'"):
        command.study("z")
    with pytest.raises(ValueError, match="unknown budget 'medium'"):
        tasks.task("digits_mlp").budget("medium")


def test_an_interrupted_command_says_how_to_continue(tmp_path, monkeypatch, capsys):
    def interrupted(session, names):
        raise KeyboardInterrupt

    monkeypatch.setattr(command, "reproduce", interrupted)
    assert command.main(["--out", str(tmp_path), "--jobs", "1"]) == 130
    assert "run the same command again to continue" in capsys.readouterr().err


def test_the_command_computes_on_one_thread_and_leaves_the_process_as_it_was(tmp_path,
                                                                            monkeypatch):
    import numba
    from threadpoolctl import threadpool_info

    seen = {}

    def record(session, names):
        seen["numba"] = numba.get_num_threads()
        seen["blas"] = {p["num_threads"] for p in threadpool_info()}

    numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
    environ = dict(os.environ)
    monkeypatch.setattr(command, "reproduce", record)
    assert command.main(["--out", str(tmp_path), "--jobs", "1"]) == 0
    assert seen["numba"] == 1 and seen["blas"] <= {1}
    assert numba.get_num_threads() == numba.config.NUMBA_NUM_THREADS
    assert dict(os.environ) == environ
    # Numba rereads the environment at each compilation and refuses a changed thread count.
    assert numba.njit(lambda v: v + 1)(1) == 2


def test_final_metrics_figure_holds_its_error_bars_and_marks_diverged_runs(tmp_path,
                                                                          monkeypatch):
    """The full run's digits_mlp panel (bf16's bar ± 0.384 ran off the axis), a language
    model panel with every no_master run diverged, and a panel with a run 100 times the
    others that did not diverge (a log axis)."""
    from fpsim.experiments import final_metrics as study
    from fpsim.reproduce.figures import pyplot

    def row(t, p, mean, spread, diverged=0, seeds=3):
        return dict(task=t, policy=p, seeds=seeds, diverged=diverged, mean=mean,
                    spread=spread, min=mean, max=mean)

    rows = [row("digits_mlp", p, m, s) for p, m, s in (
        ("fp32", 97.118, 0.222), ("no_master", 97.191, 0.339), ("bf16", 97.118, 0.384))]
    rows += [row("char_lstm", "mixed", 3.072, 0.018),
             row("char_lstm", "no_master", None, None, diverged=3),
             row("char_lstm", "bf16", 3.071, 0.016)]
    rows += [row("user", "mixed", 40.3, 0.2, seeds=2), row("user", "no_master", 145.0, None,
                                                          diverged=1, seeds=2),
             row("user", "bf16", 4000.0, 300.0, seeds=2)]
    result = dict(metrics={"digits_mlp": "accuracy", "char_lstm": "bits", "user": "loss"},
                  rows=rows)
    figures = []
    monkeypatch.setattr(study, "save", lambda fig, out, name: figures.append(fig) or name)
    assert study.figures(result, tmp_path) == ["final_metrics.png"]
    axes = {ax.get_ylabel(): ax for ax in figures[0].axes}
    for name, ax in (("digits_mlp", axes["accuracy"]), ("char_lstm", axes["bits"]),
                     ("user", axes["loss"])):
        lo, hi = ax.get_ylim()
        for r in (r for r in rows if r["task"] == name and r["mean"] is not None):
            assert lo < r["mean"] - (r["spread"] or 0) and r["mean"] + (r["spread"] or 0) < hi
        marks = sorted(t.get_text() for t in ax.texts)
        assert marks == {"digits_mlp": [], "char_lstm": ["diverged 3/3"],
                         "user": ["diverged 1/2"]}[name]
    assert [axes[k].get_yscale() for k in ("accuracy", "bits", "loss")] == [
        "linear", "linear", "log"]
    pyplot().close(figures[0])


def test_final_metrics_lists_the_diverged_runs_apart():
    from fpsim.experiments import final_metrics as study

    result = dict(metrics={"char_lstm": "bits"}, verdicts=[], noise_factor=3.0, min_seeds=3,
                  loss_growth=10.0, chance_factor=2.0,
                  rows=[dict(task="char_lstm", policy="no_master", seeds=2, diverged=2,
                             mean=None, spread=None, min=None, max=None)],
                  diverged=[dict(task="char_lstm", policy="no_master", seed=0, value=7952.251,
                                 why="final metric 7952.3 is worse than 2 times chance (6.6865)"),
                            dict(task="char_lstm", policy="no_master", seed=1, value=None,
                                 why="the weights are not finite")])
    text = study.markdown(result, ["final_metrics.png"])
    assert "| no_master | 2 of 2 diverged |" in text
    assert text.endswith(
        "Diverged runs (left out of every mean and spread above):\n\n"
        "- char_lstm/no_master, seed 0: final metric 7952.3 is worse than 2 times chance "
        "(6.6865); final metric 7952.25\n"
        "- char_lstm/no_master, seed 1: the weights are not finite")
    assert "more than 10 times its first" in text and "fewer than 3 such runs" in text


def test_the_fp8_group_runs_in_miniature(tiny_tasks, tmp_path, monkeypatch):
    """The FP8 and FP4 recipes' studies (behind --only fp8), on a few of their policies."""
    from fpsim.experiments import fp8_recipes, fp8_telemetry

    assert "fp8" not in command.STUDIES and command.expand(["fp8", "loss_scale"]) == [
        "fp8_recipes", "fp8_telemetry", "loss_scale"]
    assert command.parser().parse_args(["--only", "fp8"]).only == ["fp8"]
    monkeypatch.setattr(fp8_recipes, "RECIPES", ("fp8_hybrid_delayed", "fp8_hybrid_current",
                                                 "nvfp4"))
    monkeypatch.setattr(fp8_recipes, "PIECES", ("nvfp4_no_rht",))
    monkeypatch.setattr(fp8_telemetry, "RECIPES", ("fp8_hybrid_delayed", "nvfp4"))
    s = Session(out=tmp_path, seeds=1, tasks=("digits_mlp",), policies=("fp32", "mixed"))
    command.reproduce(s, command.expand(["fp8"]))
    saved = json.loads((tmp_path / "results.json").read_text())
    results.check_results(saved)
    study = saved["studies"]["fp8_recipes"]
    assert [r["policy"] for r in study["rows"]] == [
        "fp32", "mixed", "fp8_hybrid_delayed", "fp8_hybrid_current", "nvfp4", "nvfp4_no_rht"]
    assert {(v["policy"], v["baseline"]) for v in study["verdicts"]} >= {
        ("nvfp4", "fp32"), ("nvfp4", "mixed"), ("nvfp4_no_rht", "nvfp4"),
        ("fp8_hybrid_delayed", "fp8_hybrid_current")}
    assert all(v["verdict"].startswith("undecided: 1 seed") for v in study["verdicts"])
    runs = {(r["policy"], r["seed"]): r for r in saved["runs"]}
    telemetry = saved["studies"]["fp8_telemetry"]["tasks"]["digits_mlp"]
    for p in ("fp8_hybrid_delayed", "nvfp4"):
        # The monitored run is the study's seed-0 run, bit for bit: watching changes nothing.
        assert telemetry[p]["value"] == runs[(p, 0)]["value"]
        act = telemetry[p]["tensors"]["layers.0.weight/act"]
        assert act["steps"] == 6 and act["step"] == list(range(1, 7))
        assert all(0 <= v <= 1 for v in act["saturated"] + act["flushed"])
    # nvfp4 keeps the last layer in bf16: no quantization of it.
    assert not any(k.startswith("layers.2") for k in telemetry["nvfp4"]["tensors"])
    delayed = telemetry["fp8_hybrid_delayed"]["tensors"]["layers.2.weight/grad"]
    assert delayed["scale"][0] == 1.0  # delayed scales start at 1
    markdown = (tmp_path / "results.md").read_text()
    for name in ("fp8_recipes", "fp8_telemetry"):
        assert f"## {command.study(name).TITLE}" in markdown
        for f in saved["studies"][name]["figures"]:
            assert (tmp_path / f).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_telemetry_study_says_when_no_task_of_the_session_is_monitored():
    from fpsim.experiments import fp8_telemetry

    text = fp8_telemetry.markdown({"tasks": {}}, [])
    assert text.startswith("Not run") and "quick: digits_mlp;" in text
