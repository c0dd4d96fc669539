"""Results cached on disk by configuration, so that an interrupted sweep resumes."""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any


def digest(*parts: bytes) -> str:
    """A short digest of ``parts``, each length-prefixed so that no two splits collide."""
    h = hashlib.sha256()
    for part in parts:
        h.update(len(part).to_bytes(8, "little") + part)
    return h.hexdigest()[:16]


def key(config: dict[str, Any]) -> str:
    """A short digest of ``config`` (JSON with sorted keys)."""
    return digest(json.dumps(config, sort_keys=True, allow_nan=False).encode())


class Cache:
    """JSON documents under ``root``, one file per configuration.

    Parameters
    ----------
    root : Path or str
        The folder of the documents.

    Attributes
    ----------
    root : Path
        As given.
    """

    def __init__(self, root: Path | str):
        self.root = Path(root)

    def path(self, kind: str, config: dict[str, Any], label: str = "") -> Path:
        """Where the document for ``config`` lives; ``label`` only makes the name readable."""
        name = re.sub(r"[^A-Za-z0-9_.-]+", "-", label).strip("-")
        return self.root / kind / f"{name + '-' if name else ''}{key(config)}.json"

    def load(self, kind: str, config: dict[str, Any],
             label: str = "") -> dict[str, Any] | None:
        """The cached document, or None when there is none (or it is unreadable)."""
        path = self.path(kind, config, label)
        try:
            document = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        return document.get("result") if document.get("config") == config else None

    def save(self, kind: str, config: dict[str, Any], result: dict[str, Any],
             label: str = "") -> Path:
        """Store ``result`` atomically (a reader never sees half a file)."""
        path = self.path(kind, config, label)
        path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps({"config": config, "result": result}, allow_nan=False, indent=1)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
        return path
