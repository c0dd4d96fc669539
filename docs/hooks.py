"""MkDocs hook: an undocumented public name fails ``mkdocs build --strict``.

mkdocstrings renders a name whether or not it has a docstring, so this hook walks the
public surface itself. The roots are the modules that the API pages render (their
``::: module`` blocks); from each root it visits

- every name in the module's ``__all__`` (every public name defined in it, when it has
  no ``__all__``), following re-exports to where they are defined;
- every public member of each public class (its own, not inherited ones);
- every public submodule, which must itself be rendered by an API page.

Each name must have a docstring (a class's attribute may instead be described in the
class docstring's Attributes or Parameters section) and must be rendered: its path, or
the path it is re-exported from, is an anchor of an API page. Every failure is a warning,
which ``--strict`` turns into a failed build. ``undocumented(roots, anchors)`` is the
check itself (tests/test_site.py plants an undocumented name and sees it fail).
"""

from __future__ import annotations

import ast
import logging
import re
from collections.abc import Iterable
from pathlib import Path

log = logging.getLogger("mkdocs.plugins.fpsim.api")

DIRECTIVE = re.compile(r"^:::\s*([\w.]+)", re.MULTILINE)
ANCHOR = re.compile(r'\bid="([^"]+)"')
ROOT = Path(__file__).resolve().parent.parent

_roots: list[str] = []
_anchors: set[str] = set()


def _load(module: str, search_paths: Iterable[str]):
    import griffe

    # The extension mkdocs.yml gives mkdocstrings: a ``#:`` comment is a docstring.
    extensions = griffe.load_extensions(str(Path(__file__).with_name("griffe_comments.py")))
    return griffe.load(module, search_paths=list(search_paths), resolve_aliases=True,
                       resolve_external=False, extensions=extensions)


def _target(obj):
    """What ``obj`` is at run time (None when it cannot be resolved).

    An alias is followed to its target. Griffe keeps a submodule ``pkg.f`` where Python
    binds the function ``f`` of ``from pkg.f import f`` (griffe issue 124), so a
    submodule that its package exports under its name, and that defines a member of
    that name, stands for that member.
    """
    try:
        obj = obj.final_target if obj.is_alias else obj
    except Exception:  # an alias to something outside the loaded package
        return None
    parent = obj.parent
    if (obj.is_module and parent is not None and parent.is_module
            and parent.exports is not None and obj.name in _exports(parent)
            and obj.name in obj.members and not obj.members[obj.name].is_module):
        return _target(obj.members[obj.name])
    return obj


def _exports(module) -> list[str]:
    """``module.__all__``, with ``*NAMES`` (a tuple of strings in the module) expanded."""
    names: list[str] = []
    for item in module.exports:
        if isinstance(item, str):
            names.append(item)
        else:  # an unpacked name: ``__all__ = [..., *NAMES]``
            names.extend(ast.literal_eval(str(module.members[str(item)].value)))
    return sorted(names)


def _public(obj) -> list[str]:
    if obj.is_module:
        if obj.exports is not None:
            return _exports(obj)
        return sorted(name for name, member in obj.members.items()
                      if not name.startswith("_") and not member.is_alias)
    return sorted(name for name, member in obj.members.items()
                  if not name.startswith("_") and not member.is_alias)


def _described(cls, name: str) -> bool:
    """Whether the class docstring's Attributes or Parameters section names ``name``."""
    if cls.docstring is None:
        return False
    for section in cls.docstring.parse("numpy"):
        if section.kind.value in ("attributes", "parameters"):
            # numpydoc allows several names to one description: "weight, bias : Parameter".
            if any(name in (n.strip() for n in item.name.split(","))
                   for item in section.value):
                return True
    return False


def undocumented(roots: Iterable[str], anchors: set[str] | None = None,
                 search_paths: Iterable[str] = (str(ROOT),)) -> list[str]:
    """The problems with the public surface under the modules ``roots``.

    Each problem is a line of text: a public name without a docstring, or (when
    ``anchors``, the ids of the API pages, is given) one that no API page renders.
    """
    roots = list(roots)
    packages: dict[str, object] = {}
    problems: list[str] = []
    seen: set[str] = set()

    def get(path: str):
        top = path.split(".")[0]
        if top not in packages:
            packages[top] = _load(top, search_paths)
        obj = packages[top]
        for part in path.split(".")[1:]:
            obj = obj.members[part]
        return obj

    def resolve(path: str) -> str | None:
        """The path of what ``path`` (an anchor) names at run time; None for no object."""
        try:
            target = _target(get(path))
        except Exception:  # a heading's anchor, or a name outside the package
            return None
        return None if target is None else target.path

    # An object is rendered when an anchor names it under any of its public paths.
    tops = {root.split(".")[0] for root in roots}
    shown = set() if anchors is None else {resolve(a) for a in anchors
                                            if a.split(".")[0] in tops}

    def rendered(path: str, target_path: str) -> bool:
        return anchors is None or path in anchors or target_path in shown

    def visit(obj, path: str) -> None:
        target = _target(obj)
        if target is None:
            problems.append(f"{path}: cannot be resolved")
            return
        if target.path in seen:
            # Re-exported elsewhere: documented once, but each public path must be rendered.
            if not rendered(path, target.path):
                problems.append(f"{path}: public but not rendered in the API reference")
            return
        seen.add(target.path)
        if not rendered(path, target.path):
            problems.append(f"{path}: public but not rendered in the API reference")
        if target.is_module:
            if not target.docstring:
                problems.append(f"{path}: module has no docstring")
        elif not target.docstring:
            problems.append(f"{path}: no docstring")
        if target.is_module or target.is_class:
            for name in _public(target):
                member = target.members.get(name)
                if member is None and target.is_module:
                    # A lazy export (module ``__getattr__``): defined in a submodule.
                    member = next((sub.members[name] for sub in target.modules.values()
                                   if name in sub.members), None)
                if member is None:
                    problems.append(f"{path}.{name}: in __all__ but not defined")
                    continue
                member_target = _target(member)
                if (target.is_class and member_target is not None
                        and member_target.is_attribute and not member_target.docstring
                        and _described(target, name)):
                    seen.add(member_target.path)
                    continue
                visit(member, f"{path}.{name}")

    for root in roots:
        visit(get(root), root)
    return problems


def on_pre_build(config, **kwargs) -> None:
    _roots.clear()
    _anchors.clear()


def on_page_markdown(markdown: str, page, **kwargs) -> str:
    if page.file.src_uri.startswith("api/"):
        _roots.extend(DIRECTIVE.findall(markdown))
    return markdown


def on_page_content(html: str, page, **kwargs) -> str:
    if page.file.src_uri.startswith("api/"):
        _anchors.update(ANCHOR.findall(html))
    return html


def _search_paths(config) -> list[str]:
    """Where mkdocstrings looks for the packages (its ``paths``, from the config's folder)."""
    base = Path(config.config_file_path).resolve().parent
    try:
        handler = config.plugins["mkdocstrings"].config["handlers"]["python"]
        paths = handler.get("paths", ["."])
    except (KeyError, AttributeError, TypeError):
        paths = ["."]
    return [str(base / p) for p in paths]


def on_post_build(config, **kwargs) -> None:
    for problem in undocumented(_roots, _anchors, _search_paths(config)):
        log.warning("API reference: %s", problem)
