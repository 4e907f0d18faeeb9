"""``[tool.graphleaf]`` in the nearest ``pyproject.toml``, merged with the command line.

Codes are chosen as flake8 chooses them: a code is on when a ``select`` prefix matches
it and no ``ignore`` prefix matches it more specifically (longer); ``ALL`` selects all.
"""

from __future__ import annotations

import fnmatch
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ..analysis import Options
from ..analysis.confidence import RETIRED, check_level
from ..analysis.noqa import is_silenced
from ..analysis.rules import all_rules
from ..project.resolver import shared_resolver

# ruff's default exclusions.
DEFAULT_EXCLUDE = (
    ".bzr", ".direnv", ".eggs", ".git", ".git-rewrite", ".hg", ".ipynb_checkpoints", ".mypy_cache",
    ".nox", ".pants.d", ".pyenv", ".pytest_cache", ".pytype", ".ruff_cache", ".svn", ".tox", ".venv",
    ".vscode", "__pypackages__", "_build", "buck-out", "build", "dist", "node_modules", "site-packages",
    "venv",
)

KEYS = {
    "select", "ignore", "extend-select", "unsafe-fixes", "module-bases", "exclude", "extend-exclude",
    "per-file-ignores", "respect-gitignore", "argument-stores", "confidence",
}


class ConfigError(Exception):
    """A configuration that cannot be read or makes no sense; the message is one line."""


def _load_toml(path: Path) -> dict:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        try:
            import tomli as tomllib
        except ImportError:
            text = path.read_text(encoding="utf-8", errors="replace")
            if "[tool.graphleaf" in text:
                raise ConfigError(
                    f"{path}: cannot read [tool.graphleaf] on Python 3.10 without tomli (pip install tomli)"
                ) from None
            return {}
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None


def find_pyproject(start: Path) -> Path | None:
    """The nearest ``pyproject.toml`` at or above ``start`` that has a ``[tool.graphleaf]``
    table, else the nearest one at all (its folder is still the project root)."""
    start = start.resolve()
    if start.is_file():
        start = start.parent
    nearest = None
    for folder in (start, *start.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            if nearest is None:
                nearest = candidate
            try:
                if "[tool.graphleaf" in candidate.read_text(encoding="utf-8", errors="replace"):
                    return candidate
            except OSError:
                continue
    return nearest


def _codes(value, key: str) -> list[str]:
    if isinstance(value, str):
        value = [v for v in value.replace(",", " ").split()]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"[tool.graphleaf] {key} must be a list of codes")
    return [v.strip().upper() for v in value if v.strip()]


def _strings(value, key: str) -> list[str]:
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",")]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"[tool.graphleaf] {key} must be a list of strings")
    return [v for v in value if v]


@dataclass
class Settings:
    root: Path  # paths in exclude and per-file-ignores are relative to it
    config_file: Path | None = None
    select: list[str] = field(default_factory=lambda: ["GLF"])
    ignore: list[str] = field(default_factory=list)
    extend_select: list[str] = field(default_factory=list)
    unsafe_fixes: bool = False
    module_bases: frozenset[str] = frozenset()
    # The lowest confidence level reported (high: only what is proven). The retired opt-in code
    # GLF010 (argument-stores = true, or GLF010 named in select / extend-select) means "low".
    confidence: str = "high"
    exclude: list[str] = field(default_factory=lambda: list(DEFAULT_EXCLUDE))
    extend_exclude: list[str] = field(default_factory=list)
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    respect_gitignore: bool = True
    # Whether the fixes' edits are built for every finding (JSON and SARIF show them); text output
    # shows only what a fix does, and ``fix`` builds the edits it applies.
    fix_edits: bool = True
    # whether each folder is a package (has an __init__.py), asked for every file's module name
    # during one command (the tree does not change while it is checked)
    packages: dict = field(default_factory=dict, repr=False, compare=False)

    def enabled(self, code: str) -> bool:
        def longest(prefixes):
            best = -1
            for p in prefixes:
                if p == "ALL" or code.startswith(p):
                    best = max(best, 0 if p == "ALL" else len(p))
            return best

        chosen = longest(self.select + self.extend_select)
        return chosen >= 0 and chosen > longest(self.ignore)

    def ignored_for(self, path: str) -> list[str]:
        """Codes that ``per-file-ignores`` turns off for ``path``."""
        rel = relative_posix(path, self.root)
        name = rel.rsplit("/", 1)[-1]
        out: list[str] = []
        for pattern, codes in self.per_file_ignores.items():
            negate = pattern.startswith("!")
            pat = pattern[1:] if negate else pattern
            pat = pat[2:] if pat.startswith("./") else pat
            hit = fnmatch.fnmatchcase(rel, pat) or ("/" not in pat and fnmatch.fnmatchcase(name, pat))
            if hit != negate:
                out += codes
        return out

    def analysis_options(self, path: str) -> Options:
        """The analysis options for one file: the settings, and the file's place in the project
        (its module name and the process's whole-program view)."""
        return Options(module_bases=self.module_bases, confidence=self.confidence,
                       **shared_resolver().options_for(path, self.packages))

    def keeps(self, finding, path: str, noqa: dict | None = None) -> bool:
        """Whether a finding below ``high`` survives the retired code GLF010 named in ``ignore``,
        ``per-file-ignores`` or a ``# noqa: GLF010`` (they meant the lower levels)."""
        if getattr(finding, "confidence", "high") == "high":
            return True
        if RETIRED in self.ignore + self.ignored_for(path):
            return False
        return noqa is None or not is_silenced(RETIRED, finding.line, noqa)

    def wanted_for(self, path: str):
        extra = self.ignored_for(path)
        if not extra:
            return self.enabled
        narrowed = Settings(self.root, select=self.select, extend_select=self.extend_select,
                            ignore=self.ignore + [c for c in extra if c != RETIRED])
        return narrowed.enabled


def relative_posix(path: str, root: Path) -> str:
    """``path`` relative to ``root`` with "/" (absolute when it is not under it): what
    ``Path(abspath).relative_to(root).as_posix()`` gives, without pathlib (discovery asks once
    per entry of the tree)."""
    full = os.path.abspath(path)
    if os.sep == "/" and os.altsep is None:
        top = str(root)
        if full == top:
            return "."
        prefix = top if top.endswith("/") else top + "/"
        return full[len(prefix):] if full.startswith(prefix) and os.path.isabs(top) else full
    try:
        return Path(full).relative_to(root).as_posix()
    except ValueError:
        return Path(full).as_posix()


def from_table(table: dict, root: Path, config_file: Path | None) -> Settings:
    unknown = sorted(set(table) - KEYS - {k.replace("-", "_") for k in KEYS})
    if unknown:
        raise ConfigError(f"{config_file}: unknown key(s) in [tool.graphleaf]: {', '.join(unknown)} "
                          f"(known: {', '.join(sorted(KEYS))})")
    get = lambda key: table.get(key, table.get(key.replace("-", "_")))  # noqa: E731
    s = Settings(root=root, config_file=config_file)
    if get("select") is not None:
        s.select = _codes(get("select"), "select")
    if get("extend-select") is not None:
        s.extend_select = _codes(get("extend-select"), "extend-select")
    if get("ignore") is not None:
        s.ignore = _codes(get("ignore"), "ignore")
    for key in ("unsafe-fixes", "respect-gitignore", "argument-stores"):
        value = get(key)
        if value is not None:
            if not isinstance(value, bool):
                raise ConfigError(f"{config_file}: [tool.graphleaf] {key} must be true or false")
            if key == "argument-stores":  # the retired switch of GLF010: the lower levels
                if value:
                    s.confidence = "low"
                continue
            setattr(s, key.replace("-", "_"), value)
    if get("confidence") is not None:
        try:
            s.confidence = check_level(get("confidence"), f"{config_file}: [tool.graphleaf]")
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    if RETIRED in s.select + s.extend_select:
        s.confidence = "low"
    if get("module-bases") is not None:
        s.module_bases = frozenset(_strings(get("module-bases"), "module-bases"))
    if get("exclude") is not None:
        s.exclude = _strings(get("exclude"), "exclude")
    if get("extend-exclude") is not None:
        s.extend_exclude = _strings(get("extend-exclude"), "extend-exclude")
    pfi = get("per-file-ignores")
    if pfi is not None:
        if not isinstance(pfi, dict):
            raise ConfigError(f"{config_file}: [tool.graphleaf] per-file-ignores must be a table of glob = [codes]")
        s.per_file_ignores = {k: _codes(v, f"per-file-ignores.{k}") for k, v in pfi.items()}
    return s


FLAKE8_FILES = ("setup.cfg", "tox.ini", ".flake8")  # flake8's own order within a folder


def find_flake8_config(start: Path) -> Path | None:
    """The flake8 configuration flake8 itself would read: in the nearest folder at or above
    ``start`` that has a ``[flake8]`` section in setup.cfg, tox.ini or .flake8."""
    import configparser

    start = start.resolve()
    if start.is_file():
        start = start.parent
    for folder in (start, *start.parents):
        for name in FLAKE8_FILES:
            candidate = folder / name
            if not candidate.is_file():
                continue
            parser = configparser.RawConfigParser()
            try:
                parser.read(candidate, encoding="utf-8")
            except (configparser.Error, OSError, UnicodeDecodeError):
                continue
            if parser.has_section("flake8"):
                return candidate
    return None


def _glf_codes(value: str) -> list[str]:
    """The GLF codes of a flake8 code list (E501, GLF001 ...); G / GL select GLF as in flake8."""
    out = []
    for c in value.replace(",", " ").split():
        c = c.strip().upper()
        if c.startswith("GLF"):
            out.append(c)
        elif c and "GLF".startswith(c):
            out.append("GLF")
    return out


def from_flake8(path: Path) -> Settings:
    """GLF settings from a flake8 config's ``[flake8]`` section: ``select``, ``extend-select``,
    ``ignore``, ``extend-ignore``, ``per-file-ignores`` (GLF codes only) and
    ``graphleaf-module-bases``, so that ``graphleaf check`` reports what flake8 reports."""
    import configparser

    parser = configparser.RawConfigParser()
    try:
        parser.read(path, encoding="utf-8")
    except (configparser.Error, OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    section = {k.replace("_", "-"): v for k, v in parser.items("flake8")}
    s = Settings(root=path.parent.resolve(), config_file=path)
    if "select" in section:
        s.select = _glf_codes(section["select"])  # flake8: a select without GLF turns GLF off
    if "extend-select" in section:
        s.extend_select = _glf_codes(section["extend-select"])
    ignore = _glf_codes(section.get("ignore", "")) + _glf_codes(section.get("extend-ignore", ""))
    if ignore:
        s.ignore = ignore
    pfi = section.get("per-file-ignores", "")
    if pfi.strip():
        # flake8's format: "pattern: codes" entries separated by newlines or whitespace.
        for chunk in re.split(r"\s*\n\s*|\s+(?=[^\s:]+\s*:)", pfi.strip()):
            if ":" not in chunk:
                continue
            pattern, _, codes = chunk.rpartition(":")
            glf = _glf_codes(codes)
            for pat in pattern.replace(",", " ").split():
                if glf:
                    s.per_file_ignores.setdefault(pat, []).extend(glf)
    bases = section.get("graphleaf-module-bases", "")
    if bases.strip():
        s.module_bases = frozenset(b.strip() for b in bases.replace("\n", ",").split(",") if b.strip())
    if section.get("graphleaf-argument-stores", "").strip().lower() in ("1", "true", "yes", "on"):
        s.confidence = "low"
    if section.get("graphleaf-confidence", "").strip():
        try:
            s.confidence = check_level(section["graphleaf-confidence"], f"{path}: [flake8] graphleaf-confidence")
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    if RETIRED in s.select + s.extend_select:
        s.confidence = "low"
    return s


def load(start: Path, explicit: Path | None = None, isolated: bool = False) -> Settings:
    """Settings from ``explicit``, else the nearest pyproject.toml with ``[tool.graphleaf]``,
    else the flake8 config flake8 would read (``[flake8]`` in setup.cfg / tox.ini / .flake8,
    GLF codes only), else the defaults (with the nearest pyproject.toml's folder as root)."""
    if isolated:
        return Settings(root=Path.cwd().resolve())
    path = explicit if explicit is not None else find_pyproject(start)
    if explicit is not None and not explicit.is_file():
        raise ConfigError(f"{explicit}: no such config file")
    if explicit is not None and explicit.suffix != ".toml":
        return from_flake8(explicit)
    data = _load_toml(path) if path is not None else {}
    table = data.get("tool", {}).get("graphleaf")
    if table is None and explicit is None:
        flake8_cfg = find_flake8_config(start)
        if flake8_cfg is not None:
            return from_flake8(flake8_cfg)
    if path is None:
        return Settings(root=Path.cwd().resolve())
    table = table if table is not None else {}
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.graphleaf] must be a table")
    return from_table(table, path.parent.resolve(), path)


def check_codes(codes: list[str], what: str) -> None:
    """Refuse a code or prefix that names no rule (a typo would silently select nothing)."""
    known = all_rules()
    for c in codes:
        if c == "ALL" or any(k.startswith(c) for k in known):
            continue
        raise ConfigError(f"{what}: {c!r} matches no graphleaf rule (see `graphleaf rules`)")
