"""Tools for testing rounding code against fpsim: assertions and Hypothesis strategies.

Assertions (``numpy.testing`` style; they need only NumPy):
``assert_bits_equal``, ``assert_ulp_close``, ``assert_correctly_rounded``.
Strategies (they import Hypothesis, on first use): ``values``, ``bits``,
``near_ties``, ``arrays``, ``formats``, ``roundings``. ``import fpsim`` imports
neither; see docs/testing.md.
"""

from typing import Any

from fpsim.testing.assertions import (
    assert_bits_equal,
    assert_correctly_rounded,
    assert_ulp_close,
)

_STRATEGIES = ("values", "bits", "near_ties", "arrays", "formats", "roundings")

__all__ = ["assert_bits_equal", "assert_correctly_rounded", "assert_ulp_close",
           *_STRATEGIES]


def __getattr__(name: str) -> Any:
    if name in _STRATEGIES:
        try:
            from fpsim.testing import strategies
        except ImportError as exc:
            raise ImportError(f"fpsim.testing.{name} is a Hypothesis strategy: install "
                              f"Hypothesis (pip install hypothesis): {exc}") from None
        return getattr(strategies, name)
    raise AttributeError(f"module 'fpsim.testing' has no attribute {name!r}")
