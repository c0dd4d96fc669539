"""The progress bar of the studies: ``fpsim.sweep``'s."""

from fpsim.sweep.progress import Progress

__all__ = ["Progress"]
