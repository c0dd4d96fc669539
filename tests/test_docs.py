"""The worked examples of docs/testing.md and the docstring examples of fpsim.testing run
as doctests; fpsim.testing's imports stay out of ``import fpsim``."""

import doctest
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import settings

import fpsim.testing.assertions
import fpsim.testing.strategies

DOCS = Path(__file__).resolve().parent.parent / "docs"
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


@pytest.fixture(autouse=True)
def no_deadline():
    # A first call compiles fpsim's kernels: slower than Hypothesis's default deadline.
    settings.register_profile("docs", deadline=None)
    previous = settings._current_profile
    settings.load_profile("docs")
    yield
    settings.load_profile(previous or "default")


def test_docs_testing_md():
    result = doctest.testfile(str(DOCS / "testing.md"), module_relative=False, optionflags=FLAGS)
    assert result.attempted > 10 and result.failed == 0


@pytest.mark.parametrize("module", [fpsim.testing.assertions, fpsim.testing.strategies])
def test_docstring_examples(module):
    result = doctest.testmod(module, optionflags=FLAGS)
    assert result.attempted > 3 and result.failed == 0


# The arithmetic core and accumulation: every public function's numpydoc example runs.
# (By name: fpsim.accumulation.matmul is also the function the package re-exports.)
CORE_MODULES = [
    "fpsim.formats", "fpsim.rounding", "fpsim.bits", "fpsim.arithmetic", "fpsim.flags",
    "fpsim.modes", "fpsim.backends", "fpsim.accumulation.matmul", "fpsim.accumulation.reduce",
    "fpsim.accumulation.conv", "fpsim.accumulation.blocks", "fpsim.accumulation.stats",
    "fpsim.accumulation.scaled",
    "fpsim.hw",
]


@pytest.mark.parametrize("name", CORE_MODULES)
def test_core_docstring_examples(name):
    import importlib

    result = doctest.testmod(importlib.import_module(name), optionflags=FLAGS)
    assert result.attempted > 0 and result.failed == 0


# Autograd, layers, optimizers, policies, training and compare (fpsim.testing's are
# above): every public function's numpydoc example runs. (By name: several modules,
# such as fpsim.autograd.tensor, share their name with the function their package exports.)
MODEL_MODULES = [
    "fpsim.autograd.tensor", "fpsim.autograd.cast", "fpsim.autograd.pointwise",
    "fpsim.autograd.dot", "fpsim.autograd.reductions", "fpsim.autograd.shape",
    "fpsim.autograd.losses", "fpsim.autograd.normalization", "fpsim.nn.module",
    "fpsim.nn.layers", "fpsim.nn.lstm", "fpsim.nn.init", "fpsim.optim.optimizer",
    "fpsim.optim.sgd", "fpsim.optim.adam", "fpsim.precision.policy",
    "fpsim.training.loss_scale", "fpsim.training.monitor", "fpsim.training.trainer",
    "fpsim.compare.cases", "fpsim.compare.metrics", "fpsim.compare.run",
    "fpsim.compare.training",
]


@pytest.mark.parametrize("name", MODEL_MODULES)
def test_model_docstring_examples(name):
    import importlib

    from fpsim.nn import init

    rng = init.generator()
    state = rng.bit_generator.state
    try:
        result = doctest.testmod(importlib.import_module(name), optionflags=FLAGS)
    finally:  # the examples draw from (and reseed) the layers' generator: leave it as it was
        init._state["rng"] = rng
        rng.bit_generator.state = state
    assert result.attempted > 0 and result.failed == 0


# The packages whose public names the API reference renders (tests/test_site.py).
PUBLIC_PACKAGES = ["fpsim", "fpsim.hw", "fpsim.autograd", "fpsim.nn", "fpsim.nn.functional",
                   "fpsim.optim", "fpsim.precision", "fpsim.training", "fpsim.compare",
                   "fpsim.testing", "fpsim.sweep"]


def test_every_public_function_has_an_example():
    """numpydoc: each public function's docstring has Parameters, Returns or Yields, and
    an example (which the doctests above run)."""
    import importlib
    import inspect

    lacking = []
    for package in PUBLIC_PACKAGES:
        module = importlib.import_module(package)
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isfunction(obj):
                doc = inspect.getdoc(obj) or ""
                if ">>>" not in doc or not any(
                        section in doc for section in ("Parameters", "Returns", "Yields")):
                    lacking.append(f"{package}.{name}")
    assert lacking == []


def test_import_fpsim_does_not_import_hypothesis():
    code = ("import sys, fpsim, fpsim.testing\n"
            "fpsim.testing.assert_bits_equal([1.0], [1.0], 'fp16')\n"
            "print('hypothesis' in sys.modules)\n"
            "fpsim.testing.values\n"
            "print('hypothesis' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["False", "True"]


def test_assertions_refuse_what_is_not_of_the_format():
    with pytest.raises(AssertionError, match=r"actual\[0\] = 0.1 is not a value of fp16"):
        fpsim.testing.assert_bits_equal([0.1], [0.1], "fp16")
    with pytest.raises(AssertionError, match="shapes differ"):
        fpsim.testing.assert_bits_equal([1.0, 2.0], [1.0], "fp16")
    with pytest.raises(ValueError, match="max_ulp must be a non-negative integer"):
        fpsim.testing.assert_ulp_close([1.0], [1.0], "fp16", max_ulp=-1)
    with pytest.raises(ValueError, match="at most 51 fraction bits"):
        from fractions import Fraction

        fpsim.testing.assert_correctly_rounded([1.0], [Fraction(1, 3)], "fp64")
