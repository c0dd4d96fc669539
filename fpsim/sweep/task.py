"""Tasks: the user's own code, a function of the seed that builds the model, its data,
its optimizer and its evaluation (a ``Setup``), with the length of its training."""

from __future__ import annotations

import functools
import inspect
import json
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fpsim._checks import boolean, integer, real
from fpsim._device import as_device, gpu_module
from fpsim._machine import machine
from fpsim.sweep.cache import digest

if TYPE_CHECKING:
    from fpsim.autograd.tensor import Tensor
    from fpsim.nn.module import Module
    from fpsim.optim.optimizer import Optimizer
    from fpsim.precision.policy import Policy

# Keys of a run's cache key that a task's own configuration may not take.
RESERVED = frozenset({"task", "steps", "eval_every", "clip_norm", "task_code", "code", "seed",
                      "policy", "precision", "loss_scale", "version", "numpy", "chance",
                      "higher_is_better", "device", "gpu"})


@dataclass(frozen=True)
class Setup:
    """What a task builds from a seed: everything one training run needs.

    Parameters
    ----------
    model : fpsim.nn.Module
        The model, initialised from the seed.
    optimizer : fpsim.optim.Optimizer
        Its optimizer, over ``model.parameters()``.
    batches : iterable
        Training batches, at least as many as the task's ``steps``.
    loss : callable
        ``loss(model, batch)``: the scalar loss ``Tensor`` of a batch.
    evaluate : callable
        ``evaluate(model, policy)``: the metric on held-out data (a float), the model
        run under the precision ``policy`` (``with policy, fpsim.no_grad(): ...``). On a
        task's ``device="cuda"`` the model is on the GPU: copy the inputs there
        (``fpsim.tensor(x, device=...)``) and the outputs back (``.numpy()``).
    """

    model: Module
    optimizer: Optimizer
    batches: Iterable[Any]
    loss: Callable[[Module, Any], Tensor]
    evaluate: Callable[[Module, Policy], float]


@dataclass(frozen=True)
class Task:
    """A training task: ``build(seed)`` returns the ``Setup`` of one run.

    Parameters
    ----------
    name : str
        What records and tables call it.
    build : callable
        ``build(seed) -> Setup``; defined in a module or a script, whose source is part
        of the runs' cache key (an edit trains again).
    steps : int
        Optimizer steps per run.
    eval_every : int
        The metric is measured every this many steps, and after the last.
    metric : str
        What ``evaluate`` measures, for tables.
    higher_is_better : bool
        Whether a larger metric is better (accuracy) or worse (a loss).
    clip_norm : float or None
        Clip gradients to this global norm.
    chance : float or None
        The metric of uniform guessing (a positive number: 100 / classes for accuracy in
        percent, log2(vocabulary) for bits per character). A run whose final metric is
        worse than chance by more than ``fpsim.sweep.divergence.CHANCE_FACTOR`` is
        labelled diverged; None: that rule does not apply.
    device : {"cpu", "cuda"}
        Where the runs train: ``"cuda"`` moves each run's model to the GPU before its
        first step and copies each batch there (its NumPy arrays); ``build`` still makes
        everything on the host.
    config : mapping
        Everything else that determines a run and is not in the source of ``build``'s
        module (hyperparameters read from elsewhere, a digest of the data): JSON values.

    Raises
    ------
    ValueError
        Naming the task and the field that is wrong.

    Examples
    --------
    >>> def build(seed):
    ...     ...                       # returns a Setup
    >>> Task("toy", build, steps=100, eval_every=20, metric="accuracy (%)").steps
    100
    """

    name: str
    build: Callable[[int], Setup]
    steps: int
    eval_every: int
    metric: str = "metric"
    higher_is_better: bool = True
    clip_norm: float | None = None
    config: Mapping[str, Any] = field(default_factory=dict)
    chance: float | None = None
    device: str = "cpu"

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError(f"a task's name must be a non-empty string, got {self.name!r}")
        where = f"task {self.name!r}"
        if not callable(self.build):
            raise ValueError(f"{where}: build must be a function of the seed, "
                             f"got {self.build!r}")
        integer(self.steps, f"{where}: steps", 1)
        integer(self.eval_every, f"{where}: eval_every", 1, self.steps)
        if not isinstance(self.metric, str):
            raise ValueError(f"{where}: metric must be a string, got {self.metric!r}")
        boolean(self.higher_is_better, f"{where}: higher_is_better")
        if self.clip_norm is not None:
            real(self.clip_norm, f"{where}: clip_norm", 0, low_open=True)
        if self.chance is not None:
            real(self.chance, f"{where}: chance", 0, low_open=True)
        as_device(self.device, f"{where}: device")
        if not isinstance(self.config, Mapping):
            raise ValueError(f"{where}: config must be a mapping, got {self.config!r}")
        reserved = sorted(RESERVED & set(self.config))
        if reserved:
            raise ValueError(f"{where}: config may not use the key(s) {', '.join(reserved)} "
                             "(the sweep sets them)")
        try:
            json.dumps(dict(self.config), allow_nan=False, sort_keys=True)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where}: config must hold JSON values, finite numbers "
                             f"only: {exc}") from None

    def key(self) -> dict[str, Any]:
        """Everything of the task that determines a run (part of its cache key).

        Returns
        -------
        dict
            The name, length, clipping, chance level and the metric's direction (they
            label a run diverged), ``config`` and ``task_code``: a digest of the source
            of the module that defines ``build``. On ``"cuda"`` also ``device`` and
            ``gpu``, the GPU's name and CuPy's and CUDA's versions (native arithmetic
            is the hardware's); a cpu task's key has neither.

        Raises
        ------
        ValueError
            When that source cannot be found (a function typed at an interactive
            prompt): define it in a file.
        """
        where = {} if self.device == "cpu" else dict(device=self.device, gpu=gpu_identity())
        return dict(task=self.name, steps=self.steps, eval_every=self.eval_every,
                    clip_norm=self.clip_norm, chance=self.chance,
                    higher_is_better=self.higher_is_better,
                    task_code=source_digest(self.build, self.name),
                    **where, **self.config)


def gpu_identity() -> str:
    """The GPU in use: its name, compute capability, and CUDA's and CuPy's versions
    (``fpsim._machine.machine``). A RuntimeError where no GPU is usable."""
    gpu_module()
    return machine(gpu=True)


def source_digest(function: Callable[..., Any], name: str = "") -> str:
    """A digest of the source of the module (or script) that defines ``function``, and of
    the function's qualified name.

    Parameters
    ----------
    function : callable
        A function, a bound method, a ``functools.partial`` or a callable object.
    name : str
        The task's name, for the error message.

    Returns
    -------
    str
        16 hexadecimal digits.

    Raises
    ------
    ValueError
        When the source cannot be found.
    """
    while isinstance(function, functools.partial):
        function = function.func
    function = getattr(function, "__func__", function)
    owner = function if inspect.isfunction(function) else type(function)
    qualname = getattr(owner, "__qualname__", "").encode()
    path = getattr(sys.modules.get(owner.__module__), "__file__", None)
    if path and Path(path).is_file():
        return digest(Path(path).read_bytes(), qualname)
    try:
        return digest(inspect.getsource(owner).encode(), qualname)
    except (OSError, TypeError):
        raise ValueError(f"task {name!r}: cannot find the source of {function!r} to key "
                         "its runs' cache; define the build function in a file") from None
