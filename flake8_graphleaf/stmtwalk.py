"""Walk statements only.  Most of an ``ast`` tree is expressions; finding imports,
classes and attribute assignments needs none of them, and skipping them makes the
pass several times cheaper than ``ast.walk``."""

from __future__ import annotations

import ast
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
