"""fpsim.torch's docstring examples and docs/torch.md run as doctests."""

import pytest

pytest.importorskip("torch")

import doctest  # noqa: E402
import importlib  # noqa: E402
from pathlib import Path  # noqa: E402

DOCS = Path(__file__).resolve().parent.parent / "docs"
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


@pytest.mark.parametrize("name", ["fpsim.torch", "fpsim.torch.exchange",
                                  "fpsim.torch.rounding", "fpsim.torch.quantizing",
                                  "fpsim.torch.products", "fpsim.torch.emulation",
                                  "fpsim.torch.training"])
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=FLAGS)
    assert result.attempted > 0 and result.failed == 0


def test_docs_torch_md():
    result = doctest.testfile(str(DOCS / "torch.md"), module_relative=False, optionflags=FLAGS)
    assert result.attempted > 5 and result.failed == 0
