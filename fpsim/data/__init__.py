"""Data for the training experiments, with no downloads.

``load_digits`` (scikit-learn's bundled 8x8 digits, stratified split), ``load_text`` (a
character corpus from the standard library's pydoc topics), minibatch iterators ``batches``
and ``char_batches``, and synthetic ``make_classification`` and ``make_regression``.
scikit-learn is imported only when ``load_digits`` is called.
"""

from fpsim.data.batches import batches, char_batches
from fpsim.data.digits import Split, load_digits
from fpsim.data.synthetic import make_classification, make_regression
from fpsim.data.text import TextCorpus, load_text

__all__ = [
    "Split", "TextCorpus", "batches", "char_batches", "load_digits", "load_text",
    "make_classification", "make_regression",
]
