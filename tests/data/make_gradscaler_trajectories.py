"""Write gradscaler_trajectories.json: PyTorch's dynamic loss-scale updates, step by step.

The reference for fpsim.training.DynamicLossScale (tests/test_hardening.py). Not run by
the tests: it needs PyTorch (``pip install torch``). It calls the update PyTorch's
GradScaler makes after each step, ``torch._amp_update_scale_``, on CPU tensors, and
records the float32 scale after every step.
"""

import json
from pathlib import Path

import numpy as np
import torch

CASES = [
    # (name, initial scale, growth factor, backoff factor, growth interval, overflow pattern)
    ("grows to the float32 limit", 2.0**16, 2.0, 0.5, 1, [False] * 140),
    ("odd factors", 1000.0, 3.0, 0.3, 2, [False, False, True, False, False, False, True, True]
     + [False] * 40),
    ("backs off to zero", 2.0**-100, 2.0, 0.5, 5, [True] * 60),
    ("factor 1.5 to the limit", 3.0e37, 1.5, 0.5, 1, [False] * 10),
    ("random", 65536.0, 2.0, 0.5, 3, list(np.random.default_rng(0).random(200) < 0.2)),
]


def trajectory(scale, growth, backoff, interval, overflows):
    s = torch.full((1,), scale, dtype=torch.float32)
    tracker = torch.zeros(1, dtype=torch.int32)
    out = []
    for overflow in overflows:
        found = torch.full((1,), float(overflow), dtype=torch.float32)
        torch._amp_update_scale_(s, tracker, found, growth, backoff, interval)
        out.append(int(np.float32(s.item()).view(np.uint32)))
    return out


cases = [dict(name=name, scale=scale, growth_factor=g, backoff_factor=b, growth_interval=i,
              overflows=[bool(o) for o in pattern],
              scale_bits=trajectory(scale, g, b, i, pattern))
         for name, scale, g, b, i, pattern in CASES]
document = dict(source=f"torch {torch.__version__}, torch._amp_update_scale_ on CPU", cases=cases)
Path(__file__).with_name("gradscaler_trajectories.json").write_text(json.dumps(document, indent=1))
