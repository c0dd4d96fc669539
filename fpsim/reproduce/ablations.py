"""The ablations the studies name: the paper's (the presets of ``fpsim.sweep``), and the
FP8 and FP4 recipes with each of their pieces removed in turn (``RECIPE_ABLATIONS``, the
``fp8`` study group's)."""

from __future__ import annotations

from dataclasses import replace

from fpsim.precision.policy import parse
from fpsim.precision.recipes import CATEGORIES
from fpsim.sweep.ablation import ABLATIONS, NATIVE_ABLATIONS, Ablation, shrunk
from fpsim.sweep.ablation import ablation as sweep_ablation

__all__ = ["ABLATIONS", "NATIVE_ABLATIONS", "RECIPE_ABLATIONS", "Ablation", "ablation",
           "padded", "shrunk"]


def padded(text: str) -> str:
    """The policy ``text`` with each block scaling of its recipe padded (``pad=on``): the
    tasks' products have K of 9, 10 and 144, which no block of 16, 32 or 128 divides.

    Examples
    --------
    >>> "act=mxfp8_e4m3:rule=transformer_engine:pad=on" in padded("mxfp8")
    True
    """
    policy = parse(text)
    r = policy.recipe
    if r is None:
        return str(policy)
    changes = {c: replace(s, pad=True) for c in CATEGORIES
               if (s := getattr(r, c)) is not None and s.kind == "block"}
    return str(replace(policy, recipe=replace(r, **changes)))


def _recipe(name: str, text: str, summary: str) -> Ablation:
    # The recipes' sources train with bf16 and no loss scale (their scales do its work).
    # seed=0: stochastic rounding (NVFP4's gradients) replays; without a seed it would
    # draw fresh random bits in every run.
    return Ablation(name, padded(f"{text},seed=0"), None, summary)


RECIPE_ABLATIONS: dict[str, Ablation] = {a.name: a for a in (
    _recipe("fp8_hybrid_delayed", "fp8_hybrid_delayed",
            "TransformerEngine's delayed scaling: E4M3 forward, E5M2 gradients, per-tensor "
            "scales from a 1024-step amax history"),
    _recipe("fp8_hybrid_current", "fp8_hybrid_current",
            "as fp8_hybrid_delayed, each tensor's scale from its own amax"),
    _recipe("mxfp8", "mxfp8", "MXFP8: E4M3 in blocks of 32 with E8M0 scales"),
    _recipe("nvfp4", "nvfp4",
            "NVFP4: E2M1 in blocks of 16 with UE4M3 scales and a tensor scale, 16x16 weight "
            "blocks, stochastic rounding of gradients, a 16-point Hadamard transform in the "
            "weight gradient, the last layer in bf16"),
    _recipe("fp8_blockwise", "fp8_blockwise",
            "blockwise FP8 (TransformerEngine's Float8BlockScaling, DeepSeek-V3's blocks): "
            "1x128 and 128x128 blocks with power-of-two scales, Hopper's fp8 accumulator "
            "promoted every 128, the last layer in bf16"),
    _recipe("fp8_unscaled", "bf16,act=fp8_e4m3,weight=fp8_e4m3,grad=fp8_e5m2,wgrad=fp32",
            "as fp8_hybrid_current without scaling: every tensor rounded to its fp8 format"),
    _recipe("nvfp4_no_sr", "nvfp4,grad=nvfp4",
            "as nvfp4, gradients rounded to nearest instead of stochastically"),
    _recipe("nvfp4_no_rht", "nvfp4,rht=none", "as nvfp4, without the Hadamard transform"),
    _recipe("nvfp4_1d_weights", "nvfp4,weight=nvfp4",
            "as nvfp4, weights in 1x16 blocks instead of 16x16"),
    _recipe("nvfp4_all_fp4", "nvfp4,keep=none", "as nvfp4, the last layer in NVFP4 too"),
    _recipe("fp8_acc_h100", "fp8_hybrid_current,gemm=H100_FP8",
            "as fp8_hybrid_current, products summed by Hopper's fp8 tensor core (its "
            "accumulator keeps 13 fraction bits), never promoted"),
    _recipe("fp8_acc_h100_p128", "fp8_hybrid_current,gemm=H100_FP8,promote=128",
            "as fp8_acc_h100, each 128 products promoted to a binary32 sum (DeepSeek-V3)"),
    _recipe("fp8_acc_b200", "fp8_hybrid_current,gemm=B200_FP8",
            "as fp8_acc_h100 on Blackwell's fp8 tensor core (25 fraction bits)"),
)}
"""The FP8 and FP4 recipes (the presets of ``fpsim.precision.recipes``, padded) and each
of their pieces removed in turn, by name."""


def ablation(name: str | Ablation) -> Ablation:
    """The ablation called ``name``: one of ``RECIPE_ABLATIONS``, else ``fpsim.sweep``'s
    (a preset, or ``no_loss_scaling@2^-k``).

    Raises
    ------
    ValueError
        For an unknown name.

    Examples
    --------
    >>> ablation("nvfp4_no_rht").loss_scale is None
    True
    """
    if isinstance(name, str) and name in RECIPE_ABLATIONS:
        return RECIPE_ABLATIONS[name]
    return sweep_ablation(name)
