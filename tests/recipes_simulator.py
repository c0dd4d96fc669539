"""Block quantization and the scaling recipes on device "cuda", under Numba's CUDA simulator
with the CuPy stand-in (``fake_cupy``), against the CPU's Numba backend, bit for bit:

- ``quantize``: ``fpsim.quantize`` of a device array under the cupy backend, for every
  scheme, nearest-even and stochastic, with NaN, infinite and zero blocks: the elements'
  encodings, values and flags, the scales and their encodings, amax, NVFP4's tensor scale,
  ``dequantize`` and ``stats()``, and the arrays stay on the device; the random Hadamard
  transform; ``fpsim.matmul`` of two ``Quantized`` (MX, NVFP4, and blockwise FP8 on a
  tensor core that promotes).
- ``train``: two steps of a small MLP under each preset of
  ``fpsim.precision.recipes.RECIPES`` on device "cuda" against the same run on the CPU:
  the losses, every weight and every delayed scale.

It must run in its own process (``NUMBA_ENABLE_CUDASIM=1`` is read when numba.cuda is
first imported)::

    NUMBA_ENABLE_CUDASIM=1 python tests/recipes_simulator.py [quantize] [train]

On a real GPU (no simulator, CuPy installed) it runs the same comparisons with CuPy, at
the sizes ``--size`` scales (``tests/test_recipes_device.py``'s GPU test). Prints one
line per difference and a summary; exit status 1 on any difference.
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np

SIMULATOR = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
if SIMULATOR:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import fake_cupy

    sys.modules["cupy"] = fake_cupy  # what fpsim imports as CuPy

import fpsim  # noqa: E402
from fpsim import nn, optim, training  # noqa: E402
from fpsim.nn import functional as F  # noqa: E402
from fpsim.precision.recipes import RECIPES  # noqa: E402
from fpsim.precision.scaling import states  # noqa: E402
from fpsim.quantize import SCHEMES, hadamard_transform  # noqa: E402

xp: Any = sys.modules["cupy"] if SIMULATOR else __import__("cupy")
differ = 0
compared = 0


def host(a: Any) -> Any:
    return xp.asnumpy(a) if hasattr(a, "__cuda_array_interface__") else a


def same(what: str, got: Any, want: Any, inputs: Any = None) -> None:
    """Count a comparison; print ``what`` where ``got`` (on the device) and ``want`` differ
    in dtype, shape or any bit (NaN payloads included): the first positions that differ,
    with ``inputs`` there where it has their shape."""
    global differ, compared
    compared += 1
    g, w = np.ascontiguousarray(host(got)), np.ascontiguousarray(want)
    if g.dtype != w.dtype or g.shape != w.shape:
        differ += 1
        print(f"DIFFERS {what}: {g.dtype}{g.shape} against {w.dtype}{w.shape}")
        return
    gb = g.reshape(-1).view(np.uint8).reshape(g.size, g.itemsize)
    wb = w.reshape(-1).view(np.uint8).reshape(w.size, w.itemsize)
    where = np.flatnonzero((gb != wb).any(axis=1))
    if where.size:
        differ += 1
        given = inputs is not None and np.shape(inputs) == g.shape
        shown = ", ".join(f"[{np.unravel_index(i, g.shape)}] {g.flat[i]!r} "
                          f"(0x{gb[i][::-1].tobytes().hex()}) against {w.flat[i]!r} "
                          f"(0x{wb[i][::-1].tobytes().hex()})"
                          + (f" from {np.asarray(inputs).flat[i]!r}" if given else "")
                          for i in where[:4])
        print(f"DIFFERS {what}: {where.size} of {g.size}: {shown}")


def on_device(what: str, *arrays: Any) -> None:
    global differ
    for a in arrays:
        if not isinstance(a, xp.ndarray):
            differ += 1
            print(f"NOT ON THE DEVICE {what}: {type(a).__name__}")


def data(rows: int, cols: int, seed: int) -> np.ndarray:
    """float32 values over many binades, a zero block, NaN and infinities in others."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows, cols)) * np.logspace(-4, 4, cols)).astype(np.float32)
    x[1, :16] = 0.0
    x[0, 3], x[2, 5], x[3, 20] = np.nan, np.inf, -np.inf
    x[3, 7] = np.float32(2.0**-149)
    return x


def check_quantize(size: int) -> None:
    x = data(4 * size, 40 * size, 1)
    finite = np.nan_to_num(x, nan=0.5, posinf=3.0, neginf=-3.0)
    for name, sch in SCHEMES.items():
        rules = ["transformer_engine_pow2"] if sch.kind == "current" else [None]
        for rule in [None, *rules]:
            for mode in ("nearest_even", "stochastic"):
                options = dict(pad=True, rounding=mode, seed=7 if mode == "stochastic" else None,
                               scale_rule=rule)
                for values in (x, finite, x.T.copy()):
                    axis = -1
                    if values.shape[0] > values.shape[1]:  # columns: the stream's index
                        if sch.rows > 1:
                            continue
                        axis = 0
                    what = f"{name} {rule} {mode} axis={axis}"
                    with fpsim.backend("numba"):
                        want = fpsim.quantize(values, name, axis=axis, **options)
                        want_stats, want_dq = want.stats(), fpsim.dequantize(want)
                    with fpsim.backend("cupy"):
                        got = fpsim.quantize(xp.asarray(values), name, axis=axis, **options)
                        got_stats, got_dq = got.stats(), fpsim.dequantize(got)
                    on_device(what, got.bits, got.flags, got.scale_bits, got.scales,
                              got.values, got_dq)
                    for field in ("bits", "flags", "scale_bits", "scales", "values"):
                        same(f"{what} {field}", getattr(got, field), getattr(want, field),
                             values)
                    same(f"{what} dequantize", got_dq, want_dq, values)
                    same(f"{what} amax, tensor scale",
                         np.float64([got.amax, got.tensor_scale or 0.0]),
                         np.float64([want.amax, want.tensor_scale or 0.0]))
                    global compared, differ
                    compared += 1
                    if repr(got_stats) != repr(want_stats):
                        differ += 1
                        print(f"DIFFERS {what} stats: {got_stats} against {want_stats}")
    check_products(finite, size)


def check_products(x: np.ndarray, size: int) -> None:
    """The Hadamard transform, and ``fpsim.matmul`` of two ``Quantized``."""
    k = 32 * size
    a, b = x[:, :k], x[:, 8 * size:8 * size + k].T.copy()  # (M, K) and (K, N)
    cases = [("mxfp8_e4m3", {}), ("nvfp4", {}),
             ("fp8_block1x128", {"model": fpsim.hw.H100_FP8.with_promotion(128)})]
    for name, options in cases:
        pad = name.startswith("fp8_block")
        results = []
        for backend, arr in (("numba", np.asarray), ("cupy", xp.asarray)):
            with fpsim.backend(backend):
                qa = fpsim.quantize(arr(a), name, pad=pad)
                qb = fpsim.quantize(arr(b), name, axis=0, pad=pad)
                results.append(fpsim.matmul(qa, qb, **options))
        on_device(f"matmul {name}", results[1])
        same(f"matmul {name}", results[1], results[0])
    results = []
    for backend, arr in (("numba", np.asarray), ("cupy", xp.asarray)):
        with fpsim.backend(backend):
            results.append(hadamard_transform(arr(a), seed=3, axis=-1))
    on_device("hadamard_transform", results[1])
    same("hadamard_transform", results[1], results[0])


def padded(preset: str) -> str:
    """The preset with every block scaling padded (the layers are narrower than a block)."""
    r = RECIPES[preset]
    extra = []
    for category in ("act", "weight", "grad"):
        s = getattr(r, category)
        if s is not None and s.kind == "block":
            extra.append(f"{category}={s}:pad=on")
    return ",".join([preset, *extra])


def train(preset: str, device: str, size: int
          ) -> tuple[list[float], list[Any], list[float], str]:
    """Two steps of a small MLP under ``preset`` on ``device``: the losses, the weights,
    the delayed scales and the ``RecipeMonitor``'s records."""
    width, batch = 16 * size, 16 * size
    with fpsim.backend("numba"):
        nn.manual_seed(0)
        model = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 4))
        # The delayed preset's run also keeps its momentum in fp8 with a tensor scale.
        state = dict(state_format="fp8_e4m3", state_scaling="tensor") if (
            preset == "fp8_hybrid_delayed") else {}
        opt = optim.SGD(model.parameters(), lr=0.05, momentum=0.9, **state)
        # Sums in k order: "any" (the default) is the library's order, not the same on a GPU.
        trainer = training.Trainer(model, opt,
                                   f"{padded(preset)},order=sequential,seed=5,keep=last")
        model.to(device)
        rng = np.random.default_rng(0)
        losses = []
        with training.RecipeMonitor(model) as monitor:
            for _ in range(2):  # the second step uses the first one's delayed scales
                x, y = rng.normal(size=(batch, width)), rng.integers(0, 4, batch)
                xs = fpsim.tensor(x, device=device)
                ys = y if device == "cpu" else xp.asarray(y)
                loss = trainer.step(lambda xs=xs, ys=ys: F.cross_entropy(model(xs), ys)).loss
                losses.append(float(host(getattr(loss, "data", loss))))
        scales = [float(s.scale) for p in model.parameters() for s in states(p).values()]
        weights = [p.data for p in model.parameters()]
        if device == "cuda":
            on_device(f"{preset} weights", *weights)
        return losses, [host(w) for w in weights], scales, repr(monitor.steps)


def refused(what: str, error: type, words: tuple[str, ...], func: Any) -> None:
    """Count a check that ``func()`` raises ``error`` with each of ``words`` in its message."""
    global differ, compared
    compared += 1
    try:
        func()
    except error as exc:
        if all(w in str(exc) for w in words):
            return
        print(f"WRONG MESSAGE {what}: {exc}")
    else:
        print(f"NOT REFUSED {what}")
    differ += 1


def check_refusals() -> None:
    """What cannot run on the device says so: a block-scaled instruction as a recipe's gemm
    (computed on the host only), and a device array without the cupy backend."""

    def block_scaled_gemm() -> None:
        with fpsim.backend("numba"):
            model = nn.Linear(32, 4).to(f"{padded('mxfp8')},gemm=B200_MXF8F6F4").to("cuda")
            model(fpsim.tensor(np.ones((2, 32)), device="cuda"))

    refused("gemm=B200_MXF8F6F4 on cuda", NotImplementedError,
            ("B200_MXF8F6F4", "host only", "device 'cuda'"), block_scaled_gemm)
    with fpsim.backend("numba"):
        refused("quantize under numba", ValueError, ("cupy backend",),
                lambda: fpsim.quantize(xp.ones(32), "mxfp8_e4m3"))


def check_training(size: int) -> None:
    check_refusals()
    for preset in RECIPES:
        cpu = train(preset, "cpu", size)
        cuda = train(preset, "cuda", size)
        same(f"{preset} losses", np.float64(cuda[0]), np.float64(cpu[0]))
        same(f"{preset} delayed scales", np.float64(cuda[2]), np.float64(cpu[2]))
        for i, (got, want) in enumerate(zip(cuda[1], cpu[1], strict=True)):
            same(f"{preset} parameter {i}", got, want)
        global compared, differ
        compared += 1
        if cuda[3] != cpu[3] or "TensorStep" not in cpu[3]:
            differ += 1
            print(f"DIFFERS {preset} RecipeMonitor: {cuda[3][:300]} against {cpu[3][:300]}")
        print(f"{preset}: losses {cpu[0]}", flush=True)


def main() -> int:
    args = [a for a in sys.argv[1:] if not a.startswith("--size=")]
    size = int(next((a[7:] for a in sys.argv[1:] if a.startswith("--size=")), "1"))
    parts = args or ["quantize", "train"]
    warnings.simplefilter("ignore")  # the simulator's NumPy scalars warn on wrapping
    if "quantize" in parts:
        check_quantize(size)
    if "train" in parts:
        check_training(size)
    print(f"{compared} compared, {differ} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
