"""Positions in source text, counted as ``ast`` counts them."""

from __future__ import annotations

import ast
import re

_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def split_lines(source: str) -> list[str]:
    """Lines with their endings, broken only where Python breaks lines (not at \\f, \\x1c ...)."""
    out: list[str] = []
    start = 0
    for m in _LINE_BREAK.finditer(source):
        out.append(source[start:m.end()])
        start = m.end()
    if start < len(source):
        out.append(source[start:])
    return out


class Text:
    """Source text with conversions from ``ast`` positions (UTF-8 byte columns)."""

    def __init__(self, source: str):
        self.source = source
        self.lines = split_lines(source)

    def line(self, lineno: int) -> str:
        return self.lines[lineno - 1] if 0 < lineno <= len(self.lines) else ""

    def char_col(self, lineno: int, byte_col: int) -> int:
        line = self.line(lineno)
        if line.isascii():
            return byte_col
        return len(line.encode("utf-8")[:byte_col].decode("utf-8", "replace"))

    def start(self, node: ast.AST) -> tuple[int, int]:
        return node.lineno, self.char_col(node.lineno, node.col_offset)

    def end(self, node: ast.AST) -> tuple[int, int]:
        return node.end_lineno, self.char_col(node.end_lineno, node.end_col_offset)

    def segment(self, node: ast.AST) -> str:
        (l1, c1), (l2, c2) = self.start(node), self.end(node)
        if l1 == l2:
            return self.line(l1)[c1:c2]
        parts = [self.line(l1)[c1:]] + [self.line(n) for n in range(l1 + 1, l2)] + [self.line(l2)[:c2]]
        return "".join(parts)

    def indent_of(self, lineno: int) -> str:
        line = self.line(lineno)
        return line[: len(line) - len(line.lstrip(" \t"))]

    def newline(self) -> str:
        first = self.lines[0] if self.lines else "\n"
        if first.endswith("\r\n"):
            return "\r\n"
        if first.endswith("\r"):
            return "\r"
        return "\n"
