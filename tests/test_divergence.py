"""The divergence rule and the verdicts: planted blow-ups (an exploded metric, a
non-finite loss, a loss far above its start, a metric worse than chance) are labelled
diverged from the run itself, counted apart from the spread of the others, and no
verdict calls them noise; fewer than 3 seeds leave the spread rule undecided."""

from __future__ import annotations

import functools
import io
import math
from pathlib import Path

import numpy as np
import pytest

from fpsim import nn, no_grad, optim
from fpsim.autograd.tensor import Tensor
from fpsim.nn import functional as F
from fpsim.reproduce import tasks as reproduce_tasks
from fpsim.sweep import Ablation, Setup, Task, ablation, check_run, compare, summary, sweep
from fpsim.sweep.divergence import CHANCE_FACTOR, LOSS_GROWTH, divergence, worse_than_chance
from fpsim.sweep.statistics import MIN_SEEDS, NOISE_FACTOR, comparison_cells, summary_text
from fpsim.sweep.train import train

CHANCE_BITS = math.log2(103)  # uniform guessing over 103 characters


# -- the rule on numbers ------------------------------------------------------------------

def test_the_constants_are_those_the_docs_state():
    assert (LOSS_GROWTH, CHANCE_FACTOR, MIN_SEEDS, NOISE_FACTOR) == (10.0, 2.0, 3, 3.0)
    root = Path(__file__).resolve().parent.parent / "docs"
    for page in ("sweeps.md", "results.md"):
        text = " ".join((root / page).read_text().split())
        assert "more than 10 times its first" in text, page
        assert "worse than chance by more than a factor of 2" in text, page
        assert "the spread rule needs 3" in text, page


@pytest.mark.parametrize("final, start, value, chance, higher, why", [
    (None, 4.7, 3.1, None, False, "final training loss is not finite"),
    (47.01, 4.7, 3.1, None, False, "more than 10 times its first, 4.7"),
    (2.1, 4.7, 7952.251, CHANCE_BITS, False, "final metric 7952.3 is worse than 2 times"),
    (0.4, 2.3, 4.99, 10.0, True, "final metric 4.99 is worse than 1/2 of chance (10)"),
])
def test_each_rule_fires_on_its_blow_up(final, start, value, chance, higher, why):
    assert why in divergence(final, start, value, chance, higher)


@pytest.mark.parametrize("final, start, value, chance, higher", [
    (47.0, 4.7, 3.1, CHANCE_BITS, False),     # exactly 10 times the first: not more
    (2.1, 4.7, 2 * CHANCE_BITS, CHANCE_BITS, False),  # exactly twice chance: not worse
    (4.70, 4.62, 6.79, CHANCE_BITS, False),   # untrained, a little worse than chance
    (2.2, 2.3, 9.8, 10.0, True),              # a collapsed classifier, at chance
    (5000.0, None, 3.1, None, False),         # no finite first loss: no growth rule
    (5000.0, -1.0, 3.1, None, False),         # a negative first loss: no growth rule
    (2.1, 4.7, 7952.0, None, False),          # no chance level: no chance rule
])
def test_what_is_not_a_blow_up(final, start, value, chance, higher):
    assert divergence(final, start, value, chance, higher) is None


def test_the_rule_refuses_bad_numbers():
    with pytest.raises(ValueError, match="final_loss must be a real number"):
        divergence("1", 1.0, 1.0, None, True)
    with pytest.raises(ValueError, match="start_loss must be a finite number"):
        divergence(1.0, math.nan, 1.0, None, True)
    with pytest.raises(ValueError, match="chance must be a positive finite number"):
        divergence(1.0, 1.0, 1.0, 0.0, True)
    with pytest.raises(ValueError, match="higher_is_better must be True or False"):
        divergence(1.0, 1.0, 1.0, 1.0, "yes")
    with pytest.raises(ValueError, match="the metric must be a finite number"):
        worse_than_chance(math.inf, 1.0, True)


def test_a_task_refuses_a_chance_that_is_not_positive():
    for bad in (0, -1.0, math.nan, "10"):
        with pytest.raises(ValueError, match="task 't': chance must be"):
            Task("t", build_planted, steps=3, eval_every=3, chance=bad)
    with pytest.raises(ValueError, match="may not use the key"):
        Task("t", build_planted, steps=3, eval_every=3, config=dict(chance=1))


def test_the_built_in_tasks_know_their_chance_level():
    assert reproduce_tasks.task("digits_mlp").for_sweep("quick").chance == 10.0
    lm = reproduce_tasks.task("char_lstm")
    assert lm.for_sweep("quick").chance == math.log2(reproduce_tasks._corpus().vocab_size)


# -- planted blow-ups in training -----------------------------------------------------------

X = np.array([[1.0, 2.0], [0.5, -1.0], [2.0, 0.25], [-1.5, 1.0]], np.float32)
Y = np.array([[1.0], [0.0], [-1.0], [0.5]], np.float32)


def build_planted(seed: int, plant: str = "", steps: int = 10, blown: tuple = (1,),
                  higher: bool = False) -> Setup:
    """A linear model on four points; ``plant`` blows up the last steps' loss by a factor
    (``loss``) or to inf (``nonfinite``), or the final metric of the ``blown`` seeds under
    fp16 weights (``metric``). The loss of the other steps, and the metric otherwise, are
    those of an ordinary run."""
    nn.manual_seed(seed)
    model = nn.Linear(2, 1)
    factor = {"loss": 1000.0, "nonfinite": math.inf}.get(plant, 1.0)
    stream = [(k, factor if k > steps - 5 else 1.0) for k in range(1, steps + 1)]

    def loss(model, batch):
        _, times = batch
        return F.mse_loss(model(Tensor(X)), Y) * times

    def evaluate(model, policy):
        with policy, no_grad():
            error = float(np.mean((np.asarray(model(X).data, np.float64) - Y) ** 2))
        if plant == "metric" and seed in blown and policy.params.name == "fp16":
            return 4.0 if higher else 7952.251
        return (90.0 + seed if higher else 3.0 + 0.01 * seed) + 1e-6 * error

    return Setup(model, optim.SGD(model.parameters(), lr=1e-4), stream, loss, evaluate)


def planted(plant: str = "", steps: int = 10, **kwargs) -> Task:
    higher = kwargs.get("higher", False)
    return Task(f"planted_{plant or 'none'}", functools.partial(
        build_planted, plant=plant, steps=steps, **kwargs), steps=steps, eval_every=5,
        higher_is_better=higher, chance=10.0 if higher else CHANCE_BITS,
        config=dict(plant=plant, **{k: list(v) if isinstance(v, tuple) else v
                                    for k, v in kwargs.items()}))


def test_an_ordinary_run_is_not_diverged():
    record = train(planted(), ablation("fp32"), seed=0)
    check_run(record)
    assert not record["diverged"] and record["divergence"] is None
    assert record["diverged_at"] is None and record["chance"] == CHANCE_BITS
    model = build_planted(0).model  # untrained: step 1's loss is its loss
    first = np.mean((np.asarray(model(X).data, np.float64) - Y) ** 2)
    assert record["start_loss"] == pytest.approx(first, rel=1e-6)


def test_a_loss_far_above_its_start_is_diverged_and_keeps_its_metric():
    record = train(planted("loss"), ablation("fp32"), seed=0)
    check_run(record)
    assert record["diverged"] and record["steps"] == record["diverged_at"] == 10
    assert "more than 10 times its first" in record["divergence"]
    assert record["curve"][-1]["loss"] > LOSS_GROWTH * record["start_loss"] > 0
    assert record["value"] == record["curve"][-1]["metric"] is not None


def test_a_final_loss_that_is_not_finite_is_diverged():
    """Under a dynamic loss scale the inf steps are skipped: the weights stay finite and
    the run trains to its end, 5 non-finite steps being fewer than the 25 that stop it."""
    record = train(planted("nonfinite"), ablation("mixed"), seed=0)
    check_run(record)
    assert record["skipped_at"][-5:] == [6, 7, 8, 9, 10] and record["steps"] == 10
    assert record["diverged"] and record["divergence"] == "final training loss is not finite"
    assert record["curve"][-1]["loss"] is None and record["value"] is not None


@pytest.mark.parametrize("higher", [False, True])
def test_a_metric_worse_than_chance_is_diverged(higher):
    task = planted("metric", higher=higher)
    fine = train(task, ablation("mixed"), seed=1)
    blown = train(task, ablation("no_master"), seed=1)
    assert not fine["diverged"]
    assert blown["diverged"] and "worse than" in blown["divergence"]
    assert blown["value"] == (4.0 if higher else 7952.251)
    check_run(blown)


def test_a_diverged_record_must_say_why():
    record = train(planted("loss"), ablation("fp32"), seed=0)
    for bad, message in ((dict(divergence=None), "says why"), (dict(divergence=""), "says why"),
                         (dict(diverged=False), "says why"), (dict(start_loss=math.inf),
                                                               "start_loss"),
                         (dict(diverged=False, divergence=None, value=None), "did not diverge")):
        with pytest.raises(ValueError, match=message):
            check_run({**record, **bad})


# -- summaries and verdicts -------------------------------------------------------------------

def records(values: dict[str, list[float | None]], diverged: dict[str, list[int]]) -> list:
    """Run records by hand: a value per seed; the seeds in ``diverged`` blew up (their
    value, exploded, is kept as a finished run labelled diverged keeps it)."""
    out = []
    for policy, vs in values.items():
        for seed, v in enumerate(vs):
            blown = seed in diverged.get(policy, [])
            out.append(dict(task="t", policy=policy, seed=seed, metric="m", value=v,
                            diverged=blown, divergence="planted" if blown else None,
                            steps=1, curve=[]))
    for r in out:
        check_run(r)
    return out


def verdict(runs: list, higher: bool = False) -> tuple[str, str]:
    a, b = summary(runs, "t", "no_master"), summary(runs, "t", "mixed")
    return summary_text(a), compare(a, b, higher)["verdict"]


def test_the_users_sweep_one_exploded_seed_of_two():
    """The issue's sweep: no_master at 388868 and 145 against mixed's 40.3, printed as
    194506.711 ± 274868.726, "within noise"."""
    runs = records(dict(mixed=[40.2, 40.4], no_master=[388868.0, 145.0]), dict(no_master=[0]))
    assert verdict(runs) == ("1 of 2 diverged; the other: 145.000", "diverged in 1 of 2")
    a, b = summary(runs, "t", "no_master"), summary(runs, "t", "mixed")
    assert comparison_cells(compare(a, b, False)) == ["+104.7000", "", "diverged in 1 of 2"]


def test_one_exploded_seed_among_fine_ones_is_not_noise():
    fine = [3.07, 3.09, 3.05, 3.08]
    runs = records(dict(mixed=fine, no_master=[3.06, 7952.251, 3.08, 3.07]),
                   dict(no_master=[1]))
    text, said = verdict(runs)
    assert text == "1 of 4 diverged; the other 3: 3.070 ± 0.010"
    assert said == "diverged in 1 of 4; the other 3: within noise"
    row = summary(runs, "t", "no_master")
    assert (row["mean"], row["max"]) == (pytest.approx(3.07), 3.08)  # 7952 left out
    runs = records(dict(mixed=fine, no_master=[3.56, 7952.251, 3.58, 3.57]),
                   dict(no_master=[1]))
    assert verdict(runs)[1] == "diverged in 1 of 4; the other 3: worse"
    runs = records(dict(mixed=fine[:3], no_master=[3.06, 7952.251, 3.08]), dict(no_master=[1]))
    assert verdict(runs)[1] == "diverged in 1 of 3"  # 2 left: the spread rule cannot judge


def test_every_run_diverged():
    runs = records(dict(mixed=[3.07, 3.09, 3.05], no_master=[None, None, 7726.213]),
                   dict(no_master=[0, 1, 2]))
    assert verdict(runs) == ("3 of 3 diverged", "diverged in 3 of 3")
    assert compare(summary(runs, "t", "no_master"), summary(runs, "t", "mixed"),
                   False)["worse_by"] is None


def test_two_seeds_are_undecided_three_decide():
    two = records(dict(mixed=[3.07, 3.09], no_master=[3.57, 3.58]), {})
    assert verdict(two)[1] == "undecided: 2 seeds, the spread rule needs 3"
    three = records(dict(mixed=[3.07, 3.09, 3.05], no_master=[3.57, 3.58, 3.59]), {})
    assert verdict(three)[1] == "worse"
    same = records(dict(mixed=[3.07, 3.09, 3.05], no_master=[3.08, 3.06, 3.07]), {})
    assert verdict(same)[1] == "within noise"
    one = records(dict(mixed=[3.07], no_master=[3.08]), {})
    assert verdict(one)[1] == "undecided: 1 seed, the spread rule needs 3"


def test_a_diverged_reference_is_named():
    runs = records(dict(mixed=[3.07, 7952.0, 3.05, 3.06], no_master=[3.08, 3.06, 3.07]),
                   dict(mixed=[1]))
    assert verdict(runs)[1] == "within noise (reference: diverged in 1 of 4)"
    runs = records(dict(mixed=[3.07, 7952.0, 3.05], no_master=[3.08, 3.06, 3.07]),
                   dict(mixed=[1]))
    assert verdict(runs)[1] == ("undecided: 2 seeds that did not diverge, the spread rule "
                                "needs 3 (reference: diverged in 1 of 3)")


# -- a sweep end to end -----------------------------------------------------------------------

def test_a_sweep_reports_the_planted_blow_up(tmp_path):
    no_master = Ablation("no_master", "mixed,params=fp16", "dynamic")
    for seeds, said in ((2, "diverged in 1 of 2"),
                        (4, "diverged in 1 of 4; the other 3: within noise")):
        result = sweep([planted("metric", steps=5)], ["mixed", no_master], seeds=seeds,
                       cache=tmp_path, jobs=1, stream=io.StringIO())
        assert [v["verdict"] for v in result.verdicts] == [said]
        blown = [r for r in result.records if r["diverged"]]
        assert [(r["policy"], r["seed"], r["value"]) for r in blown] == [
            ("no_master", 1, 7952.251)]
        assert "| planted_metric | no_master | 1 of " in result.markdown()
        assert "7952" not in result.markdown()  # counted apart, never in a mean
