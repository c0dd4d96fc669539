"""The paper's ablations, as the studies name them: the presets of ``fpsim.sweep``."""

from fpsim.sweep.ablation import ABLATIONS, NATIVE_ABLATIONS, Ablation, ablation, shrunk

__all__ = ["ABLATIONS", "NATIVE_ABLATIONS", "Ablation", "ablation", "shrunk"]
