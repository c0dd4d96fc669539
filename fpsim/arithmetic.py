"""Elementwise arithmetic in a format: the exact result rounded once (IEEE 754)."""

from __future__ import annotations

from fpsim._elementwise import elementwise

_DOC = """

    Operands must be values of ``fmt`` (``ValueError`` otherwise). With
    ``flags=True`` returns ``(result, flags)``; see ``docs/semantics.md``.
    """


def _binary(kernel: str, name: str, doc: str):
    def op(a, b, fmt, rounding: str = "nearest_even", *, subnormals: bool = True,
           saturate: bool = False, flags: bool = False, seed: int | None = None,
           random_bits: int | None = None):
        return elementwise(
            kernel, {"a": a, "b": b}, fmt, rounding, subnormals=subnormals, saturate=saturate,
            flags=flags, seed=seed, random_bits=random_bits, arithmetic=True,
        )

    op.__name__ = op.__qualname__ = name
    op.__doc__ = doc + _DOC
    return op


add = _binary("op_add", "add", "a + b rounded to ``fmt``.")
sub = _binary("op_sub", "sub", "a - b rounded to ``fmt``.")
mul = _binary("op_mul", "mul", "a * b rounded to ``fmt``.")
div = _binary("op_div", "div", "a / b rounded to ``fmt``.")


def sqrt(a, fmt, rounding: str = "nearest_even", *, subnormals: bool = True,
         saturate: bool = False, flags: bool = False, seed: int | None = None,
         random_bits: int | None = None):
    """The square root of a, rounded to ``fmt``."""
    return elementwise(
        "op_sqrt", {"a": a}, fmt, rounding, subnormals=subnormals, saturate=saturate,
        flags=flags, seed=seed, random_bits=random_bits, arithmetic=True,
    )


def fma(a, b, c, fmt, rounding: str = "nearest_even", *, subnormals: bool = True,
        saturate: bool = False, flags: bool = False, seed: int | None = None,
        random_bits: int | None = None):
    """a * b + c rounded once to ``fmt``."""
    return elementwise(
        "op_fma", {"a": a, "b": b, "c": c}, fmt, rounding, subnormals=subnormals,
        saturate=saturate, flags=flags, seed=seed, random_bits=random_bits, arithmetic=True,
    )


sqrt.__doc__ += _DOC
fma.__doc__ += _DOC
