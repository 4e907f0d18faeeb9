"""What every fix builder works from: the file's tree, text and classes, and helpers to find the
statements, names and reads a fix has to respect."""

from __future__ import annotations

import ast
import builtins
import keyword

from ..analysis.findings import Edit, Finding
from ..analysis.program.imports import ImportMap
from ..analysis.program.stmtwalk import parent_map
from ..analysis.program.textpos import Text

_SIMPLE = (ast.Name, ast.Attribute, ast.Call, ast.Subscript)
DISPLAYS = (ast.List, ast.Tuple, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp, ast.GeneratorExp, ast.Starred)


class Context:
    def __init__(self, tree, text: Text, classes, imports: ImportMap):
        self.tree = tree
        self.text = text
        self.classes = classes
        self.imports = imports
        self._parents: dict | None = None
        self.project = None  # usage.ProjectReads, or None: any attribute may be read elsewhere
        self._reads: dict | None = None
        self.shapes: dict[str, str | None] = {}  # shapes.known_shape's answers (one per attribute name)
        self._simple_at: dict[int, list[ast.stmt]] | None = None
        self._usage_index: dict | None = None  # usage._candidates' index of the file's nodes

    def simple_statements_at(self, line: int) -> list[ast.stmt]:
        """The assignments and expression statements whose lines include ``line``, in
        ``ast.walk``'s order (an index built once per file: each store fix asks for its lines)."""
        if self._simple_at is None:
            at: dict[int, list[ast.stmt]] = {}
            for stmt in ast.walk(self.tree):
                if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.Expr)):
                    for n in range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1):
                        at.setdefault(n, []).append(stmt)
            self._simple_at = at
        return self._simple_at.get(line, [])

    def reads_of(self, attr: str) -> list[ast.AST]:
        """Every node of the file that reads ``.attr`` or names it in a string (an index
        built once per file, so that each fix's question costs the size of its method)."""
        if self._reads is None:
            reads: dict[str, list[ast.AST]] = {}
            parents = self.parents
            for n in ast.walk(self.tree):
                if isinstance(n, ast.Attribute):
                    stored = isinstance(n.ctx, ast.Store) and not isinstance(parents.get(n), ast.AugAssign)
                    if not stored:
                        reads.setdefault(n.attr, []).append(n)
                elif isinstance(n, ast.Constant) and isinstance(n.value, str):
                    reads.setdefault(n.value, []).append(n)
            self._reads = reads
        return self._reads.get(attr, [])

    @property
    def parents(self) -> dict:
        if self._parents is None:
            self._parents = parent_map(self.tree)
        return self._parents

    def method(self, f: Finding) -> ast.FunctionDef | None:
        info = self.classes.get(f.class_name or "")
        name = f.data.get("method")
        if not name:
            return None
        # a module-level function storing on the object it is given first (a training step's
        # model.last_out = model(x)): that parameter plays the part of self
        body = info.node.body if info is not None else self.tree.body
        for stmt in body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == name:
                if stmt.lineno <= f.line <= stmt.end_lineno:
                    return stmt
        return None

    def edit(self, node: ast.AST, content: str) -> Edit:
        (l1, c1), (l2, c2) = self.text.start(node), self.text.end(node)
        return Edit(l1, c1, l2, c2, content)

    def insert(self, line: int, col: int, content: str) -> Edit:
        return Edit(line, col, line, col, content)


def at(root: ast.AST, line: int, col: int, kinds) -> ast.AST | None:
    for n in ast.walk(root):
        if isinstance(n, kinds) and getattr(n, "lineno", None) == line and n.col_offset == col:
            return n
    return None


def self_attr_nodes(method: ast.FunctionDef, self_name: str, attr: str) -> list[ast.Attribute]:
    nodes = [
        n for n in ast.walk(method)
        if isinstance(n, ast.Attribute) and n.attr == attr and isinstance(n.value, ast.Name) and n.value.id == self_name
    ]
    return sorted(nodes, key=lambda n: (n.lineno, n.col_offset))


def self_attribute(f: Finding, ctx: "Context"):
    """(method, self name, attribute) for a finding on a plain ``self.<attr>``, else None."""
    method = ctx.method(f)
    if method is None:
        return None
    self_name = method_self_name(method)
    attr = (f.attribute or "").removeprefix(self_name + ".")
    if f.attribute != f"{self_name}.{attr}" or not attr.isidentifier():
        return None
    return method, self_name, attr


def method_self_name(method) -> str:
    params = method.args.posonlyargs + method.args.args
    return params[0].arg if params else "self"


def read_elsewhere(ctx: Context, method, attr: str) -> bool:
    """Is ``.attr`` read, or named in a string, anywhere in the file outside ``method``?"""
    readers = ctx.reads_of(attr)
    if not readers:
        return False
    inside = set(map(id, ast.walk(method)))
    return any(id(n) not in inside for n in readers)


def wrap(ctx: Context, node: ast.AST) -> str:
    seg = ctx.text.segment(node)
    return seg if isinstance(node, _SIMPLE) else f"({seg})"


def fresh_name(attr: str, method, tree) -> str:
    base = attr.lstrip("_") or "value"
    if not base.isidentifier():
        base = "value"
    # Names the method uses or binds, and names bound at module level (globals it may read).
    used = {n.id for n in ast.walk(method) if isinstance(n, ast.Name)}
    used |= {a.arg for a in ast.walk(method) if isinstance(a, ast.arg)}
    used |= {n.name for n in ast.walk(method) if isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))}
    module = module_names(tree)  # looked up, not copied: it holds every class of the file
    name = base
    while name in used or name in module or keyword.iskeyword(name) or hasattr(builtins, name):
        name += "_"
    return name


def module_names(tree) -> frozenset[str]:
    """Names bound at module level, and every name an import binds anywhere in the file;
    computed once per tree (kept on it) however many fixes ask."""
    cached = getattr(tree, "_graphleaf_module_names", None)
    if cached is not None:
        return cached
    used: set[str] = set()
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
            used.add(stmt.name)
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            used |= {(a.asname or a.name).split(".")[0] for a in stmt.names}
        else:
            used |= {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)}
    used |= {(a.asname or a.name).split(".")[0] for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
    result = frozenset(used)
    tree._graphleaf_module_names = result
    return result


def top_statement(method, node, parents) -> ast.stmt | None:
    """The statement of ``method.body`` (top level) that contains ``node``."""
    cur = node
    while cur is not None and parents.get(cur) is not method:
        cur = parents.get(cur)
    return cur if cur is not None and cur in method.body else None


_TERMINAL = (ast.Return, ast.Raise)


def _find(owner: ast.AST, target: ast.stmt, path: list) -> bool:
    """Put the blocks from ``owner`` down to ``target`` on ``path`` (innermost first)."""
    for field in ("body", "orelse", "finalbody", "handlers"):
        block = getattr(owner, field, None)
        if not isinstance(block, list):
            continue
        for i, stmt in enumerate(block):
            if stmt is target or (
                getattr(stmt, "lineno", 0) <= target.lineno <= getattr(stmt, "end_lineno", 0) and _find(stmt, target, path)
            ):
                path.append((owner, block, i))
                return True
    for case in getattr(owner, "cases", None) or []:
        if _find(case, target, path):
            return True
    return False


def reachable_after(method, target: ast.stmt) -> list[ast.stmt]:
    """Statements that may run after ``target`` in one call of ``method``: the rest of
    its block, then of each enclosing block (not the other branch of an ``if``), and
    the whole body of each enclosing loop (its next iteration).  Climbing stops at a
    block that returns or raises after ``target``."""
    path: list[tuple[ast.AST, list, int]] = []
    if not _find(method, target, path):
        return []
    out: list[ast.stmt] = []
    for owner, block, i in path:  # innermost first
        rest = block[i + 1:]
        out += rest
        if isinstance(owner, (ast.For, ast.AsyncFor, ast.While)):
            out += owner.body
        if any(isinstance(s, _TERMINAL) for s in rest) or isinstance(block[i], _TERMINAL):
            break
    return out


def statement(node, parents) -> ast.stmt | None:
    cur = node
    while cur is not None and not isinstance(cur, ast.stmt):
        cur = parents.get(cur)
    return cur


def alone_on_lines(ctx: Context, stmt: ast.stmt) -> bool:
    text = ctx.text
    first = text.line(stmt.lineno)
    (_, c1), (_, c2) = text.start(stmt), text.end(stmt)
    if first[:c1].strip():
        return False
    rest = text.line(stmt.end_lineno)[c2:].strip()
    return rest == "" or rest.startswith("#")
