"""Which files to check: walk the given paths for ``*.py``, skip excluded folders and files
(ruff's defaults, ``exclude``, ``extend-exclude``) and what ``.gitignore`` files ignore.

Paths named on the command line are checked even when excluded, as ruff and flake8 do,
unless ``force_exclude`` is set (pre-commit passes every staged file by name).
"""

from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from .config import Settings, relative_posix


@dataclass
class Discovery:
    files: list[str] = field(default_factory=list)
    # (path, one-line reason): paths that do not exist or cannot be listed
    errors: list[tuple[str, str]] = field(default_factory=list)


# ---------------------------------------------------------------- gitignore


def _glob_to_regex(pattern: str) -> str:
    """A gitignore glob (no leading/trailing slash handling) as a regex over posix paths."""
    out = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            if pattern[i:i + 2] == "**":
                before_ok = i == 0 or pattern[i - 1] == "/"
                after = pattern[i + 2:i + 3]
                if before_ok and after == "/":
                    out.append("(?:.*/)?")
                    i += 3
                    continue
                if before_ok and after == "":
                    out.append(".*")
                    i += 2
                    continue
                out.append("[^/]*")
                i += 2
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = pattern.find("]", i + 1)
            if j == -1:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1:j]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = j
        elif c == "\\" and i + 1 < n:
            i += 1
            out.append(re.escape(pattern[i]))
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


@dataclass(frozen=True)
class GitignoreRule:
    regex: re.Pattern
    negate: bool
    dir_only: bool


def parse_gitignore(text: str) -> list[GitignoreRule]:
    rules = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        # Trailing spaces are dropped unless escaped.
        while line.endswith(" ") and not line.endswith("\\ "):
            line = line[:-1]
        if not line:
            continue
        negate = line.startswith("!")
        if negate:
            line = line[1:]
        elif line.startswith("\\!") or line.startswith("\\#"):
            line = line[1:]
        dir_only = line.endswith("/")
        line = line.rstrip("/")
        if not line:
            continue
        anchored = "/" in line
        line = line.lstrip("/")
        body = _glob_to_regex(line)
        regex = re.compile(("" if anchored else "(?:.*/)?") + body + r"\Z", re.S)
        rules.append(GitignoreRule(regex, negate, dir_only))
    return rules


class GitignoreStack:
    """The ``.gitignore`` files that apply in one folder: each with its folder, outermost first."""

    def __init__(self, layers: tuple[tuple[Path, tuple[GitignoreRule, ...]], ...] = ()):
        self.layers = layers

    def enter(self, folder: Path) -> "GitignoreStack":
        f = folder / ".gitignore"
        try:
            text = f.read_text(encoding="utf-8", errors="replace") if f.is_file() else ""
        except OSError:
            text = ""
        rules = tuple(parse_gitignore(text))
        return GitignoreStack(self.layers + ((folder, rules),)) if rules else self

    def ignored(self, path: Path, is_dir: bool) -> bool:
        verdict = False
        for folder, rules in self.layers:
            try:
                rel = path.relative_to(folder).as_posix()
            except ValueError:
                continue
            for rule in rules:
                if rule.dir_only and not is_dir:
                    continue
                if rule.regex.match(rel):
                    verdict = not rule.negate
        return verdict


def git_root(start: Path) -> Path | None:
    for folder in (start, *start.parents):
        if (folder / ".git").exists():
            return folder
    return None


def stack_for(folder: Path) -> GitignoreStack:
    """The gitignore files from the repository root down to ``folder`` (inclusive)."""
    root = git_root(folder)
    if root is None:
        return GitignoreStack()
    stack = GitignoreStack()
    info_exclude = root / ".git" / "info" / "exclude"
    if info_exclude.is_file():
        try:
            rules = tuple(parse_gitignore(info_exclude.read_text(encoding="utf-8", errors="replace")))
            stack = GitignoreStack(((root, rules),))
        except OSError:
            pass
    chain = [folder, *folder.parents]
    for f in reversed(chain[: chain.index(root) + 1]):
        stack = stack.enter(f)
    return stack


# ---------------------------------------------------------------- exclude


def is_excluded(path: str, settings: Settings, name_only: bool = False) -> bool:
    """True if a pattern of ``exclude`` / ``extend-exclude`` matches the path's name (or,
    unless ``name_only``, the name of one of its folders below the project root), or,
    for a pattern with a "/", its path relative to the project root (globs, as in ruff)."""
    rel = relative_posix(path, settings.root)
    inside = not os.path.isabs(rel)
    parts = rel.split("/") if inside and not name_only else [os.path.basename(os.path.normpath(path))]
    names, paths = _exclude_patterns(settings)
    if names is not None and any(names.match(p) for p in parts):
        return True
    return paths is not None and paths.match(rel) is not None


def _exclude_patterns(settings: Settings):
    """(regex of the name patterns, regex of the path patterns), compiled once per settings."""
    patterns = tuple(settings.exclude) + tuple(settings.extend_exclude)
    cached = getattr(settings, "_exclude_compiled", None)
    if cached is not None and cached[0] == patterns:
        return cached[1]
    names, paths = [], []
    for pattern in patterns:
        pat = pattern.rstrip("/")
        pat = pat[2:] if pat.startswith("./") else pat
        if "/" in pat:
            paths += [fnmatch.translate(pat), fnmatch.translate(pat + "/*")]
        else:
            names.append(fnmatch.translate(pat))
    compiled = (re.compile("|".join(f"(?:{n})" for n in names)) if names else None,
                re.compile("|".join(f"(?:{p})" for p in paths)) if paths else None)
    settings._exclude_compiled = (patterns, compiled)
    return compiled


def is_python(name: str) -> bool:
    return name.endswith(".py")


def discover(paths: list[str], settings: Settings, force_exclude: bool = False) -> Discovery:
    found: dict[str, str] = {}  # normalised path -> the path as shown (as flake8 shows it)
    result = Discovery()
    for given in paths:
        p = Path(given)
        if not os.path.lexists(given):
            result.errors.append((given, "No such file or directory"))
            continue
        if p.is_dir():
            if force_exclude and is_excluded(given, settings):
                continue
            top = p.resolve()
            stack = stack_for(top) if settings.respect_gitignore else GitignoreStack()
            _walk(given, top, stack, settings, found, result)
        else:
            if force_exclude:
                if is_excluded(given, settings):
                    continue
                if settings.respect_gitignore:
                    abs_p = Path(os.path.abspath(given))
                    if stack_for(abs_p.parent).ignored(abs_p, False):
                        continue
            found.setdefault(os.path.normpath(given), given)
    result.files = sorted(found.values())
    return result


def _walk(shown: str, real: Path, stack: GitignoreStack, settings: Settings, found: dict, result: Discovery):
    if settings.respect_gitignore:
        stack = stack.enter(real)
    try:
        entries = sorted(os.scandir(real), key=lambda e: e.name)
    except OSError as exc:
        result.errors.append((shown, f"cannot list: {exc.strerror or exc}"))
        return
    for entry in entries:
        child_shown = os.path.join(shown, entry.name)
        child_real = real / entry.name
        try:
            is_dir = entry.is_dir()  # follows symlinks, as ruff does
        except OSError:
            continue
        if is_excluded(child_shown, settings, name_only=True):
            continue
        if settings.respect_gitignore and stack.ignored(child_real, is_dir):
            continue
        if is_dir:
            if entry.is_symlink():
                continue  # avoid cycles; a linked folder can be named on the command line
            _walk(child_shown, child_real, stack, settings, found, result)
        elif is_python(entry.name):
            found.setdefault(os.path.normpath(child_shown), child_shown)
