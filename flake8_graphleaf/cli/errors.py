"""How a file that cannot be read or parsed is reported: one GLF900 finding, at the
line and column flake8 gives E999 (``SyntaxError.offset`` as flake8's 0-based column,
so ``path:3:6`` where flake8 says ``3:6``), with the message flake8 prints
(``SyntaxError: '(' was never closed``), and a hint when the running Python is older than
the syntax the file uses."""

from __future__ import annotations

import re
import sys

# (pattern on the failing line, Python version that has it, what it is)
_NEWER_SYNTAX = [
    (re.compile(r"^\s*type\s+[A-Za-z_]\w*\s*(\[.*\])?\s*="), (3, 12), "the `type` statement (PEP 695)"),
    (re.compile(r"^\s*(async\s+)?def\s+[A-Za-z_]\w*\s*\["), (3, 12), "type parameters (PEP 695)"),
    (re.compile(r"^\s*class\s+[A-Za-z_]\w*\s*\["), (3, 12), "type parameters (PEP 695)"),
    (re.compile(r"^\s*except\s*\*"), (3, 11), "`except*` (PEP 654)"),
    (re.compile(r"""f(['"]).*\{[^}]*\1"""), (3, 12), "f-strings that reuse their quotes (PEP 701)"),
    (re.compile(r"^\s*(async\s+)?with\s*\(.*\bas\b"), (3, 10), "parenthesized context managers"),
]


def version_hint(line: str, running: tuple[int, int] | None = None) -> str | None:
    running = running or sys.version_info[:2]
    for pattern, needed, what in _NEWER_SYNTAX:
        if running < needed and pattern.search(line):
            return (f"{what} needs Python {needed[0]}.{needed[1]}; this is Python {running[0]}.{running[1]}: "
                    f"run graphleaf under Python {needed[0]}.{needed[1]} or later")
    return None


def syntax_error(exc: BaseException, text: str) -> tuple[str, int, int]:
    """(message, line, 0-based flake8 column) for an exception ``ast.parse`` raised."""
    if isinstance(exc, SyntaxError):
        line = exc.lineno or 1
        col = exc.offset or 0
        if col < 0:
            col = 0
        message = f"{type(exc).__name__}: {exc.msg}"
        lines = text.split("\n")
        failing = lines[line - 1] if 1 <= line <= len(lines) else ""
        hint = version_hint(failing)
        if hint:
            message += f"; {hint}"
        return message, line, col
    if isinstance(exc, ValueError):  # a NUL byte, on Pythons that raise ValueError for it
        return f"ValueError: {exc}", 1, 0
    return "it nests too deeply to analyse", 1, 0
