"""Rounding-mode names and their codes in the kernels.

``fpsim.ROUNDING_MODES`` lists the names every function takes.

Examples
--------
>>> import fpsim
>>> fpsim.ROUNDING_MODES
('nearest_even', 'nearest_away', 'toward_zero', 'up', 'down', 'odd', 'stochastic')
"""

NEAREST_EVEN = 0
NEAREST_AWAY = 1
TOWARD_ZERO = 2
UP = 3
DOWN = 4
ODD = 5
STOCHASTIC = 6

#: The kernel code of each rounding mode.
CODES: dict[str, int] = {
    "nearest_even": NEAREST_EVEN,
    "nearest_away": NEAREST_AWAY,
    "toward_zero": TOWARD_ZERO,
    "up": UP,
    "down": DOWN,
    "odd": ODD,
    "stochastic": STOCHASTIC,
}


def mode_code(rounding: str) -> int:
    """The kernel code of a rounding mode.

    Parameters
    ----------
    rounding : str
        A name of ``CODES``.

    Returns
    -------
    int

    Raises
    ------
    ValueError
        An unknown name (the message lists the known ones).

    Examples
    --------
    >>> from fpsim.modes import mode_code
    >>> mode_code("odd")
    5
    """
    if not isinstance(rounding, str) or rounding not in CODES:
        known = ", ".join(CODES)
        raise ValueError(f"unknown rounding mode {rounding!r}; known modes: {known}")
    return CODES[rounding]
