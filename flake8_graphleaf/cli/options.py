"""The command line: the parser of every subcommand, the settings the flags give, and what
``check`` and ``fix`` share (stdin, ``--output-file``, ``--show-settings``, ``--show-files``, the cache)."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from pathlib import Path

from .. import __version__
from ..analysis.confidence import LEVELS, RETIRED
from ..analysis.rules import all_rules
from ..project.cache import DIR_NAME, Cache
from .config import ConfigError, Settings, check_codes, load
from .files import discover
from .output import FORMATS


LAZY = {
    "explain": ("flake8_graphleaf.cli.explain", "name the tensors that break deepcopy: a model's step, or --run SCRIPT (needs torch)"),
    "verify": ("flake8_graphleaf.cli.verify", "run the model and prove that deepcopy works (needs torch)"),
}
STDIN = "-"


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
    sel.add_argument("--confidence", choices=LEVELS, default=None,
                     help="the lowest confidence level to report: high (the default: only what is proven), "
                          "medium (one step taken on trust), low (all)")
    sel.add_argument("--argument-stores", action="store_true", default=None,
                     help="the same as --confidence low (the retired opt-in code GLF010)")
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

    sub.add_parser("rules", help="list the codes: default or opt-in, fix and its safety, confidence levels")
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
    parser.set_defaults(subcommands=dict(sub.choices))
    return parser


def parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """The arguments; a flag the subcommand does not know is reported with that subcommand's usage
    (argparse leaves unknown arguments to the top-level parser, whose usage names no flag)."""
    args, extra = parser.parse_known_args(argv)
    if extra:
        sub = args.subcommands.get(args.command, parser)
        sub.error("unrecognized arguments: " + " ".join(extra))  # exits 2
    return args


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
        s.confidence = "low"
    if RETIRED in (args.select or []) + (args.extend_select or []):
        s.confidence = "low"
    if args.confidence is not None:
        s.confidence = args.confidence
    return s


def read_stdin() -> bytes:
    return sys.stdin.buffer.read()


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def cache_for(args, settings: Settings) -> Cache:
    return Cache.open(settings.root, enabled=not args.no_cache, directory=args.cache_dir)


def emit(args, text: str) -> None:
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


def show_settings(args, settings: Settings) -> int:
    rows = [
        ("config file", str(settings.config_file) if settings.config_file else "(none)"),
        ("project root", str(settings.root)),
        ("select", ", ".join(settings.select)),
        ("extend-select", ", ".join(settings.extend_select)),
        ("ignore", ", ".join(settings.ignore)),
        ("per-file-ignores", "; ".join(f"{k} = {', '.join(v)}" for k, v in settings.per_file_ignores.items())),
        ("enabled rules", ", ".join(c for c in all_rules() if settings.enabled(c))),
        ("confidence", settings.confidence),
        ("unsafe-fixes", str(settings.unsafe_fixes).lower()),
        ("module-bases", ", ".join(sorted(settings.module_bases))),
        ("exclude", ", ".join(settings.exclude)),
        ("extend-exclude", ", ".join(settings.extend_exclude)),
        ("respect-gitignore", str(settings.respect_gitignore).lower()),
        ("cache", "off" if args.no_cache else str(cache_for(args, settings).directory)),
    ]
    width = max(len(k) for k, _ in rows)
    sys.stdout.write("".join(f"{k:<{width}} = {v}\n" for k, v in rows))
    return 0


def show_files(args, settings: Settings) -> int:
    paths = [p for p in (args.paths or ["."]) if p != STDIN]
    found = discover(paths, settings, force_exclude=args.force_exclude)
    for p in found.files:
        sys.stdout.write(p + "\n")
    for p, why in found.errors:
        sys.stderr.write(f"graphleaf: {p}: {why}\n")
    return 0
