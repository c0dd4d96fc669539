"""Scaling recipes in the policy: the typed objects, the policy-string syntax (round trip),
the presets' defaults as their sources state them, and the errors for bad input.

Sources of the pinned defaults:
- TransformerEngine, ``transformer_engine/common/recipe/__init__.py`` and its API docs
  (``DelayedScaling(margin=0, fp8_format=Format.HYBRID, amax_history_len=1024,
  amax_compute_algo="max")``, ``Float8CurrentScaling(fp8_format=Format.HYBRID)``,
  ``MXFP8BlockScaling(fp8_format=Format.E4M3)``, ``NVFP4BlockScaling``: 2-D weight
  quantization, stochastic rounding and random Hadamard transforms of gradients,
  ``Format.HYBRID``: E4M3 forward, E5M2 backward; "Pure E5M2 training is not supported");
- NVIDIA, "Pretraining Large Language Models with NVFP4" (arXiv 2509.25149): 16x16
  Hadamard transform of the weight gradient's inputs, 16x16 weight blocks, stochastic
  rounding of gradients, a few layers in BF16, FP32 weight gradients;
- DeepSeek-V3 (arXiv 2412.19437, section 3.3): 1x128 activation tiles, 128x128 weight
  blocks, E4M3 on all tensors, Hopper's limited fp8 accumulation; output head kept in
  higher precision; TransformerEngine's ``Float8BlockScaling`` (its recipe module):
  x 1-D, w 2-D, grad 1-D blocks, E4M3, power-of-two scales by default;
- OCP Microscaling Formats (MX) v1.0: blocks of 32 with E8M0 scales.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fpsim
from fpsim.precision import Policy, parse
from fpsim.precision.policy import OPERATIONS
from fpsim.precision.recipes import RECIPES, Recipe, Scaling, scaling
from fpsim.quantize import SCHEMES

MODES = ["nearest_even", "toward_zero", "stochastic", "nearest_away"]


def test_presets_pin_their_sources_defaults():
    delayed = RECIPES["fp8_hybrid_delayed"]
    # TransformerEngine DelayedScaling: history 1024, "max", margin 0; HYBRID formats.
    for name, fmt in (("act", "fp8_e4m3"), ("weight", "fp8_e4m3"), ("grad", "fp8_e5m2")):
        s = getattr(delayed, name)
        assert (s.kind, s.format.name, s.history, s.algo, s.margin, s.interval, s.pow2) == (
            "delayed", fmt, 1024, "max", 0, 1, False)
    current = RECIPES["fp8_hybrid_current"]
    assert [(getattr(current, c).kind, getattr(current, c).format.name, getattr(current, c).pow2)
            for c in ("act", "weight", "grad")] == [
        ("current", "fp8_e4m3", False), ("current", "fp8_e4m3", False),
        ("current", "fp8_e5m2", False)]
    mx = RECIPES["mxfp8"]  # E4M3 everywhere, blocks of 32, E8M0 scales, TE's scale rule
    for c in ("act", "weight", "grad"):
        s = getattr(mx, c)
        assert (s.scheme, s.rule) == ("mxfp8_e4m3", "transformer_engine")
        assert SCHEMES[s.scheme].block == 32 and SCHEMES[s.scheme].scale_format.name == "e8m0"
    nv = RECIPES["nvfp4"]
    assert (nv.act.scheme, nv.weight.scheme, nv.grad.scheme) == ("nvfp4", "nvfp4_16x16",
                                                                 "nvfp4")
    assert (nv.act.rounding, nv.weight.rounding, nv.grad.rounding) == (
        "nearest_even", "nearest_even", "stochastic")
    assert nv.rht == 16 and nv.keep == ("last",) and nv.wgrad.format.name == "fp32"
    ds = RECIPES["fp8_blockwise"]
    assert (ds.act.scheme, ds.weight.scheme, ds.grad.scheme) == (
        "fp8_block1x128", "fp8_block128x128", "fp8_block1x128")
    assert ds.gemm == "H100_FP8" and ds.keep == ("last",)
    # TransformerEngine Float8BlockScaling: QParams(power_2_scale=not use_f32_scales), the
    # FP32 scales only with NVTE_FP8_BLOCK_SCALING_FP32_SCALES=1.
    assert (ds.act.pow2, ds.weight.pow2, ds.grad.pow2) == (True, True, True)
    for name in RECIPES:  # the policy presets: bf16 compute, fp32 master weights
        p = parse(name)
        assert (p.compute.name, p.params.name, p.recipe) == ("bf16", "fp32", RECIPES[name])


def test_no_recipe_changes_nothing_in_a_policys_text():
    for text in ("fp32", "mixed", "fp16", "bf16", "native_fp16", "mixed,accum=fp16"):
        p = parse(text)
        assert p.recipe is None and "act=" not in str(p) and "recipe" not in str(p)
    assert Policy(recipe=Recipe()) == Policy()  # an empty recipe is none
    assert parse("fp8_hybrid_delayed,recipe=none") == parse("bf16")
    assert str(Policy(compute="fp16")) == (
        "params=fp32,compute=fp16,accum=fp32,reduce=fp32,output=fp32")


def test_recipe_objects_and_strings_agree():
    r = Recipe(act="fp8_e4m3:delayed:history=16:algo=most_recent:margin=2:interval=3",
               grad=Scaling(fpsim.format("fp8_e5m2"), "current", pow2=True), keep="first+last2")
    p = Policy(compute="bf16", recipe=r)
    assert parse(str(p)) == p
    assert "act=fp8_e4m3:delayed:history=16:algo=most_recent:margin=2:interval=3" in str(p)
    assert "grad=fp8_e5m2:current:pow2=on" in str(p) and "keep=first+last2" in str(p)
    assert Policy(recipe="nvfp4", compute="bf16") == parse("nvfp4")
    assert parse("bf16,recipe=nvfp4,rht=none").recipe.rht == 0
    # Keys change the preset's recipe whatever their order.
    assert parse("act=fp8_e4m3:current,fp8_hybrid_delayed") == parse(
        "fp8_hybrid_delayed,act=fp8_e4m3:current")
    assert scaling("mxfp8_e4m3:block") == scaling("mxfp8_e4m3")


# -- the round trip, over the new keys --------------------------------------------------

formats_fwd = st.sampled_from(["fp8_e4m3", "fp16", "bf16", "fp32", "fp4_e2m1", "fp6_e3m2"])
formats_any = st.sampled_from(["fp8_e4m3", "fp8_e5m2", "bf16", "fp32", "fp4_e2m1"])


@st.composite
def scalings(draw, forward: bool, family: str):
    """A scaling of ``family``: "scaled" (none, delayed, current, binary32 blocks), or an
    exact block family ("mx", "nvfp4")."""
    rounding = draw(st.sampled_from(MODES))
    bits = draw(st.none() | st.integers(1, 24)) if rounding == "stochastic" else None
    common = dict(rounding=rounding, random_bits=bits)
    if family == "mx":
        name = draw(st.sampled_from(["mxfp8_e4m3", "mxfp6_e2m3", "mxfp4_e2m1"]
                                    + ([] if forward else ["mxfp8_e5m2"])))
        rule = draw(st.none() | st.sampled_from(SCHEMES[name].rules))
        return Scaling(None, "block", scheme=name, rule=rule, pad=draw(st.booleans()), **common)
    if family == "nvfp4":
        return Scaling(None, "block", scheme=draw(st.sampled_from(["nvfp4", "nvfp4_16x16"])),
                       pad=draw(st.booleans()), **common)
    fmt = fpsim.format(draw(formats_fwd if forward else formats_any))
    kind = draw(st.sampled_from(["none", "delayed", "current", "block"]))
    if kind == "none":
        return Scaling(fmt, **common)
    if kind == "current":
        return Scaling(fmt, "current", pow2=draw(st.booleans()), **common)
    if kind == "delayed":
        return Scaling(fmt, "delayed", history=draw(st.integers(1, 2048)),
                       algo=draw(st.sampled_from(["max", "most_recent"])),
                       margin=draw(st.integers(-4, 4)), interval=draw(st.integers(1, 5)),
                       pow2=draw(st.booleans()), **common)
    name = draw(st.sampled_from(["fp8_block1x128", "fp8_block128x128", "per_row",
                                 "per_tensor"]))
    pow2 = draw(st.booleans())
    rule = None if pow2 or "block" not in name else draw(
        st.sampled_from([None, "deepseek_v3", "transformer_engine"]))
    return Scaling(None, "block", scheme=name, pow2=pow2, rule=rule, pad=draw(st.booleans()),
                   **common)


@st.composite
def recipes(draw):
    family = draw(st.sampled_from(["scaled", "scaled", "mx", "nvfp4"]))
    cats = {c: draw(st.none() | scalings(c in ("act", "weight"), family))
            for c in ("act", "weight", "grad")}
    if family != "scaled" and any(v is None for v in cats.values()):
        cats = {c: v if v is not None else draw(scalings(c in ("act", "weight"), family))
                for c, v in cats.items()}
    wgrad = draw(st.none() | scalings(False, "scaled"))
    keep = tuple(draw(st.lists(st.sampled_from(["first", "last", "last3", "decoder",
                                                "layers.0"]), max_size=2, unique=True)))
    rht = draw(st.sampled_from([0, 16, 4])) if all(cats[c] for c in ("act", "grad")) else 0
    gemm = promote = None
    if family == "scaled" and all(v is not None and v.format.name in ("fp8_e4m3", "fp8_e5m2")
                                  for v in cats.values()):
        gemm = draw(st.none() | st.sampled_from(["H100_FP8", "B200_FP8"]))
    if family == "scaled":
        promote = draw(st.none() | st.sampled_from([32, 128]))
    elif family == "nvfp4":
        gemm = draw(st.none() | st.sampled_from(["B200_NVF4", "RTX5090_NVF4"]))
    elif all(v.scheme != "mxfp4_e2m1" for v in cats.values()):  # mxf8f6f4 takes fp4 too,
        gemm = draw(st.none() | st.just("B200_MXF8F6F4"))  # but mxf4 not fp8/fp6
    return Recipe(**cats, wgrad=wgrad, keep=keep, rht=rht,
                  rht_seed=draw(st.integers(0, 9)) if rht else 0, gemm=gemm, promote=promote)


@st.composite
def policies(draw):
    base = dict(compute=draw(st.sampled_from(["bf16", "fp16", "fp32"])),
                accum=draw(st.sampled_from(["fp32", "fp16"])),
                seed=draw(st.none() | st.integers(0, 2**32 - 1)),
                recipe=draw(st.none() | recipes()))
    overrides = {}
    for op in draw(st.lists(st.sampled_from(["matmul", "conv2d", "softmax"]), max_size=2,
                            unique=True)):
        overrides[op] = Policy(**{**base, "recipe": draw(st.none() | recipes())})
    assert all(op in OPERATIONS for op in overrides)
    return Policy(**base, overrides=overrides)


@settings(max_examples=80, deadline=None)
@given(policies())
def test_every_recipe_policy_parses_back_from_its_string(policy):
    assert parse(str(policy)) == policy


# -- bad input -----------------------------------------------------------------------

@pytest.mark.parametrize("text, message", [
    ("bf16,act=fp8_e4m3:delayed:histroy=4", "unknown recipe option 'histroy'.*known options "
                                            "of delayed scaling: history"),
    ("bf16,act=fp8_e4m3:delayed:history=0", "history must be an integer in 1"),
    ("bf16,act=fp8_e5m2:delayed", "forward pass is E4M3.*Pure E5M2 training"),
    ("bf16,weight=mxfp8_e5m2", "forward pass is E4M3"),
    ("bf16,act=fp8_e4m3:delayd", "unknown scaling 'delayd'"),
    ("bf16,act=mxfp9", "unknown format or scheme 'mxfp9'.*known schemes: mxfp8_e4m3"),
    ("bf16,act=fp8_e4m3:current:history=3", "history is not an option of current scaling"),
    ("bf16,act=fp8_e4m3:current:margin", "options are written name=value"),
    ("bf16,act=fp8_e4m3:rounding=stochastic:random_bits=x", "random_bits takes an integer"),
    ("bf16,act=fp8_e4m3:random_bits=8", "random_bits is the budget of stochastic rounding"),
    ("bf16,act=mxfp8_e4m3:pow2=on", "power-of-two scales are an option of per_tensor"),
    ("bf16,act=fp8_block1x128:pow2=on:rule=deepseek_v3", "pow2=on is the rule "
                                                         "transformer_engine_pow2"),
    ("bf16,act=fp8_block1x128:rule=ocp", "unknown scale rule 'ocp'.*deepseek_v3, "
                                         "transformer_engine"),
    ("bf16,act=mxfp8_e4m3:rule=floor", "unknown scale rule 'floor' for mxfp8_e4m3"),
    ("bf16,recipe=fp9", "unknown recipe 'fp9'; known recipes: fp8_hybrid_delayed"),
    ("bf16,act=mxfp8_e4m3", "MX or NVFP4 operand's product takes another"),
    ("bf16,act=mxfp8_e4m3,weight=nvfp4,grad=mxfp8_e4m3", "blocks of equal length"),
    ("nvfp4,gemm=B200_FP8", "apply each block's scales in the instruction.*B200_NVF4"),
    ("fp8_hybrid_delayed,gemm=B200_MXF8F6F4", "block-scaled instruction.*got act=fp8_e4m3"),
    ("mxfp8,gemm=B200_NVF4", "reads ue4m3 scales, one per 16.*e8m0 scales per 32"),
    ("nvfp4,gemm=B200_MXF4", "reads e8m0 scales, one per 32"),
    ("mxfp8,gemm=B200_MXF4", "takes elements of fp4_e2m1, not act=fp8_e4m3"),
    ("mxfp8,promote=32", "take no promotion"),
    ("fp8_hybrid_delayed,gemm=H200", "unknown gemm 'H200'.*block-scaled instructions"),
    ("bf16,gemm=H100_FP8,act=fp8_e4m3", "give weight, grad a scaling too"),
    ("nvfp4,rht=12", "power of 4"),
    ("nvfp4,rht=16:sed=3", "rht takes a size and an optional seed"),
    ("fp8_hybrid_delayed,keep=la st", "keep names layers"),
    ("native_fp16,act=fp8_e4m3", "native policy cannot take one"),
    ("fp32,compute=fp64,act=fp8_e4m3", "binary32 or narrower"),
    ("fp8_hybrid_delayed,act=fp8_e4m3,act=fp8_e4m3:current", "given twice"),
    ("fp8_hybrid_delayed,matmul.act=fp8_e4m3:delayed:history=0", "matmul.act: history"),
])
def test_bad_recipes_name_the_problem(text, message):
    with pytest.raises(ValueError, match=message):
        parse(text)


def test_docstring_examples():
    import doctest

    import fpsim.precision.recipes
    import fpsim.precision.scaling

    for module in (fpsim.precision.recipes, fpsim.precision.scaling):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.attempted > 0 and result.failed == 0
