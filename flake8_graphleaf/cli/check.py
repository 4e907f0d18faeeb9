"""``graphleaf check``: each file's findings (from the cache when nothing it read changed), the
report, and ``check --add-noqa``.  ``check --fix`` and ``--diff`` go through :mod:`.fixing`."""

from __future__ import annotations

import sys

from ..analysis.findings import Finding
from ..analysis.noqa import add_noqa, file_is_skipped, is_silenced, noqa_map
from ..analysis.rules import all_rules
from ..fix.attach import analyze_with_fixes
from ..fix.writer import SourceError, Source, decode, encode, read_bytes, read_source, write_atomic
from ..project.cache import Cache, key as cache_key
from ..project.resolver import file_stamp, shared_resolver
from .cached import finding_from_json, finding_to_json
from .config import Settings
from .errors import syntax_error
from .files import discover
from .fixing import fix_command, fix_for_check
from .options import STDIN, cache_for, emit, plural, read_stdin, settings_from, show_files, show_settings
from .output import EDIT_FORMATS, FileReport, render, statistics
from .runner import Interrupted, Progress, progress_wanted, run_many, stopped, with_edits


_CODES: dict[tuple, tuple[str, ...]] = {}  # the selection's codes, when no file has codes of its own


def _wanted_codes(settings: Settings, path: str) -> tuple[str, ...]:
    if not settings.per_file_ignores:  # the same codes for every file
        key = (tuple(settings.select), tuple(settings.extend_select), tuple(settings.ignore))
        found = _CODES.get(key)
        if found is None:
            found = _CODES[key] = tuple(c for c in all_rules() if settings.enabled(c))
        return found
    wanted = settings.wanted_for(path)
    return tuple(c for c in all_rules() if wanted(c))


def _findings_key(data: bytes, settings: Settings, codes: tuple[str, ...], options) -> str:
    # The content, every setting that changes the answer, the file's module name and path (two
    # files with the same text beside different neighbours -- a test next to its own training.py
    # -- are analysed apart), and the running Python (the parse error of newer syntax depends on
    # it); cache_key mixes in the tool's version.  The other files the analysis read are checked
    # on a hit (_deps_ok).
    return cache_key(data, sorted(settings.module_bases), codes, sys.version_info[:2],
                     getattr(options, "module", None), getattr(options, "is_package", False),
                     getattr(options, "confidence", "high"), getattr(options, "path", None))


def _stamp(path: str | None):
    stamp = file_stamp(path) if path is not None else None
    return None if stamp is None else [path, *stamp]


def _recording(view):
    """Wrap ``view.parsed`` (and ``parsed_file``, ``users_of``) to record the modules and files
    the analysis of one file looks up."""
    seen: list[str] = []
    if view is None or not hasattr(view, "parsed"):
        return seen, lambda: None
    original, by_path, users = view.parsed, getattr(view, "parsed_file", None), getattr(view, "users_of", None)

    def parsed(module):
        seen.append(module)
        return original(module)

    def parsed_file(path, module):
        seen.append("path:" + path)
        return by_path(path, module)

    def users_of(module, words, path=""):
        found = users(module, words, path)  # the files of other files' runs (the copy graph)
        seen.extend("path:" + p for p in found)
        return found

    view.parsed = parsed
    if by_path is not None and users is not None:
        view.parsed_file, view.users_of = parsed_file, users_of

    def restore():
        for name in ("parsed", "parsed_file", "users_of"):
            view.__dict__.pop(name, None)
    return seen, restore


def _deps(view, modules: list[str]):
    locate = getattr(view, "_locate", None)
    if modules and locate is None:
        return None  # cannot tell what was read: do not cache
    return {m: _stamp(m[5:] if m.startswith("path:") else locate(m)) for m in sorted(set(modules))}


def _deps_ok(view, deps) -> bool:
    if not deps:
        return True
    locate = getattr(view, "_locate", None)
    return locate is not None and all(
        _stamp(m[5:] if m.startswith("path:") else locate(m)) == stamp for m, stamp in deps.items())


def _analyse(src: Source, path: str, settings: Settings, codes: tuple[str, ...],
             options=None) -> tuple[list[Finding], tuple | None]:
    """(findings, error): findings already filtered by selection and noqa; error is
    (message, line, col) for a file that does not parse."""
    if file_is_skipped(src.text):
        return [], None
    try:
        findings = analyze_with_fixes(src.text, path, options if options is not None else settings.analysis_options(path))
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        return [], syntax_error(exc, src.text)
    wanted = set(codes)
    findings = [f for f in findings if f.code in wanted]
    if not findings:
        return [], None
    noqa = noqa_map(src.text)
    return [f for f in findings if not is_silenced(f.code, f.line, noqa) and settings.keeps(f, path, noqa)], None


def _rebuilder(data: bytes, path: str, settings: Settings, codes: tuple[str, ...], options):
    """For findings read from the cache whose fix edits were not stored: analyse the file again
    (once, when the first such fix is needed) and give each its edits."""
    fresh: dict = {}

    def rebuild(finding: Finding) -> tuple:
        if not fresh:
            found, _ = _analyse(decode(data, path), path, settings, codes, options)
            fresh.update({(f.code, f.line, f.col): f.fix for f in found})
            fresh.setdefault(None, None)
        fix = fresh.get((finding.code, finding.line, finding.col))
        return fix.edits if fix is not None else ()
    return rebuild


def check_one(path: str, settings: Settings, raw: bytes | None = None, shown: str | None = None,
              cache: Cache | None = None) -> FileReport:
    report = FileReport(shown or path)
    try:
        data = raw if raw is not None else read_bytes(path)
    except SourceError as exc:
        report.error, report.refused = f"could not read: {exc}", True
        return report
    codes = _wanted_codes(settings, path)
    options = settings.analysis_options(path)
    view = getattr(options, "project", None)
    key = _findings_key(data, settings, codes, options) if cache is not None and cache.enabled else None
    hit = cache.get("findings", key) if key is not None else None
    if hit is not None and not _deps_ok(view, hit.get("deps")):
        hit = None  # a file it read (a base class's module, say) changed
    if hit is not None:
        try:
            rebuild = _rebuilder(data, path, settings, codes, options)
            report.findings = [finding_from_json(d, rebuild) for d in hit["findings"]]
            error = hit.get("error")
            if error:
                report.error, report.error_line, report.error_col = error[0], error[1], error[2]
            if report.findings:
                report.lines = decode(data, path).text.split("\n")
            return report
        except (KeyError, TypeError, ValueError, IndexError, SourceError):
            report = FileReport(shown or path)  # a damaged entry: analyse again
    try:
        src = decode(data, path)
    except SourceError as exc:
        report.error, report.refused = f"could not read: {exc}", True
        return report
    seen, restore = _recording(view) if key is not None else ([], lambda: None)
    try:
        report.findings, error = _analyse(src, path, settings, codes, options)
    except Exception as exc:  # noqa: BLE001 - one file's bug must not stop the others
        report.error, report.internal = f"internal error: {type(exc).__name__}: {exc} (please report it)", True
        report.lines = src.text.split("\n")
        return report
    finally:
        restore()
    if error is not None:
        report.error, report.error_line, report.error_col = error
    if report.findings or report.error:
        # the lines are read only to show a finding or an error (columns, context): a file with
        # neither keeps none (a worker hands every report back to the main process, pickled)
        report.lines = src.text.split("\n")
    deps = _deps(view, seen) if key is not None else None
    if key is not None and deps is not None:
        cache.put("findings", key, {"findings": [finding_to_json(f) for f in report.findings],
                                    "error": list(error) if error else None, "deps": deps})
    return report


def _check_batch(batch, settings, cache=None):
    if cache is not None and cache.enabled:
        shared_resolver().index.cache = cache  # the project index keeps its summaries there too
    out = []
    for p in batch:
        if stopped():
            break
        out.append(with_edits(check_one(p, settings, cache=cache), settings))
    return out


def _summary_counts(reports) -> tuple[int, int, int, int]:
    """(checked, findings, errors, internal): a file refused (missing, unreadable, not
    decodable, too large) is not counted as checked."""
    checked = sum(1 for r in reports if not r.refused)
    errors = sum(1 for r in reports if r.error)
    internal = sum(1 for r in reports if getattr(r, "internal", False))
    findings = sum(len(r.findings) for r in reports)
    return checked, findings, errors, internal


def cmd_check(args) -> int:
    settings = settings_from(args)
    settings.fix_edits = args.output_format in EDIT_FORMATS
    if args.unsafe_fixes is not None:
        settings.unsafe_fixes = args.unsafe_fixes
    if args.show_settings:
        return show_settings(args, settings)
    if args.show_files:
        return show_files(args, settings)
    if args.add_noqa:
        return cmd_add_noqa(args, settings)
    if args.diff or (args.fix and STDIN in (args.paths or [])):
        return fix_command(args, settings, diff=args.diff, from_check=True)
    fixed_note = None
    if args.fix:
        fixed_note = fix_for_check(args, settings)
        if isinstance(fixed_note, int):
            return fixed_note
    rules = all_rules()
    reports: list[FileReport] = []
    paths = args.paths or ["."]
    cache = cache_for(args, settings)
    if STDIN in paths:
        name = args.stdin_filename or "stdin"
        reports.append(check_one(name, settings, raw=read_stdin(), shown=args.stdin_filename or STDIN))
        paths = [p for p in paths if p != STDIN]
    if paths:
        found = discover(paths, settings, force_exclude=args.force_exclude)
        reports += [FileReport(p, error=f"could not read: {why}", refused=True) for p, why in found.errors]
        progress = Progress(len(found.files), progress_wanted(args.quiet))
        try:
            reports += run_many(_check_batch, found.files, max(1, args.jobs), progress, settings, cache)
        except Interrupted:
            sys.stderr.write("graphleaf: interrupted\n")
            return 130
    reports.sort(key=lambda r: r.path)
    out = render(args.output_format, reports, rules, settings.unsafe_fixes, show_witness=args.show_witness)
    if args.statistics:
        stats = statistics(reports, rules)
        if args.output_format in ("text", "concise"):
            out += stats
        else:
            sys.stderr.write(stats)
    emit(args, out)
    checked, findings, errors, internal = _summary_counts(reports)
    if not args.quiet:
        if fixed_note:
            sys.stderr.write(fixed_note)
        fixable = sum(1 for r in reports for f in r.findings if f.fix is not None)
        if findings or errors:
            line = f"Found {plural(findings + errors, 'finding')} in {plural(checked, 'file')} checked"
            if fixable:
                line += f" ({fixable} fixable with `graphleaf check --fix`)"
            if errors:
                line += f"; {plural(errors, 'file')} could not be read or parsed (GLF900)"
            sys.stderr.write(line + ".\n")
        else:
            sys.stderr.write(f"All clear: {plural(checked, 'file')} checked, no findings.\n")
    if internal:
        return 2
    if (findings or errors) and not args.exit_zero:
        return 1
    return 0


def cmd_add_noqa(args, settings: Settings) -> int:
    """``check --add-noqa``: a ``# noqa: CODE`` on the line of each finding, merged
    into a noqa comment already there; running it twice changes nothing more."""
    paths = [p for p in (args.paths or ["."]) if p != STDIN]
    found = discover(paths, settings, force_exclude=args.force_exclude)
    for p, why in found.errors:
        sys.stderr.write(f"{p}:1:1: GLF900 could not read: {why}\n")
    added = files = 0
    for path in found.files:
        report = check_one(path, settings)
        if not report.findings:
            continue
        src = read_source(path)
        new_text, n = add_noqa(src.text, [(f.line, f.code) for f in report.findings])
        if n:
            try:
                write_atomic(path, encode(src, new_text), expected_old=src.raw)
            except SourceError as exc:
                sys.stderr.write(f"{path}:1:1: GLF900 could not write: {exc}\n")
                continue
            added += n
            files += 1
    if not args.quiet:
        sys.stderr.write(f"Added {plural(added, 'noqa directive')} in {plural(files, 'file')}.\n")
    return 1 if found.errors and not args.exit_zero else 0
