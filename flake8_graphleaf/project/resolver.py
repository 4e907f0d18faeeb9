"""Finding and parsing the other files of the program, for the analysis of one file.

:class:`FileResolver` is the :class:`~flake8_graphleaf.analysis.program.project_view.ProjectView` that both
faces use (``graphleaf check`` and the flake8 plugin), so they give the same findings.  A dotted
module name is looked up, without importing anything, under:

1. the roots of the project: for a file inside a package, the folder that holds its top-level
   package (``src/pkg/sub/model.py`` -> ``src/``); the folders given explicitly;
2. the folders of ``sys.path`` (installed packages), for names not found in the project.

Files are parsed once per process and kept while their size and modification time do not
change.  A file that does not parse, cannot be read, or is larger than ``MAX_BYTES`` is treated
as absent: what it defines is unknown, and unknown is never reported.
"""

from __future__ import annotations

import ast
import os
import re
import sys
import warnings

from ..analysis.evaluator.effects import function_effect
from ..analysis.evaluator.forward_results import forward_items
from ..analysis.program.imports import ImportMap
from ..analysis.program.project_view import ParsedModule, ProjectView, looked_up
from .index import ProjectIndex
from .names import module_name_for

MAX_BYTES = 2_000_000


class FileResolver(ProjectView):
    def __init__(self, roots: list[str] | tuple[str, ...] = (), use_sys_path: bool = True, cache=None):
        super().__init__()
        self.index = ProjectIndex((), cache)
        self.roots: list[str] = []
        self.use_sys_path = use_sys_path
        self._files: dict[str, tuple[tuple[int, int], ParsedModule | None]] = {}
        self._where: dict[str, str | None] = {}
        for r in roots:
            self.add_root(r)

    def add_root(self, root: str | None, project: str | None = None) -> None:
        """Look modules up under ``root``; index ``project`` (default: ``root``) as the
        project whose files answer the index's questions (who reads, makes, calls)."""
        if root:
            root = os.path.abspath(root)
            if root not in self.roots:
                self.roots.append(root)
                self._where.clear()
            self.index.add_root(os.path.abspath(project) if project else root)

    def options_for(self, path: str, packages: dict | None = None) -> dict:
        """The ``Options`` fields for analysing ``path`` in this project (its module name, and
        its root added to the roots); ``packages``: see :func:`module_name_for`."""
        module, is_package, root = module_name_for(path, packages)
        if root is None and module is None:
            root = os.path.dirname(os.path.abspath(path))
        self.add_root(root, project_folder(root, module))
        return {"module": module, "is_package": is_package, "project": self, "path": os.path.abspath(path)}

    def parsed_file(self, path: str, module: str) -> ParsedModule | None:
        """The parsed file at ``path`` (as module ``module``), or None."""
        stamp = file_stamp(path)
        if stamp is None:
            return None
        cached = self._files.get(path)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        if cached is not None:
            self.generation += 1  # a file changed since it was parsed (a fix wrote it): runs made before are stale
        parsed = self._parse(module, path, stamp[0])
        self._files[path] = (stamp, parsed)
        return parsed

    def located(self, module: str) -> str | None:
        return self._locate(module) if module and looked_up(module) else None

    def text_of(self, path: str) -> str | None:
        return self.index.text(path) or None

    def forget(self, path: str) -> None:
        """``path`` was rewritten in this process (``graphleaf fix``): the runs of the files that use
        it, and its text, are made and read again."""
        self.index.forget(path)
        self.memo.clear()
        self.generation += 1

    def mentions(self, module: str, words: tuple[str, ...]) -> bool | None:
        key = ("mentions", module, words)
        if key not in self.memo:
            path = self._locate(module) if module and looked_up(module) else None
            self.memo[key] = None if path is None else self._has_words(path, words)
        return self.memo[key]

    def reaches(self, module: str, words: tuple[str, ...]) -> bool | None:
        key = ("reaches", module, words)
        if key not in self.memo:
            path = self._locate(module) if module and looked_up(module) else None
            self.memo[key] = None if path is None else self._reached_from(path, words)[1]
        return self.memo[key]

    def users_of(self, module: str, words: tuple[str, ...], path: str = "") -> list[str]:
        """The paths of the files whose run may reach ``module`` (the file at ``path``): files of
        the indexed project that import ``module`` (or a name from it), directly or through up to
        USER_DEPTH - 1 modules of their own folder or below (a training script imports the model,
        whose file imports the selector it calls), and whose text, or that of one of those
        modules, has one of ``words`` (a copy or a send the run may reach). Only
        users whose folder holds the file: its own folder or its parent's (a script beside the
        package it imports, a training script above the model's folder). A run follows calls
        only into its file's folder and below (the copy graph's scope), so a user elsewhere (a
        test folder beside the code, a far corner of a large tree) could not reach this file's
        code: running it would cost its parse and find nothing here. Read from the texts (their
        import lines), once per folder and process; at most USERS files (:meth:`parsed_path`
        parses one)."""
        here = os.path.abspath(path) if path else ""
        roots = sorted((r for r in self.index.paths if here.startswith(r.rstrip(os.sep) + os.sep)), key=len)
        if not roots:
            return []
        root = os.path.join(roots[-1].rstrip(os.sep), "")
        folder = os.path.dirname(here)
        key = ("users", words, folder)
        table = self.memo.get(key)
        if table is None:
            table = self.memo[key] = {}
            for holder in sorted({folder, os.path.dirname(folder)}):
                if not os.path.join(holder, "").startswith(root):
                    continue  # above the project's root: not the project's files
                for user in self._files_in(holder):
                    # a user copies or sends something itself, or calls into a module of its
                    # folder that does (a script running a trainer whose file deep-copies)
                    reached, sinks, own = self._reached_from(user, words)
                    if sinks and self._may_run(user):
                        for module, depth in reached.items():
                            table.setdefault(module, []).append((depth, not own, user))
        # the nearest first: a file that imports the module itself and copies, then those that
        # reach it through more imports
        return [p for _, _, p in sorted(table.get(module, [])) if p != here][:USERS]

    def _files_in(self, folder: str) -> list[str]:
        """:func:`_files_in`, once per folder and process (a folder is the parent of each of its
        subfolders: users_of lists it for each)."""
        key = ("files-in", folder)
        if key not in self.memo:
            self.memo[key] = _files_in(folder)
        return self.memo[key]

    def _may_run(self, user: str) -> bool:
        """Can a run of ``user`` start anywhere: a function at its top, or module-level code other
        than imports and class statements? A file of classes only (a decoder that imports the
        beam) starts nothing: the run that matters is its user's, a training script's. (One
        search of the text, each line's start tried: no split into lines.)"""
        key = ("may-run", user)
        if key not in self.memo:
            self.memo[key] = _STARTS_LINE.search(self.index.text(user)) is not None
        return self.memo[key]

    def _reached_from(self, user: str, words: tuple[str, ...]) -> tuple[dict[str, int], bool, bool]:
        """(the modules ``user`` imports, and those its imported modules of its own folder and
        below import, USER_DEPTH steps deep, each with the step it is first reached at; whether
        the user or one of those files of its folder has one of ``words``; whether the user's own
        text has one). Once per user and words: a user is asked about from each folder it may
        reach."""
        key = ("reached-from", user, words)
        if key not in self.memo:
            self.memo[key] = self._walk_reached(user, words)
        return self.memo[key]

    def _walk_reached(self, user: str, words: tuple[str, ...]) -> tuple[dict[str, int], bool, bool]:
        scope = os.path.join(os.path.dirname(user), "")
        reached: dict[str, int] = {}
        own = sinks = self._has_words(user, words)
        todo, seen = [user], {user}
        for depth in range(USER_DEPTH):
            following = []
            for path in todo:
                for imported in sorted(self._imports_of(path)):
                    reached.setdefault(imported, depth)
                    found = self._locate(imported) if looked_up(imported) else None
                    if found is not None and found.startswith(scope) and found not in seen:
                        seen.add(found)
                        following.append(found)
                        sinks = sinks or self._has_words(found, words)
            todo = following
        return reached, sinks, own

    def _has_words(self, path: str, words: tuple[str, ...]) -> bool:
        """Has the text of ``path`` one of ``words``? Once per file and words (a file of a folder
        is reached from each user of the folder that imports it)."""
        key = ("has-words", path, words)
        found = self.memo.get(key)
        if found is None:
            found = self.memo[key] = any(w in self.index.text(path) for w in words)
        return found

    def _imports_of(self, path: str) -> set[str]:
        key = ("imports-of", path)
        if key not in self.memo:
            name, is_package, _ = module_name_for(path)
            self.memo[key] = imported_modules(self.index.text(path), name, is_package)
        return self.memo[key]

    def tree_of(self, path: str, source: str) -> ast.Module | None:
        for key in (path, os.path.abspath(path)):
            cached = self._files.get(key)
            if cached is not None:
                stamp, parsed = cached
                if parsed is not None and file_stamp(key) == stamp and self.index.text(key) == source:
                    return parsed.tree
                return None
        return None

    def parsed_path(self, path: str) -> ParsedModule | None:
        """The parsed file at ``path``, under the module name its place in the tree gives."""
        name = module_name_for(path)[0]
        return self.parsed_file(path, name or os.path.splitext(os.path.basename(path))[0])

    # -- ProjectView ----------------------------------------------------------------
    def parsed(self, module: str) -> ParsedModule | None:
        if not module or not looked_up(module):
            return None
        path = self._locate(module)
        if path is None:
            return None
        return self.parsed_file(path, module)

    def _locate(self, module: str) -> str | None:
        if module in self._where:
            return self._where[module]
        rel = module.replace(".", os.sep)
        found = None
        search = list(self.roots)
        if self.use_sys_path:
            search += [p for p in sys.path if p and os.path.isdir(p) and os.path.abspath(p) not in self.roots]
        for root in search:
            for candidate in (os.path.join(root, rel + ".py"), os.path.join(root, rel, "__init__.py")):
                if os.path.isfile(candidate):
                    found = candidate
                    break
            if found:
                break
        self._where[module] = found
        return found

    def _parse(self, module: str, path: str, size: int) -> ParsedModule | None:
        if size > MAX_BYTES:
            return None
        try:
            with open(path, "rb") as fh:
                data = fh.read()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tree = ast.parse(data, filename=path)
        except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        is_package = os.path.basename(path) == "__init__.py"
        imports = ImportMap(tree, module, is_package, self)
        parsed = ParsedModule.of(module, path, tree, imports)
        imports.current = parsed
        imports.effect_of = function_effect
        imports.forward_items_of = forward_items
        return parsed


INSTALLED = frozenset({"site-packages", "dist-packages"})


def project_folder(root: str | None, module: str | None) -> str | None:
    """The folder that is a file's project, for the index: the root above its top-level
    package, except in a folder of installed distributions (``site-packages``), where each
    top-level package is its own project (checking torch there is checking torch, not every
    package installed beside it; the others are its dependents, like a project's users on
    PyPI, which no check sees either)."""
    if root and module and os.path.basename(os.path.normpath(root)) in INSTALLED:
        top = os.path.join(root, module.split(".")[0])
        if os.path.isdir(top):
            return top
        if os.path.isfile(top + ".py"):
            return top + ".py"  # a one-file module (six.py): the project is that file
    return root


USERS = 2  # files whose runs are looked at for one module (users_of)
# a top-level line that may start a run: a function, or code that is no import, class, decorator,
# comment, string or the rest of a bracket (a line inside a docstring may count: it costs a parse)
_STARTS = re.compile(r"(?:async[ \t]+)?def[ \t]|(?!import[ \t]|from[ \t]|class[ \t]|@|#|[\"')\]}]|\s|$)")
# _STARTS tried at the start of every line of a text in one search (``\s`` in the lookahead
# refuses the newline of an empty line, as ``$`` does at the end of a line on its own)
_STARTS_LINE = re.compile(r"^(?:" + _STARTS.pattern + ")", re.M)
USER_DEPTH = 3  # import steps from a user to the module it may reach (users_of)


def _files_in(folder: str) -> list[str]:
    """The ``.py`` files directly in ``folder``, sorted."""
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    return [os.path.join(folder, n) for n in names if n.endswith(".py") and os.path.isfile(os.path.join(folder, n))]
_IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+\(?([\w, \t]+)|import[ \t]+([\w., \t]+))", re.M)


def imported_modules(text: str, name: str | None, is_package: bool) -> set[str]:
    """The modules a file's import lines name (``from .training import Trainer`` in package
    ``shop`` gives ``shop.training`` and ``shop.training.Trainer``), read from its text."""
    out: set[str] = set()
    package = (name or "").split(".") if is_package else (name or "").split(".")[:-1]
    for m in _import_lines(text):
        if m.group(3):
            out |= {part.split(" as ")[0].strip() for part in m.group(3).split(",") if part.strip()}
            continue
        base = m.group(1)
        dots = len(base) - len(base.lstrip("."))
        if dots:
            up = package[: len(package) - (dots - 1)] if dots - 1 <= len(package) else []
            rest = base.lstrip(".")
            base = ".".join(up + ([rest] if rest else []))
        if not base:
            continue
        out.add(base)
        for item in m.group(2).split(","):
            item = item.split(" as ")[0].strip()
            if item:
                out.add(f"{base}.{item}")
    return out


def _import_lines(text: str):
    """The matches of _IMPORT, tried only on the lines that hold the word ``import`` (found
    with str.find: the pattern over every line of a large file cost more than the rest)."""
    at, last = text.find("import"), -1
    while at != -1:
        start = text.rfind("\n", 0, at) + 1
        if start != last:
            last = start
            m = _IMPORT.match(text, start)
            if m is not None:
                yield m
        at = text.find("import", at + 6)


def file_stamp(path: str) -> tuple[int, int] | None:
    """(size, mtime in ns) of a file, or None when it cannot be read: what tells a changed file."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns)


_SHARED: FileResolver | None = None


def shared_resolver() -> FileResolver:
    """The process's resolver: one per process, so that each file of the program is parsed once
    however many files refer to it (the CLI's workers and flake8's each have their own)."""
    global _SHARED
    if _SHARED is None:
        _SHARED = FileResolver()
    return _SHARED


def forget_shared() -> None:
    """Drop the process's resolver and what it read: the next analysis reads every file again
    (``graphleaf fix`` rechecks the files it left findings in, once the other files are written)."""
    global _SHARED
    _SHARED = None
