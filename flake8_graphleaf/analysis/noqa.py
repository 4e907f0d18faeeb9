"""``# noqa`` comments, read as flake8 reads them."""

from __future__ import annotations

import bisect
import io
import re
import tokenize

# flake8's own pattern (flake8.defaults.NOQA_INLINE_REGEX).
NOQA_INLINE = re.compile(
    r"# noqa"
    r"(?::[\s]?(?P<codes>([A-Z]+[0-9]+(?:[,\s]+)?)+))?",
    re.IGNORECASE,
)
# flake8.defaults.NOQA_FILE, matched at the start of a line: the whole file is skipped,
# codes or not (flake8 ignores codes there).
NOQA_FILE = re.compile(r"\s*# flake8[:=]\s*noqa", re.I)
_SEP = re.compile(r"[,\s]")


def file_is_skipped(source: str) -> bool:
    """A bare ``# flake8: noqa`` line makes flake8 skip the whole file."""
    if "flake8" not in source:
        return False
    for line in source.splitlines():
        if NOQA_FILE.match(line):
            return True
    return False


def statement_ranges(source: str) -> list[tuple[int, int]]:
    """(first line, last line) of each logical line (statement), sorted; [] if it does not tokenize."""
    ranges: list[tuple[int, int]] = []
    try:
        start = None
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type in (tokenize.NEWLINE, tokenize.ENDMARKER):
                if start is not None:
                    ranges.append((start, tok.start[0]))
                start = None
            elif tok.type not in (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT) and start is None:
                start = tok.start[0]
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return []
    return ranges


def add_noqa(source: str, hits: list[tuple[int, str]]) -> tuple[str, int]:
    """``source`` with ``# noqa: CODE`` for each (line, code) of ``hits`` that is not
    silenced yet, written at the end of the statement's last line (where a comment can
    go, and where flake8 reads it for the whole statement), merged into a noqa comment
    already there.  Returns (new source, number of lines changed)."""
    noqa = noqa_map(source)
    ranges = statement_ranges(source)
    starts = [a for a, _ in ranges]
    wanted: dict[int, set[str]] = {}
    for line, code in hits:
        if is_silenced(code, line, noqa):
            continue
        k = bisect.bisect_right(starts, line) - 1
        target = ranges[k][1] if k >= 0 and ranges[k][0] <= line <= ranges[k][1] else line
        wanted.setdefault(target, set()).add(code)
    if not wanted:
        return source, 0
    lines = source.split("\n")
    for line, codes in wanted.items():
        if not 1 <= line <= len(lines):
            continue
        text = lines[line - 1]
        m = NOQA_INLINE.search(text)
        if m and m.group("codes"):
            old = [c for c in _SEP.split(m.group("codes").upper()) if c]
            merged = old + sorted(c for c in codes if c not in old)
            tail = m.group("codes")[len(m.group("codes").rstrip(", \t")):]
            text = text[: m.start()] + "# noqa: " + ", ".join(merged) + tail + text[m.end():]
        elif m:
            continue  # a bare "# noqa" silences everything already
        else:
            text = text.rstrip() + "  # noqa: " + ", ".join(sorted(codes))
        lines[line - 1] = text
    return "\n".join(lines), len(wanted)


def noqa_map(source: str) -> dict[int, frozenset[str] | None]:
    """line -> codes silenced there (None: every code).  A comment on the last line
    of a multi-line string or statement covers all its lines, as in flake8."""
    out: dict[int, frozenset[str] | None] = {}
    if "noqa" not in source.lower():
        return out
    lines = source.splitlines()
    ranges: list[tuple[int, int]] | None = None  # tokenized at the first noqa comment only
    starts: list[int] = []
    for i, line in enumerate(lines, start=1):
        if "noqa" not in line and "NOQA" not in line.upper():
            continue
        m = NOQA_INLINE.search(line)
        if not m:
            continue
        codes = m.group("codes")
        value = None if not codes else frozenset(c for c in _SEP.split(codes.upper()) if c)
        covered = [i]
        if ranges is None:
            ranges = statement_ranges(source)
            starts = [a for a, _ in ranges]
        k = bisect.bisect_right(starts, i) - 1  # ranges are sorted and disjoint
        if k >= 0 and ranges[k][0] <= i <= ranges[k][1]:
            a, b = ranges[k]
            covered = list(range(a, b + 1))
        for ln in covered:
            old = out.get(ln, frozenset())
            if value is None or old is None:
                out[ln] = None
            else:
                out[ln] = old | value
    return out


def is_silenced(code: str, line: int, noqa: dict[int, frozenset[str] | None]) -> bool:
    if line not in noqa:
        return False
    codes = noqa[line]
    return codes is None or any(code.startswith(c) for c in codes)
