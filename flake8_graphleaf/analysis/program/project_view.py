"""What the analysis of one file may ask about the rest of the program.

The analysis stays pure (source text in, findings out): it never opens a file.  A
:class:`ProjectView` is handed in (by :mod:`flake8_graphleaf.project`, which finds and parses the
files), and the questions below are answered from the parsed definitions it returns:

- :func:`resolve`: the class or function a qualified name stands for (following re-exports such
  as ``from .base import BaseModel`` in a package's ``__init__``);
- :func:`class_kind`: is a class a ``torch.nn.Module`` (through its bases, across files), a class
  of another framework (chainer, keras ...), or something else;
- :func:`defines_method`: does a class (through its bases, across files) define a method;

What a function's result carries is :mod:`..evaluator.effects`' business.

Everything is memoised on the view, so each definition is judged once per process.
"""

from __future__ import annotations

import ast
import os
import sys
from dataclasses import dataclass, field

MODULE_CLASS, OTHER_CLASS, FOREIGN_FRAMEWORK = "module", "other", "foreign"

# Top-level packages whose classes are never torch modules, whatever their methods are called.
NON_TORCH_FRAMEWORKS = frozenset(
    "chainer tensorflow keras tf_keras flax haiku jax mxnet paddle mindspore oneflow sklearn".split()
)
# Packages never looked into: torch's own names are the rules' business, the others never matter.
NOT_LOOKED_UP = frozenset(
    """torch numpy np math os sys re typing collections functools itertools dataclasses abc enum
    builtins copy logging warnings json pathlib contextlib types inspect random time""".split()
)
_DEPTH = 6
# The standard library is never looked into either: its functions are not the program's.
STDLIB = frozenset(getattr(sys, "stdlib_module_names", ())) | NOT_LOOKED_UP


def looked_up(qualname: str) -> bool:
    return qualname.split(".")[0] not in STDLIB


@dataclass
class ParsedModule:
    """One file of the program, parsed: what :meth:`ProjectView.parsed` returns."""

    name: str
    path: str
    tree: ast.Module
    imports: object  # ImportMap, with module and project set
    defs: dict[str, ast.AST] = field(default_factory=dict)  # top-level classes and functions
    memo: dict = field(default_factory=dict)  # facts judged about its definitions

    @classmethod
    def of(cls, name: str, path: str, tree: ast.Module, imports) -> "ParsedModule":
        defs = {
            n.name: n for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        }
        return cls(name, path, tree, imports, defs)


class ProjectView:
    """The interface: a project hands one of these to the analysis (``Options.project``)."""

    def __init__(self) -> None:
        self.memo: dict = {}
        # bumped whenever a file the view parsed has changed since: what was worked out from the
        # old text (the copy graph's runs) is keyed by it
        self.generation = 0
        # The project index (flake8_graphleaf.project.index.ProjectIndex) when the whole project
        # was summarised: who makes which class a layer, who instantiates it in which grad mode.
        self.index = None

    def parsed(self, module: str) -> ParsedModule | None:  # pragma: no cover - interface
        """The parsed file of a dotted module name, or None if it is not in the program."""
        raise NotImplementedError

    def parsed_file(self, path: str, module: str) -> ParsedModule | None:
        """The parsed file at ``path``, or None (a view that reads no files by path)."""
        return None

    def mentions(self, module: str, words: tuple[str, ...]) -> bool | None:
        """Does the text of the program's file of ``module`` contain one of ``words``?  None: no
        such file (or a view that reads no texts).  Reads the text, parses nothing."""
        return None

    def reaches(self, module: str, words: tuple[str, ...]) -> bool | None:
        """Does the text of the program's file of ``module``, or of a module of its folder or
        below that it imports (a few imports deep), contain one of ``words``? None: no such
        file. A view that follows no imports answers as :meth:`mentions`."""
        return self.mentions(module, words)

    def located(self, module: str) -> str | None:
        """The path of the program's file of ``module``, found without parsing it, or None."""
        return None

    def text_of(self, path: str) -> str | None:
        """The text of a file of the project, or None (a view that reads no texts)."""
        return None

    def users_of(self, module: str, words: tuple[str, ...], path: str = "") -> list[str]:
        """The paths of the files of the project of ``path`` that import ``module`` (or a name
        from it) and whose text contains one of ``words``, or [] (a view without a project index)."""
        return []

    def parsed_path(self, path: str) -> ParsedModule | None:
        """The parsed file at ``path`` (one :meth:`users_of` gave), or None."""
        return None

    def tree_of(self, path: str, source: str) -> ast.Module | None:
        """The tree of ``source``, the text of the file at ``path``, when the view has parsed that
        file already (as another file's import or user), or None: the checked file's own parse."""
        return None


@dataclass(frozen=True)
class Definition:
    module: ParsedModule
    node: ast.AST  # ast.ClassDef or ast.FunctionDef

    @property
    def qualname(self) -> str:
        return f"{self.module.name}.{self.node.name}"


def resolve(project: ProjectView | None, qualname: str | None, depth: int = 0) -> Definition | None:
    """The top-level class or function ``qualname`` names, or None."""
    if project is None or not qualname or depth > _DEPTH or not looked_up(qualname):
        return None
    key = ("resolve", qualname)
    if key in project.memo:
        return project.memo[key]
    project.memo[key] = None  # a cycle of re-exports resolves to nothing
    result = None
    module, _, attr = qualname.rpartition(".")
    parsed = project.parsed(module) if module else None
    if parsed is not None:
        node = parsed.defs.get(attr)
        if node is not None:
            result = Definition(parsed, node)
        else:
            target = parsed.imports.names.get(attr)  # re-exported: from .base import BaseModel
            if target and target != qualname:
                result = resolve(project, target, depth + 1)
    project.memo[key] = result
    return result


def resolve_from(imports, qualname: str | None) -> Definition | None:
    """The definition ``qualname`` names as the file of ``imports`` imports it: a top-level
    module is found next to the importing file first (a script's folder leads ``sys.path``), and
    another folder's file of that name is not the one imported; else :func:`resolve`."""
    project = getattr(imports, "project", None)
    if project is None or not qualname:
        return None
    module, _, name = qualname.rpartition(".")
    current = getattr(getattr(imports, "current", None), "path", "<current>")
    if module and "." not in module and current != "<current>":
        beside = os.path.join(os.path.dirname(current), module + ".py")
        parsed = project.parsed_file(beside, module) if os.path.isfile(beside) else None
        if parsed is None:
            return None
        node = parsed.defs.get(name)
        return Definition(parsed, node) if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) else None
    return resolve(project, qualname)


def base_qualnames(found: Definition, keep_unknown: bool = False) -> list:
    """The qualified names of a class's bases (None for one that cannot be named, if kept)."""
    imports = found.module.imports
    out = []
    for base in found.node.bases:
        if isinstance(base, ast.Subscript):
            base = base.value
        q = imports.qualname(base)
        if q is None and isinstance(base, ast.Name) and base.id in found.module.defs:
            q = f"{found.module.name}.{base.id}"
        if q or keep_unknown:
            out.append(q)
    return out


def class_kind(project: ProjectView | None, qualname: str | None, depth: int = 0) -> str | None:
    """MODULE_CLASS, FOREIGN_FRAMEWORK, OTHER_CLASS, or None when it cannot be known."""
    if not qualname:
        return None
    top = qualname.split(".")[0]
    if top in NON_TORCH_FRAMEWORKS:
        return FOREIGN_FRAMEWORK
    if qualname.startswith("torch.nn.") and qualname.rsplit(".", 1)[-1][:1].isupper():
        return MODULE_CLASS if not qualname.startswith(("torch.nn.utils", "torch.nn.functional")) else OTHER_CLASS
    if qualname.startswith(("torch.optim", "torch.utils.data", "torch.distributions")):
        return OTHER_CLASS
    if project is None or depth > _DEPTH:
        return None
    key = ("class_kind", qualname)
    if key in project.memo:
        return project.memo[key]
    project.memo[key] = None
    found = resolve(project, qualname)
    result = None
    if found is not None and isinstance(found.node, ast.ClassDef):
        result = OTHER_CLASS
        for bq in base_qualnames(found, keep_unknown=True):
            kind = class_kind(project, bq, depth + 1) if bq else None
            if kind in (MODULE_CLASS, FOREIGN_FRAMEWORK):
                result = kind
                break
            if kind is None and bq and not bq.startswith(("builtins.", "typing.", "abc.")):
                result = None  # a base we cannot see: we do not know
    project.memo[key] = result
    return result


def defines_method(project: ProjectView | None, base_quals: list[str], name: str, depth: int = 0) -> bool:
    """Does one of these classes (or their bases, across files) define a method ``name``?
    (``self.propagate(...)`` in a MessagePassing subclass is a method call, not a submodule's.)"""
    if project is None or depth > _DEPTH:
        return False
    for qual in base_quals:
        key = ("method", qual, name)
        if key in project.memo:
            if project.memo[key]:
                return True
            continue
        project.memo[key] = False
        found = resolve(project, qual)
        hit = False
        if found is not None and isinstance(found.node, ast.ClassDef):
            body_names = {
                n.name for n in found.node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            }
            if name in body_names:
                hit = True
            else:
                hit = defines_method(project, base_qualnames(found), name, depth + 1)
        project.memo[key] = hit
        if hit:
            return True
    return False
