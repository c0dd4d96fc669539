"""IEEE 754 exception flags, plus ABSORBED (the mantissa-shift loss of an addition).

Functions called with ``flags=True`` return one uint8 per element, the bitwise or
of the flags raised (``docs/semantics.md`` says when each is raised).

Examples
--------
>>> import fpsim
>>> result, flags = fpsim.add(1.0, 2.0**-12, "fp16", flags=True)
>>> bool(flags & fpsim.ABSORBED), fpsim.flags.describe(flags)
(True, 'inexact|absorbed')
"""

#: The result differs from the exact value (overflow and flush to zero included).
INEXACT = 1
#: The result is tiny (below the smallest normal number after rounding) and inexact;
#: also every flush to zero.
UNDERFLOW = 2
#: The rounded magnitude exceeds the format's largest finite value (also with saturate).
OVERFLOW = 4
#: A finite nonzero number divided by zero.
DIVBYZERO = 8
#: An invalid operation: inf - inf, 0 * inf, 0/0, inf/inf, the square root of a negative
#: number, a signalling NaN operand, or an infinite input to a format without infinities.
INVALID = 16
#: An addition whose finite nonzero addend had no effect: the result equals the other
#: operand (the mantissa-shift loss of an addition).
ABSORBED = 32

#: The name of each flag.
NAMES: dict[int, str] = {
    INEXACT: "inexact",
    UNDERFLOW: "underflow",
    OVERFLOW: "overflow",
    DIVBYZERO: "divbyzero",
    INVALID: "invalid",
    ABSORBED: "absorbed",
}


def describe(flags: int) -> str:
    """The names of the flags set in a flags value.

    Parameters
    ----------
    flags : int
        A flags value (an int, or one element of a flags array).

    Returns
    -------
    str
        The names joined by ``|`` (e.g. ``"inexact|underflow"``), or ``"none"``.

    Raises
    ------
    ValueError, TypeError
        ``flags`` is not an integer (``int(flags)`` fails).

    Examples
    --------
    >>> from fpsim.flags import describe, INEXACT, ABSORBED
    >>> describe(INEXACT | ABSORBED), describe(3), describe(0)
    ('inexact|absorbed', 'inexact|underflow', 'none')
    """
    return "|".join(name for bit, name in NAMES.items() if int(flags) & bit) or "none"
