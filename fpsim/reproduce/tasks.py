"""The three tasks of the ablations: an MLP and a CNN on the scikit-learn digits, and a
character-level LSTM language model on the standard library's pydoc topics.

Models and hyperparameters are ordinary textbook choices (see docs/results.md); each
task says how many steps a ``quick`` and a ``full`` reproduction train for, and
``for_sweep(budget)`` makes it a ``fpsim.sweep.Task`` like any user's: its ``setup`` is
the function of the seed that builds the run.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

import numpy as np

from fpsim import nn, optim
from fpsim._device import transfer
from fpsim.autograd.tensor import Tensor, no_grad
from fpsim.data import batches, char_batches, load_digits, load_text
from fpsim.nn import functional as F
from fpsim.nn.module import Module
from fpsim.optim.optimizer import Optimizer
from fpsim.precision.policy import Policy
from fpsim.sweep import Setup
from fpsim.sweep import Task as SweepTask
from fpsim.sweep.cache import digest

BUDGETS = ("quick", "full", "gpu")
CLASSES = 10  # the ten digits


@dataclass(frozen=True)
class Budget:
    """Training length: ``steps`` optimizer steps, the metric measured every ``eval_every``;
    ``hyperparameters`` replace the task's own at this budget (a larger model or batch)."""

    steps: int
    eval_every: int
    hyperparameters: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Task:
    """A dataset, a model, an optimizer and a metric; see ``TASKS``."""

    name: str
    metric: str
    higher_is_better: bool
    budgets: dict[str, Budget]
    hyperparameters: dict = field(default_factory=dict)
    clip_norm: float | None = None

    def budget(self, name: str) -> Budget:
        if name not in self.budgets:
            raise ValueError(f"unknown budget {name!r}; known: {', '.join(BUDGETS)}")
        return self.budgets[name]

    def for_sweep(self, budget: str, device: str = "cpu") -> SweepTask:
        """This task at ``budget`` on ``device``, as a sweep trains it: ``setup`` builds
        each run, and the data's digest and the hyperparameters are part of the cache key
        (the pydoc topics differ between Python versions)."""
        b = self.budget(budget)
        sized = self.at(budget)
        return SweepTask(self.name, sized.setup, b.steps, b.eval_every, metric=self.metric,
                         higher_is_better=self.higher_is_better, clip_norm=self.clip_norm,
                         config=dict(data=self.data_digest(), **sized.hyperparameters),
                         chance=self.chance(), device=device)

    def at(self, budget: str) -> Task:
        """This task with ``budget``'s hyperparameters in place of its own."""
        extra = self.budget(budget).hyperparameters
        return replace(self, hyperparameters={**self.hyperparameters, **extra}) if extra else self

    def config(self, budget: str) -> dict:
        """Everything that determines a run of this task at ``budget`` (a cache key)."""
        return self.for_sweep(budget).key()

    def setup(self, seed: int) -> Setup:
        """Everything one run from ``seed`` needs: the model, its optimizer, the batches."""
        model, optimizer = self.build(seed)
        return Setup(model, optimizer, self.batches(seed), self.loss, self.evaluate)

    def data_digest(self) -> str:
        """A digest of the task's data."""
        raise NotImplementedError

    def chance(self) -> float:
        """The metric of uniform guessing (a run far worse than it is diverged)."""
        raise NotImplementedError

    def build(self, seed: int) -> tuple[Module, Optimizer]:
        """The model (initialised from ``seed``) and its optimizer."""
        raise NotImplementedError

    def batches(self, seed: int) -> Iterator:
        """An endless stream of training batches, shuffled by ``seed``."""
        raise NotImplementedError

    def loss(self, model: Module, batch) -> Tensor:
        raise NotImplementedError

    def evaluate(self, model: Module, policy: Policy) -> float:
        """The metric on held-out data, the model run under ``policy``."""
        raise NotImplementedError


@functools.lru_cache(maxsize=2)
def _digits(images: bool):
    # One fixed split for every seed: seeds vary initialisation and batch order.
    return load_digits(seed=0, images=images, standardize=True)


@functools.lru_cache(maxsize=1)
def _corpus():
    return load_text()


def _digest(*arrays: np.ndarray) -> str:
    return digest(*(part for a in arrays
                     for part in (f"{a.dtype.str}{a.shape}".encode(), a.tobytes())))


@functools.lru_cache(maxsize=2)
def _digits_digest(images: bool) -> str:
    d = _digits(images)
    return _digest(d.x_train, d.y_train, d.x_test, d.y_test)


@functools.lru_cache(maxsize=1)
def _corpus_digest() -> str:
    c = _corpus()
    return _digest(np.frombuffer(c.vocab.encode("utf-32-le"), np.uint8), c.train, c.valid)


def model_device(model: Module) -> str:
    """The device of a model's parameters."""
    return next(iter(model.parameters())).device


def _epochs(make_epoch, seed: int) -> Iterator:
    for epoch in itertools.count():
        yield from make_epoch(seed * 100_003 + epoch)


@dataclass(frozen=True)
class DigitsTask(Task):
    """Digit classification (8x8 images, 10 classes), test accuracy in percent."""

    images: bool = False

    def _data(self):
        return _digits(self.images)

    def data_digest(self) -> str:
        return _digits_digest(self.images)

    def chance(self) -> float:
        return 100.0 / CLASSES

    def build(self, seed: int) -> tuple[Module, Optimizer]:
        nn.manual_seed(seed)
        if self.images:
            model = nn.Sequential(
                nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(),
                nn.Conv2d(8, 16, 3, stride=2), nn.ReLU(),
                nn.Flatten(), nn.Linear(16 * 3 * 3, CLASSES),
            )
        else:
            hidden = self.hyperparameters["hidden"]
            model = nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, CLASSES))
        h = self.hyperparameters
        return model, optim.SGD(model.parameters(), lr=h["lr"], momentum=h["momentum"])

    def batches(self, seed: int) -> Iterator:
        data = self._data()
        size = self.hyperparameters["batch_size"]
        return _epochs(lambda s: batches(data.x_train, data.y_train, batch_size=size, seed=s,
                                         drop_last=True), seed)

    def loss(self, model: Module, batch) -> Tensor:
        x, y = batch
        return F.cross_entropy(model(x), y)

    def evaluate(self, model: Module, policy: Policy) -> float:
        data = self._data()
        model.eval()
        try:
            with policy, no_grad():
                x = transfer(data.x_test, model_device(model))
                logits = np.asarray(model(x).numpy(), dtype=np.float64)
        finally:
            model.train()
        return float(np.mean(np.argmax(logits, axis=1) == data.y_test) * 100)


class CharModel(Module):
    """Embedding, LSTM, and a linear read-out to next-character logits."""

    def __init__(self, vocab_size: int, embedding: int, hidden: int):
        self.embedding = nn.Embedding(vocab_size, embedding)
        self.lstm = nn.LSTM(embedding, hidden)
        self.decoder = nn.Linear(hidden, vocab_size)

    def forward(self, ids):
        h, _ = self.lstm(self.embedding(ids))
        steps, batch, hidden = h.shape
        return self.decoder(h.reshape((steps * batch, hidden)))


@dataclass(frozen=True)
class CharTask(Task):
    """Next-character prediction with Adam; validation bits per character (lower is
    better) on the first ``eval_chars`` characters of the validation text."""

    def _corpus(self):
        return _corpus()

    def data_digest(self) -> str:
        return _corpus_digest()

    def chance(self) -> float:
        return math.log2(self._corpus().vocab_size)

    def build(self, seed: int) -> tuple[Module, Optimizer]:
        nn.manual_seed(seed)
        h = self.hyperparameters
        model = CharModel(self._corpus().vocab_size, h["embedding"], h["hidden"])
        return model, optim.Adam(model.parameters(), lr=h["lr"])

    def batches(self, seed: int) -> Iterator:
        h = self.hyperparameters
        train = self._corpus().train
        return _epochs(lambda s: char_batches(train, batch_size=h["batch_size"],
                                              seq_len=h["seq_len"], seed=s), seed)

    def loss(self, model: Module, batch) -> Tensor:
        x, y = batch
        return F.cross_entropy(model(x), y.reshape(-1))

    def evaluate(self, model: Module, policy: Policy) -> float:
        h = self.hyperparameters
        valid = self._corpus().valid[: h["eval_chars"] + 1]
        nats = count = 0.0
        device = model_device(model)
        with policy, no_grad():
            for x, y in char_batches(valid, batch_size=h["batch_size"], seq_len=h["seq_len"]):
                logits = np.asarray(model(transfer(x, device)).numpy(), dtype=np.float64)
                shifted = logits - logits.max(axis=1, keepdims=True)
                log_p = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
                nats -= float(log_p[np.arange(y.size), y.reshape(-1)].sum())
                count += y.size
        return nats / count / math.log(2)


TASKS: dict[str, Task] = {t.name: t for t in (
    DigitsTask(
        name="digits_mlp", metric="test accuracy (%)", higher_is_better=True,
        budgets={"quick": Budget(420, 42), "full": Budget(2100, 105),
                 "gpu": Budget(2100, 105)},
        hyperparameters=dict(hidden=64, lr=0.05, momentum=0.9, batch_size=32),
    ),
    DigitsTask(
        name="digits_cnn", metric="test accuracy (%)", higher_is_better=True, images=True,
        budgets={"quick": Budget(420, 42), "full": Budget(2100, 105),
                 "gpu": Budget(2100, 105)},
        hyperparameters=dict(lr=0.05, momentum=0.9, batch_size=32),
    ),
    CharTask(
        name="char_lstm", metric="validation bits per character", higher_is_better=False,
        # gpu: batches of 2^14 tokens (512 sequences of 32), where fp16 flushes gradients
        # at their natural size, and products with K = 2^14 in the weight gradients.
        budgets={"quick": Budget(100, 25), "full": Budget(600, 50),
                 "gpu": Budget(60, 20, dict(embedding=64, hidden=512, batch_size=512,
                                             eval_chars=65536))},
        hyperparameters=dict(embedding=32, hidden=128, optimizer="adam", lr=2e-3,
                             batch_size=32, seq_len=32, eval_chars=8192),
        clip_norm=5.0,
    ),
)}


def task(name: str) -> Task:
    """The task called ``name``."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; known tasks: {', '.join(TASKS)}")
    return TASKS[name]
