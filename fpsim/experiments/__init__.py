"""The studies of ``fpsim reproduce``: the repository's experiments/ folder.

An installed fpsim has that folder here (pyproject.toml maps it). This file serves the
source tree itself: run from the repository root, ``python3 -m fpsim`` imports the
package from ``fpsim/`` rather than the installed copy, and finds the studies through
this path.
"""

from pathlib import Path

__path__ = [str(Path(__file__).resolve().parent.parent.parent / "experiments")]
