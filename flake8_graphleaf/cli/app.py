"""The ``graphleaf`` command: check, fix, rules, rule, explain, verify.

check and fix never import torch; explain and verify import their modules (which do)
only when asked for.  Exit codes: 0 nothing found, 1 findings (or, for ``fix --diff``,
changes to make), 2 a usage error or a file that could not be read or parsed.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from .. import __version__
from ..fix.attach import analyze_with_fixes
from .config import ConfigError, Settings, check_codes, load
from .files import discover
from ..analysis.findings import SAFE, Finding
from ..fix.fixer import fix_source
from ..fix.readers import project_index
from ..analysis.noqa import file_is_skipped, is_silenced, noqa_map
from .output import FORMATS, FileReport, render, statistics
from ..analysis.rules import all_rules
from ..fix.writer import (SourceError, Source, check_parses, decode, encode, read_source, restore_newlines,
                          unified_diff, write_atomic)

LAZY = {
    "explain": ("flake8_graphleaf.cli.explain", "name the tensors that break deepcopy: a model's step, or --run SCRIPT (needs torch)"),
    "verify": ("flake8_graphleaf.cli.verify", "run the model and prove that deepcopy works (needs torch)"),
}
STDIN = "-"


# ------------------------------------------------------------------ per file work


def _analyse(src: Source, path: str, settings: Settings) -> tuple[list[Finding], str | None, int]:
    """(findings, error, error line); findings already filtered by selection and noqa."""
    if file_is_skipped(src.text):
        return [], None, 1
    try:
        findings = analyze_with_fixes(src.text, path, settings.analysis_options(path))
    except SyntaxError as exc:
        return [], f"{exc.msg} (line {exc.lineno or 1})", exc.lineno or 1
    except ValueError as exc:  # null bytes
        return [], str(exc), 1
    except (RecursionError, MemoryError):
        return [], "it nests too deeply to analyse", 1
    wanted = settings.wanted_for(path)
    noqa = noqa_map(src.text)
    return [f for f in findings if wanted(f.code) and not is_silenced(f.code, f.line, noqa)], None, 1


def check_one(path: str, settings: Settings, raw: bytes | None = None, shown: str | None = None) -> FileReport:
    report = FileReport(shown or path)
    try:
        src = decode(raw) if raw is not None else read_source(path)
    except SourceError as exc:
        report.error = str(exc)
        return report
    report.lines = src.text.split("\n")
    report.findings, report.error, report.error_line = _analyse(src, path, settings)
    return report


@dataclass
class FixReport:
    path: str
    applied: list[Finding] = field(default_factory=list)
    left: list[tuple[Finding, str]] = field(default_factory=list)
    error: str | None = None
    diff: str = ""
    changed: bool = False
    output: str | None = None  # the fixed text, for stdin


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
        src = decode(raw) if raw is not None else read_source(path)
    except SourceError as exc:
        report.error = str(exc)
        return report
    if raw is not None:
        report.output = restore_newlines(src, src.text)
    if file_is_skipped(src.text):
        return report
    try:
        result = fix_source(src.text, path, unsafe=unsafe, wanted=settings.wanted_for(path),
                            options=settings.analysis_options(path), project=project)
    except SyntaxError as exc:
        report.error = f"{exc.msg} (line {exc.lineno or 1})"
        return report
    except ValueError as exc:
        report.error = str(exc)
        return report
    except (RecursionError, MemoryError):
        report.error = "it nests too deeply to analyse"
        return report
    report.left = result.skipped
    if result.source == src.text:
        return report
    try:
        check_parses(result.source, path)
        data = encode(src, result.source)
        report.applied = result.applied
        report.changed = True
        if raw is not None:
            report.output = restore_newlines(src, result.source)
        elif diff_only:
            report.diff = _diff(report.path, src.text, result.source)
        else:
            write_atomic(path, data, expected_old=src.raw)
    except SourceError as exc:
        report.error = str(exc)
        report.applied, report.changed = [], False
    return report


def _check_batch(batch, settings):
    return [check_one(p, settings) for p in batch]


def _fix_batch(batch, settings, unsafe, diff_only, project=None):
    return [fix_one(p, settings, unsafe, diff_only, project=project) for p in batch]


# ------------------------------------------------------------------ running many files


class Progress:
    """A one-line bar on stderr, for terminals only, shown once a run has taken 0.5 s."""

    def __init__(self, total: int, enabled: bool):
        self.total, self.done = total, 0
        self.enabled = enabled and total > 1
        self.start = time.monotonic()
        self.last = 0.0
        self.shown = False

    def advance(self, n: int) -> None:
        self.done += n
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.start < 0.5 or (now - self.last < 0.1 and self.done < self.total):
            return
        self.last = now
        width = 30
        filled = width * self.done // self.total
        sys.stderr.write(f"\r[{'#' * filled}{' ' * (width - filled)}] {self.done}/{self.total} files")
        sys.stderr.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def progress_wanted(quiet: bool) -> bool:
    if quiet or os.environ.get("CI") or os.environ.get("TERM") == "dumb":
        return False
    return sys.stderr.isatty()


def run_many(func, files: list[str], jobs: int, progress: Progress, *extra) -> list:
    """``func(batch, *extra)`` over ``files`` in batches, in parallel when it pays;
    results come back in the order of ``files`` whatever finishes first."""
    if not files:
        return []
    size = max(1, min(16, len(files) // (jobs * 4) or 1))
    batches = [files[i:i + size] for i in range(0, len(files), size)]
    results: dict[int, list] = {}
    if jobs > 1 and len(files) >= 8:
        try:
            with ProcessPoolExecutor(max_workers=min(jobs, len(batches))) as pool:
                futures = {pool.submit(func, b, *extra): i for i, b in enumerate(batches)}
                for fut in as_completed(futures):
                    results[futures[fut]] = fut.result()
                    progress.advance(len(batches[futures[fut]]))
        except (OSError, NotImplementedError, PermissionError):
            results = {}  # no process pool here (sandbox, no /dev/shm): run serially below
    for i, b in enumerate(batches):
        if i not in results:
            results[i] = func(b, *extra)
            progress.advance(len(b))
    progress.close()
    return [r for i in range(len(batches)) for r in results[i]]


# ------------------------------------------------------------------ options


def _code_list(text: str) -> list[str]:
    return [c.strip().upper() for c in text.split(",") if c.strip()]


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="*", metavar="PATH", help="files or folders (default: .); - reads stdin")
    sel = p.add_argument_group("rule selection (comma-separated codes or prefixes, as in flake8)")
    sel.add_argument("--select", type=_code_list, help="codes to report (default: GLF, all)")
    sel.add_argument("--extend-select", type=_code_list, help="codes to add to the selection")
    sel.add_argument("--ignore", type=_code_list, help="codes to leave out")
    sel.add_argument("--extend-ignore", type=_code_list, help="more codes to leave out, on top of the config's")
    files = p.add_argument_group("files and configuration")
    files.add_argument("--config", type=Path, help="a pyproject.toml to read [tool.graphleaf] from")
    files.add_argument("--isolated", action="store_true", help="ignore every configuration file")
    files.add_argument("--exclude", type=lambda s: [x.strip() for x in s.split(",") if x.strip()],
                       help="globs to skip, replacing the defaults and the config's")
    files.add_argument("--extend-exclude", type=lambda s: [x.strip() for x in s.split(",") if x.strip()],
                       help="more globs to skip")
    files.add_argument("--force-exclude", action="store_true",
                       help="apply exclude and .gitignore to paths named on the command line too (pre-commit)")
    files.add_argument("--no-respect-gitignore", action="store_true", help="check files that .gitignore ignores")
    files.add_argument("--module-bases", type=lambda s: [x.strip() for x in s.split(",") if x.strip()],
                       help="more base classes whose subclasses are torch modules (MyBase,mylib.Net)")
    files.add_argument("--argument-stores", action="store_true", default=None,
                       help="also report GLF010: stores whose only evidence is a forward argument")
    files.add_argument("--stdin-filename", help="the name of the file read from stdin (for config and messages)")
    run = p.add_argument_group("running")
    run.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1, help="processes (default: all cores)")
    run.add_argument("-q", "--quiet", action="store_true", help="no summary line, no progress bar")


def build_parser(command: str | None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="graphleaf",
        description="Find and fix PyTorch code that makes copy.deepcopy(model) fail with "
        "'Only Tensors created explicitly by the user (graph leaves) support the deepcopy protocol'.",
    )
    parser.add_argument("--version", action="version", version=f"graphleaf {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    check = sub.add_parser("check", help="report findings (the same as flake8 --select=GLF)")
    _add_common(check)
    check.add_argument("--output-format", choices=FORMATS, default="text")
    check.add_argument("--statistics", action="store_true", help="count findings per code")
    check.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings")

    fix = sub.add_parser("fix", help="apply fixes in place")
    _add_common(fix)
    fix.add_argument("--diff", action="store_true", help="print a unified diff and write nothing")
    unsafe = fix.add_mutually_exclusive_group()
    unsafe.add_argument("--unsafe-fixes", dest="unsafe_fixes", action="store_true", default=None,
                        help="also apply fixes that may change behaviour")
    unsafe.add_argument("--no-unsafe-fixes", dest="unsafe_fixes", action="store_false")
    fix.add_argument("--exit-non-zero-on-fix", action="store_true", help="exit 1 when something was fixed")

    sub.add_parser("rules", help="list the codes with one-line summaries")
    rule = sub.add_parser("rule", help="print a rule's documentation")
    rule.add_argument("code")

    for name, (module, help_text) in LAZY.items():
        p = sub.add_parser(name, help=help_text, add_help=command != name)
        if command == name:
            p.set_defaults(lazy_module=None)
            try:
                mod = importlib.import_module(module)
            except ImportError as exc:
                p.set_defaults(lazy_error=f"graphleaf {name} is not available: cannot import {module} ({exc}). "
                               f"It needs torch: pip install 'flake8-graphleaf[verify]'")
                p.add_argument("rest", nargs=argparse.REMAINDER)
            else:
                mod.add_arguments(p)
                p.set_defaults(lazy_module=mod)
    return parser


def settings_from(args) -> Settings:
    paths = [p for p in args.paths if p != STDIN] or ([args.stdin_filename] if args.stdin_filename else [])
    existing = [os.path.abspath(p) for p in paths if os.path.exists(p)]
    start = Path(os.path.commonpath(existing)) if existing else Path.cwd()
    s = load(start, explicit=args.config, isolated=args.isolated)
    if args.select is not None:
        check_codes(args.select, "--select")
        s.select, s.extend_select = args.select, []
    if args.extend_select is not None:
        check_codes(args.extend_select, "--extend-select")
        s.extend_select = s.extend_select + args.extend_select
    if args.ignore is not None:
        check_codes(args.ignore, "--ignore")
        s.ignore = args.ignore
    if args.extend_ignore is not None:
        check_codes(args.extend_ignore, "--extend-ignore")
        s.ignore = s.ignore + args.extend_ignore
    check_codes(s.select + s.extend_select + s.ignore, f"{s.config_file or 'configuration'}")
    if args.exclude is not None:
        s.exclude = args.exclude
    if args.extend_exclude is not None:
        s.extend_exclude = s.extend_exclude + args.extend_exclude
    if args.no_respect_gitignore:
        s.respect_gitignore = False
    if args.module_bases is not None:
        s.module_bases = frozenset(args.module_bases)
    if args.argument_stores:
        s.argument_stores = True
    return s


def _read_stdin() -> bytes:
    return sys.stdin.buffer.read()


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


# ------------------------------------------------------------------ commands


def cmd_check(args) -> int:
    settings = settings_from(args)
    rules = all_rules()
    reports: list[FileReport] = []
    paths = args.paths or ["."]
    if STDIN in paths:
        name = args.stdin_filename or "stdin"
        reports.append(check_one(name, settings, raw=_read_stdin(), shown=args.stdin_filename or STDIN))
        paths = [p for p in paths if p != STDIN]
    if paths:
        found = discover(paths, settings, force_exclude=args.force_exclude)
        reports += [FileReport(p, error=why) for p, why in found.errors]
        progress = Progress(len(found.files), progress_wanted(args.quiet))
        reports += run_many(_check_batch, found.files, max(1, args.jobs), progress, settings)
        checked = len(found.files)
    else:
        checked = 1
    reports.sort(key=lambda r: r.path)
    out = render(args.output_format, reports, rules, settings.unsafe_fixes)
    if args.statistics:
        stats = statistics(reports, rules)
        if args.output_format in ("text", "concise"):
            out += stats
        else:
            sys.stderr.write(stats)
    sys.stdout.write(out)
    sys.stdout.flush()
    findings = sum(len(r.findings) for r in reports)
    errors = sum(1 for r in reports if r.error)
    if not args.quiet:
        fixable = sum(1 for r in reports for f in r.findings if f.fix is not None)
        if findings or errors:
            line = f"Found {_plural(findings, 'finding')} in {_plural(checked, 'file')} checked"
            if fixable:
                line += f" ({fixable} fixable with `graphleaf fix`)"
            if errors:
                line += f"; {_plural(errors, 'path')} could not be read or parsed (GLF900)"
            sys.stderr.write(line + ".\n")
        else:
            sys.stderr.write(f"All clear: {_plural(checked, 'file')} checked, no findings.\n")
    if errors:
        return 2
    if findings and not args.exit_zero:
        return 1
    return 0


def _fix_lines(report: FixReport, out) -> None:
    for f in report.applied:
        out.write(f"{report.path}:{f.line}:{f.col + 1}: {f.code} fixed: {f.fix.description if f.fix else ''}\n")
    for f, why in report.left:
        out.write(f"{report.path}:{f.line}:{f.col + 1}: {f.code} left: {why}: {f.message}\n")


def cmd_fix(args) -> int:
    settings = settings_from(args)
    unsafe = settings.unsafe_fixes if args.unsafe_fixes is None else args.unsafe_fixes
    paths = args.paths or ["."]
    reports: list[FixReport] = []
    stdin_report = None
    if STDIN in paths:
        name = args.stdin_filename or "stdin"
        stdin_report = fix_one(name, settings, unsafe, True, raw=_read_stdin(), shown=args.stdin_filename or STDIN)
        reports.append(stdin_report)
        paths = [p for p in paths if p != STDIN]
    if paths:
        found = discover(paths, settings, force_exclude=args.force_exclude)
        reports += [FixReport(p, error=why) for p, why in found.errors]
        progress = Progress(len(found.files), progress_wanted(args.quiet))
        project = project_index(list(found.files))  # once, over every checked file: who reads what
        reports += run_many(_fix_batch, found.files, max(1, args.jobs), progress, settings, unsafe, args.diff, project)
    reports.sort(key=lambda r: r.path)
    # With --diff or stdin the fixed text goes to stdout, so the report goes to stderr.
    info = sys.stderr if (args.diff or stdin_report is not None) else sys.stdout
    if stdin_report is not None and stdin_report.output is not None:
        sys.stdout.write(stdin_report.output)
    for r in reports:
        if r.diff:
            sys.stdout.write(r.diff)
    for r in reports:
        if r.error:
            info.write(f"{r.path}:1:1: GLF900 could not parse: {r.error}\n")
        if not args.quiet:
            _fix_lines(r, info)
    sys.stdout.flush()
    applied = sum(len(r.applied) for r in reports)
    changed = sum(1 for r in reports if r.changed)
    left = [f for r in reports for f, _ in r.left]
    need_unsafe = sum(1 for f in left if f.fix is not None and f.fix.applicability != SAFE and not unsafe)
    errors = sum(1 for r in reports if r.error)
    if not args.quiet:
        verb = "Would fix" if args.diff else "Fixed"
        line = f"{verb} {_plural(applied, 'finding')} in {_plural(changed, 'file')}"
        line += f"; {len(left)} left"
        if left:
            line += f" ({need_unsafe} with an unsafe fix: add --unsafe-fixes)" if need_unsafe else " (no automatic fix)"
        if errors:
            line += f"; {_plural(errors, 'path')} could not be read, parsed or written (GLF900)"
        info.write(line + ".\n")
    if errors:
        return 2
    if args.diff:
        return 1 if changed else 0
    if left or (args.exit_non_zero_on_fix and changed):
        return 1
    return 0


def cmd_rules(args) -> int:
    rules = all_rules()
    width = max(len(c) for c in rules)
    for code, summary in rules.items():
        print(f"{code:<{width}}  {summary}")
    return 0


def cmd_rule(args) -> int:
    from importlib.resources import files

    code = args.code.strip().upper()
    rules = all_rules()
    if code not in rules:
        sys.stderr.write(f"graphleaf: unknown rule code {args.code!r}; `graphleaf rules` lists them\n")
        return 2
    page = files("flake8_graphleaf") / "rule_docs" / f"{code}.md"
    try:
        text = page.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError, OSError):
        sys.stderr.write(f"graphleaf: {code} ({rules[code]}) has no documentation page installed "
                         f"(flake8_graphleaf/rule_docs/{code}.md is missing)\n")
        return 2
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


def cmd_lazy(args) -> int:
    if getattr(args, "lazy_error", None):
        sys.stderr.write(args.lazy_error + "\n")
        return 2
    return int(args.lazy_module.run(args) or 0)


COMMANDS = {"check": cmd_check, "fix": cmd_fix, "rules": cmd_rules, "rule": cmd_rule,
            "explain": cmd_lazy, "verify": cmd_lazy}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(command)
    args = parser.parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except ConfigError as exc:
        sys.stderr.write(f"graphleaf: error: {exc}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("graphleaf: interrupted; every file is either as it was or fully fixed\n")
        return 130
    except BrokenPipeError:
        # stdout closed early (| head): nothing more to say.
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 1


if __name__ == "__main__":
    sys.exit(main())
