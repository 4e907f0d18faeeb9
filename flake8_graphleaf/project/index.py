"""The project index: one small summary per file of the checked project, and what follows
from all of them together.

Per file (:func:`flake8_graphleaf.analysis.program.summaries.summarize`, keyed by content hash, kept in
memory and, with a cache, on disk): attributes read, dynamic attribute access, classes made part
of another module, factories, grad mode of each instantiation.  Across files:

- :meth:`ProjectIndex.attribute_reads` / :meth:`dynamic_access`: who reads an attribute, for the
  fixer's safety decisions (a rename is safe only if nothing in the project reads it);
- :meth:`is_layer`: the class's instances become parts of other modules somewhere in the project,
  so its ``forward`` gets activations (the previous layer's output);
- :meth:`made_only_without_grad`: every instantiation of the class in the project happens under
  ``torch.no_grad()`` / ``inference_mode`` (beam searches, streaming decoders).

Nothing here imports user code: files are read and parsed, never run.
"""

from __future__ import annotations

import ast
import os
import re
import warnings
from dataclasses import dataclass

from ..analysis.program.imports import ImportMap
from ..analysis.program.summaries import VERSION, summarize
from .cache import key as cache_key
from .names import module_name_for

# Folders never indexed (virtual environments, build output, caches, VCS).
SKIP_DIRS = frozenset(
    """.git .hg .svn .tox .nox .venv venv env .env __pycache__ build dist node_modules .mypy_cache
    .pytest_cache .ruff_cache .graphleaf_cache site-packages .eggs""".split()
)
MAX_FILES = 50_000
MAX_BYTES = 2_000_000


@dataclass(frozen=True)
class AttrRead:
    path: str
    line: int
    col: int
    class_name: str | None
    function: str | None
    how: str  # "attr" (obj.name load), "getattr" (getattr/hasattr with that name), "string"


def python_files(paths: list[str]) -> list[str]:
    """Every ``.py`` file under ``paths`` (files are taken as given), sorted, without the
    folders in SKIP_DIRS or hidden ones."""
    out: list[str] = []
    for p in paths:
        if os.path.isfile(p):
            if p.endswith(".py"):
                out.append(os.path.abspath(p))
            continue
        for dirpath, dirnames, filenames in os.walk(p):
            dirnames[:] = sorted(
                d for d in dirnames if d not in SKIP_DIRS and not d.startswith(".") and not d.endswith(".egg-info")
                and not os.path.exists(os.path.join(dirpath, d, "pyvenv.cfg"))  # a virtual environment, any name
            )
            for name in sorted(filenames):
                if name.endswith(".py"):
                    out.append(os.path.abspath(os.path.join(dirpath, name)))
                    if len(out) >= MAX_FILES:
                        return out
    return sorted(set(out))


_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
INDEX_AFTER = 64  # questions answered by scanning the texts before the word index is built


class ProjectIndex:
    """Lazy: files are listed when first needed, and a file is parsed and summarised only when a
    question names something its text contains (``is_layer("pkg.att.AttDot")`` reads the files
    that mention ``AttDot``).  Each summary is kept, by content hash, in memory and in the cache."""

    def __init__(self, paths: list[str] | tuple[str, ...] = (), cache=None):
        self.paths = [os.path.abspath(p) for p in paths]
        self.cache = cache  # project.cache store with get/put(kind, key, data), or None
        self.summaries: dict[str, dict] = {}
        self._files: list[str] | None = None
        self._texts: dict[str, str] = {}
        self._modules: dict[str, str | None] = {}
        self._answers: dict = {}
        self._words: dict[str, list[str]] | None = None  # identifier -> the files whose text has it
        self._questions = 0

    @classmethod
    def build(cls, paths: list[str], cache=None) -> "ProjectIndex":
        return cls(paths, cache)

    def add_root(self, path: str) -> None:
        path = os.path.abspath(path)
        if any(path == p or path.startswith(p.rstrip(os.sep) + os.sep) for p in self.paths):
            return  # already indexed
        self.paths = [p for p in self.paths if not p.startswith(path.rstrip(os.sep) + os.sep)] + [path]
        self._files = None
        self._words = None
        self._answers.clear()

    def forget(self, path: str) -> None:
        """``path`` was rewritten (``graphleaf fix``): its text, its summary and the answers read
        from the texts are read again when next asked."""
        for key in (path, os.path.abspath(path)):
            self._texts.pop(key, None)
            self.summaries.pop(key, None)
        self._words = None
        self._answers.clear()

    # -- files ----------------------------------------------------------------------
    def files(self) -> list[str]:
        if self._files is None:
            self._files = python_files(self.paths)
        return self._files

    def text(self, path: str) -> str:
        t = self._texts.get(path)
        if t is None:
            try:
                if os.path.getsize(path) > MAX_BYTES:
                    t = ""
                else:
                    with open(path, "rb") as fh:
                        t = fh.read().decode("utf-8", "replace")
            except OSError:
                t = ""
            self._texts[path] = t
        return t

    def mentioning(self, word: str) -> list[str]:
        """Files whose text has ``word`` (an identifier: as a whole word, so ``Name`` is not found
        in ``MyName``); for a class name (CamelCase), the files that call it (``Name(``).  A scan of
        the texts for the first INDEX_AFTER questions, then an index of every file's words."""
        key = ("mentioning", word)
        if key not in self._answers:  # callers ask the same word several times in a row
            self._answers[key] = self._mentioning(word)
        return list(self._answers[key])

    def _mentioning(self, word: str) -> list[str]:
        needle = word + "(" if word[:1].isupper() else word
        if not _IDENTIFIER.fullmatch(word):
            return [p for p in self.files() if needle in self.text(p)]
        self._questions += 1
        if self._words is None and self._questions <= INDEX_AFTER:
            # a few questions: a substring scan of the texts each (cheap); many: an index of every
            # file's words, built once (it costs about as much as 50 scans)
            whole = re.compile(r"(?<!\w)" + re.escape(word) + r"(?!\w)")
            return [p for p in self.files() if needle in self.text(p) and whole.search(self.text(p))]
        return [p for p in self._with_word(word) if needle in self.text(p)]

    def subclassing(self, name: str) -> list[str]:
        """Files with a class statement that names ``name`` among its bases (``class
        LULinear(CachedLinear):``, ``class B(base.A, Mixin):``)."""
        key = ("subclassing", name)
        if key not in self._answers:
            found = re.compile(r"^[ \t]*class\s+\w+\s*\([^)]*(?<![\w])" + re.escape(name) + r"(?!\w)", re.M)
            if _IDENTIFIER.fullmatch(name) and (self._words is not None or self._questions >= INDEX_AFTER):
                paths = self._with_word(name)
            else:
                # the same files, in the same order: a match names ``name`` as a whole word, which
                # the index would list; scanning is cheaper than building the index for a few
                # questions (as in _mentioning)
                self._questions += 1
                paths = [p for p in self.files() if name in self.text(p)]
            self._answers[key] = [p for p in paths if found.search(self.text(p))]
        return list(self._answers[key])

    def _with_word(self, word: str) -> list[str]:
        if self._words is None:
            words: dict[str, list[str]] = {}
            for p in self.files():
                for w in set(_IDENTIFIER.findall(self.text(p))):
                    words.setdefault(w, []).append(p)
            self._words = words
        return self._words.get(word, [])

    def summary(self, path: str) -> dict | None:
        if path in self.summaries:
            return self.summaries[path]
        text = self.text(path)
        source = text.encode("utf-8", "surrogateescape") if text else b""
        key = cache_key("summary", VERSION, source, path)
        summary = self.cache.get("summary", key) if self.cache is not None else None
        if summary is None:
            summary = summarize_source(source, path) if text else None
            if summary is not None and self.cache is not None:
                self.cache.put("summary", key, summary)
        self.summaries[path] = summary
        return summary

    def _candidates(self, word: str, qualname: str | None = None) -> list[str]:
        """The files that mention ``word``; with the class's ``qualname``, only those that can mean
        that class: its own module's file, or a file that names its module (an import of it) and
        defines no class of that name itself."""
        module, _, name = (qualname or "").rpartition(".")
        last = module.rsplit(".", 1)[-1]
        out = []
        for p in self.mentioning(word):
            if qualname and self._module_of(p) != module:
                text = self.text(p)
                if last not in text or f"class {name}" in text:
                    continue
            out.append(p)
        return out

    def _module_of(self, path: str) -> str | None:
        """The dotted module name of a file of the project, once per file (a file is a candidate
        for every question that names a word of its text)."""
        found = self._modules.get(path, self)
        if found is self:
            found = self._modules[path] = module_name_for(path)[0]
        return found

    def _summaries(self, word: str, qualname: str | None = None) -> list[tuple[str, dict]]:
        out = []
        for p in self._candidates(word, qualname):
            s = self.summary(p)
            if s is not None:
                out.append((p, s))
        return out

    # -- questions ------------------------------------------------------------------
    def attribute_reads(self, name: str) -> list[AttrRead]:
        """Every read of attribute ``name`` in the project (see summaries.summarize)."""
        out = []
        for path, s in self._summaries(name):
            for line, col, cls, fn, how in s["reads"].get(name, ()):
                out.append(AttrRead(path, line, col, cls, fn, how))
        return out

    def dynamic_access(self) -> list[tuple[str, int]]:
        """Where the project reaches attributes by computed names (getattr(o, n), vars(o), __dict__)."""
        out = []
        for word in ("getattr", "hasattr", "vars", "__dict__"):
            for path, s in self._summaries(word):
                out += [(path, line) for line, _ in s["dynamic"]]
        return sorted(set(out))

    def is_layer(self, qualname: str) -> bool:
        key = ("layer", qualname)
        if key not in self._answers:
            self._answers[key] = self._is_layer(qualname)
        return self._answers[key]

    def _is_layer(self, qualname: str) -> bool:
        name = qualname.rsplit(".", 1)[-1]
        factories = []
        for _, s in self._summaries(name, qualname):
            if qualname in s["layers"]:
                return True
            if s.get("module"):
                factories += [f"{s['module']}.{f}" for f, made in s["factories"].items() if qualname in made]
        for factory in factories:  # self.att = att_for(args), att_for in another file
            for _, s in self._summaries(factory.rsplit(".", 1)[-1]):
                if factory in s["layer_calls"]:
                    return True
        return False

    def made_in(self, qualname: str) -> set[bool]:
        """The grad modes the project instantiates this class in (empty: never seen made).  A file
        that never mentions no_grad, inference_mode or set_grad_enabled makes it with grad on, as
        far as this question goes, without being parsed; the answer stops at the first such file."""
        key = ("made", qualname)
        if key not in self._answers:
            modes: set[bool] = set()
            name = qualname.rsplit(".", 1)[-1]
            for path in self._candidates(name, qualname):
                text = self.text(path)
                if f"{name}(" in text and not any(w in text for w in _GRAD_OFF_WORDS):
                    modes.add(True)
                    break
                s = self.summary(path)
                if s is not None:
                    modes.update(s["made"].get(qualname, ()))
                if True in modes:
                    break
            self._answers[key] = modes
        return self._answers[key]

    def modules_making(self, qualname: str, limit: int = 20) -> list[str]:
        """Dotted module names of the project's files that can instantiate the class (they name
        it and its module, or are its own file): where its callers are.  At most ``limit``."""
        name = qualname.rsplit(".", 1)[-1]
        out = []
        for path in self._candidates(name, qualname):
            module = self._module_of(path)
            if module:
                out.append(module)
            if len(out) >= limit:
                break
        return out

    def made_only_without_grad(self, qualname: str) -> bool:
        modes = self.made_in(qualname)
        return bool(modes) and True not in modes


_GRAD_OFF_WORDS = ("no_grad", "inference_mode", "set_grad_enabled")


def summarize_source(source: bytes, path: str) -> dict | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(source, filename=path)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    module, is_package, _ = module_name_for(path)
    try:
        return summarize(tree, ImportMap(tree, module, is_package))
    except RecursionError:
        return None
