"""The error of dot products of fp16 vectors accumulated in fp16 against fp32, as the
inner dimension n grows from 1 to 65536, beside the standard error bounds.

Products of fp16 values are exact; each accumulator rounds every addition. The error
is |computed - exact| / sum |a_i b_i| (the exact sum by math.fsum), the quantity the
bounds bound (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., sec.
3.1 and 4.2), with gamma_k = k u / (1 - k u):
- fp16 sequential: gamma_n. n roundings reach each product: the products are not fp16
  values, so even the first one is rounded on entering the accumulator;
- fp16 pairwise: gamma_max(1, ceil(log2 n)), one rounding per level of the tree;
- fp32 sequential: gamma_(n-1). Products of fp16 values are fp32 values, so the first
  one enters exactly;
- the probabilistic bound of Higham and Mary (SIAM J. Sci. Comput. 2019, thm. 3.1) for
  fp16 sequential: exp(lambda sqrt(n) u + n u^2/(1-u)) - 1, which holds with
  probability at least 1 - 2n exp(-lambda^2 (1-u)^2 / 2) when the rounding errors are
  independent with mean zero; lambda is chosen to make that 0.99.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

import fpsim
from fpsim.reproduce.figures import save, subplots
from fpsim.reproduce.progress import Progress
from fpsim.reproduce.session import Session

NAME = "accumulation_error"
TITLE = "fp16 against fp32 accumulation"

SIZES = tuple(2**k for k in range(17))
TRIALS = {"quick": 16, "full": 64, "gpu": 64}
ACCUMULATORS = {
    "fp16 sequential": dict(accum="fp16", order="sequential"),
    "fp16 pairwise": dict(accum="fp16", order="pairwise"),
    "fp32 sequential": dict(accum="fp32", order="sequential"),
    "H100 tensor-core model": dict(model="H100"),
}
DATA = ("uniform [0, 1)", "normal (0, 1)")
PROBABILITY = 0.99


def needs(session: Session) -> list:
    return []


def gamma(n: int, u: float) -> float | None:
    """gamma_n = n u / (1 - n u); None where n u >= 1 (no bound)."""
    return n * u / (1 - n * u) if n * u < 1 else None


def probabilistic(n: int, u: float, probability: float = PROBABILITY) -> float:
    """Higham and Mary's bound for n roundings, holding with ``probability``."""
    lam = math.sqrt(2 * math.log(2 * n / (1 - probability))) / (1 - u)
    return math.expm1(lam * math.sqrt(n) * u + n * u * u / (1 - u))


def bounds(n: int) -> dict:
    u16, u32 = fpsim.format("fp16").eps / 2, fpsim.format("fp32").eps / 2
    depth = max(1, math.ceil(math.log2(n)))
    return {
        "fp16 sequential (deterministic)": gamma(n, u16),
        "fp16 pairwise (deterministic)": gamma(depth, u16),
        "fp32 sequential (deterministic)": gamma(n - 1, u32),
        "fp16 sequential (probabilistic, 99%)": probabilistic(n, u16),
    }


def _inputs(data: str, n: int, trials: int, rng) -> tuple[np.ndarray, np.ndarray]:
    draw = rng.random if data.startswith("uniform") else rng.standard_normal
    a = fpsim.round(draw((trials, 1, n)), "fp16")
    b = fpsim.round(draw((trials, n, 1)), "fp16")
    return a, b


def _errors(data: str, n: int, trials: int, seed: int) -> dict:
    a, b = _inputs(data, n, trials, np.random.default_rng([seed, n, DATA.index(data)]))
    products = a[:, 0, :] * b[:, :, 0]  # exact in binary64 (11-bit significands)
    exact = np.array([math.fsum(p) for p in products])
    scale = np.abs(products).sum(axis=1)
    out = {}
    for name, options in ACCUMULATORS.items():
        if "model" in options:
            options = dict(model=getattr(fpsim.hw, options["model"]))
        computed = fpsim.matmul(a, b, **options)[:, 0, 0]
        err = np.abs(computed - exact) / np.where(scale > 0, scale, 1)
        out[name] = dict(median=float(np.median(err)), max=float(np.max(err)))
    return out


def _compute(session: Session) -> dict:
    trials = TRIALS[session.budget]
    bar = Progress(len(DATA) * len(SIZES), "accumulation error", session.stream)
    table = {}
    for data in DATA:
        rows = []
        for n in SIZES:
            rows.append(dict(n=n, errors=_errors(data, n, trials, seed=0), bounds=bounds(n)))
            bar.advance(f"{data}, n={n}")
        table[data] = rows
    return dict(trials=trials, sizes=list(SIZES), data=table)


def run(session: Session) -> dict:
    return session.cached(NAME, dict(sizes=list(SIZES), trials=TRIALS[session.budget],
                                     accumulators=list(ACCUMULATORS), data=list(DATA)),
                          lambda: _compute(session))


def figures(result: dict, out: Path) -> list[str]:
    fig, axes = subplots(len(result["data"]), width=5.5, height=4)
    styles = {"fp16 sequential": "C3", "fp16 pairwise": "C1", "fp32 sequential": "C0",
              "H100 tensor-core model": "C2"}
    for ax, (data, rows) in zip(axes, result["data"].items(), strict=True):
        n = [r["n"] for r in rows]
        for name, color in styles.items():
            ax.plot(n, [max(r["errors"][name]["median"], 1e-12) for r in rows], "o-",
                    color=color, ms=3, label=f"{name} (median)")
            ax.plot(n, [max(r["errors"][name]["max"], 1e-12) for r in rows], ":", color=color)
        for key, style in (("fp16 sequential (deterministic)", "k--"),
                           ("fp16 sequential (probabilistic, 99%)", "k-."),
                           ("fp32 sequential (deterministic)", "b--")):
            pts = [(r["n"], r["bounds"][key]) for r in rows if r["bounds"][key] is not None]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], style, lw=1, label=f"bound: {key}")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_ylim(1e-10, 10)
        ax.set(title=f"inputs {data} (dotted: max of {result['trials']})",
               xlabel="inner dimension n", ylabel="|error| / sum |a_i b_i|")
        ax.legend(fontsize=6)
    return [save(fig, out, "accumulation_error.png")]


def markdown(result: dict, files: list[str]) -> str:
    lines = [f"Median relative error over {result['trials']} dot products per size "
             "(error / sum |a_i b_i|).", ""]
    names = list(ACCUMULATORS)
    for data, rows in result["data"].items():
        lines += [f"Inputs {data}:", "",
                  "| n | " + " | ".join(names) + " | fp16 sequential bound |",
                  "| --- | " + " | ".join("---" for _ in names) + " | --- |"]
        for r in rows:
            if r["n"] not in (1, 16, 256, 1024, 4096, 16384, 65536):
                continue
            bound = r["bounds"]["fp16 sequential (deterministic)"]
            lines.append(f"| {r['n']} | " + " | ".join(
                f"{r['errors'][k]['median']:.2e}" for k in names)
                + f" | {'none (nu >= 1)' if bound is None else f'{bound:.2e}'} |")
        lines.append("")
    lines.append(f"![accumulation error]({files[0]})")
    return "\n".join(lines)


if __name__ == "__main__":
    import sys

    from fpsim.reproduce.command import main

    raise SystemExit(main(["--only", NAME, *sys.argv[1:]]))
