"""How an attribute is read, across the checked project: which fix keeps the program's meaning.

- *no reader* (and private): the store can become a local variable;
- every reader only *inspects* the value (``.shape``, ``.item()``, ``.detach()``, ``.tolist()``,
  ``.cpu().numpy()``, ``is None``): storing ``.detach()`` gives each reader the same result;
- anything else (a loss, ``backward``, the next ``forward`` call, ``print`` of the tensor, a
  ``getattr`` with that name, a string naming it, ``vars()``/``__dict__`` access anywhere): only the
  copy-safe fix keeps the program's meaning.

An attribute without a leading underscore may be read by code outside the checked paths, so only
the copy-safe fix is safe for it.  The project is the lead's index (``attribute_reads(name)``,
``dynamic_access()``); without one every attribute counts as possibly read elsewhere.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass, field

INSPECT_ATTRS = frozenset({"shape", "dtype", "device", "ndim", "is_cuda", "layout"})
INSPECT_CALLS = frozenset({"detach", "item", "tolist", "size", "dim", "numel", "numpy", "nelement"})
INSPECT_BUILTINS = frozenset({"len", "isinstance", "type", "id", "callable"})
# Calls that keep the value's data and are then inspected: x.cpu().numpy(), x.float().mean().item()
PASS_THROUGH = frozenset({"cpu", "float", "double", "half", "to", "clone", "contiguous", "mean", "sum", "max", "min",
                          "abs", "norm", "flatten", "view", "reshape", "squeeze", "unsqueeze", "cuda"})


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


@dataclass
class Usage:
    readers: list[str] = field(default_factory=list)  # "path:line (how)"
    all_inspection: bool = True
    unknown: str | None = None  # why readers cannot be known (no project, dynamic access)

    @property
    def none(self) -> bool:
        return not self.readers and self.unknown is None


def inspection(node: ast.AST, parents: dict) -> bool:
    """Is the load ``node`` (an ``obj.name``) only inspected?"""
    cur = node
    while True:
        parent = parents.get(cur)
        if isinstance(parent, ast.Compare) and len(parent.ops) == 1 and isinstance(parent.ops[0], (ast.Is, ast.IsNot)):
            other = parent.comparators[0] if parent.left is cur else parent.left
            return isinstance(other, ast.Constant) and other.value is None
        if (isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and parent.func.id in INSPECT_BUILTINS
                and cur in parent.args):
            return True  # len(obj.losses), isinstance(obj.state, dict): nothing of the values
        if not isinstance(parent, ast.Attribute) or parent.value is not cur:
            return False
        if parent.attr in INSPECT_ATTRS:
            return True
        call = parents.get(parent)
        if not (isinstance(call, ast.Call) and call.func is parent):
            return False
        if parent.attr in INSPECT_CALLS:
            return True
        if parent.attr not in PASS_THROUGH:
            return False
        cur = call


class ProjectReads:
    """Reads of attribute names in the project's other files, classified (files parsed once)."""

    def __init__(self, index, this_file: str):
        self.index = index
        self.this = os.path.abspath(this_file) if this_file else ""
        self._trees: dict[str, tuple[ast.AST, dict] | None] = {}
        self._dynamic = None

    def _tree(self, path: str):
        if path not in self._trees:
            try:
                with open(path, encoding="utf-8", errors="replace") as fh:
                    tree = ast.parse(fh.read())
                parents = {c: p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}
                self._trees[path] = (tree, parents)
            except (OSError, SyntaxError, ValueError, RecursionError):
                self._trees[path] = None
        return self._trees[path]

    def dynamic(self) -> list:
        if self._dynamic is None:
            self._dynamic = list(self.index.dynamic_access())
        return self._dynamic

    def add(self, usage: Usage, name: str) -> None:
        dyn = self.dynamic()
        if dyn:  # readers cannot be known: no need to classify the named ones
            path, line = dyn[0][0], dyn[0][1]
            usage.unknown = f"attributes are read dynamically ({os.path.basename(path)}:{line}, {len(dyn)} place(s))"
            return
        by_path: dict[str, set[int]] = {}
        for r in self.index.attribute_reads(name):
            if os.path.abspath(r.path) == self.this:
                continue  # this file is read from its current text
            where = f"{os.path.basename(r.path)}:{r.line}"
            if r.how != "attr":
                usage.readers.append(f"{where} ({r.how})")
                usage.all_inspection = False
                continue
            by_path.setdefault(r.path, set()).add(r.line)
        for path, lines in by_path.items():  # one walk per file
            parsed = self._tree(path)
            seen: set[int] = set()
            if parsed is not None:
                tree, parents = parsed
                for n in ast.walk(tree):
                    if isinstance(n, ast.Attribute) and n.attr == name and getattr(n, "lineno", 0) in lines \
                            and isinstance(n.ctx, ast.Load):
                        seen.add(n.lineno)
                        ok = inspection(n, parents)
                        usage.readers.append(f"{os.path.basename(path)}:{n.lineno}" + (" (inspection)" if ok else ""))
                        usage.all_inspection &= ok
            for line in lines - seen:
                usage.readers.append(f"{os.path.basename(path)}:{line}")
                usage.all_inspection = False


def _candidates(ctx, name: str) -> list[ast.AST]:
    """The nodes of the file that :func:`usage_of` looks at for ``name``, in ``ast.walk``'s order:
    attributes named ``name``, string constants equal to it, ``vars(...)`` calls and ``__dict__``
    attributes (an index built once per file: each store fix asks for its attribute)."""
    index = getattr(ctx, "_usage_index", None)
    if index is None:
        index = {}
        for pos, n in enumerate(ast.walk(ctx.tree)):
            if isinstance(n, ast.Attribute):
                index.setdefault(("attr", n.attr), []).append((pos, n))
                if n.attr == "__dict__":
                    index.setdefault("dynamic", []).append((pos, n))
            elif isinstance(n, ast.Constant) and isinstance(n.value, str):
                index.setdefault(("str", n.value), []).append((pos, n))
            elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "vars":
                index.setdefault("dynamic", []).append((pos, n))
        ctx._usage_index = index
    found = dict(index.get(("attr", name), []) + index.get(("str", name), []) + index.get("dynamic", []))
    return [found[pos] for pos in sorted(found)]


def usage_of(ctx, name: str, skip: set[int]) -> Usage:
    """Every read of ``.name`` in this file (outside the nodes in ``skip``) and in the project."""
    usage = Usage()
    parents = ctx.parents
    for n in _candidates(ctx, name):  # the nodes below do nothing for any other node of the file
        if id(n) in skip:
            continue
        if isinstance(n, ast.Attribute) and n.attr == name:
            parent = parents.get(n)
            if isinstance(n.ctx, ast.Store) and not isinstance(parent, ast.AugAssign):
                continue
            if isinstance(n.ctx, ast.Del):
                continue
            usage.readers.append(f"line {n.lineno}" + (" (inspection)" if inspection(n, parents) else ""))
            if not inspection(n, parents):
                usage.all_inspection = False
        elif isinstance(n, ast.Constant) and n.value == name:
            usage.readers.append(f"line {n.lineno} (string)")
            usage.all_inspection = False
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "vars":
            usage.unknown = usage.unknown or f"vars() at line {n.lineno}"
        elif isinstance(n, ast.Attribute) and n.attr == "__dict__" and isinstance(n.ctx, ast.Load):
            parent = parents.get(n)
            if not (isinstance(parent, ast.Subscript) and isinstance(parent.ctx, ast.Store)):
                usage.unknown = usage.unknown or f"__dict__ read at line {n.lineno}"
    if ctx.project is None:
        usage.unknown = usage.unknown or "no project index (the attribute may be read in other files)"
    else:
        ctx.project.add(usage, name)
    return usage
