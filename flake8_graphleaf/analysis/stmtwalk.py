"""Walk statements only.  Most of an ``ast`` tree is expressions; finding imports,
classes and attribute assignments needs none of them, and skipping them makes the
pass several times cheaper than ``ast.walk``."""

from __future__ import annotations

import ast
import re
from typing import Iterator

_BODIES = ("body", "orelse", "finalbody", "handlers")


def statements(node: ast.AST) -> Iterator[ast.stmt]:
    """Every statement under ``node`` (nested blocks, functions and classes included)."""
    stack = [node]
    while stack:
        cur = stack.pop()
        for name in _BODIES:
            block = getattr(cur, name, None)
            if block:
                for child in reversed(block):
                    if isinstance(child, ast.stmt):
                        yield child
                    stack.append(child)
        cases = getattr(cur, "cases", None)
        if cases:
            for case in reversed(cases):
                stack.append(case)


def tree_statements(tree: ast.AST) -> list[ast.stmt]:
    """Every statement of a module, walked once per tree (imports, classes, scopes and several
    rules each want them): kept on the tree, which nothing here changes."""
    cached = getattr(tree, "_graphleaf_statements", None)
    if cached is None:
        cached = list(statements(tree))
        if isinstance(tree, ast.Module):
            tree._graphleaf_statements = cached
    return cached


def own_nodes(scope: ast.AST) -> Iterator[ast.AST]:
    """Every node of a function's (or module's) body, but not those of nested functions
    or classes, which are scopes of their own."""
    stack = list(scope.body)
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                stack.append(child)


def scopes_with_classes(tree: ast.Module) -> list[tuple[ast.AST, "ast.ClassDef | None"]]:
    """The module and every function, each with the class it is a method of (or None)."""
    out: list[tuple[ast.AST, ast.ClassDef | None]] = [(tree, None)]
    for s in statements(tree):
        if isinstance(s, ast.ClassDef):
            for item in s.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    out.append((item, s))
    methods = {id(f) for f, c in out if c is not None}
    for s in statements(tree):
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and id(s) not in methods:
            out.append((s, None))
    return out


def lines_matching(source: str, pattern: re.Pattern) -> set[int]:
    """1-based numbers of the lines where ``pattern`` matches: a cheap way to find the few
    places worth walking before walking anything."""
    out: set[int] = set()
    line, pos = 1, 0
    for m in pattern.finditer(source):  # newlines counted once, from one match to the next
        line += source.count("\n", pos, m.start())
        pos = m.start()
        out.add(line)
    return out


def scopes_at(tree: ast.Module, lines: set[int]) -> list[ast.AST]:
    """The innermost functions (or the module) whose own code spans one of ``lines``."""
    funcs = [s for s in tree_statements(tree) if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
    found: dict[int, ast.AST] = {}
    for line in lines:
        best: ast.AST = tree
        for s in funcs:
            if s.lineno <= line <= s.end_lineno:
                if best is tree or s.lineno >= best.lineno:
                    best = s
        found[id(best)] = best
    return list(found.values())


def parent_map(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    """child -> parent for every node: built only by the few checks that need it."""
    parents: dict[ast.AST, ast.AST] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[child] = node
    return parents
