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


def noqa_map(source: str) -> dict[int, frozenset[str] | None]:
    """line -> codes silenced there (None: every code).  A comment on the last line
    of a multi-line string or statement covers all its lines, as in flake8."""
    out: dict[int, frozenset[str] | None] = {}
    if "noqa" not in source.lower():
        return out
    lines = source.splitlines()
    ranges: list[tuple[int, int]] = []
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
        start = None
        for tok in tokens:
            if tok.type in (tokenize.NEWLINE, tokenize.ENDMARKER):
                if start is not None:
                    ranges.append((start, tok.start[0]))
                start = None
            elif tok.type not in (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT) and start is None:
                start = tok.start[0]
    except (tokenize.TokenError, SyntaxError, IndentationError):
        ranges = []
    starts = [a for a, _ in ranges]
    for i, line in enumerate(lines, start=1):
        if "noqa" not in line and "NOQA" not in line.upper():
            continue
        m = NOQA_INLINE.search(line)
        if not m:
            continue
        codes = m.group("codes")
        value = None if not codes else frozenset(c for c in _SEP.split(codes.upper()) if c)
        covered = [i]
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
