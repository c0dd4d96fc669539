"""A character-level corpus from the standard library's pydoc topics, for language models."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np

from fpsim.data.batches import _fraction, _positive_int


def _code_points(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-32-le"), dtype="<u4")


@dataclass(frozen=True, eq=False)
class TextCorpus:
    """Character ids of a text cut into a training and a validation part, with the vocabulary."""

    vocab: str
    train: np.ndarray
    valid: np.ndarray
    _codes: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.vocab or list(self.vocab) != sorted(set(self.vocab)):
            raise ValueError("vocab must be a non-empty string of sorted, unique characters")
        object.__setattr__(self, "_codes", _code_points(self.vocab).astype(np.int64))
        for name in ("train", "valid"):
            ids = np.asarray(getattr(self, name))
            if ids.ndim != 1 or (ids.size and not np.issubdtype(ids.dtype, np.integer)):
                raise ValueError(f"{name} must be a 1-D integer array, got {ids.dtype} "
                                 f"of shape {ids.shape}")
            object.__setattr__(self, name, ids.astype(np.int64, copy=False))

    @property
    def vocab_size(self) -> int:
        """Number of distinct characters."""
        return len(self.vocab)

    def encode(self, text: str) -> np.ndarray:
        """The int64 ids of the characters of ``text``."""
        if not isinstance(text, str):
            raise ValueError(f"encode expects a str, got {type(text).__name__}")
        codes = _code_points(text).astype(np.int64)
        ids = np.searchsorted(self._codes, codes)
        clipped = np.minimum(ids, self.vocab_size - 1)
        unknown = np.flatnonzero(self._codes[clipped] != codes)
        if unknown.size:
            at = int(unknown[0])
            raise ValueError(f"character {text[at]!r} at index {at} is not in the vocabulary")
        return ids.astype(np.int64)

    def decode(self, ids: np.ndarray) -> str:
        """The text spelled by a 1-D sequence of ids."""
        ids = np.asarray(ids)
        if ids.ndim != 1:
            raise ValueError(f"decode expects a 1-D sequence of ids, got shape {ids.shape}")
        if ids.size == 0:
            return ""
        if not np.issubdtype(ids.dtype, np.integer):
            raise ValueError(f"ids must be integers, got dtype {ids.dtype}")
        bad = np.flatnonzero((ids < 0) | (ids >= self.vocab_size))
        if bad.size:
            raise ValueError(f"id {int(ids[bad[0]])} at index {int(bad[0])} is outside the "
                             f"vocabulary of {self.vocab_size} characters")
        text: str = self._codes[ids].astype("<u4").tobytes().decode("utf-32-le")
        return text


@functools.lru_cache(maxsize=1)
def _pydoc_text() -> str:
    from pydoc_data.topics import topics

    return "\n".join(topics[key] for key in sorted(topics))


def load_text(*, valid_fraction: float = 0.1, max_chars: int | None = None) -> TextCorpus:
    """The pydoc topics of the standard library as a character corpus.

    The topics are joined in key order with newlines, cut to the first ``max_chars``
    characters if given; the vocabulary is the sorted set of characters, and the last
    ``valid_fraction`` of the text is the validation part.  No download.
    """
    valid_fraction = _fraction("valid_fraction", valid_fraction)
    text = _pydoc_text()
    if max_chars is not None:
        max_chars = _positive_int("max_chars", max_chars)
        text = text[:max_chars]
    n_valid = int(np.floor(len(text) * valid_fraction + 0.5))
    n_train = len(text) - n_valid
    if n_valid == 0 or n_train == 0:
        raise ValueError(f"{len(text)} characters with valid_fraction={valid_fraction} leave "
                         f"the training or validation part empty")
    vocab = "".join(sorted(set(text)))
    codes = _code_points(text).astype(np.int64)
    ids = np.searchsorted(_code_points(vocab).astype(np.int64), codes).astype(np.int64)
    return TextCorpus(vocab=vocab, train=ids[:n_train], valid=ids[n_train:])

