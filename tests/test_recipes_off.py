"""The off switch: without a recipe, policies give the bits they gave before recipes existed.

``PINNED`` holds the digests of short training runs (``test_policy.models()``: an MLP, a
CNN and an LSTM language model, three steps each) under the fp32, mixed and
fp16-accumulation policies, computed by ``fingerprint`` below on fpsim
as of commit ee41b06 (before issue 33)::

    git archive ee41b06 | tar -x -C /tmp/base
    PYTHONPATH=/tmp/base python3 tests/test_recipes_off.py

Every run names its order of summation (sequential), so the digests do not depend on a
BLAS library's order. ``ABLATION_TEXTS`` pins the policy strings of the paper's ablations
(their run caches are keyed by them).
"""

from __future__ import annotations

import hashlib
import sys

import numpy as np

POLICIES = {
    "fp32": ("fp32,order=sequential", None),
    "mixed": ("mixed,order=sequential", "dynamic"),
    "fp16_accum": ("mixed,accum=fp16,order=sequential", "dynamic"),
}

PINNED = {
    'fp32/0': '5f7be90f3a4246da',
    'fp32/1': 'e9e57e8c6e0bc2fc',
    'fp32/2': '9ad940f954702827',
    'mixed/0': 'c242dfa496d92419',
    'mixed/1': '99363e6de24c2e14',
    'mixed/2': 'b0b6e9091cfd794e',
    'fp16_accum/0': 'f6e76839afd0310c',
    'fp16_accum/1': '3ee2c31560a7ca18',
    'fp16_accum/2': '0e9dd1e226421173',
}

ABLATION_TEXTS = {
    'fp32': 'params=fp32,compute=fp32,accum=fp32,reduce=fp32,output=fp32,native=true',
    'mixed': 'params=fp32,compute=fp16,accum=fp32,reduce=fp32,output=fp32',
    'no_master': 'params=fp16,compute=fp16,accum=fp32,reduce=fp32,output=fp32',
    'no_loss_scaling': 'params=fp32,compute=fp16,accum=fp32,reduce=fp32,output=fp32',
    'fp16_accum': 'params=fp32,compute=fp16,accum=fp16,reduce=fp32,output=fp32,order=sequential',
    'bf16': 'params=fp32,compute=bf16,accum=fp32,reduce=fp32,output=fp32',
    'native_fp16': 'params=fp32,compute=fp16,accum=fp32,reduce=fp32,output=fp32,native=true',
    'native_no_master': 'params=fp16,compute=fp16,accum=fp32,reduce=fp32,output=fp32,native=true',
    'native_no_loss_scaling':
        'params=fp32,compute=fp16,accum=fp32,reduce=fp32,output=fp32,native=true',
}


def fingerprint(policy: str, loss_scale, case: int, counts: bool = True) -> str:
    """A digest of three training steps of ``test_policy.models()[case]`` (an MLP, a CNN,
    an LSTM language model); with ``counts``, the reports' gradient counts too."""
    from test_policy import models

    from fpsim import optim, training

    model, loss_fn = models()[case]
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    trainer = training.Trainer(model, opt, policy, loss_scale=loss_scale)
    h = hashlib.sha256()
    for _ in range(3):
        r = trainer.step(lambda: loss_fn(model))
        fields = (r.loss, r.loss_scale, r.skipped, r.grad_norm, r.absorbed_fraction,
                  r.flushed_fraction)
        h.update(repr(fields + ((r.activation_grads, r.weight_grads) if counts else ())).encode())
    for p in model.parameters():
        h.update(np.ascontiguousarray(p.data).tobytes())
    return h.hexdigest()[:16]


def ablation_texts() -> dict[str, str]:
    from fpsim.sweep.ablation import ABLATIONS, NATIVE_ABLATIONS

    return {name: str(a.precision()) for name, a in {**ABLATIONS, **NATIVE_ABLATIONS}.items()}


def test_training_without_a_recipe_gives_the_bits_it_gave_before_recipes():
    got = {f"{name}/{case}": fingerprint(text, scale, case)
           for name, (text, scale) in POLICIES.items() for case in range(3)}
    assert got == PINNED


def test_the_ablations_policy_strings_are_unchanged():
    assert ablation_texts() == ABLATION_TEXTS


def test_a_recipe_that_quantizes_nothing_computes_as_no_recipe():
    # A recipe with no category quantized and promotion past every K: its products run
    # with every operand unquantized, which must be the plain products, bit for bit (the
    # gradient counts differ: a recipe's weight gradients are the parameters', not those
    # of compute-format copies).
    for case in range(3):
        a = fingerprint("mixed,order=sequential", "dynamic", case, counts=False)
        b = fingerprint("mixed,order=sequential,promote=4096", "dynamic", case, counts=False)
        assert a == b


if __name__ == "__main__":  # print the pinned values of the fpsim on sys.path
    print("PINNED =", {f"{name}/{case}": fingerprint(text, scale, case)
                       for name, (text, scale) in POLICIES.items() for case in range(3)})
    print("ABLATION_TEXTS =", ablation_texts())
    sys.exit(0)
