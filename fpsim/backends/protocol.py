"""The seam between fpsim's core and a backend: every method the core calls.

A backend evaluates the kernels of ``fpsim.kernels`` on arrays; the core does
all checking, broadcasting and layout before it calls one. Arrays are 1-D
(elementwise) or C-contiguous 2-D/3-D (accumulation), of float32 or float64 (an
elementwise result also of float16 or bfloat16, ``Backend.apply``);
a device backend also takes arrays of its own kind (``__cuda_array_interface__``)
and then writes results into arrays of that kind.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

from fpsim.flags import ABSORBED, INEXACT, OVERFLOW, UNDERFLOW
from fpsim.kernels.spec import BlockSpec, Spec

Array = Any  # a NumPy array, or a device array of the backend's kind


def is_device_array(x: object) -> bool:
    """Whether ``x`` lives on a GPU (CuPy: it has ``__cuda_array_interface__``)."""
    return hasattr(x, "__cuda_array_interface__")

# The counters ``accumulate`` and ``accumulate_blocks`` return, in this order: how
# many rounded additions there were, then how many raised each flag of COUNTED_FLAGS.
COUNTERS = ("additions", "inexact", "absorbed", "underflow", "overflow")
COUNTED_FLAGS = (INEXACT, ABSORBED, UNDERFLOW, OVERFLOW)

KERNELS = ("round_value", "op_add", "op_sub", "op_mul", "op_div", "op_sqrt", "op_fma",
           "op_exp", "op_log", "op_tanh")
ARITY = {"round_value": 1, "op_sqrt": 1, "op_add": 2, "op_sub": 2, "op_mul": 2, "op_div": 2,
         "op_fma": 3, "op_exp": 1, "op_log": 1, "op_tanh": 1}


@runtime_checkable
class Backend(Protocol):
    """What fpsim's core calls on a backend (``fpsim.backends.get_backend()``)."""

    name: str

    def apply(
        self,
        kernel: str,
        operands: Sequence[Array],
        out: Array,
        flags: Array | None,
        spec: Spec,
        key: int | None,
        check: bool = False,
        hot: bool = False,
    ) -> int:
        """Evaluate ``kernel`` (one of ``KERNELS``) elementwise.

        ``operands``: ``ARITY[kernel]`` equally long 1-D arrays; writes ``out`` (float32,
        float64, or a host float16 or ml_dtypes bfloat16 array when that dtype holds every
        value of the format: each result stored exactly) and,
        unless ``flags`` is None, the uint8 ``flags``. ``key``: the uint64 key of the
        random stream (stochastic rounding), drawn by element index; None otherwise.
        With ``check``, returns how many elements have an operand that is not a
        value of the format (else 0). ``hot``: the caller repeats this spec many
        times (a backend may compile for it).
        """
        ...

    def convert(self, x: Array, out: Array) -> None:
        """Write the 1-D ``x`` into the 1-D ``out`` of the same size and another float
        dtype (float16, ml_dtypes' bfloat16, float32, float64) that holds each of its
        values exactly; NaN as a NaN."""
        ...

    def first_unrepresentable(self, x: Array, spec: Spec) -> int:
        """Index of the first element of the 1-D ``x`` that is not a value of the format,
        or -1."""
        ...

    def narrow(self, x: np.ndarray, out: np.ndarray) -> int:
        """Write the 1-D float64 host array ``x`` into the float32 ``out`` of its size
        (each value rounded to nearest); return the index of the first element whose
        value float32 does not hold (every NaN is held), or -1."""
        ...

    def accumulate(
        self,
        A: Array,
        B: Array,
        C: Array,
        out: Array,
        spec: Spec,
        *,
        key: int | None,
        order: Literal["sequential", "pairwise"],
        rounded: bool,
        has_c: bool,
        want_stats: bool,
    ) -> np.ndarray:
        """``out[r, j]`` = the sum over k of ``A[r, k] * B[r // (rows // groups), k, j]``,
        accumulated from ``C[r, j]`` with every addition rounded to ``spec``.

        A (rows, K), B (groups, K, N), C and out (rows, N), all float64 (products of
        the inputs are exact). ``order``: "sequential" (c first, then each term in
        k order; ``rounded`` rounds each product to ``spec`` first) or "pairwise"
        (the tree of ``schedule.pairwise_program(K, has_c)``, terms rounded).
        Stochastic draws: element (r, j) uses stream indices from
        ``(r * N + j) * (2K + 1)`` (docs/accumulation.md). Returns the int64
        ``COUNTERS`` (zeros unless ``want_stats``).
        """
        ...

    def accumulate_blocks(
        self,
        A: Array,
        B: Array,
        C: Array,
        out: Array,
        hw: BlockSpec,
        out_spec: Spec,
        block: int,
        want_stats: bool,
    ) -> np.ndarray:
        """As ``accumulate``, each ``block`` products and the running sum added as the
        block FMA ``hw`` does and rounded to ``out_spec`` (docs/accumulation.md).
        Returns the ``COUNTERS`` (vanished terms count as absorbed)."""
        ...
