"""The ``graphleaf`` command: check, fix, rules, rule, explain, verify.

check and fix never import torch; explain and verify import their modules (which do)
only when asked for.  Exit codes: 0 nothing found, 1 findings (or, for ``fix --diff``,
changes to make), 2 a usage error or a file that could not be read or parsed.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from .. import __version__
from ..fix.attach import analyze_with_fixes
from .config import ConfigError, Settings, check_codes, load
from .errors import syntax_error
from .cached import finding_from_json, finding_to_json
from ..project.resolver import file_stamp, shared_resolver
from ..project.cache import DIR_NAME, Cache, key as cache_key
from .files import discover
from ..analysis.findings import SAFE, Finding
from ..fix.fixer import NOT_REMOVED, fix_source
from ..fix.readers import project_index
from ..analysis.noqa import add_noqa, file_is_skipped, is_silenced, noqa_map
from .output import EDIT_FORMATS, FORMATS, FileReport, render, statistics
from ..analysis.rules import all_rules
from ..fix.writer import (SourceError, Source, check_parses, decode, encode, read_source, restore_newlines,
                          read_bytes, unified_diff, write_atomic)

LAZY = {
    "explain": ("flake8_graphleaf.cli.explain", "name the tensors that break deepcopy: a model's step, or --run SCRIPT (needs torch)"),
    "verify": ("flake8_graphleaf.cli.verify", "run the model and prove that deepcopy works (needs torch)"),
}
STDIN = "-"


# ------------------------------------------------------------------ per file work


def _wanted_codes(settings: Settings, path: str) -> tuple[str, ...]:
    wanted = settings.wanted_for(path)
    return tuple(c for c in all_rules() if wanted(c))


def _findings_key(data: bytes, settings: Settings, codes: tuple[str, ...], options) -> str:
    # The content, every setting that changes the answer, the file's module name, and the
    # running Python (the parse error of newer syntax depends on it); cache_key mixes in
    # the tool's version.  The other files the analysis read are checked on a hit (_deps_ok).
    return cache_key(data, sorted(settings.module_bases), codes, sys.version_info[:2],
                     getattr(options, "module", None), getattr(options, "is_package", False),
                     getattr(options, "argument_stores", False))


def _stamp(path: str | None):
    stamp = file_stamp(path) if path is not None else None
    return None if stamp is None else [path, *stamp]


def _recording(view):
    """Wrap ``view.parsed`` to record the modules the analysis of one file looks up."""
    seen: list[str] = []
    if view is None or not hasattr(view, "parsed"):
        return seen, lambda: None
    original = view.parsed

    def parsed(module):
        seen.append(module)
        return original(module)

    view.parsed = parsed
    return seen, lambda: view.__dict__.pop("parsed", None)


def _deps(view, modules: list[str]):
    locate = getattr(view, "_locate", None)
    if modules and locate is None:
        return None  # cannot tell what was read: do not cache
    return {m: _stamp(locate(m)) for m in sorted(set(modules))}


def _deps_ok(view, deps) -> bool:
    if not deps:
        return True
    locate = getattr(view, "_locate", None)
    return locate is not None and all(_stamp(locate(m)) == stamp for m, stamp in deps.items())


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
    return [f for f in findings if not is_silenced(f.code, f.line, noqa)], None


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
    report.lines = src.text.split("\n")
    seen, restore = _recording(view) if key is not None else ([], lambda: None)
    try:
        report.findings, error = _analyse(src, path, settings, codes, options)
    except Exception as exc:  # noqa: BLE001 - one file's bug must not stop the others
        report.error, report.internal = f"internal error: {type(exc).__name__}: {exc} (please report it)", True
        return report
    finally:
        restore()
    if error is not None:
        report.error, report.error_line, report.error_col = error
    deps = _deps(view, seen) if key is not None else None
    if key is not None and deps is not None:
        cache.put("findings", key, {"findings": [finding_to_json(f) for f in report.findings],
                                    "error": list(error) if error else None, "deps": deps})
    return report


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
            if _WRITTEN is not None:
                _WRITTEN.put(report.path)
    except SourceError as exc:
        report.error = f"could not write: {exc}"
        report.applied, report.changed = [], False
    return report


# Set in a worker process when the parent was interrupted: stop before the next file.
_STOP = None
# In a worker: where each file written goes at once (a pipe), so that the parent can list
# every file changed even from a worker it had to terminate.
_WRITTEN = None


def _init_worker(stop, written=None) -> None:
    global _STOP, _WRITTEN
    _STOP, _WRITTEN = stop, written
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides; a file is never cut in half


def _stopped() -> bool:
    return _STOP is not None and _STOP.is_set()


def _check_batch(batch, settings, cache=None):
    if cache is not None and cache.enabled:
        shared_resolver().index.cache = cache  # the project index keeps its summaries there too
    out = []
    for p in batch:
        if _stopped():
            break
        out.append(_with_edits(check_one(p, settings, cache=cache), settings))
    return out


def _with_edits(report, settings: Settings):
    """Build the edits of the fixes the output will show, before the report leaves this process."""
    if settings.fix_edits:
        shown = report.findings if isinstance(report, FileReport) else [f for f, _ in report.left]
        for f in shown:
            if f.fix is not None:
                f.fix.edits  # noqa: B018 - builds them
    return report


def _fix_batch(batch, settings, unsafe, diff_only, project=None):
    out = []
    for p in batch:
        if _stopped():
            break
        out.append(_with_edits(fix_one(p, settings, unsafe, diff_only, project=project), settings))
    return out


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


class Interrupted(Exception):
    """Ctrl-C during :func:`run_many`; ``done`` holds the results of the files finished."""

    def __init__(self, done: list, written: set[str] | None = None):
        super().__init__("interrupted")
        self.done = done
        self.written = written or set()  # paths written by workers whose results did not come back


# After Ctrl-C, how long the workers get to finish the file each is on (a file, not a batch).
WORKER_STOP_S = 120.0


def run_many(func, files: list[str], jobs: int, progress: Progress, *extra) -> list:
    """``func(batch, *extra)`` over ``files`` in batches, in parallel when it pays;
    results come back in the order of ``files`` whatever finishes first.

    Ctrl-C raises :class:`Interrupted` once the files in hand are done: pending batches are
    cancelled, each worker (and the serial loop) finishes the file it is on (so a file is old
    or new, never half written, and each one changed is in ``done``), then the pool is
    terminated."""
    if not files:
        return []
    size = max(1, min(16, len(files) // (jobs * 4) or 1))
    batches = [files[i:i + size] for i in range(0, len(files), size)]
    results: dict[int, list] = {}
    if jobs > 1 and len(files) >= 8:
        try:
            import multiprocessing

            mp = multiprocessing.get_context()
            stop, written = mp.Event(), mp.SimpleQueue()
            pool = ProcessPoolExecutor(max_workers=min(jobs, len(batches)), initializer=_init_worker,
                                       initargs=(stop, written))
        except (OSError, NotImplementedError, PermissionError, ImportError):
            pool = None  # no process pool here (sandbox, no /dev/shm): run serially below
        if pool is not None:
            futures = {}
            try:
                futures = {pool.submit(func, b, *extra): i for i, b in enumerate(batches)}
                for fut in as_completed(futures):
                    results[futures[fut]] = fut.result()
                    progress.advance(len(batches[futures[fut]]))
                pool.shutdown(wait=True)
            except KeyboardInterrupt:
                stop.set()
                for fut in futures:
                    fut.cancel()
                # Each running worker stops after the file it is on (it checks ``stop`` before each
                # one): wait for that, however busy the machine, so that no file is cut off mid-write.
                deadline = time.monotonic() + WORKER_STOP_S
                for fut, i in futures.items():
                    if i in results or fut.cancelled():
                        continue
                    try:
                        results[i] = fut.result(timeout=max(0.0, deadline - time.monotonic()))
                    except BaseException:  # noqa: BLE001 - timed out or failed: nothing to report
                        pass
                _terminate(pool)
                progress.close()
                paths = set()
                try:
                    while not written.empty():
                        paths.add(written.get())
                except (OSError, EOFError):
                    pass
                raise Interrupted([r for i in sorted(results) for r in results[i]], paths) from None
            except (OSError, PermissionError):
                _terminate(pool)
                results = {}
    done: list = []
    try:
        with _sigint_between_files() as pressed:
            for i, b in enumerate(batches):
                if i not in results:
                    for p in b:  # one file at a time: Ctrl-C stops after the file in hand
                        results.setdefault(i, []).extend(func([p], *extra))
                        if pressed():
                            raise KeyboardInterrupt
                    progress.advance(len(b))
    except KeyboardInterrupt:
        progress.close()
        done = [r for i in sorted(results) for r in results[i]]
        raise Interrupted(done) from None
    progress.close()
    return [r for i in range(len(batches)) for r in results[i]]


class _sigint_between_files:
    """Ctrl-C while a file is in hand takes effect once it is done (its report is then in the
    results, so a file written is always listed); the previous handler comes back afterwards.
    Outside the main thread (no signal handlers there) Ctrl-C is not deferred."""

    def __enter__(self):
        self.pending = False
        self.old = None
        try:
            self.old = signal.signal(signal.SIGINT, self._note)
        except ValueError:  # not the main thread
            self.old = None
        return lambda: self.pending

    def _note(self, signum, frame):
        self.pending = True

    def __exit__(self, *exc):
        if self.old is not None:
            signal.signal(signal.SIGINT, self.old)
        return False


def _terminate(pool: ProcessPoolExecutor) -> None:
    procs = list(getattr(pool, "_processes", {}).values())
    try:
        pool.shutdown(wait=False, cancel_futures=True)
    except Exception:  # noqa: BLE001
        pass
    for proc in procs:
        try:
            proc.terminate()
        except Exception:  # noqa: BLE001
            pass
    for proc in procs:
        try:
            proc.join(timeout=1.0)
        except Exception:  # noqa: BLE001
            pass


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
    files.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    files.add_argument("--cache-dir", type=Path, default=None,
                       help=f"where the cache lives (default: $GRAPHLEAF_CACHE_DIR, else {DIR_NAME} in the project root)")
    files.add_argument("--show-settings", action="store_true", help="print the settings in effect and exit")
    files.add_argument("--show-files", action="store_true", help="print the files that would be checked and exit")
    out = p.add_argument_group("output")
    out.add_argument("--output-format", choices=FORMATS, default="text")
    out.add_argument("-o", "--output-file", type=Path, default=None,
                     help="write the findings to this file instead of stdout")
    out.add_argument("--statistics", action="store_true", help="count findings per code")
    out.add_argument("--show-witness", action="store_true",
                     help="print each finding's witness under it: the grad source, each step to the store, how the "
                          "code is reached, why the value is kept, what deepcopy copies (json and sarif always carry it)")
    out.add_argument("--exit-zero", action="store_true",
                     help="exit 0 even when there are findings (usage and internal errors still exit 2)")
    run = p.add_argument_group("running")
    run.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1, help="processes (default: all cores)")
    run.add_argument("-q", "--quiet", action="store_true", help="no summary line, no progress bar")


def _add_unsafe(p: argparse.ArgumentParser) -> None:
    unsafe = p.add_mutually_exclusive_group()
    unsafe.add_argument("--unsafe-fixes", dest="unsafe_fixes", action="store_true", default=None,
                        help="also apply fixes that may change behaviour")
    unsafe.add_argument("--no-unsafe-fixes", dest="unsafe_fixes", action="store_false")


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
    fixing = check.add_argument_group("fixing (as ruff check)")
    fixing.add_argument("--fix", action="store_true", help="apply the fixes, then report what is left")
    fixing.add_argument("--diff", action="store_true", help="print the fixes as a unified diff and write nothing")
    fixing.add_argument("--show-fixes", action="store_true", help="list the fixes applied (with --fix)")
    fixing.add_argument("--add-noqa", action="store_true",
                        help="write '# noqa: GLFnnn' on the line of every finding (merged with an existing noqa)")
    _add_unsafe(fixing)

    fix = sub.add_parser("fix", help="apply fixes in place")
    _add_common(fix)
    fix.add_argument("--diff", action="store_true", help="print a unified diff and write nothing")
    fix.add_argument("--show-fixes", action="store_true", help="list the fixes applied (the default unless -q)")
    _add_unsafe(fix)
    fix.add_argument("--exit-non-zero-on-fix", action="store_true", help="exit 1 when something was fixed")

    sub.add_parser("rules", help="list the codes with one-line summaries")
    rule = sub.add_parser("rule", help="print a rule's documentation")
    rule.add_argument("code")

    for name, (module, help_text) in LAZY.items():
        p = sub.add_parser(name, help=help_text)
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


def _cache_for(args, settings: Settings) -> Cache:
    return Cache.open(settings.root, enabled=not args.no_cache, directory=args.cache_dir)


def _emit(args, text: str) -> None:
    """The findings: to --output-file when given, else stdout."""
    if args.output_file is not None:
        try:
            args.output_file.parent.mkdir(parents=True, exist_ok=True)
            args.output_file.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"--output-file {args.output_file}: {exc.strerror or exc}") from None
        return
    sys.stdout.write(text)
    sys.stdout.flush()


def _show_settings(args, settings: Settings) -> int:
    rows = [
        ("config file", str(settings.config_file) if settings.config_file else "(none)"),
        ("project root", str(settings.root)),
        ("select", ", ".join(settings.select)),
        ("extend-select", ", ".join(settings.extend_select)),
        ("ignore", ", ".join(settings.ignore)),
        ("per-file-ignores", "; ".join(f"{k} = {', '.join(v)}" for k, v in settings.per_file_ignores.items())),
        ("enabled rules", ", ".join(c for c in all_rules() if settings.enabled(c))),
        ("unsafe-fixes", str(settings.unsafe_fixes).lower()),
        ("module-bases", ", ".join(sorted(settings.module_bases))),
        ("exclude", ", ".join(settings.exclude)),
        ("extend-exclude", ", ".join(settings.extend_exclude)),
        ("respect-gitignore", str(settings.respect_gitignore).lower()),
        ("cache", "off" if args.no_cache else str(_cache_for(args, settings).directory)),
    ]
    width = max(len(k) for k, _ in rows)
    sys.stdout.write("".join(f"{k:<{width}} = {v}\n" for k, v in rows))
    return 0


def _show_files(args, settings: Settings) -> int:
    paths = [p for p in (args.paths or ["."]) if p != STDIN]
    found = discover(paths, settings, force_exclude=args.force_exclude)
    for p in found.files:
        sys.stdout.write(p + "\n")
    for p, why in found.errors:
        sys.stderr.write(f"graphleaf: {p}: {why}\n")
    return 0


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
        return _show_settings(args, settings)
    if args.show_files:
        return _show_files(args, settings)
    if args.add_noqa:
        return cmd_add_noqa(args, settings)
    if args.diff or (args.fix and STDIN in (args.paths or [])):
        return _fix_command(args, settings, diff=args.diff, from_check=True)
    fixed_note = None
    if args.fix:
        fixed_note = _fix_for_check(args, settings)
        if isinstance(fixed_note, int):
            return fixed_note
    rules = all_rules()
    reports: list[FileReport] = []
    paths = args.paths or ["."]
    cache = _cache_for(args, settings)
    if STDIN in paths:
        name = args.stdin_filename or "stdin"
        reports.append(check_one(name, settings, raw=_read_stdin(), shown=args.stdin_filename or STDIN))
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
    _emit(args, out)
    checked, findings, errors, internal = _summary_counts(reports)
    if not args.quiet:
        if fixed_note:
            sys.stderr.write(fixed_note)
        fixable = sum(1 for r in reports for f in r.findings if f.fix is not None)
        if findings or errors:
            line = f"Found {_plural(findings + errors, 'finding')} in {_plural(checked, 'file')} checked"
            if fixable:
                line += f" ({fixable} fixable with `graphleaf check --fix`)"
            if errors:
                line += f"; {_plural(errors, 'file')} could not be read or parsed (GLF900)"
            sys.stderr.write(line + ".\n")
        else:
            sys.stderr.write(f"All clear: {_plural(checked, 'file')} checked, no findings.\n")
    if internal:
        return 2
    if (findings or errors) and not args.exit_zero:
        return 1
    return 0


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
        reports.append(fix_one(name, settings, unsafe, diff, raw=_read_stdin(), shown=args.stdin_filename or STDIN))
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
    sys.stderr.write(f"graphleaf: interrupted; {_plural(len(written), 'file')} changed before stopping"
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
    return (f"Fixed {_plural(total, 'finding')}:\n" + "".join(l + "\n" for l in lines)) if total else ""


def _fix_for_check(args, settings: Settings):
    """``check --fix``: apply, then the check reports what is left.  Returns the note to
    print, or an exit code when interrupted."""
    unsafe = settings.unsafe_fixes
    reports, interrupted = _run_fix(args, settings, unsafe, diff=False)
    if interrupted:
        return _report_interrupt(reports)
    if args.show_fixes:
        return _fixed_summary(reports)
    total = sum(len(r.applied) for r in reports)
    return f"Fixed {_plural(total, 'finding')}.\n" if total else None


def _fix_command(args, settings: Settings, diff: bool, from_check: bool = False) -> int:
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
            _emit(args, rendered)
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
        line = f"{verb} {_plural(applied, 'finding')} in {_plural(changed, 'file')}"
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
            line += f"; {_plural(errors, 'file')} could not be read, parsed or written (GLF900)"
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
        return _show_settings(args, settings)
    if args.show_files:
        return _show_files(args, settings)
    return _fix_command(args, settings, diff=args.diff)


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
        sys.stderr.write(f"Added {_plural(added, 'noqa directive')} in {_plural(files, 'file')}.\n")
    return 1 if found.errors and not args.exit_zero else 0


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
    except Exception as exc:  # noqa: BLE001 - an internal error: one line, exit 2
        if os.environ.get("GRAPHLEAF_DEBUG"):
            raise
        sys.stderr.write(f"graphleaf: internal error: {type(exc).__name__}: {exc} "
                         f"(set GRAPHLEAF_DEBUG=1 for the traceback, and please report it)\n")
        return 2


if __name__ == "__main__":
    sys.exit(main())
