"""Resolve the names a file uses to dotted qualified names, from its import statements.

This is what libcst's QualifiedNameProvider would give, for the small set of names the
rules care about, at a fraction of the cost: one pass over the import statements.
"""

from __future__ import annotations

import ast
import weakref

from .stmtwalk import tree_statements

# Names that code snippets commonly use without importing them.  Only used when the
# file binds the name to nothing else.
_CONVENTIONAL = {"torch": "torch", "nn": "torch.nn", "F": "torch.nn.functional"}


class ImportMap:
    """What the names of one file mean.  ``module`` is the file's dotted module name when it is
    known (then relative imports resolve too); ``project`` is the whole-program view
    (:class:`flake8_graphleaf.analysis.program.project_view.ProjectView`) that looks up what a qualified
    name defined in another file is, or None when the file is analysed on its own."""

    def __init__(self, tree: ast.AST, module: str | None = None, is_package: bool = False, project=None):
        self.names: dict[str, str] = {}
        self._bound: set[str] = set()
        self.module = module
        self.project = project
        self._current = None  # this file as a project_view.ParsedModule (weakly: it holds this map)
        self.summary = None  # this file's summaries.summarize(), computed when first needed
        self.effect_of = None  # effects.function_effect, installed by the analysis
        self.forward_items_of = None  # forward_results.forward_items, installed by the analysis
        package = None
        if module:
            package = module if is_package else module.rpartition(".")[0]
        fallback: list[ast.ImportFrom] = []
        in_fallback: set[int] = set()
        for node in tree_statements(tree):
            kind = type(node)
            if kind not in _IMPORT_MAP_KINDS:
                continue  # most statements: nothing here to read
            if kind is ast.Try or kind is _TRY_STAR:
                # `except ImportError: from torch.nn.utils import weight_norm` is a fallback:
                # the name means what the try body imported.
                for handler in node.handlers:
                    for stmt in handler.body:
                        if isinstance(stmt, ast.ImportFrom):
                            fallback.append(stmt)
                            in_fallback.add(id(stmt))
                continue
            if kind is ast.ImportFrom and id(node) in in_fallback:
                continue
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.names[alias.asname] = alias.name
                    else:
                        top = alias.name.split(".")[0]
                        self.names[top] = top
            elif isinstance(node, ast.ImportFrom):
                source = _absolute(node, package)
                if source is None:
                    for alias in node.names:
                        self._bound.add(alias.asname or alias.name)
                    continue
                for alias in node.names:
                    if alias.name != "*":
                        self.names[alias.asname or alias.name] = f"{source}.{alias.name}"
                continue
                for alias in node.names:
                    if alias.name == "*":
                        continue
                    self.names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self._bound.add(node.name)
        for node in fallback:
            if node.module and not node.level:
                for alias in node.names:
                    self.names.setdefault(alias.asname or alias.name, f"{node.module}.{alias.name}")

    @property
    def current(self):
        """This file as a project_view.ParsedModule, set by the analysis. Held weakly: the
        ParsedModule holds this map, and a cycle would keep the file's tree alive after its
        analysis until the collector ran (whoever made it holds it: the resolver's cache, the
        file's FileAnalysis)."""
        ref = self._current
        return ref() if ref is not None else None

    @current.setter
    def current(self, parsed) -> None:
        self._current = weakref.ref(parsed) if parsed is not None else None

    def local_qualname(self, name: str) -> str | None:
        """Qualified name of a class or function defined at the top of this file."""
        return f"{self.module}.{name}" if self.module and name in self._bound else None

    def qualname(self, node: ast.AST) -> str | None:
        """Dotted name of ``node`` (``F.relu`` -> ``torch.nn.functional.relu``), or None."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        base = self.names.get(node.id)
        if base is None:
            if node.id in self._bound:
                return None
            base = _CONVENTIONAL.get(node.id)
            if base is None:
                return None
        parts.append(base)
        return ".".join(reversed(parts))


_TRY_STAR = getattr(ast, "TryStar", ast.Try)
_IMPORT_MAP_KINDS = frozenset({ast.Try, _TRY_STAR, ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef,
                               ast.ClassDef})


def _absolute(node: ast.ImportFrom, package: str | None) -> str | None:
    """The absolute module an ``import from`` reads, or None when it cannot be known."""
    if not node.level:
        return node.module or None
    if package is None:
        return None
    parts = package.split(".") if package else []
    if node.level - 1 > len(parts):
        return None
    base = parts[: len(parts) - (node.level - 1)]
    if node.module:
        base.append(node.module)
    return ".".join(base) or None
