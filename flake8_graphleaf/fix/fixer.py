"""Applies the fixes that findings carry.  Pure text in, text out: the CLI decides
which files to read and writes them (atomically) with ``flake8_graphleaf.writer``."""

from __future__ import annotations

import ast
import bisect
from dataclasses import dataclass, field

from ..analysis import Options
from ..analysis.findings import SAFE, Edit, Finding
from ..analysis.noqa import is_silenced, noqa_map
from ..analysis.program.textpos import split_lines
from .attach import analyze_with_fixes

MAX_ROUNDS = 6
MAX_UNDONE = 12  # rounds made again without a fix that did not work


@dataclass
class FixResult:
    source: str
    applied: list[Finding] = field(default_factory=list)
    # (finding, why it was not fixed): "no fix available", "unsafe fix (enable with --unsafe-fixes)", ...
    skipped: list[tuple[Finding, str]] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.applied)


def apply_edits(source: str, edits: list[Edit]) -> str:
    """Apply non-overlapping edits (1-based lines, 0-based character columns)."""
    lines = split_lines(source)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))

    def pos(line: int, col: int) -> int:
        if line - 1 >= len(lines):
            return len(source)
        return offsets[line - 1] + col

    # Cut the text once at every edit (in order) and join the pieces: linear in the
    # text and the number of edits, where slicing per edit would copy the text each time.
    pieces: list[str] = []
    cursor = len(source)
    for e in sorted(edits, key=lambda e: (e.line, e.col, e.end_line, e.end_col), reverse=True):
        start, end = pos(e.line, e.col), pos(e.end_line, e.end_col)
        pieces.append(source[min(end, cursor):cursor])
        pieces.append(e.content)
        cursor = min(start, cursor)
    pieces.append(source[:cursor])
    return "".join(reversed(pieces))


def _span(e: Edit) -> tuple[tuple[int, int], tuple[int, int]]:
    return (e.line, e.col), (e.end_line, e.end_col)


def _clash(x: Edit, y: Edit) -> bool:
    (xs, xe), (ys, ye) = _span(x), _span(y)
    if xs < ye and ys < xe:
        return True
    return xs == xe == ys == ye  # two insertions at one point


def _overlaps(a: list[Edit], b: list[Edit]) -> bool:
    return any(_clash(x, y) for x in a for y in b)


class _Taken:
    """The edits chosen so far in one round, sorted by start; they never overlap, so an
    edit can only clash with the few whose start is near its own (bisect, not a scan)."""

    def __init__(self):
        self.keys: list[tuple[tuple[int, int], tuple[int, int]]] = []
        self.edits: list[Edit] = []

    def clashes(self, new: list[Edit]) -> bool:
        for y in new:
            (ys, ye) = _span(y)
            i = bisect.bisect_left(self.keys, (ys, ys))
            # Those starting before ``ys``: only the last few can reach it (ends are sorted).
            j = i - 1
            while j >= 0 and self.keys[j][1] >= ys:
                if _clash(self.edits[j], y):
                    return True
                j -= 1
            k = i
            while k < len(self.keys) and self.keys[k][0] <= ye:
                if _clash(self.edits[k], y):
                    return True
                k += 1
        return False

    def add(self, new: list[Edit]) -> None:
        for y in new:
            key = _span(y)
            i = bisect.bisect_right(self.keys, key)
            self.keys.insert(i, key)
            self.edits.insert(i, y)

    def all(self) -> list[Edit]:
        return list(self.edits)


def _identity(f: Finding) -> tuple:
    """What a finding is about, whatever line it moved to: a fix works when the number of findings
    with its identity goes down by the number it fixed (and no identity gains one)."""
    return (f.code, f.class_name, f.attribute, f.data.get("method"), f.data.get("kind"))


def _where(f: Finding, source_lines: list[str]) -> tuple:
    """A finding in one text: its identity and the text of its line (positions move with other
    edits; a fix that was undone leaves its line as it was)."""
    line = source_lines[f.line - 1].strip() if 0 < f.line <= len(source_lines) else ""
    return _identity(f) + (line,)


NOT_REMOVED = "the fix did not remove the finding"


# The findings at a copy or a send: they are consequences of the stores they name (a fix of one
# store may leave the copy failing for another store, which the copy's finding then names).
SITE_CODES = frozenset({"GLF201", "GLF202", "GLF301"})


def _broken(before: list[Finding], chosen: list[Finding], after: list[Finding]) -> tuple[set, bool]:
    """(identities of chosen findings still there after the round, whether the round added a
    finding of its own kind).  A fix is judged by the findings it owns: a copy site that still
    fails because of another store (and now names that store) is not a finding this fix added."""
    from collections import Counter

    was = Counter(_identity(f) for f in before)
    now = Counter(_identity(f) for f in after)
    fixed = Counter(_identity(f) for f in chosen)
    still = {k for k, n in fixed.items() if now[k] > was[k] - n}
    own = {f.code for f in chosen} - SITE_CODES
    added = any(now[k] > was[k] for k in now if k[0] in own)
    return still, added


def fix_source(
    source: str,
    filename: str = "<unknown>",
    *,
    unsafe: bool = False,
    wanted=None,
    options: Options | None = None,
    project=None,
) -> FixResult:
    """Fix ``source``; ``wanted(code) -> bool`` limits which findings are fixed; ``project`` is the
    project index (None: every attribute may be read in other files, so only fixes that are safe
    whoever reads it are safe).

    Runs the analysis again after each round, so that fixes which touch the same lines are applied
    one after the other, and a second run finds nothing to do.  A fix is kept only when it works:
    after the round, its finding must be gone and no finding may have been added; a fix that fails
    is undone (the round is made again without it), never applied again, and reported as left with
    "the fix did not remove the finding".  A round whose result would not parse is dropped and
    reported, never returned.
    """
    result = FixResult(source)
    current = source
    reported: set[tuple[str, int, int]] = set()
    failed: set[tuple] = set()  # _where() of findings whose fix did not remove them (in the text it was tried on)

    def analyse(text: str) -> list[Finding]:
        lines = text.split("\n")
        withhold = (lambda f: _where(f, lines) in failed) if failed else None
        return analyze_with_fixes(text, filename, options, project, withhold=withhold)

    findings = analyse(current)
    rounds = undone = 0
    while rounds < MAX_ROUNDS and undone <= MAX_UNDONE:
        noqa = noqa_map(current) if findings else {}
        chosen: list[Finding] = []
        taken = _Taken()
        for f in findings:
            if wanted is not None and not wanted(f.code):
                continue
            if is_silenced(f.code, f.line, noqa):
                continue
            if f.confidence != "high" and is_silenced("GLF010", f.line, noqa):
                continue  # the retired code of the lower levels
            if f.fix is None:
                continue
            if f.fix.applicability != SAFE and not unsafe:
                continue
            if not f.fix.edits:  # its edits could not be built after all
                key = (f.code, f.line, f.col)
                if key not in reported:
                    reported.add(key)
                    result.skipped.append((f, "the fix could not be built; left as is"))
                continue
            if any(f.fix is c.fix for c in chosen):  # one edit fixes several findings (copy-safe)
                chosen.append(f)
                continue
            if taken.clashes(list(f.fix.edits)):
                continue
            chosen.append(f)
            taken.add(list(f.fix.edits))
        if any(c.code not in SITE_CODES for c in chosen) and any(c.code in SITE_CODES for c in chosen):
            # Stores before the copy sites they cause: the copy may work once its stores are fixed,
            # and is fixed in a later round only if it still fails then.
            chosen = [c for c in chosen if c.code not in SITE_CODES]
            taken = _Taken()
            added: set[int] = set()
            for c in chosen:
                if id(c.fix) not in added:  # one copy-safe edit may fix several findings
                    added.add(id(c.fix))
                    taken.add(list(c.fix.edits))
        if not chosen:
            break
        new = apply_edits(current, taken.all())
        try:
            ast.parse(new)
        except SyntaxError:
            # Try the fixes one at a time and keep those that parse.
            kept = []
            for f in chosen:
                trial = apply_edits(current, list(f.fix.edits))
                try:
                    ast.parse(trial)
                except SyntaxError:
                    key = (f.code, f.line, f.col)
                    if key not in reported:
                        reported.add(key)
                        result.skipped.append((f, "the fix would not parse; left as is"))
                    continue
                kept.append(f)
                break
            if not kept:
                break
            chosen = [c for c in chosen if c.fix is kept[0].fix]
            new = apply_edits(current, list(kept[0].fix.edits))
        if new == current:
            break
        after = analyse(new)
        bad = _failing(current, findings, chosen, after, analyse)
        if bad:
            # Undo the round: the failing fixes are withheld from now on, the others are made again.
            lines = current.split("\n")
            failed.update(_where(f, lines) for f in bad)
            findings = analyse(current)
            undone += 1
            continue
        rounds += 1
        result.applied += chosen
        current = new
        findings = after
    result.source = current
    # What is left: findings with no fix, with a fix that was not enabled, or whose fix did not work.
    final = findings
    lines = current.split("\n")
    noqa = noqa_map(current) if final else {}
    for f in final:
        if (wanted is not None and not wanted(f.code)) or is_silenced(f.code, f.line, noqa):
            continue
        if _where(f, lines) in failed:
            result.skipped.append((f, NOT_REMOVED))
        elif f.fix is None:
            why = f.data.get("no_fix")
            result.skipped.append((f, "no automatic fix" + (f": {why}" if why else "")))
        elif f.fix.applicability != SAFE and not unsafe:
            result.skipped.append((f, "unsafe fix not applied (enable with --unsafe-fixes)"))
        elif (f.code, f.line, f.col) not in reported:
            result.skipped.append((f, "fix not applied (conflicts with another fix)"))
    return result


def _failing(current: str, before: list[Finding], chosen: list[Finding], after: list[Finding], analyse) -> list[Finding]:
    """The chosen findings whose fix does not work (their finding stays, or the fix adds one).  When
    the round as a whole fails and it made several fixes, each is tried alone to find the culprits."""
    still, added = _broken(before, chosen, after)
    if not still and not added:
        return []
    groups: list[list[Finding]] = []
    for f in chosen:
        for g in groups:
            if g[0].fix is f.fix:
                g.append(f)
                break
        else:
            groups.append([f])
    if len(groups) == 1:
        return [f for f in chosen if _identity(f) in still] or list(chosen)
    bad: list[Finding] = []
    for g in groups:
        trial = apply_edits(current, list(g[0].fix.edits))
        try:
            ast.parse(trial)
        except SyntaxError:
            bad += g
            continue
        s, a = _broken(before, g, analyse(trial))
        if s or a:
            bad += [f for f in g if _identity(f) in s] or g
    return bad or list(chosen)
