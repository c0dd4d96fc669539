"""Divergence of a finished run: the rule that labels a run whose numbers blew up, read
from the run itself (its final training loss against its first, and its final metric
against the task's chance level), so that no verdict counts it as seed noise.

A run stops early, diverged, when its loss is non-finite ``NONFINITE_PATIENCE`` steps
in a row, when its weights stop being finite, or when its final metric is not finite
(``fpsim.sweep.train``). A run that trains to the end is labelled diverged by
``divergence`` when:

- its final training loss (the mean over the steps since the previous evaluation) is
  not finite: every one of those steps gave a non-finite loss;
- its final training loss is more than ``LOSS_GROWTH`` times its first (the loss of
  step 1, when that is a positive number);
- its final metric is worse than the task's chance level by more than a factor of
  ``CHANCE_FACTOR``: above ``CHANCE_FACTOR`` times chance when lower is better (bits
  per character: log2 of the vocabulary), below chance over ``CHANCE_FACTOR`` when
  higher is better (accuracy: 100 over the number of classes).
"""

from __future__ import annotations

from fpsim._checks import boolean, real

LOSS_GROWTH = 10.0
"""A final training loss more than this many times the first is a blow-up. A classifier's
cross-entropy starts near ln(classes) (2.3 nats on the digits, 4.7 on 103 characters);
ten times that puts a probability of e^-23 or less on the right class on average, which
no seed's noise reaches: a healthy run ends below its start."""

CHANCE_FACTOR = 2.0
"""A final metric worse than chance by more than this factor is a blow-up. An untrained
model sits near chance on either side (a language model 6 steps in: 6.79 bits per
character against chance's 6.69), so "worse than chance" needs a margin; twice as bad
(13.4 bits per character, 5% accuracy on ten classes) is far from where an untrained or
a slowly training model sits, and far short of the blown-up runs (7726 and 7952 bits)."""


def worse_than_chance(value: float, chance: float, higher_is_better: bool) -> bool:
    """Whether a metric is worse than chance by more than ``CHANCE_FACTOR``.

    Parameters
    ----------
    value : float
        The final metric.
    chance : float
        The metric of uniform guessing (positive).
    higher_is_better : bool
        Whether a larger metric is better (accuracy) or worse (bits per character).

    Returns
    -------
    bool

    Raises
    ------
    ValueError
        For a value that is not a finite number, or a chance level that is not positive.

    Examples
    --------
    >>> worse_than_chance(7952.3, chance=6.69, higher_is_better=False)
    True
    >>> worse_than_chance(6.79, chance=6.69, higher_is_better=False)  # untrained, not diverged
    False
    >>> worse_than_chance(4.0, chance=10.0, higher_is_better=True)
    True
    """
    value = real(value, "the metric")
    chance = real(chance, "chance", 0, low_open=True)
    if boolean(higher_is_better, "higher_is_better"):
        return value < chance / CHANCE_FACTOR
    return value > chance * CHANCE_FACTOR


def divergence(final_loss: float | None, start_loss: float | None, value: float | None,
               chance: float | None, higher_is_better: bool) -> str | None:
    """Why a run that trained to the end diverged, or None when it did not.

    Parameters
    ----------
    final_loss : float or None
        The run's final training loss (its last curve point's); None when it was not
        finite.
    start_loss : float or None
        The loss of its first step; None when that was not finite (the growth rule
        then does not apply).
    value : float or None
        Its final metric.
    chance : float or None
        The task's chance level; None: the chance rule does not apply.
    higher_is_better : bool
        The metric's direction.

    Returns
    -------
    str or None
        The rule that fired, with the numbers, or None.

    Raises
    ------
    ValueError
        For a NaN or infinite number (a non-finite value is passed as None), or a
        chance level that is not positive.

    Examples
    --------
    >>> divergence(5510.0, 4.7, 7952.3, chance=6.69, higher_is_better=False)
    'final training loss 5510 is more than 10 times its first, 4.7'
    >>> divergence(2.1, 4.7, 7952.3, chance=6.69, higher_is_better=False)
    'final metric 7952.3 is worse than 2 times chance (6.69)'
    >>> divergence(None, 4.7, 3.1, chance=6.69, higher_is_better=False)
    'final training loss is not finite'
    >>> print(divergence(2.1, 4.7, 3.07, chance=6.69, higher_is_better=False))
    None
    """
    for name, number in (("final_loss", final_loss), ("start_loss", start_loss),
                         ("value", value)):
        if number is not None:
            real(number, name)
    if chance is not None:
        real(chance, "chance", 0, low_open=True)
    boolean(higher_is_better, "higher_is_better")
    if final_loss is None:
        return "final training loss is not finite"
    if start_loss is not None and start_loss > 0 and final_loss > LOSS_GROWTH * start_loss:
        return (f"final training loss {final_loss:.5g} is more than {LOSS_GROWTH:g} times "
                f"its first, {start_loss:.5g}")
    if chance is not None and value is not None and worse_than_chance(
            value, chance, higher_is_better):
        side = (f"1/{CHANCE_FACTOR:g} of" if higher_is_better else f"{CHANCE_FACTOR:g} times")
        return f"final metric {value:.5g} is worse than {side} chance ({chance:.5g})"
    return None
