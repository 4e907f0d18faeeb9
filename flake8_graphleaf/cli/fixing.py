"""``graphleaf fix`` (and ``check --fix`` / ``--diff``): each file fixed until nothing changes, written
atomically or shown as a diff; then the copy-safe state a helper object's class needs in another
checked file; the files that were fixed or left findings checked again once all are written (a copy
site in one file that a store's fix in another removed is not left); the summary and the exit code."""

from __future__ import annotations

import os
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ..analysis.findings import SAFE, Finding
from ..analysis.noqa import file_is_skipped
from ..analysis.rules import all_rules
from ..fix.fixer import NOT_REMOVED, fix_source
from ..fix.readers import forget_written, project_index
from ..fix.recheck import recheck
from ..fix.writer import (SourceError, check_parses, decode, encode, read_source, restore_newlines,
                          unified_diff, write_atomic)
from .config import Settings
from .errors import syntax_error
from .files import discover
from .options import STDIN, emit, plural, read_stdin, settings_from, show_files, show_settings
from .output import EDIT_FORMATS, FileReport, render
from .runner import Interrupted, Progress, note_written, progress_wanted, run_many, stopped, with_edits


@dataclass
class FixReport:
    path: str
    applied: list[Finding] = field(default_factory=list)
    left: list[tuple[Finding, str]] = field(default_factory=list)
    error: str | None = None
    error_line: int = 1
    error_col: int = 0
    refused: bool = False  # could not be read: not "checked"
    internal: bool = False
    diff: str = ""
    changed: bool = False
    written: bool = False  # the file on disk was replaced
    output: str | None = None  # the fixed text, for stdin
    lines: list[str] = field(default_factory=list)  # the final text's lines, for --output-format

    def as_file_report(self) -> FileReport:
        return FileReport(self.path, findings=[f for f, _ in self.left], error=self.error,
                          error_line=self.error_line, error_col=self.error_col, lines=self.lines,
                          refused=self.refused, internal=self.internal)


def _diff(path: str, old: str, new: str) -> str:
    def lines(text):
        out = text.splitlines(keepends=True)
        if out and not out[-1].endswith("\n"):
            out[-1] += "\n\\ No newline at end of file\n"
        return out

    shown = _diff_path(path)
    return unified_diff(lines(old), lines(new), f"a/{shown}", f"b/{shown}")


def _diff_path(path: str) -> str:
    """The path as ``git apply`` wants it in a header: relative, normalised, with "/"
    (``./pkg/m.py`` is ``pkg/m.py``)."""
    norm = os.path.normpath(path)
    if os.path.isabs(norm):
        rel = os.path.relpath(norm)
        norm = rel if not rel.startswith("..") else norm
    return Path(norm).as_posix()


def fix_one(path: str, settings: Settings, unsafe: bool, diff_only: bool,
            raw: bytes | None = None, shown: str | None = None, project=None) -> FixReport:
    report = FixReport(shown or path)
    try:
        src = decode(raw, path) if raw is not None else read_source(path)
    except SourceError as exc:
        report.error, report.refused = f"could not read: {exc}", True
        return report
    report.lines = src.text.split("\n")
    if raw is not None:
        report.output = restore_newlines(src, src.text)  # the fixed text of stdin (printed unless --diff)
    if file_is_skipped(src.text):
        return report
    try:
        result = fix_source(src.text, path, unsafe=unsafe, wanted=settings.wanted_for(path),
                            options=settings.analysis_options(path), project=project)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        report.error, report.error_line, report.error_col = syntax_error(exc, src.text)
        return report
    except Exception as exc:  # noqa: BLE001
        report.error, report.internal = f"internal error: {type(exc).__name__}: {exc} (please report it)", True
        return report
    report.left = result.skipped
    if result.source == src.text:
        return report
    try:
        check_parses(result.source, path)
        data = encode(src, result.source)
        report.applied = result.applied
        report.changed = True
        report.lines = result.source.split("\n")
        if raw is not None:
            report.output = restore_newlines(src, result.source)
        if diff_only:
            report.diff = _diff(report.path, src.text, result.source)
        elif raw is None:
            write_atomic(path, data, expected_old=src.raw)
            report.written = True
            note_written(report.path)
            forget_written(path, project)
    except SourceError as exc:
        report.error = f"could not write: {exc}"
        report.applied, report.changed = [], False
    return report


def _fix_batch(batch, settings, unsafe, diff_only, project=None):
    out = []
    for p in batch:
        if stopped():
            break
        out.append(with_edits(fix_one(p, settings, unsafe, diff_only, project=project), settings))
    return out


def _fix_lines(report: FixReport, out, show_fixed: bool = True, show_left: bool = True) -> None:
    if show_fixed:
        for f in report.applied:
            out.write(f"{report.path}:{f.line}:{f.col + 1}: {f.code} fixed: {f.fix.description if f.fix else ''}\n")
    if show_left:
        for f, why in report.left:
            out.write(f"{report.path}:{f.line}:{f.col + 1}: {f.code} left: {why}: {f.message}\n")


def _run_fix(args, settings: Settings, unsafe: bool, diff: bool) -> tuple[list[FixReport], bool]:
    """(reports, interrupted)."""
    paths = args.paths or ["."]
    reports: list[FixReport] = []
    if STDIN in paths:
        name = args.stdin_filename or "stdin"
        reports.append(fix_one(name, settings, unsafe, diff, raw=read_stdin(), shown=args.stdin_filename or STDIN))
        paths = [p for p in paths if p != STDIN]
    interrupted = False
    if paths:
        found = discover(paths, settings, force_exclude=args.force_exclude)
        reports += [FixReport(p, error=f"could not read: {why}", refused=True) for p, why in found.errors]
        progress = Progress(len(found.files), progress_wanted(args.quiet))
        try:
            project = project_index(list(found.files))  # once, over every checked file: who reads what
            reports += run_many(_fix_batch, found.files, max(1, args.jobs), progress, settings, unsafe, diff, project)
        except Interrupted as exc:
            reports += exc.done
            known = {r.path for r in exc.done if getattr(r, "written", False)}
            reports += [FixReport(p, written=True, changed=True) for p in sorted(exc.written - known)]
            interrupted = True
        if not interrupted:
            _fix_in_other_files(reports, settings, diff)
            if not diff:  # what a copy in one file still needs once the others are written
                recheck([r for r in reports if r.output is None], list(found.files), settings.analysis_options)
    reports.sort(key=lambda r: r.path)
    return reports, interrupted


def _fix_in_other_files(reports: list[FixReport], settings: Settings, diff: bool) -> None:
    """Helper objects of a class in another checked file: that file gets the copy-safe state, and
    the module's findings they caused count as fixed.  Files that were not checked are not touched."""
    from ..fix.foreign import fix_classes, requests, settle_moved

    left = [f for r in reports for f, _ in r.left]
    wanted = requests(left)
    if not wanted:
        return
    by_path = {os.path.realpath(r.path): r for r in reports if not r.error and r.output is None}
    done: dict[tuple[str, str], str] = {}  # (path, class) -> description
    for path, classes in wanted.items():
        target = by_path.get(path)
        if target is None:
            continue
        try:
            src = read_source(target.path)
            base = "\n".join(target.lines) if target.lines else src.text
            new, made = fix_classes(base, target.path, classes, settings.analysis_options(target.path))
            if not made:
                continue
            if new == base:  # already covered by the file's own fixes: nothing more to write
                done.update({(path, cls): why for cls, why in made.items()})
                continue
            check_parses(new, target.path)
            original = src.text if diff else None
            if diff:
                target.diff = _diff(target.path, original, new)
            else:
                write_atomic(target.path, encode(src, new), expected_old=src.raw)
                target.written = True
        except SourceError as exc:
            target.error = f"could not write: {exc}"
            continue
        target.changed = True
        target.lines = new.split("\n")
        done.update({(path, cls): why for cls, why in made.items()})
    if not done:
        return
    for r in reports:
        r.left = settle_moved(r.left, r.applied, done)


def _report_interrupt(reports: list[FixReport]) -> int:
    written = [r.path for r in reports if r.written]
    sys.stderr.write(f"graphleaf: interrupted; {plural(len(written), 'file')} changed before stopping"
                     + (":\n" if written else ".\n"))
    for p in written:
        sys.stderr.write(f"  {p}\n")
    sys.stderr.write("every other file is as it was (each file is replaced in one rename)\n")
    sys.stderr.flush()
    return 130


def _fixed_summary(reports: list[FixReport]) -> str:
    """ruff's --show-fixes list: each file with the count of each code fixed."""
    lines = []
    for r in reports:
        if not r.applied:
            continue
        lines.append(f"- {r.path}:")
        counts = Counter(f.code for f in r.applied)
        for code in sorted(counts):
            lines.append(f"    {counts[code]} x {code} ({all_rules().get(code, '')})")
    total = sum(len(r.applied) for r in reports)
    return (f"Fixed {plural(total, 'finding')}:\n" + "".join(l + "\n" for l in lines)) if total else ""


def fix_for_check(args, settings: Settings):
    """``check --fix``: apply, then the check reports what is left.  Returns the note to
    print, or an exit code when interrupted."""
    unsafe = settings.unsafe_fixes
    reports, interrupted = _run_fix(args, settings, unsafe, diff=False)
    if interrupted:
        return _report_interrupt(reports)
    if args.show_fixes:
        return _fixed_summary(reports)
    total = sum(len(r.applied) for r in reports)
    return f"Fixed {plural(total, 'finding')}.\n" if total else None


def fix_command(args, settings: Settings, diff: bool, from_check: bool = False) -> int:
    settings.fix_edits = getattr(args, "output_format", "text") in EDIT_FORMATS
    if from_check:
        unsafe = settings.unsafe_fixes
    else:
        unsafe = settings.unsafe_fixes if args.unsafe_fixes is None else args.unsafe_fixes
    reports, interrupted = _run_fix(args, settings, unsafe, diff)
    if interrupted:
        return _report_interrupt(reports)
    stdin_report = next((r for r in reports if r.output is not None), None)
    structured = args.output_format != "text" or args.output_file is not None
    # With --diff or stdin the fixed text goes to stdout, so the report goes to stderr.
    info = sys.stderr if (diff or stdin_report is not None or structured) else sys.stdout
    if stdin_report is not None and not diff:
        sys.stdout.write(stdin_report.output)
    for r in reports:
        if r.diff:
            sys.stdout.write(r.diff)
    if structured:
        rendered = render(args.output_format, [r.as_file_report() for r in reports], all_rules(), unsafe)
        if args.output_file is not None or not (diff or stdin_report is not None):
            emit(args, rendered)
        else:
            sys.stderr.write(rendered)
    for r in reports:
        if r.error and not structured:
            info.write(f"{r.path}:{r.error_line}:{r.error_col + 1}: GLF900 {r.error}\n")
        if not args.quiet and not structured:
            _fix_lines(r, info, show_fixed=not from_check or args.show_fixes)
    if args.statistics:
        fixed = Counter(f.code for r in reports for f in r.applied)
        left = Counter(f.code for r in reports for f, _ in r.left)
        left.update("GLF900" for r in reports if r.error)
        rules = all_rules()
        for code in sorted(set(fixed) | set(left)):
            info.write(f"{fixed[code]:<5} fixed {left[code]:<5} left  {code} {rules.get(code, '')}\n")
    sys.stdout.flush()
    applied = sum(len(r.applied) for r in reports)
    changed = sum(1 for r in reports if r.changed)
    left = [f for r in reports for f, _ in r.left]
    need_unsafe = sum(1 for f in left if f.fix is not None and f.fix.applicability != SAFE and not unsafe)
    errors = sum(1 for r in reports if r.error)
    internal = sum(1 for r in reports if r.internal)
    if not args.quiet:
        verb = "Would fix" if diff else "Fixed"
        line = f"{verb} {plural(applied, 'finding')} in {plural(changed, 'file')}"
        line += f"; {len(left)} left"
        if left:
            not_removed = sum(1 for r in reports for _, why in r.left if why == NOT_REMOVED)
            parts = []
            if need_unsafe:
                parts.append(f"{need_unsafe} with an unsafe fix: add --unsafe-fixes")
            if not_removed:
                parts.append(f"{not_removed} whose fix did not remove the finding")
            line += f" ({'; '.join(parts)})" if parts else " (no automatic fix)"
        if errors:
            line += f"; {plural(errors, 'file')} could not be read, parsed or written (GLF900)"
        info.write(line + ".\n")
    if internal:
        return 2
    if args.exit_zero:
        return 0
    if errors:
        return 1
    if diff:
        return 1 if changed else 0
    if left or (getattr(args, "exit_non_zero_on_fix", False) and changed):
        return 1
    return 0


def cmd_fix(args) -> int:
    settings = settings_from(args)
    if args.show_settings:
        return show_settings(args, settings)
    if args.show_files:
        return show_files(args, settings)
    return fix_command(args, settings, diff=args.diff)
