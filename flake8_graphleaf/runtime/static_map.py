"""Mapping a graph tensor found at run time to the static finding that names its line.

For each class above the tensor (found through ``inspect``), the class's file goes through the
static analysis (:mod:`flake8_graphleaf.analysis`), and the findings for the same class and
attribute, or the legacy ``weight_norm`` / ``spectral_norm`` call that built the submodule, are
the tensor's sources.  Imports torch (through :mod:`.walk`).
"""

from __future__ import annotations

import functools
import inspect
import linecache
import os
import re
from typing import Iterable

from torch import nn

from ..analysis.program.stmtwalk import parent_map
from .findings import GraphTensor, Source
from .walk import TORCH_DIR


def user_class_files(cls) -> list[tuple[type, str]]:
    """[(class, its source file)] down the MRO, leaving out torch's and builtin classes.

    The file comes from the class's own functions' code objects (``__code__.co_filename``), else
    from ``inspect.getsourcefile``, which needs the class's module in ``sys.modules``: a class loaded
    with ``importlib.util.spec_from_file_location`` and never registered (config-driven trainers),
    or defined in a script run as ``__main__``, has no such entry."""
    out = []
    for c in cls.__mro__:
        mod = getattr(c, "__module__", "") or ""
        if c is object or mod == "builtins" or mod == "torch" or mod.startswith("torch."):
            continue
        # The functions' code objects first: they name the file that was run even for a class of a
        # script run as __main__ (whose sys.modules entry may be another module by now).
        f = _file_from_code(c)
        if f is None:
            try:
                f = inspect.getsourcefile(c)
            except (TypeError, OSError):
                f = None
        if f and not os.path.abspath(f).startswith(TORCH_DIR):
            out.append((c, os.path.abspath(f)))
    return out


def _file_from_code(c: type) -> str | None:
    for value in vars(c).values():
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        elif isinstance(value, property):
            value = value.fget
        code = getattr(inspect.unwrap(value), "__code__", None) if callable(value) else None
        if code is not None and os.path.isfile(code.co_filename) and \
                code.co_qualname.startswith(c.__qualname__ + "."):
            return code.co_filename
    return None


_user_class_files = user_class_files


class StaticIndex:
    """Findings of the static analysis, one analysis per source file."""

    def __init__(self):
        self._cache: dict[str, list] = {}

    def findings(self, path: str) -> list:
        if path not in self._cache:
            from ..analysis import Options, analyze_source

            for attempt in range(2):
                try:
                    with open(path, encoding="utf-8") as fh:
                        src = fh.read()
                    # every level: the run is the proof of a store the analysis took a step on trust for
                    self._cache[path] = analyze_source(src, path, Options(confidence="low"))
                except SystemError:
                    # CPython 3.11's ast module keeps one recursion counter for all threads: a parse in
                    # another thread at the same moment (a traceback printed by a queue's feeder
                    # thread parses its source lines) can fail this one with "AST constructor
                    # recursion depth mismatch".  The failure is transient: parse again.
                    self._cache[path] = []
                    continue
                except (OSError, SyntaxError, UnicodeDecodeError, RecursionError, ValueError):
                    self._cache[path] = []
                break
        return self._cache[path]


def _finding_chain(attribute: str | None) -> tuple[str, tuple[str, ...]]:
    """'self.stats[...]' -> ('self', ('stats',)); 'self.<name>' -> ('self', ('*',))."""
    if not attribute:
        return "", ()
    text = re.sub(r"\[.*?\]", "", attribute)
    parts = text.split(".")
    root, rest = parts[0], parts[1:]
    return root, tuple("*" if p.startswith("<") else p for p in rest if p)


def _chain_matches(fchain, chain) -> bool:
    return len(fchain) == len(chain) and all(a == "*" or a == b for a, b in zip(fchain, chain))


_LEGACY_HOOKS = {}
try:  # the legacy reparametrizations keep a non-leaf weight and recompute it in a pre-hook
    from torch.nn.utils.weight_norm import WeightNorm as _WN

    _LEGACY_HOOKS[_WN] = "GLF101"
except ImportError:  # pragma: no cover
    pass
try:
    from torch.nn.utils.spectral_norm import SpectralNorm as _SN

    _LEGACY_HOOKS[_SN] = "GLF102"
except ImportError:  # pragma: no cover
    pass


@functools.lru_cache(maxsize=64)
def _parsed(path: str):
    import ast

    try:
        with open(path, encoding="utf-8") as fh:
            tree = ast.parse(fh.read())
    except (OSError, SyntaxError, ValueError):
        return None
    return tree, parent_map(tree)


def _built_at(path: str, line: int, col: int, chain: tuple[str, ...]) -> bool:
    """True when the expression at line:col builds the submodule at ``self.<chain>``:
    ``self.a = f(...)`` for ("a",), or positional argument i of ``self.a = Seq(...)`` for ("a", "i")."""
    import ast

    parsed = _parsed(path)
    if parsed is None or not chain:
        return False
    tree, parents = parsed
    node = next((n for n in ast.walk(tree) if getattr(n, "lineno", None) == line
                 and getattr(n, "col_offset", None) == col and isinstance(n, (ast.Name, ast.Attribute))), None)
    if node is None:
        return False
    call = parents.get(node)
    if not isinstance(call, ast.Call):
        return False
    indices = []
    cur = call
    while True:
        parent = parents.get(cur)
        if isinstance(parent, ast.Call) and cur in parent.args:
            indices.append(str(parent.args.index(cur)))
            cur = parent
            continue
        if isinstance(parent, ast.Starred) or isinstance(parent, (ast.List, ast.Tuple)):
            return False
        break
    stmt = parents.get(cur)
    if not isinstance(stmt, ast.Assign) or stmt.value is not cur:
        return False
    names = [t.attr for t in stmt.targets if isinstance(t, ast.Attribute)]
    if chain[0] not in names:
        return False
    return tuple(reversed(indices)) == tuple(chain[1:])


def _legacy_code(owner, chain) -> str | None:
    if not isinstance(owner, nn.Module) or len(chain) != 1:
        return None
    for hook in getattr(owner, "_forward_pre_hooks", {}).values():
        code = _LEGACY_HOOKS.get(type(hook))
        if code and getattr(hook, "name", None) == chain[0]:
            return code
    return None


def _source_of(f, path: str) -> Source:
    text = linecache.getline(path, f.line).strip()
    return Source(file=path, line=f.line, code=f.code, text=text, attribute=f.attribute, message=f.message)


def map_static(item: GraphTensor, index: StaticIndex, extra_files: Iterable[str]) -> list[Source]:
    files: list[tuple[set[str], str]] = []  # (class names this file may speak for, path)
    for owner, _chain in item.owners:
        for c, f in _user_class_files(type(owner)):
            files.append(({c.__name__}, f))
    for f in extra_files:
        if f:
            files.append((set(), os.path.abspath(f)))
    by_file: dict[str, set[str]] = {}
    for names, f in files:
        by_file.setdefault(f, set()).update(names)
    out: list[Source] = []
    seen = set()

    def add(f, path):
        key = (path, f.line, f.code)
        if key not in seen:
            seen.add(key)
            out.append(_source_of(f, path))

    # 1. Stores on an attribute: class + attribute chain, nearest owner first.
    for owner, chain in item.owners:
        if not chain:
            continue
        mro_names = {c.__name__ for c in type(owner).__mro__}
        for path in by_file:
            for f in index.findings(path):
                if f.code not in ("GLF001", "GLF002", "GLF003", "GLF004", "GLF005"):
                    continue
                root, fchain = _finding_chain(f.attribute)
                # A helper object's finding names the attribute holding an object (a distribution) whose
                # own attributes hold the tensor: the runtime chain goes on past the finding's.
                held = chain[:len(fchain)] if (f.data or {}).get("kind") == "helper" else chain
                if not _chain_matches(fchain, held):
                    continue
                if root == "self" or (f.data or {}).get("root") == "self":
                    if f.class_name not in mro_names:
                        continue
                elif f.class_name is not None and f.code != "GLF003" and f.class_name not in mro_names:
                    continue
                add(f, path)
        if out:
            return out
    # 2. Legacy weight_norm / spectral_norm: the weight is set by the library's pre-hook.
    for owner, chain in item.owners[:1]:
        code = _legacy_code(owner, chain)
        if code is None:
            continue
        ancestors = {type(o).__name__ for o, _ in item.owners}
        candidates = [(f, p) for p in by_file for f in index.findings(p) if f.code == code]
        preferred = [(f, p) for f, p in candidates if f.class_name in ancestors] or candidates
        # Narrow down to the call that built this very submodule: `self.fc = spectral_norm(...)`
        # for model.fc.weight, the 2nd argument of `self.net = nn.Sequential(...)` for model.net[1].weight.
        chains = {(type(o).__name__, c) for o, c in item.owners}
        exact = [(f, p) for f, p in preferred if any(
            f.class_name == cls and _built_at(p, f.line, f.col, chain[:-1]) for cls, chain in chains)]
        for f, p in exact or preferred:
            add(f, p)
    return out
