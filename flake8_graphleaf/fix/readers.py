"""A small stand-in for :class:`flake8_graphleaf.project.index.ProjectIndex`, with the same two queries
(``attribute_reads(name)``, ``dynamic_access()``), used until (and only where) the project index is not
available.  It parses each file once with ``ast``."""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass


@dataclass(frozen=True)
class AttrRead:
    path: str
    line: int
    col: int
    class_name: str | None
    function: str | None
    how: str  # "attr" | "getattr" | "string"


def project_index(paths: list[str]):
    """The project index over ``paths`` (the lead's, if present; else this stand-in)."""
    try:
        from ..project.index import ProjectIndex  # type: ignore[import-not-found]
    except ImportError:
        return SimpleIndex.build(paths)
    return ProjectIndex.build(list(paths))


class SimpleIndex:
    def __init__(self):
        self.reads: dict[str, list[AttrRead]] = {}
        self.dynamic: list[tuple[str, int]] = []
        self._keys: set[int] = set()  # getattr name constants, already counted

    @classmethod
    def build(cls, paths: list[str]) -> "SimpleIndex":
        index = cls()
        files: list[str] = []
        for p in paths:
            if os.path.isdir(p):
                for root, dirs, names in os.walk(p):
                    dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                    files += [os.path.join(root, n) for n in sorted(names) if n.endswith(".py")]
            elif p.endswith(".py") or os.path.isfile(p):
                files.append(p)
        for path in files:
            try:
                with open(path, encoding="utf-8", errors="replace") as fh:
                    tree = ast.parse(fh.read())
            except (OSError, SyntaxError, ValueError, RecursionError):
                continue
            index._scan(path, tree)
        return index

    def _scan(self, path: str, tree: ast.AST) -> None:
        def visit(node, cls, func):
            for child in ast.iter_child_nodes(node):
                c, f = cls, func
                if isinstance(child, ast.ClassDef):
                    c = child.name
                elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    f = child.name
                self._node(path, child, c, f)
                visit(child, c, f)

        visit(tree, None, None)

    def _node(self, path, n, cls, func) -> None:
        def add(name, how):
            self.reads.setdefault(name, []).append(AttrRead(path, n.lineno, n.col_offset, cls, func, how))

        if isinstance(n, ast.Attribute) and not isinstance(n.ctx, (ast.Store, ast.Del)):
            add(n.attr, "attr")
            if n.attr == "__dict__":
                self.dynamic.append((path, n.lineno))
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
            if n.func.id in ("getattr", "hasattr") and len(n.args) >= 2:
                key = n.args[1]
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    add(key.value, "getattr")
                    self._keys.add(id(key))
                else:
                    self.dynamic.append((path, n.lineno))
            elif n.func.id == "vars":
                self.dynamic.append((path, n.lineno))
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.isidentifier() and id(n) not in self._keys:
            add(n.value, "string")

    def attribute_reads(self, name: str) -> list[AttrRead]:
        return list(self.reads.get(name, ()))

    def dynamic_access(self) -> list[tuple[str, int]]:
        return list(self.dynamic)
