"""Optimizer base: the update ``w - u`` rounded to each parameter's format, and lost updates.

An update is *absorbed* (lost) when it is nonzero but leaves the weight unchanged:
it rounds to zero in the weight's format, or the rounded subtraction returns the
old weight (fpsim's ABSORBED flag: the smaller operand had no effect).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from fpsim import _device
from fpsim._checks import boolean, integer
from fpsim.formats import Format, as_format
from fpsim.modes import mode_code
from fpsim.nn.module import Parameter
from fpsim.precision import numerics, scaling
from fpsim.precision.policy import Policy, as_policy


class Optimizer:
    """Holds parameters and per-parameter state; ``step()`` applies ``update``.

    A subclass defines ``update``; ``step()`` rounds each update ``u`` to the parameter's
    format and subtracts it there, rounded (``w - u``). An update is *absorbed* (lost)
    when it is nonzero but leaves the weight unchanged.

    Attributes
    ----------
    params : list of Parameter
        As given.
    state_format : Format or None
        As given.
    policy : Policy, str or None
        As given.
    state : dict
        Per-parameter state, by ``id(parameter)``.
    absorbed, updated : int
        Of the last step's nonzero updates: how many were lost, and how many there were.
    counts : tuple
        ``(absorbed, updated)`` where the parameters are: on a GPU, 0-d arrays there, read
        on the host only when ``absorbed``, ``updated`` or ``absorbed_fraction`` is.

    Parameters
    ----------
    params : iterable of Parameter
        The parameters to train (``model.parameters()``).
    state_format : Format or str, optional
        The format of the optimizer's state (momentum, moments); each
        parameter's own format by default.
    policy : Policy or str, optional
        The policy the updates are rounded under; the current one at each
        ``step()`` by default.
    master : Format or str, optional
        Keep a master copy of each parameter in this format (``"fp32"``, ``"bf16"``): the
        updates go to it, and the parameter becomes its rounding to the parameter's format
        after each step. None (the default): the parameter is its own master.
    state_scaling : {None, "tensor"}, default None
        ``"tensor"``: the state is stored with one binary32 scale per tensor, current
        scaling (``scale = max / amax``, TransformerEngine's rule, the ``per_tensor``
        scheme of ``fpsim.quantize`` in ``state_format``), as FP8 optimizer states need;
        None: rounded to ``state_format``.
    update_rounding : str, optional
        The rounding of the update's subtraction ``w - u`` (``"stochastic"``: unbiased
        updates of narrow weights); the policy's rounding by default. Stochastic rounding
        draws from the policy's seed (a stream of its own).
    random_bits : int, optional
        The random bits per stochastic rounding of an update (``fpsim.sub``'s budget).
    kahan : bool, default False
        Kahan-compensated updates: a compensation per parameter, in the weights' format,
        carries what each rounded subtraction lost into the next step.

    Raises
    ------
    ValueError
        If there are no parameters, or something else than Parameters; an unknown
        format, rounding mode or state scaling; ``random_bits`` without stochastic
        updates.

    Examples
    --------
    >>> import numpy as np
    >>> import fpsim
    >>> from fpsim import nn, optim
    >>> with fpsim.precision.parse("fp16"):
    ...     w = nn.Parameter([1.0, 1.0])
    >>> w.grad = np.array([1e-4, 0.5])
    >>> opt = optim.SGD([w], lr=0.01)
    >>> opt.step()  # 1 - 1e-6 rounds back to 1 in fp16: that update is lost
    >>> w
    Tensor(array([1.        , 0.99511719]), format=fp16, requires_grad=True)
    >>> opt.absorbed, opt.updated, opt.absorbed_fraction
    (1, 2, 0.5)
    """

    def __init__(self, params: Iterable[Parameter], *, state_format: Format | str | None = None,
                 policy: Policy | str | None = None, master: Format | str | None = None,
                 state_scaling: str | None = None, update_rounding: str | None = None,
                 random_bits: int | None = None, kahan: bool = False):
        self.params = list(params)
        if not self.params:
            raise ValueError("the optimizer got no parameters")
        if any(not isinstance(p, Parameter) for p in self.params):
            raise ValueError("the optimizer takes Parameters (model.parameters())")
        self.state_format = None if state_format is None else as_format(state_format)
        self.master = None if master is None else as_format(master)
        if state_scaling not in (None, "tensor"):
            raise ValueError(f"state_scaling takes None or 'tensor', got {state_scaling!r}")
        self.state_scaling = state_scaling
        if update_rounding is not None:
            mode_code(update_rounding)
        self.update_rounding = update_rounding
        if random_bits is not None:
            random_bits = integer(random_bits, "random_bits", 1, 64)
            if update_rounding != "stochastic":
                raise ValueError("random_bits is the budget of stochastic updates: give "
                                 "update_rounding='stochastic' too")
        self.random_bits = random_bits
        self.kahan = boolean(kahan, "kahan")
        self.policy = policy
        self.state: dict[int, dict[str, np.ndarray]] = {}
        # The last step's counts where the parameters are (0-d arrays on a GPU).
        self.counts: tuple[Any, Any] = (0, 0)

    def zero_grad(self) -> None:
        """Clear every parameter's gradient (set it to None)."""
        for p in self.params:
            p.grad = None

    def _policy(self) -> Policy:
        return as_policy(self.policy)

    def store(self, p: Parameter, value: np.ndarray, policy: Policy) -> np.ndarray:
        """``value`` rounded to the optimizer state's format (the parameter's by default).

        Parameters
        ----------
        p : Parameter
            The parameter the state belongs to.
        value : numpy.ndarray
            The state's new value.
        policy : Policy
            The policy whose rounding applies.

        Returns
        -------
        numpy.ndarray
            The stored values (with ``state_scaling="tensor"``, each element times the
            tensor's decode scale).
        """
        fmt = self.state_format or p.format
        if self.state_scaling is None:
            return numerics.round(value, fmt, policy)
        stored: np.ndarray = _scaled(value, fmt, policy)
        return stored

    def step(self) -> None:
        """Update every parameter with a gradient; counts absorbed updates.

        Parameters without a gradient (``grad`` None) are left alone. The state follows
        its parameter: state left on another device (the model moved) is copied over.
        Then the step ends for a scaling recipe's delayed scales (``fpsim.precision.
        scaling.advance``): their amax histories roll and their scales are recomputed.
        """
        policy = self._policy()
        self.counts = (0, 0)
        for p in self.params:
            if p.grad is None:
                continue
            state = self.state.setdefault(id(p), {})
            for key, value in state.items():
                if hasattr(value, "shape") and _device.device_of(value) != p.device:
                    state[key] = _device.transfer(value, p.device)
            xp = _device.array_module(p.data)
            with np.errstate(all="ignore"):
                delta = self.update(p, _device.binary64(xp.asarray(p.grad)), state, policy)
            self._apply(p, delta, policy, state)
        scaling.advance(self.params)  # a recipe's delayed scales: the step's amaxes

    def update(self, p: Parameter, grad: np.ndarray, state: dict[str, Any],
               policy: Policy) -> np.ndarray:
        """The amount to subtract from ``p`` (before rounding); subclasses define it.

        Parameters
        ----------
        p : Parameter
            The parameter.
        grad : numpy.ndarray
            Its gradient, as float64.
        state : dict
            Its state, which the method may update.
        policy : Policy
            The policy of the step (``store`` rounds state with it).

        Returns
        -------
        numpy.ndarray
            The update, unrounded.

        Raises
        ------
        NotImplementedError
            In ``Optimizer`` itself.
        """
        raise NotImplementedError

    def _apply(self, p: Parameter, delta: np.ndarray, policy: Policy,
               state: dict[str, Any]) -> None:
        fmt = self.master or p.format
        if self.master is not None and "master" not in state:
            state["master"] = numerics.round(p.data, fmt, policy)
        w = state["master"] if self.master is not None else p.data
        u = numerics.round(delta, fmt, policy)
        update = numerics.stream(policy, "optim.update") if (
            self.update_rounding == "stochastic") else policy
        if self.kahan:
            new, absorbed = self._compensated(w, u, fmt, update, state)
        else:
            new, absorbed = numerics.subtract(w, u, fmt, update, self.update_rounding,
                                              self.random_bits)
        nonzero = delta != 0
        xp = _device.array_module(p.data)
        # Counted where the values are: nothing is read on a GPU until asked for.
        lost = xp.count_nonzero(nonzero & ((u == 0) | absorbed))
        self.counts = (self.counts[0] + lost, self.counts[1] + xp.count_nonzero(nonzero))
        if self.master is not None:
            state["master"] = new
            new = numerics.round(new, p.format, policy)
        p.data = xp.asarray(new, dtype=p.data.dtype)

    def _compensated(self, w: Any, u: Any, fmt: Format, policy: Policy,
                     state: dict[str, Any]) -> tuple[Any, Any]:
        """Kahan's compensated ``w - u`` in ``fmt``: ``y = -u - c``, ``t = w + y``,
        ``c = (t - w) - y`` (each rounded to ``fmt``; ``t`` in the update's rounding), and
        whether the weight kept its value."""
        xp = _device.array_module(w)
        c = state.get("compensation")
        if c is None:
            c = xp.zeros_like(_device.binary64(xp.asarray(w)))
        plain = numerics.stream(policy, "optim.kahan") if policy.rounding == "stochastic" \
            else policy
        y, _ = numerics.subtract(-u, c, fmt, plain, "nearest_even")
        t, _ = numerics.subtract(w, -y, fmt, policy, self.update_rounding, self.random_bits)
        moved, _ = numerics.subtract(t, w, fmt, plain, "nearest_even")
        state["compensation"], _ = numerics.subtract(moved, y, fmt, plain, "nearest_even")
        return t, t == w

    @property
    def absorbed(self) -> int:
        """Of the last step's nonzero updates, how many were lost (absorbed)."""
        return int(self.counts[0])

    @property
    def updated(self) -> int:
        """The last step's nonzero updates."""
        return int(self.counts[1])

    @property
    def absorbed_fraction(self) -> float:
        """Of the last step's nonzero updates, the fraction lost to rounding (absorbed).

        Zero when there were none.
        """
        return self.absorbed / self.updated if self.updated else 0.0


def _scaled(value: Any, fmt: Format, policy: Policy) -> Any:
    """``value`` stored in ``fmt`` with one binary32 scale (current scaling, the
    ``per_tensor`` scheme of ``fpsim.quantize``), as the values it stands for."""
    from dataclasses import replace

    from fpsim.quantize import dequantize, quantize
    from fpsim.quantize.schemes import scheme

    wide = _device.binary64(_device.array_module(value).asarray(value))
    stream = numerics.stream(policy, "optim.state")
    with _device.kernels(wide):  # on the value's device
        q = quantize(wide, replace(scheme("per_tensor"), element=fmt), rounding=policy.rounding,
                     seed=numerics.seed(stream, policy.rounding))
    return dequantize(q)
