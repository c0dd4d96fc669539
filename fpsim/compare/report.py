"""The comparison's outputs: results.json, a markdown table, a figure, the verdicts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import numpy as np

from fpsim.compare.cases import Record
from fpsim.compare.metrics import HISTOGRAM_EDGES, share, ulp_text


def bin_labels() -> list[str]:
    """Labels of the histogram's bins: 0, 1, 2, 3-4, 5-8, ..., more, NaN against a number."""
    edges = list(HISTOGRAM_EDGES)
    labels = []
    for lo, hi in zip(edges, edges[1:] + [None], strict=False):
        if hi is None:
            labels.append(f">={lo}")
        elif hi - lo == 1:
            labels.append(str(lo))
        else:
            labels.append(f"{lo}-{hi - 1}")
    return labels + ["NaN/num"]


def markdown(records: list[Record], header: dict[str, Any], more: str = "") -> str:
    """The table of cases (the closest candidate of each) and of every candidate; then
    ``more`` (the training suite's tables)."""
    lines = [f"Machine: {header['machine']}  ", "Versions: " + ", ".join(
        f"{k} {v}" for k, v in header["versions"].items()) + "  ",
        f"Suite {header['suite']}, "
        + (f"{header['steps']} steps" if "steps" in header else f"size {header['size']}")
        + f", seed {header['seed']}.", "",
        *([f"**{header['not_run'][:1].upper()}{header['not_run'][1:]}.**", ""]
          if header.get("not_run") else []),
        "| case | hardware | closest emulation | identical | max ulp | median ulp | verdict |",
        "| --- | --- | --- | ---: | ---: | ---: | --- |"]
    for r in records:
        if r.skipped:
            lines.append(f"| {r.name} | {r.hardware_is} | | | | | {r.verdict} |")
            continue
        c = r.results[cast(str, r.best)]
        lines.append(f"| {r.name} | {r.hardware_is} | {r.best} | {share(c.identical)} | "
                     f"{ulp_text(c.max_ulp)} | {ulp_text(c.median_ulp)} | {r.verdict} |")
    lines += ["", "Every candidate:", "",
              "| case | candidate | identical | max ulp | median ulp |",
              "| --- | --- | ---: | ---: | ---: |"]
    for r in records:
        for model, c in r.results.items():
            lines.append(f"| {r.name} | {model} | {share(c.identical)} | "
                         f"{ulp_text(c.max_ulp)} | {ulp_text(c.median_ulp)} |")
    text = "\n".join(lines) + "\n"
    return text + ("\n" + more if more else "")


# The histograms' text, in points: readable at the figure's size in a page.
TITLE_SIZE, LABEL_SIZE, TICK_SIZE = 10, 10, 9
COUNTED = "number of elements"


def histogram_figure(records: list[Record]) -> Any:
    """A matplotlib Figure: per case that ran, a histogram of its closest candidate's ulp
    distances (the elements at each distance, on a log scale)."""
    import textwrap

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [r for r in records if r.results]
    cols = min(3, max(1, len(shown)))
    rows = max(1, -(-len(shown) // cols))
    fig, axes = plt.subplots(rows, cols, figsize=(5.0 * cols, 3.6 * rows), squeeze=False,
                             layout="constrained")
    labels = bin_labels()
    for ax, r in zip(axes.ravel(), shown, strict=False):
        c = r.results[cast(str, r.best)]
        counts = np.asarray(c.histogram, dtype=np.float64)
        ax.bar(range(len(labels)), np.where(counts > 0, counts, np.nan), color="tab:blue")
        ax.set_yscale("log")
        ax.set_ylim(0.5, max(10.0, 3.0 * float(counts.max(initial=1.0))))
        title = f"{r.name}: {share(c.identical)} identical\nclosest: {r.best}"
        ax.set_title("\n".join(textwrap.fill(line, 60) for line in title.splitlines()),
                     fontsize=TITLE_SIZE)
        ax.set_xticks(range(len(labels)), labels, rotation=90, fontsize=TICK_SIZE)
        ax.set_xlim(-0.8, len(labels) - 0.2)
        ax.tick_params(axis="y", labelsize=TICK_SIZE)
        ax.set_ylabel(COUNTED, fontsize=LABEL_SIZE)
    for ax in axes.ravel()[len(shown):]:
        ax.axis("off")
    fig.supxlabel("distance from the hardware's result (ulp of the case's format)",
                  fontsize=LABEL_SIZE + 1)
    return fig


def figure(records: list[Record], path: Path) -> None:
    """Write ``histogram_figure(records)`` to ``path`` (a PNG)."""
    import matplotlib.pyplot as plt

    fig = histogram_figure(records)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write(records: list[Record], header: dict[str, Any], out: Path, more: str = "",
          extra: dict[str, Any] | None = None) -> dict[str, Path]:
    """results.json, results.md and ulp_histograms.png in ``out``; ``more`` ends
    results.md and ``extra``'s keys join results.json (the training suite's)."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "results.json", "markdown": out / "results.md",
             "figure": out / "ulp_histograms.png"}
    document = dict(header, records=[r.as_dict() for r in records])
    document.update(extra or {})
    paths["json"].write_text(json.dumps(_finite(document), indent=1, allow_nan=False) + "\n")
    paths["markdown"].write_text(markdown(records, header, more))
    figure(records, paths["figure"])
    return paths


def _finite(v: Any) -> Any:
    """JSON has no infinity: an infinite distance (a NaN against a number) is null."""
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_finite(x) for x in v]
    if isinstance(v, float) and not np.isfinite(v):
        return None
    return v


def verdicts(records: list[Record]) -> str:
    """One line a case: its name and its plain verdict."""
    width = max((len(r.name) for r in records), default=0)
    return "\n".join(f"{r.name:{width}}  {r.verdict}" for r in records)
