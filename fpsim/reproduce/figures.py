"""PNG figures with matplotlib (no display needed), one colour per policy throughout."""

from __future__ import annotations

from pathlib import Path

COLORS = {
    "fp32": "#222222", "mixed": "#1f77b4", "no_master": "#d62728",
    "no_loss_scaling": "#ff7f0e", "fp16_accum": "#9467bd", "bf16": "#2ca02c",
    "native_fp16": "#17becf", "fp8_hybrid_delayed": "#8c564b", "fp8_hybrid_current": "#e377c2",
    "mxfp8": "#bcbd22", "nvfp4": "#393b79", "fp8_blockwise": "#637939",
}


def pyplot():
    """matplotlib.pyplot on the Agg (file-only) backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def subplots(n: int, width: float = 4.2, height: float = 3.2, rows: int = 1):
    """``rows`` rows of ``n`` axes, as one list (row by row)."""
    plt = pyplot()
    fig, axes = plt.subplots(rows, n, figsize=(width * n, height * rows), squeeze=False)
    return fig, [ax for row in axes for ax in row]


def save(fig, out: Path, name: str) -> str:
    """Write ``fig`` to ``out/name`` and return ``name``."""
    out.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out / name, dpi=100)
    pyplot().close(fig)
    return name
