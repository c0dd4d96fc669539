"""The off switch: without a recipe, policies give the bits they gave before recipes existed.

``PINNED`` holds the digests of short training runs (an MLP, a CNN and an LSTM language
model, three steps each) under the fp32, mixed, fp16-accumulation, bf16 and fp16 policies,
computed by ``fingerprint`` below on fpsim as of commit ee41b06 (before issue 33):
``git archive ee41b06 | tar -x -C /tmp/base; PYTHONPATH=/tmp/base python3
tests/test_recipes_off.py``. Every run names its order of summation (sequential), so the
digests do not depend on a BLAS library's order. ``ABLATION_TEXTS`` pins the policy
strings of the paper's ablations (their run caches are keyed by them).
"""

from __future__ import annotations

import hashlib
import sys

import numpy as np

POLICIES = {
    "fp32": ("fp32,order=sequential", None),
    "mixed": ("mixed,order=sequential", "dynamic"),
    "fp16_accum": ("mixed,accum=fp16,order=sequential", "dynamic"),
    "bf16": ("bf16,order=sequential", None),
    "fp16": ("fp16,order=sequential", 1024.0),
}

PINNED = {
    'fp32/0': 'e2d2fd99d3f26ad4',
    'fp32/1': '00420b18e60793c6',
    'fp32/2': '8619be4bb4539bdc',
    'mixed/0': 'b993f8b2edf78412',
    'mixed/1': '9f37a8f39030167a',
    'mixed/2': '53d2c4fc7938f984',
    'fp16_accum/0': '3298682fab05946d',
    'fp16_accum/1': '2e6f5b6a2829e3aa',
    'fp16_accum/2': '34caf2614fac14d1',
    'bf16/0': '34bdcc1523832405',
    'bf16/1': '4c8cad7039e87737',
    'bf16/2': '0a4ed6e057b306a8',
    'fp16/0': '4e7be99e0f38faa7',
    'fp16/1': '08aa6a3629f5614f',
    'fp16/2': 'd5ad48a7b6b250b7',
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
    """A digest of three training steps of model ``case`` (0: MLP, 1: CNN, 2: LSTM); with
    ``counts``, the reports' gradient counts too."""
    from fpsim import nn, optim, training
    from fpsim.nn import functional as F

    nn.manual_seed(case)
    rng = np.random.default_rng(case)
    if case == 0:
        model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 4))

        def loss():
            return F.cross_entropy(model(x), y)
        x, y = rng.normal(size=(5, 6)), np.arange(5) % 4
    elif case == 1:
        model = nn.Sequential(nn.Conv2d(1, 3, 3, padding=1), nn.BatchNorm2d(3), nn.ReLU(),
                              nn.Conv2d(3, 4, 3, stride=2), nn.Flatten(), nn.Linear(36, 4))

        def loss():
            return F.cross_entropy(model(x), y)
        x, y = rng.random((3, 1, 8, 8)), np.array([0, 1, 3])
    else:
        class LM(nn.Module):
            def __init__(self):
                self.embed = nn.Embedding(5, 4)
                self.lstm = nn.LSTM(4, 6)
                self.head = nn.Linear(6, 5)

            def forward(self, ids):
                out, _ = self.lstm(self.embed(ids))
                return self.head(F.reshape(out, (-1, 6)))

        model = LM()

        def loss():
            return F.cross_entropy(model(x), y)
        x, y = rng.integers(0, 5, (4, 2)), rng.integers(0, 5, 8)
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    trainer = training.Trainer(model, opt, policy, loss_scale=loss_scale)
    h = hashlib.sha256()
    for _ in range(3):
        r = trainer.step(loss)
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
