"""Griffe extension: a ``#:`` comment above an attribute is its docstring.

fpsim documents some constants the Sphinx way (``#: The preset formats by name.``
on the lines above ``PRESETS = ...``); griffe reads only a string below the
assignment. This extension gives such an attribute (without a docstring of its own)
the text of the ``#:`` lines right above it, so mkdocstrings renders it and
docs/hooks.py counts it as documented.
"""

from __future__ import annotations

import ast
from typing import Any

import griffe


class SphinxComments(griffe.Extension):
    def on_attribute_instance(self, *, node: Any, attr: griffe.Attribute, agent: Any,
                              **kwargs: Any) -> None:
        if attr.docstring is not None or not isinstance(node, ast.AST):
            return
        code = getattr(agent, "code", None)
        if not code or not attr.lineno:
            return
        lines = code.splitlines()
        comment: list[str] = []
        i = attr.lineno - 2  # the line above the assignment, 0-based
        while i >= 0 and lines[i].lstrip().startswith("#:"):
            comment.insert(0, lines[i].lstrip()[2:].strip())
            i -= 1
        if comment:
            attr.docstring = griffe.Docstring("\n".join(comment), lineno=i + 2,
                                              endlineno=attr.lineno - 1, parent=attr)
