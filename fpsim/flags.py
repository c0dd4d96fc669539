"""IEEE 754 exception flags, plus ABSORBED (the mantissa-shift loss of an addition)."""

INEXACT = 1
UNDERFLOW = 2
OVERFLOW = 4
DIVBYZERO = 8
INVALID = 16
ABSORBED = 32

NAMES = {
    INEXACT: "inexact",
    UNDERFLOW: "underflow",
    OVERFLOW: "overflow",
    DIVBYZERO: "divbyzero",
    INVALID: "invalid",
    ABSORBED: "absorbed",
}


def describe(flags: int) -> str:
    """Names of the flags set in ``flags``, e.g. ``"inexact|underflow"``."""
    return "|".join(name for bit, name in NAMES.items() if int(flags) & bit) or "none"
