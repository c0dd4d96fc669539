"""Data loaders, minibatch iterators and synthetic generators of ``fpsim.data``."""

import json
import subprocess
import sys

import numpy as np
import pytest

from fpsim import data
from fpsim.data import (
    batches,
    char_batches,
    load_digits,
    load_text,
    make_classification,
    make_regression,
)

# --- digits ---------------------------------------------------------------------------------


def test_digits_shapes_dtypes_and_range():
    split = load_digits()
    assert split.classes == 10
    assert split.x_train.shape[1:] == (64,) and split.x_test.shape[1:] == (64,)
    assert len(split.x_train) + len(split.x_test) == 1797
    assert len(split.y_train) == len(split.x_train) and len(split.y_test) == len(split.x_test)
    for x in (split.x_train, split.x_test):
        assert x.dtype == np.float64 and x.min() == 0.0 and x.max() == 1.0
        np.testing.assert_array_equal(x * 16, np.round(x * 16))   # pixel / 16
    for y in (split.y_train, split.y_test):
        assert y.dtype == np.int64 and set(np.unique(y)) == set(range(10))


def test_digits_images_match_flat_features():
    flat, images = load_digits(seed=3), load_digits(seed=3, images=True)
    assert images.x_train.shape[1:] == (1, 8, 8) and images.x_test.shape[1:] == (1, 8, 8)
    np.testing.assert_array_equal(images.x_train.reshape(-1, 64), flat.x_train)
    np.testing.assert_array_equal(images.y_test, flat.y_test)


def test_digits_split_is_deterministic_and_seed_sensitive():
    a, b, c = load_digits(seed=0), load_digits(seed=0), load_digits(seed=1)
    for name in ("x_train", "y_train", "x_test", "y_test"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert not np.array_equal(a.x_test, c.x_test)


@pytest.mark.parametrize("fraction", [0.1, 0.25, 0.5])
def test_digits_split_is_stratified(fraction):
    split = load_digits(seed=7, test_fraction=fraction)
    total = np.bincount(split.y_train, minlength=10) + np.bincount(split.y_test, minlength=10)
    test = np.bincount(split.y_test, minlength=10)
    assert np.all(np.abs(test - total * fraction) <= 1)


def test_digits_split_is_a_permutation_of_the_data():
    from sklearn.datasets import load_digits as sklearn_load_digits

    split = load_digits(seed=2)
    rows = np.concatenate([split.x_train, split.x_test])
    raw = sklearn_load_digits().data / 16.0

    def sorted_rows(a):
        return a[np.lexsort(a.T[::-1])]

    np.testing.assert_array_equal(sorted_rows(rows), sorted_rows(raw))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"test_fraction": 0.0}, "test_fraction"),
        ({"test_fraction": 1.0}, "test_fraction"),
        ({"test_fraction": "0.2"}, "test_fraction"),
        ({"seed": None}, "seed"),
        ({"seed": 1.5}, "seed"),
    ],
)
def test_digits_bad_input(kwargs, message):
    with pytest.raises(ValueError, match=message):
        load_digits(**kwargs)


# --- text -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def corpus():
    return load_text()


def test_text_is_pydoc_topics(corpus):
    from pydoc_data.topics import topics

    text = "\n".join(topics[k] for k in sorted(topics))
    assert corpus.vocab == "".join(sorted(set(text)))
    assert corpus.vocab_size == len(corpus.vocab)
    assert corpus.decode(np.concatenate([corpus.train, corpus.valid])) == text


def test_text_split_sizes_and_dtypes(corpus):
    n = len(corpus.train) + len(corpus.valid)
    assert abs(len(corpus.valid) - 0.1 * n) <= 1
    for ids in (corpus.train, corpus.valid):
        assert ids.dtype == np.int64 and ids.ndim == 1
        assert ids.min() >= 0 and ids.max() < corpus.vocab_size


def test_text_max_chars_and_fraction():
    small = load_text(max_chars=1000, valid_fraction=0.2)
    assert (len(small.train), len(small.valid)) == (800, 200)
    full = load_text()
    text = full.decode(np.concatenate([full.train, full.valid]))
    assert small.decode(np.concatenate([small.train, small.valid])) == text[:1000]
    assert small.vocab == "".join(sorted(set(text[:1000])))


def test_encode_decode_round_trip(corpus):
    text = 'def f(x):\n    return x["key"] + 1  # comment'
    ids = corpus.encode(text)
    assert ids.dtype == np.int64 and len(ids) == len(text)
    assert corpus.decode(ids) == text
    assert corpus.decode(list(ids)) == text
    assert corpus.encode("").shape == (0,) and corpus.decode([]) == ""


def test_encode_and_decode_errors(corpus):
    with pytest.raises(ValueError, match="character '\u2603' at index 3.*not in the vocabulary"):
        corpus.encode("abc\u2603")
    with pytest.raises(ValueError, match=f"id {corpus.vocab_size} at index 1"):
        corpus.decode([0, corpus.vocab_size])
    with pytest.raises(ValueError, match="id -1"):
        corpus.decode([-1])


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"valid_fraction": 0.0}, "valid_fraction"),
        ({"valid_fraction": 1.5}, "valid_fraction"),
        ({"max_chars": 0}, "max_chars"),
        ({"max_chars": 2.5}, "max_chars"),
        ({"max_chars": 3, "valid_fraction": 0.01}, "empty"),
    ],
)
def test_text_bad_input(kwargs, message):
    with pytest.raises(ValueError, match=message):
        load_text(**kwargs)


# --- char_batches ---------------------------------------------------------------------------


def test_char_batches_shapes_and_shift(corpus):
    ids = corpus.train[:5000]
    seen = list(char_batches(ids, batch_size=8, seq_len=32))
    assert len(seen) == ((5000 - 1) // 8) // 32
    for inputs, targets in seen:
        assert inputs.shape == targets.shape == (32, 8)
        assert inputs.dtype == targets.dtype == np.int64
        np.testing.assert_array_equal(inputs[1:], targets[:-1])
    # in order: column b is one stream of the text, continued by the next batch
    stream = (5000 - 1) // 8
    for b in range(8):
        column = np.concatenate([inputs[:, b] for inputs, _ in seen])
        np.testing.assert_array_equal(column, ids[b * stream:b * stream + len(column)])
        targets = np.concatenate([t[:, b] for _, t in seen])
        np.testing.assert_array_equal(targets, ids[b * stream + 1:b * stream + 1 + len(column)])


def test_char_batches_shuffled_windows_against_raw_ids():
    ids = np.arange(1000, dtype=np.int64) * 3  # distinct ids: a window is known by its first
    seen = list(char_batches(ids, batch_size=4, seq_len=10, seed=5))
    starts = []
    for inputs, targets in seen:
        for b in range(4):
            start = int(inputs[0, b]) // 3
            starts.append(start)
            np.testing.assert_array_equal(inputs[:, b], ids[start:start + 10])
            np.testing.assert_array_equal(targets[:, b], ids[start + 1:start + 11])
    ordered = [inputs[0] // 3 for inputs, _ in char_batches(ids, batch_size=4, seq_len=10)]
    assert sorted(starts) == sorted(np.concatenate(ordered).tolist())   # same windows, once
    assert len(set(starts)) == len(starts)
    assert starts != np.concatenate(ordered).tolist()


def test_char_batches_determinism_and_seed_sensitivity():
    ids = np.arange(2000) % 97
    def first(seed):
        return next(char_batches(ids, batch_size=4, seq_len=16, seed=seed))[0]
    np.testing.assert_array_equal(first(1), first(1))
    assert not np.array_equal(first(1), first(2))


@pytest.mark.parametrize(
    "ids, kwargs, message",
    [
        (np.arange(10), {"batch_size": 1, "seq_len": 10}, "seq_len=10 is longer than the data"),
        (np.arange(100), {"batch_size": 20, "seq_len": 8}, "data too short"),
        (np.arange(100), {"batch_size": 0, "seq_len": 8}, "batch_size"),
        (np.arange(100), {"batch_size": 2, "seq_len": -1}, "seq_len"),
        (np.zeros((10, 10), dtype=int), {"batch_size": 2, "seq_len": 2}, "1-D"),
        (np.linspace(0, 1, 50), {"batch_size": 2, "seq_len": 2}, "integers"),
    ],
)
def test_char_batches_bad_input_raises_at_call(ids, kwargs, message):
    with pytest.raises(ValueError, match=message):
        char_batches(ids, **kwargs)   # raised before iterating


# --- batches --------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [None, 0, 1])
def test_batches_each_sample_once_per_epoch(seed):
    x = np.arange(103 * 3).reshape(103, 3)
    y = np.arange(103)
    seen = list(batches(x, y, batch_size=10, seed=seed))
    assert [len(yb) for _, yb in seen] == [10] * 10 + [3]
    order = np.concatenate([yb for _, yb in seen])
    np.testing.assert_array_equal(np.sort(order), y)
    for xb, yb in seen:
        np.testing.assert_array_equal(xb, x[yb])
    if seed is None:
        np.testing.assert_array_equal(order, y)


def test_batches_drop_last():
    x, y = np.zeros((25, 2)), np.arange(25)
    seen = list(batches(x, y, batch_size=10, seed=3, drop_last=True))
    assert [len(yb) for _, yb in seen] == [10, 10]
    assert len(set(np.concatenate([yb for _, yb in seen]).tolist())) == 20


def test_batches_determinism_and_seed_sensitivity():
    y = np.arange(50)
    def order(seed):
        return np.concatenate([yb for _, yb in batches(y, y, batch_size=7, seed=seed)])
    np.testing.assert_array_equal(order(4), order(4))
    assert not np.array_equal(order(4), order(5))


@pytest.mark.parametrize(
    "x, y, kwargs, message",
    [
        (np.zeros(5), np.zeros(4), {"batch_size": 2}, "different lengths: 5 and 4"),
        (np.zeros(5), np.zeros(5), {"batch_size": 0}, "batch_size must be a positive"),
        (np.zeros(5), np.zeros(5), {"batch_size": 2.0}, "batch_size"),
        (np.zeros(0), np.zeros(0), {"batch_size": 2}, "empty"),
        (np.zeros(5), np.zeros(5), {"batch_size": 8, "drop_last": True}, "no batch"),
        (np.zeros(5), np.zeros(5), {"batch_size": 2, "seed": "a"}, "seed"),
    ],
)
def test_batches_bad_input_raises_at_call(x, y, kwargs, message):
    with pytest.raises(ValueError, match=message):
        batches(x, y, **kwargs)


# --- synthetic ------------------------------------------------------------------------------


def test_make_classification():
    x, y = make_classification(300, features=5, classes=3, seed=1)
    assert x.shape == (300, 5) and x.dtype == np.float64
    assert y.shape == (300,) and y.dtype == np.int64
    np.testing.assert_array_equal(np.bincount(y), [100, 100, 100])
    again = make_classification(300, features=5, classes=3, seed=1)
    np.testing.assert_array_equal(x, again[0])
    assert not np.array_equal(x, make_classification(300, features=5, classes=3, seed=2)[0])
    # well separated blobs: the nearest class mean classifies almost all samples
    far_x, far_y = make_classification(400, classes=4, separation=8.0)
    means = np.stack([far_x[far_y == k].mean(axis=0) for k in range(4)])
    guess = np.argmin(((far_x[:, None, :] - means) ** 2).sum(axis=2), axis=1)
    assert np.mean(guess == far_y) > 0.95
    one_x, _ = make_classification(10, features=1)
    assert one_x.shape == (10, 1)


def test_make_regression():
    x, y, w = make_regression(200, features=3, noise=0.0, seed=4)
    assert x.shape == (200, 3) and y.shape == (200,) and w.shape == (3,)
    np.testing.assert_allclose(y, x @ w)
    _, noisy, _ = make_regression(200, features=3, noise=0.5, seed=4)
    assert 0.3 < np.std(noisy - x @ w) < 0.7
    assert not np.array_equal(w, make_regression(200, features=3, seed=5)[2])


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: make_classification(0), "n must be a positive"),
        (lambda: make_classification(10, classes=1), "classes must be at least 2"),
        (lambda: make_classification(2, classes=3), "fewer than classes"),
        (lambda: make_classification(10, separation=-1.0), "separation"),
        (lambda: make_classification(10, features=0), "features"),
        (lambda: make_regression(10, noise=float("nan")), "noise"),
        (lambda: make_regression(-3), "n must be a positive"),
    ],
)
def test_synthetic_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# --- imports --------------------------------------------------------------------------------


def _modules_after(statement):
    code = f"import json, sys; {statement}; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    return set(json.loads(out.stdout))


def test_import_data_does_not_load_sklearn():
    modules = _modules_after("import fpsim.data")
    assert "sklearn" not in modules and "pydoc_data.topics" not in modules


def test_import_fpsim_does_not_load_data():
    assert "fpsim.data" not in _modules_after("import fpsim")


def test_public_names():
    assert set(data.__all__) == {
        "Split", "TextCorpus", "batches", "char_batches", "load_digits", "load_text",
        "make_classification", "make_regression",
    }


def test_digits_standardized_with_training_statistics():
    from fpsim.data import load_digits

    raw = load_digits(seed=4)
    std = load_digits(seed=4, standardize=True)
    np.testing.assert_array_equal(raw.y_train, std.y_train)
    mean, scale = raw.x_train.mean(axis=0), raw.x_train.std(axis=0) + 0.01
    np.testing.assert_allclose(std.x_train, (raw.x_train - mean) / scale)
    np.testing.assert_allclose(std.x_test, (raw.x_test - mean) / scale)
    assert np.all(np.abs(std.x_train.mean(axis=0)) < 1e-12)
