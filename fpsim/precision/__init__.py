"""Mixed-precision policies and the arithmetic they stand for."""

from fpsim.precision.policy import Policy, as_policy, current, parse

__all__ = ["Policy", "as_policy", "current", "parse"]
