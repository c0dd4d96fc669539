"""``fpsim compare --suite training`` (issue 29, item 6): per-step metrics and the walk over
two autograd graphs on planted differences (NumPy), the whole suite under Numba's CUDA
simulator with the CuPy stand-in (tests/compare_training_sim.py, a subprocess), the
missing-GPU error, and a ``gpu``-marked run on a real GPU."""

import functools
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import fpsim
from fpsim.compare import training as T
from fpsim.compare.gpu import NoGPU
from fpsim.compare.training import training_markdown
from fpsim.nn import functional as F

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def _next32(x, n=1):
    """x moved n binary32 values up (an independent ulp: NumPy's nextafter)."""
    x = np.float32(x)
    for _ in range(n):
        x = np.nextafter(x, np.float32(np.inf))
    return float(x)


# -- classification --------------------------------------------------------------------

@pytest.mark.parametrize("op, phase, summed, kind", [
    ("matmul", "forward", False, T.PRODUCT), ("conv2d", "backward", False, T.PRODUCT),
    ("sum", "forward", False, T.REDUCTION), ("softmax", "forward", False, T.REDUCTION),
    ("cross_entropy", "forward", False, T.REDUCTION), ("batch_norm", "forward", False,
                                                        T.REDUCTION),
    ("exp", "forward", False, T.TRANSCENDENTAL), ("tanh", "forward", False, T.TRANSCENDENTAL),
    ("log", "forward", False, T.TRANSCENDENTAL), ("sigmoid", "forward", False,
                                                  T.TRANSCENDENTAL),
    ("add", "forward", False, T.ELEMENTWISE), ("relu", "forward", False, T.ELEMENTWISE),
    ("cast", "forward", False, T.ELEMENTWISE),
    ("add", "backward", True, T.REDUCTION), ("add", "backward", False, T.ELEMENTWISE),
    ("softmax", "backward", False, T.REDUCTION), ("mse_loss", "backward", False, T.ELEMENTWISE),
    ("sum", "backward", False, T.ELEMENTWISE), ("anything", "update", False, T.ELEMENTWISE),
])
def test_classify(op, phase, summed, kind):
    assert T.classify(op, phase, summed) == kind


def test_classify_refuses_an_unknown_phase():
    with pytest.raises(ValueError, match="unknown phase 'sideways'"):
        T.classify("add", "sideways")


# -- per-step metrics ------------------------------------------------------------------

def test_compare_step_counts_planted_differences():
    rng = np.random.default_rng(1)
    a = [rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal(5).astype(np.float32)]
    b = [x.astype(np.float64) for x in a]
    b[0][1, 2] = _next32(a[0][1, 2], 3)  # 3 ulp
    b[1][4] = _next32(a[1][4], 1)  # 1 ulp
    c = T.compare_step(4, a, b, "fp32", (0.5, 0.75), (1024.0, 512.0))
    assert c.step == 4 and c.identical == 15 / 17
    assert c.max_ulp == 3.0 and c.median_ulp == 0.0
    assert c.loss_difference == 0.25 and c.losses_part and c.weights_part
    assert (c.scale_native, c.scale_emulated) == (1024.0, 512.0)
    same = T.compare_step(1, a, [x.astype(np.float64) for x in a], "fp32", (0.5, 0.5))
    assert same.identical == 1.0 and not same.weights_part and not same.losses_part
    # -0 against +0 is a difference of bits (0 ulp); two NaN losses are alike.
    z = T.compare_step(1, [np.float32([0.0])], [np.array([-0.0])], "fp32",
                       (float("nan"), float("nan")))
    assert z.identical == 0.0 and z.max_ulp == 0.0 and not z.losses_part


def test_compare_step_refuses_mismatched_runs():
    with pytest.raises(ValueError, match="parameter shapes differ"):
        T.compare_step(1, [np.zeros(2, np.float32)], [np.zeros(3)], "fp32", (0, 0))
    with pytest.raises(ValueError, match="the runs have 1 and 2 parameters"):
        T.compare_step(1, [np.zeros(2)], [np.zeros(2), np.zeros(2)], "fp32", (0, 0))
    with pytest.raises(ValueError, match="the runs have 0 and 0"):
        T.compare_step(1, [], [], "fp32", (0, 0))
    with pytest.raises(ValueError, match="empty"):
        T.compare_step(1, [np.zeros(0)], [np.zeros(0)], "fp32", (0, 0))
    with pytest.raises(ValueError, match="not representable in fp16"):
        T.compare_step(1, [np.array([0.1])], [np.array([0.1])], "fp16", (0, 0))


def _steps(shares, losses):
    return tuple(T.StepComparison(i + 1, s, 0.0 if s == 1 else 2.0, 0.0, 1.0, loss, 8.0, 8.0)
                 for i, (s, loss) in enumerate(zip(shares, losses, strict=True)))


def test_first_part_and_the_verdict():
    steps = _steps([1.0, 1.0, 0.75, 0.5], [1.0, 1.5, 1.0, 1.0])
    assert T.first_part(steps) == 3 and T.first_part(steps, "losses") == 2
    assert T.first_part(steps[:2]) is None and T.first_part(steps[:1], "losses") is None
    with pytest.raises(ValueError, match="'weights' or 'losses'"):
        T.first_part(steps, "grads")
    run = T.TrainingRun("m", "a model", True, "native_fp16", "mixed,model=H100", steps)
    assert run.verdict == ("weights part at step 3, losses part at step 2; after step 4: "
                           "50.00% identical, max 2 ulp")
    assert T.TrainingRun("m", "", True, "n", "e", steps[:1]).verdict == "identical over 1 step"
    assert T.TrainingRun("m", "", True, "n", "e", _steps([1.0, 1.0], [1.0, 2.0])).verdict == \
        "weights identical over 2 steps, losses part at step 2"


def test_a_run_as_records_tables_and_json():
    steps = _steps([1.0, 0.5], [1.0, 1.25])
    final = fpsim.compare.compare_bits(np.array([1, 2]), np.array([1, 3]), "fp32")
    source = T.Source("backward", "matmul", T.PRODUCT, (2, 3), 4, 7.0, "a note", 2)
    run = T.TrainingRun("tiny", "a tiny model", False, "native_fp16", "mixed,model=H100",
                        steps, (source,), (2,), final)
    record = run.record()
    assert record.name == "training tiny" and record.verdict == "differs: 1 of 2, max 1 ulp"
    doc = run.as_dict()
    assert doc["first_weights_part"] == 2 and doc["first_loss_part"] == 2
    assert doc["sources"][0] == dict(phase="backward", op="matmul", kind=T.PRODUCT,
                                     shape=[2, 3], differ=4, max_ulp=7.0, note="a note",
                                     step=2)
    assert doc["replayed"] == [2]
    assert doc["steps"][1]["loss_difference"] == 0.25
    json.dumps(doc, allow_nan=False)
    text = training_markdown([run])
    assert "| tiny | no | 2 | 2 | 2 | 50.00% | 2 | 0 | product: split-K or block model " \
           "(matmul, backward) |" in text
    assert ("Where the runs part at step 2 (replayed from its identical starting weights):"
            "\n\n- product: split-K or block model: matmul (backward, 4 of 6 differ, max 7 "
            "ulp); a note\n\nEach product, gradient summed over broadcast axes, tanh, exp "
            "and log of that step's native graph, run by the emulation on native's own "
            "inputs:\n\n- every one gives native's bits\n") in text
    assert "| 2 | 50.00% | 2 | 0 | 1 | 1.25 | 0.25 | 8 | 8 |" in text
    assert T.TrainingRun("x", "", True, "n", "e", steps).record().skipped == "no steps"


# -- the walk over two graphs, on planted differences ----------------------------------

def _graph(policy="mixed", x=None):
    """A small model's loss after backward: matmul, bias add, tanh, matmul, mse_loss."""
    x = np.arange(12.0).reshape(4, 3) / 8 if x is None else x
    w1 = fpsim.tensor(np.linspace(-1, 1, 6).reshape(3, 2), requires_grad=True)
    b1 = fpsim.tensor([0.25, -0.5], requires_grad=True)
    w2 = fpsim.tensor([[0.5], [-0.75]], requires_grad=True)
    with fpsim.precision.parse(policy):
        h = F.tanh(F.matmul(fpsim.tensor(x), w1) + b1)
        loss = F.mse_loss(F.matmul(h, w2), np.ones((x.shape[0], 1)))
        loss.backward(8.0)
    return loss


def _node(loss, op, k=0):
    return [t for t in loss.graph() if t.op == op][k]


def _plant(array, index, ulps=1):
    """A copy of ``array`` with element ``index`` moved ``ulps`` fp16 values up."""
    out = array.copy()
    bits = fpsim.to_bits(out[index], "fp16") + ulps
    out[index] = fpsim.from_bits(np.array(bits), "fp16")
    return out


def test_identical_graphs_have_no_source():
    assert T.walk(_graph(), _graph(), fpsim.hw.H100) == []


@pytest.mark.parametrize("op, kind", [("tanh", T.TRANSCENDENTAL), ("add", T.ELEMENTWISE),
                                      ("mse_loss", T.REDUCTION)])
def test_a_planted_forward_difference_is_found_and_named(op, kind):
    native, emulated = _graph(), _graph()
    node = _node(native, op)
    fmt = node.format.name
    index = (0,) * node.data.ndim
    if fmt == "fp16":
        node.data = _plant(node.data, index, 2)
    else:
        node.data = np.asarray(np.nextafter(np.float32(node.data), np.float32(9)), np.float64)
    sources = T.walk(native, emulated)
    assert [(s.phase, s.op, s.kind, s.differ) for s in sources] == [("forward", op, kind, 1)]
    assert sources[0].max_ulp == (2.0 if fmt == "fp16" else 1.0)


def test_a_planted_product_is_checked_against_the_block_model():
    policy = "mixed,model=H100"
    native, emulated = _graph(policy), _graph(policy)
    node = _node(native, "matmul")
    node.data = _plant(node.data, (1, 1), 5)
    (source,) = T.walk(native, emulated, fpsim.hw.H100)
    assert (source.phase, source.op, source.kind, source.differ, source.max_ulp) == \
        ("forward", "matmul", T.PRODUCT, 1, 5.0)
    # The 7 elements not planted are the block model's.
    assert source.note == "H100 block FMA in one pass: 87.50% identical (K = 3: too short " \
                          "to split)"


def test_a_planted_bias_gradient_is_a_reduction():
    native, emulated = _graph(), _graph()
    b1 = [t for t in native.graph() if t.op == "leaf" and t.shape == (2,)][0]
    cast = [t for t in native.graph() if t.op == "cast" and t._parents[0] is b1][0]
    cast.grad = _plant(cast.grad, (1,), 1)  # the sum over the batch the add's backward does
    b1.grad = cast.grad.copy()  # and what the cast passed on
    (source,) = T.walk(native, emulated)
    assert (source.phase, source.kind, source.shape) == ("backward", T.REDUCTION, (2,))
    assert source.op == "add (its gradient summed over broadcast axes)"


def test_a_planted_backward_product_is_named():
    policy = "mixed,model=H100"
    native, emulated = _graph(policy), _graph(policy)
    second = _node(native, "matmul", 1)  # h @ w2: its backward sends h its gradient
    tanh = _node(native, "tanh")
    real = second._backward

    def perturbed(g):
        gh, gw = real(g)
        gh = (_plant(np.asarray(gh[0]), (0, 0), 1), gh[1])
        return gh, gw

    second._backward = perturbed
    tanh.grad = _plant(tanh.grad, (0, 0), 1)
    (source,) = T.walk(native, emulated, fpsim.hw.H100)
    assert (source.phase, source.op, source.kind, source.shape, source.differ) == \
        ("backward", "matmul", T.PRODUCT, (4, 2), 1)
    assert source.note.startswith("H100 block FMA in one pass: 87.50% identical (K = 1")


def test_a_planted_accumulation_difference_is_elementwise():
    native, emulated = _graph(), _graph()
    w2 = [t for t in native.graph() if t.op == "leaf" and t.shape == (2, 1)][0]
    cast = [t for t in native.graph() if t.op == "cast" and t._parents[0] is w2][0]
    cast.grad = _plant(cast.grad, (1, 0), 1)  # its one consumer (matmul) sends the same
    (source,) = T.walk(native, emulated)
    assert (source.phase, source.kind) == ("backward", T.ELEMENTWISE)
    assert source.op == "cast (its gradients added and rounded)"


def test_graphs_of_different_models_are_refused():
    other = fpsim.tensor([1.0], requires_grad=True)
    with fpsim.precision.parse("mixed"):
        loss = F.exp(other).sum()
    loss.backward()
    with pytest.raises(ValueError, match="the two graphs differ"):
        T.walk(_graph(), loss)
    with pytest.raises(ValueError, match="the inputs differ"):
        T.walk(_graph(), _graph(x=np.ones((4, 3))))


def test_native_and_emulated_on_the_cpu_walk_as_one_graph():
    """NumPy's native matmul gives a float32 product labelled fp16, cast later: the walk
    passes over that re-typing cast and compares the cast's values."""
    sources = T.walk(_graph("native_fp16"), _graph("mixed"), fpsim.hw.H100)
    assert all(s.kind in T.KINDS for s in sources)


def test_the_models_and_the_policy_names():
    assert [m.modelled for m in T.models()] == [False, True, False, True]
    assert T.emulated_policy(fpsim.hw.H100) == "mixed,model=H100"
    model, opt, batches = T.models(hidden=4, batch=8)[3].build(0, 2)
    assert len(batches) == 2 and batches[0][0].shape == (8, 64)
    assert batches[0][1].shape == (8, T.OUTPUTS)
    np.testing.assert_array_equal(fpsim.round(batches[0][0], "fp16"), batches[0][0])


# -- the suite: without a GPU, under the simulator, on a GPU ---------------------------

@functools.cache
def _missing():
    return T.missing()


def test_without_a_gpu_the_suite_is_a_one_line_error(tmp_path):
    if _missing() is None:
        pytest.skip("a GPU is usable here")
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, "-m", "fpsim", "compare", "--suite", "training",
                             "--out", str(out)], capture_output=True, text=True, cwd=ROOT,
                            timeout=300)
    assert result.returncode == 2 and result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("fpsim compare: error: no usable GPU for the training suite: ")
    assert not out.exists()
    with pytest.raises(NoGPU, match="no usable GPU for the training suite"):
        fpsim.compare.run("training", out=out)
    assert not out.exists()


@pytest.mark.parametrize("bad", ["0", "-3", "x"])
def test_steps_must_be_a_positive_integer(bad, capsys):
    from fpsim.compare.command import main

    with pytest.raises(SystemExit) as exc:
        main(["--suite", "training", "--steps", bad])
    assert exc.value.code == 2
    assert "--steps" in capsys.readouterr().err
    with pytest.raises(ValueError, match="steps must be an integer >= 1"):
        fpsim.compare.run("training", steps=0)


@pytest.mark.skipif(importlib.util.find_spec("numba_cuda") is None,
                    reason="numba-cuda is not installed (it comes with the test and gpu extras)")
def test_the_suite_under_the_simulator(tmp_path):
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    result = subprocess.run([sys.executable, str(HERE / "compare_training_sim.py"),
                             str(tmp_path), "2"], env=env, capture_output=True, text=True,
                            cwd=ROOT, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    names = [m.name for m in T.models()]
    out = result.stdout.splitlines()
    assert out[0] == (f"wrote {tmp_path / 'results.json'}, {tmp_path / 'results.md'}, "
                      f"{tmp_path / 'ulp_histograms.png'}") and out[1] == ""
    runs = [line.split()[0] for line in out[2:]]
    assert runs == names
    err = result.stderr
    assert "fpsim compare --suite training, 2 steps, seed 0" in err
    assert all(f"  {n}: " in err for n in names) and "    step 1: " in err
    doc = json.loads((tmp_path / "results.json").read_text())
    assert doc["suite"] == "training" and doc["steps"] == 2
    assert "fake_cupy (CUDA simulator)" in doc["machine"]
    assert [r["name"] for r in doc["records"]] == [f"training {n}" for n in runs]
    by_name = {r["model"]: r for r in doc["training"]}
    for r in doc["training"]:
        assert [s["step"] for s in r["steps"]] == [1, 2]
        assert r["native"] == "native_fp16" and r["emulated"] == f"mixed,model={doc['preset']}"
        assert all(s["kind"] in T.KINDS for s in r["sources"])
        assert r["failed"] is None  # every replay and walk ran
        assert r["seconds"] > 0
    # The digits MLP: the stand-in's sums (NumPy's pairwise order) are not the backend's
    # sequential ones, so cross_entropy's forward is a reduction-order source.
    digits = by_name["digits_mlp"]
    assert digits["replayed"] == [1]
    assert ("forward", "cross_entropy", T.REDUCTION) in [
        (s["phase"], s["op"], s["kind"]) for s in digits["sources"]]
    text = (tmp_path / "results.md").read_text()
    assert "## Training: native against emulated, step by step" in text
    assert "Suite training, 2 steps, seed 0." in text
    assert (tmp_path / "ulp_histograms.png").stat().st_size > 0


@pytest.mark.gpu
def test_the_suite_on_a_real_gpu(tmp_path):
    """On a GPU: the suite runs, and the model whose every operation is modelled (no
    split-K at its sizes) trains bit-identically, natively and emulated."""
    if _missing() is not None:
        pytest.skip("no GPU for device 'cuda' (fpsim.backends.gpu_missing() says why)")
    runs = fpsim.compare.training.run(3, 0, out=tmp_path, only=["digits_relu_mse"])
    (run,) = runs
    assert [s.step for s in run.steps] == [1, 2, 3]
    assert T.first_part(run.steps) is None, run.verdict
    assert (tmp_path / "results.md").exists()


def test_the_modules_examples_run():
    import doctest

    result = doctest.testmod(T, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


def test_one_policy_twice_trains_identically(monkeypatch):
    """Both runs under the emulated policy (on the CPU): identical at every step."""
    monkeypatch.setattr(T, "NATIVE", "mixed,model=H100")
    spec = T.models(hidden=4, batch=8)[1]
    run = T.train_and_compare(spec, fpsim.hw.H100, steps=3, device="cpu")
    assert run.verdict == "identical over 3 steps" and run.sources == () and run.replayed == ()
    assert [(s.identical, s.max_ulp, s.loss_difference) for s in run.steps] == [(1.0, 0, 0)] * 3
    assert run.record().verdict == "identical"


def test_products_of_another_order_are_found_at_the_first_step(monkeypatch):
    """fp32 accumulation in sequence (rounded to nearest) against the H100 block model
    (truncating): the runs part at step 1, first at a forward product."""
    monkeypatch.setattr(T, "NATIVE", "mixed,order=sequential")
    spec = T.models(hidden=8, batch=16)[1]
    run = T.train_and_compare(spec, fpsim.hw.H100, steps=2, device="cpu")
    assert T.first_part(run.steps) == 1 and run.replayed == (1,)
    first = run.sources[0]
    assert (first.step, first.phase, first.op, first.kind) == (1, "forward", "matmul",
                                                                T.PRODUCT)
    assert first.note.startswith("H100 block FMA in one pass: ")
    assert run.steps[-1].identical < 1.0


def test_an_operation_whose_output_and_backward_differ_is_named_twice():
    """tanh's output differs (forward) and so does the gradient its backward sends, from
    identical inputs and an identical upstream gradient: a forward and a backward
    source at the same operation (an output that differs does not hide its backward)."""
    native, emulated = _graph(), _graph()
    tanh, add = _node(native, "tanh"), _node(native, "add")
    tanh.data = _plant(tanh.data, (0, 0), 1)
    real = tanh._backward

    def perturbed(g):
        (raw,) = real(g)
        raw = np.array(raw)
        raw[2, 1] += 1e-3
        return (raw,)

    tanh._backward = perturbed
    add.grad = _plant(add.grad, (2, 1), 3)
    sources = T.walk(native, emulated)
    assert [(s.phase, s.op, s.kind, s.max_ulp) for s in sources] == [
        ("forward", "tanh", T.TRANSCENDENTAL, 1.0), ("backward", "tanh", T.ELEMENTWISE, 3.0)]


def test_a_softmax_difference_says_it_may_be_either():
    x = np.linspace(-2, 2, 8).reshape(2, 4)
    losses = []
    for _ in range(2):
        with fpsim.precision.parse("mixed"):
            logits = fpsim.tensor(x, requires_grad=True)
            loss = F.cross_entropy(logits, [1, 3])
            loss.backward()
        losses.append(loss)
    losses[0].data = np.asarray(_next32(losses[0].data))
    (source,) = T.walk(*losses)
    assert (source.op, source.kind) == ("cross_entropy", T.REDUCTION)
    assert source.note == T.BOTH and "transcendental functions" in source.note


def test_a_failed_search_for_sources_keeps_the_metrics(monkeypatch):
    def broken(*args, **kwargs):
        raise TypeError("planted")

    monkeypatch.setattr(T, "NATIVE", "mixed,order=sequential")
    monkeypatch.setattr(T, "replay", broken)
    run = T.train_and_compare(T.models(hidden=8, batch=16)[1], fpsim.hw.H100, steps=2,
                              device="cpu")
    assert T.first_part(run.steps) == 1  # as in the test above
    assert run.failed == "step 1: TypeError: planted" and run.sources == ()
    assert len(run.steps) == 2 and run.replayed == ()
    assert run.verdict.endswith("; the search for sources failed at step 1: TypeError: planted")
    assert "The search for sources failed at step 1: TypeError: planted." in \
        training_markdown([run])
    assert run.as_dict()["failed"] == "step 1: TypeError: planted"


# -- the census: each operation again on native's own inputs ---------------------------

def test_census_of_a_run_against_its_own_policy_is_empty():
    assert T.census(_graph("mixed,model=H100"), "mixed,model=H100", fpsim.hw.H100) == []


def test_census_finds_a_bias_sum_behind_nothing_else():
    """The native run sums its gradients in fp16 (reduce=fp16), the emulation in fp32:
    only the bias's gradient sum differs among the operations the census checks."""
    rng = np.random.default_rng(0)
    x = np.asarray(fpsim.round(rng.standard_normal((64, 3)), "fp16"))
    (source,) = T.census(_graph("mixed,reduce=fp16", x=x), "mixed")
    assert (source.phase, source.op, source.kind, source.shape) == (
        "backward", "add (its gradient summed over broadcast axes)", T.REDUCTION, (2,))
    assert source.note == T.ON_NATIVE
    # Against the reference: the fp16 sum of the 64 rows, and the fp32 sum rounded to fp16.
    b = _node(_graph("mixed,reduce=fp16", x=x), "add")
    g = b.grad
    fp16 = fpsim.sum(g, axis=0, accum="fp16")
    fp32 = fpsim.round(fpsim.sum(g, axis=0, accum="fp32"), "fp16")
    assert source.differ == int(np.sum(fpsim.to_bits(fp16, "fp16") != fpsim.to_bits(fp32,
                                                                                 "fp16")))


def test_census_finds_planted_products_and_functions():
    native = _graph("mixed,model=H100")
    product, tanh = _node(native, "matmul"), _node(native, "tanh")
    product.data = _plant(product.data, (3, 0), 2)
    tanh.data = _plant(tanh.data, (1, 1), 1)
    sources = T.census(native, "mixed,model=H100", fpsim.hw.H100)
    assert [(s.phase, s.op, s.kind, s.differ, s.max_ulp) for s in sources] == [
        ("forward", "matmul", T.PRODUCT, 1, 2.0), ("forward", "tanh", T.TRANSCENDENTAL, 1, 1.0)]
    assert sources[0].note == (f"{T.ON_NATIVE}; H100 block FMA in one pass: 87.50% identical "
                               "(K = 3: too short to split)")


def test_the_digits_mlp_is_the_reproduce_tasks():
    from fpsim.reproduce.tasks import TASKS

    model, opt, batches = T.models()[0].build(3, 2)
    task = TASKS["digits_mlp"]
    theirs, _ = task.build(3)
    for a, b in zip(model.parameters(), theirs.parameters(), strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    stream = task.batches(3)
    for got in batches:
        want = next(stream)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
    assert (opt.lr, opt.momentum) == (task.hyperparameters["lr"],
                                      task.hyperparameters["momentum"])
