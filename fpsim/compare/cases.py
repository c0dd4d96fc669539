"""A comparison case (what the hardware computed, and fpsim's candidate emulations of
it) and its record (how close each candidate came, which came closest, the verdict)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from fpsim.bits import to_bits
from fpsim.compare.metrics import Comparison, compare_bits
from fpsim.formats import as_format


@dataclass(frozen=True)
class Case:
    """One case: ``hardware`` holds the hardware's results (values of ``format``),
    ``candidates`` fpsim's emulations of them, by model name.

    Parameters
    ----------
    name : str
        The case's name (``"numpy fp16 add"``).
    hardware_is : str
        What computed the results, in words.
    emulation_is : str
        How fpsim emulated it, in words.
    format : str
        The format of the results.
    hardware : numpy.ndarray
        The hardware's results, values of ``format``.
    candidates : dict of str to numpy.ndarray
        fpsim's emulations, by model name, of the same shape.

    Examples
    --------
    >>> import numpy as np
    >>> import fpsim
    >>> from fpsim.compare import Case, evaluate
    >>> x = [0.1, 0.3]
    >>> case = Case("numpy cast", "float64.astype(float16)", "fp16 nearest_even", "fp16",
    ...             np.float16(x).astype(np.float64),
    ...             {"nearest_even": fpsim.round(x, "fp16"),
    ...              "toward_zero": fpsim.round(x, "fp16", "toward_zero")})
    >>> case.format, sorted(case.candidates)
    ('fp16', ['nearest_even', 'toward_zero'])

    ``evaluate(case)`` compares them (see its example).
    """

    name: str
    hardware_is: str  # what computed the results, in words
    emulation_is: str  # how fpsim emulated it, in words
    format: str
    hardware: np.ndarray
    candidates: dict[str, np.ndarray]


@dataclass(frozen=True)
class Record:
    """The outcome of one case (or why it was skipped, in ``skipped``).

    Parameters
    ----------
    name, hardware_is, emulation_is, format : str
        As the case's (``format`` the format's name).
    results : dict of str to Comparison
        Each candidate's comparison with the hardware.
    skipped : str, default ""
        Why the case could not run here ("" when it ran).

    Examples
    --------
    >>> from fpsim.compare import Record
    >>> Record("gpu fp16 add", "CuPy float16 add", "", "fp16", skipped="no GPU").verdict
    'skipped: no GPU'
    """

    name: str
    hardware_is: str
    emulation_is: str
    format: str
    results: dict[str, Comparison] = field(default_factory=dict)
    skipped: str = ""

    @property
    def best(self) -> str | None:
        """The candidate closest to the hardware: most identical elements, then the
        smallest maximum and median distance (None when skipped)."""
        if not self.results:
            return None
        return min(self.results, key=lambda m: (-self.results[m].identical,
                                                 self.results[m].max_ulp,
                                                 self.results[m].median_ulp))

    @property
    def verdict(self) -> str:
        """"identical", "differs: N of M, max K ulp", or "skipped: why"."""
        if self.skipped:
            return f"skipped: {self.skipped}"
        c = self.results[cast(str, self.best)]  # a record that ran has results
        if c.identical == 1.0:
            return "identical"
        differ = c.size - round(c.identical * c.size)
        worst = "a NaN against a number" if np.isinf(c.max_ulp) else f"{c.max_ulp:g} ulp"
        return f"differs: {differ} of {c.size}, max {worst}"

    def as_dict(self) -> dict[str, Any]:
        """The record as results.json holds it (``best``, ``verdict`` and each result).

        Returns
        -------
        dict
        """
        return dict(name=self.name, hardware=self.hardware_is, emulation=self.emulation_is,
                    format=self.format, best=self.best, verdict=self.verdict,
                    skipped=self.skipped or None,
                    results={m: c.as_dict() for m, c in self.results.items()})


def skipped(name: str, hardware_is: str, why: str, fmt: str = "") -> Record:
    """The record of a case that could not run here."""
    return Record(name, hardware_is, "", fmt, skipped=why)


def evaluate(case: Case) -> Record:
    """Compare every candidate with the hardware, encoding by encoding (NaNs as a class).

    Parameters
    ----------
    case : Case
        The hardware's results and the candidates.

    Returns
    -------
    Record
        A ``Comparison`` per candidate (``compare_bits``).

    Raises
    ------
    ValueError
        If a candidate's shape is not the hardware's, or its values are not of the format.

    Examples
    --------
    >>> import numpy as np
    >>> import fpsim
    >>> from fpsim.compare import Case, evaluate
    >>> x = [0.1, 0.3]
    >>> case = Case("numpy cast", "float64.astype(float16)", "fp16 nearest_even", "fp16",
    ...             np.float16(x).astype(np.float64),
    ...             {"nearest_even": fpsim.round(x, "fp16"),
    ...              "toward_zero": fpsim.round(x, "fp16", "toward_zero")})
    >>> record = evaluate(case)
    >>> record.best, record.verdict
    ('nearest_even', 'identical')
    >>> record.results["toward_zero"].identical, record.results["toward_zero"].max_ulp
    (0.5, 1.0)
    """
    fmt = as_format(case.format)
    hardware = to_bits(np.asarray(case.hardware, dtype=np.float64), fmt)
    results = {}
    for model, values in case.candidates.items():
        emulated = to_bits(np.asarray(values, dtype=np.float64), fmt)
        if emulated.shape != hardware.shape:
            raise ValueError(f"{case.name}: {model} has shape {emulated.shape}, the hardware's "
                             f"results {hardware.shape}")
        results[model] = compare_bits(emulated, hardware, fmt)
    return Record(case.name, case.hardware_is, case.emulation_is, fmt.name, results)
