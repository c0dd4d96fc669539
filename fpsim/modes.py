"""Rounding-mode names and their codes in the kernels."""

NEAREST_EVEN = 0
NEAREST_AWAY = 1
TOWARD_ZERO = 2
UP = 3
DOWN = 4
ODD = 5
STOCHASTIC = 6

CODES = {
    "nearest_even": NEAREST_EVEN,
    "nearest_away": NEAREST_AWAY,
    "toward_zero": TOWARD_ZERO,
    "up": UP,
    "down": DOWN,
    "odd": ODD,
    "stochastic": STOCHASTIC,
}


def mode_code(rounding: str) -> int:
    """The kernel code of a rounding-mode name; ``ValueError`` for an unknown one."""
    if not isinstance(rounding, str) or rounding not in CODES:
        known = ", ".join(CODES)
        raise ValueError(f"unknown rounding mode {rounding!r}; known modes: {known}")
    return CODES[rounding]
