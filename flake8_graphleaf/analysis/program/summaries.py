"""A file's summary for the whole-program index: small, JSON-able, computed in one walk.

What other files need to know about this one, and nothing that needs another file:

- ``reads``: every attribute name this file reads (``obj.name`` loads, ``getattr(obj, "name")``,
  ``hasattr``, a ``"name"`` string constant), with where: the fixer's "is it read anywhere?";
- ``dynamic``: where attributes are reached by a name computed at run time (``getattr(obj, n)``,
  ``vars(obj)``, ``obj.__dict__``): a reader of every attribute;
- ``layers``: classes (qualified names) whose instances this file chains into a module
  (``model.add_module(name, ContentLoss(t))``, ``nn.Sequential(Conv(), Block())``,
  ``layers.append(AttDot(...))``): their ``forward`` gets the previous layer's output.  A plain
  ``self.transform = Normalize()`` is not chaining: such a part may well get the raw input;
- ``factories``: functions of this file that return a new instance of a class (``att_for(args)``),
  and ``layer_calls``: functions of other files whose result this file makes a layer, so that a
  layer built through a factory counts too;
- ``made``: for each class instantiated here, the grad modes it is instantiated in (a beam search
  built and run only under ``torch.no_grad()`` never records the graph);
- ``chained``: classes whose instances this file puts into an ``nn.Sequential`` right after a torch
  layer that holds parameters (``nn.Sequential(nn.Linear(4, 8), Spike())``, also through layers
  that carry their input's history, ``nn.Conv2d(...), nn.ReLU(), Spike()``, and through a list
  built by ``append``/``+=`` in one block of code).  Their
  ``forward``'s first argument is that layer's output, on the graph whenever grad is on.  Which
  torch layers hold parameters and which carry history is the generated torch fact
  (``facts.torch_facts.nn_module``), not a list of names.  The layer before may be a class of the
  project (``layer.Linear(8, 4)``): it is recorded by name, and the rule asks its definition
  whether it is a subclass of such a torch layer: {class: [[line, layer], ...]}.

Summaries are keyed by the file's content; the index (:mod:`flake8_graphleaf.project.index`)
caches them.
"""

from __future__ import annotations

import ast

from .grad_mode import function_grad_mode, grad_mode_of
from .imports import ImportMap
from .stmtwalk import children, walk
from ..facts.torch_facts import nn_module
from ..facts.torch_names import is_torch_name

VERSION = 6

# Calls that make their arguments parts of a module.
_LAYER_CALLS = frozenset(
    {"add_module", "register_module", "append", "extend", "insert", "Sequential", "ModuleList", "ModuleDict", "setattr"}
)


def summarize(tree: ast.Module, imports: ImportMap) -> dict:
    s = _Summary(tree, imports)
    s.run()
    return {
        "version": VERSION,
        "module": imports.module,
        "reads": s.reads,
        "dynamic": s.dynamic,
        "layers": sorted(s.layers),
        "factories": s.factories,
        "layer_calls": sorted(s.layer_calls),
        "made": {k: sorted(v) for k, v in s.made.items()},
        "chained": s.chained,
    }


class _Summary:
    def __init__(self, tree: ast.Module, imports: ImportMap):
        self.tree = tree
        self.imports = imports
        self.module = imports.module or "__main__"
        self.local_classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
        self.reads: dict[str, list] = {}
        self.dynamic: list = []
        self.layers: set[str] = set()
        self.factories: dict[str, list[str]] = {}
        self.layer_calls: set[str] = set()
        self.made: dict[str, set[bool]] = {}
        self.chained: dict[str, list] = {}
        # the statement list each call statement (``layers.append(...)``) and assignment is in
        self.block_of: dict[int, int] = {}
        for node in walk(tree):
            for field in ("body", "orelse", "finalbody", "handlers"):
                stmts = getattr(node, field, None)
                if isinstance(stmts, list):
                    for stmt in stmts:
                        if isinstance(stmt, (ast.Expr, ast.Assign, ast.AugAssign)):
                            self.block_of[id(stmt.value)] = id(stmts)

    def class_qual(self, func: ast.AST) -> str | None:
        """The class a call instantiates (local or imported), or None."""
        if isinstance(func, ast.Name) and func.id in self.local_classes:
            return f"{self.module}.{func.id}"
        q = self.imports.qualname(func)
        if q and q.rsplit(".", 1)[-1][:1].isupper():
            return q
        return None

    def made_by(self, func: ast.AST) -> list[str]:
        """The classes a call gives a new instance of: a class, or a factory of this file."""
        q = self.class_qual(func)
        if q:
            return [q]
        if isinstance(func, ast.Name):
            return self.factories.get(func.id, [])
        return []

    def run(self) -> None:
        # factories first (top-level functions returning a new instance), so uses can see them
        for _ in range(2):  # a factory that calls a factory (att_for -> initial_att)
            for node in self.tree.body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    made = _returned_instances(node, self.made_by)
                    if made:
                        self.factories[node.name] = made
        self.visit_body(self.tree.body, None, None, True, {})

    def visit_body(self, body, cls, fn, grad, bound) -> None:
        for stmt in body:
            self.visit(stmt, cls, fn, grad, bound)

    def visit(self, node: ast.AST, cls: str | None, fn: str | None, grad: bool, bound: dict) -> None:
        if isinstance(node, ast.ClassDef):
            for d in node.decorator_list + node.bases:
                self.visit(d, cls, fn, grad, bound)
            self.visit_body(node.body, node.name, fn, grad, {})
            return
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for d in node.decorator_list:
                self.visit(d, cls, fn, grad, bound)
            inner = function_grad_mode(node, self.imports) if grad else grad
            self.visit_body(node.body, cls, node.name, inner, {})
            return
        if isinstance(node, (ast.With, ast.AsyncWith)):
            inner = grad
            for item in node.items:
                self.visit(item.context_expr, cls, fn, grad, bound)
                inner = grad_mode_of(item.context_expr, self.imports, inner)
            self.visit_body(node.body, cls, fn, inner, bound)
            return
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            self.assignment(node, cls, bound)
        elif isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add) and isinstance(node.target, ast.Name):
            key = ("list", node.target.id)  # layers += [nn.Linear(4, 8), Spike()]
            if key in bound:
                items = node.value.elts if isinstance(node.value, (ast.List, ast.Tuple)) else [None]
                bound[key] = bound[key] + [(e, self.block_of.get(id(node.value))) for e in items]
        elif isinstance(node, ast.Attribute):
            if isinstance(node.ctx, ast.Load):
                self.read(node.attr, node, cls, fn, "attr")
                if node.attr == "__dict__":
                    self.dynamic.append([node.lineno, "__dict__"])
        elif isinstance(node, ast.Constant):
            if isinstance(node.value, str) and node.value.isidentifier():
                self.read(node.value, node, cls, fn, "string")
        elif isinstance(node, ast.Call):
            self.call(node, cls, fn, grad, bound)
            if _is_getattr(node):  # its name constant is a read already, not a string too
                for child in [node.func, node.args[0], *node.args[2:], *node.keywords]:
                    self.visit(child, cls, fn, grad, bound)
                return
        for child in children(node):
            self.visit(child, cls, fn, grad, bound)

    def read(self, name: str, node: ast.AST, cls, fn, how: str) -> None:
        self.reads.setdefault(name, []).append([node.lineno, node.col_offset, cls, fn, how])

    def assignment(self, node, cls, bound: dict) -> None:
        value = node.value
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if isinstance(value, ast.List):  # layers = [nn.Linear(4, 8), Spike()]
            for t in targets:
                if isinstance(t, ast.Name):
                    bound[("list", t.id)] = [(e, self.block_of.get(id(value))) for e in value.elts]
        if isinstance(value, ast.Call):
            made = self.made_by(value.func)
            if made and made[0] in _CONTAINERS:
                # self.convs = nn.ModuleList([GCNConv(...) for ...]): it holds what it lists
                before = set(self.layers)
                for arg in list(value.args) + [k.value for k in value.keywords]:
                    self.layer_argument(arg, bound)
                made = sorted(self.layers - before) or made
            if made:
                for t in targets:
                    if isinstance(t, ast.Name):
                        bound[t.id] = made

    def call(self, node: ast.Call, cls, fn, grad: bool, bound: dict) -> None:
        f = node.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
        if isinstance(f, ast.Name) and name in ("getattr", "hasattr") and len(node.args) >= 2:
            key = node.args[1]
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                self.read(key.value, node, cls, fn, "getattr")
            else:
                self.dynamic.append([node.lineno, name])
        elif isinstance(f, ast.Name) and name == "vars" and node.args:
            self.dynamic.append([node.lineno, "vars"])
        qual = self.class_qual(f)
        if qual:
            self.made.setdefault(qual, set()).add(grad)
        if name in _LAYER_CALLS:
            for arg in list(node.args) + [k.value for k in node.keywords]:
                self.layer_argument(arg, bound)
        if name in ("append", "extend") and isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and node.args:
            items = node.args[0].elts if name == "extend" and isinstance(node.args[0], (ast.List, ast.Tuple)) else (
                [node.args[0]] if name == "append" else [None])
            key = ("list", f.value.id)
            if key in bound:
                bound[key] = bound[key] + [(e, self.block_of.get(id(node))) for e in items]
        if qual in _SEQUENTIALS:
            self.sequential(node, bound)

    def sequential(self, node: ast.Call, bound: dict) -> None:
        """``nn.Sequential(a, b, c)``: each element of a class of the project that comes right after
        a torch layer holding parameters (through layers that carry history) is chained after it."""
        elements: list[tuple] = []
        args = list(node.args)
        if len(args) == 1 and isinstance(args[0], ast.Call) and self.imports.qualname(args[0].func) in (
                "collections.OrderedDict", "typing.OrderedDict") and args[0].args and isinstance(args[0].args[0], ast.List):
            args = [e.elts[1] if isinstance(e, ast.Tuple) and len(e.elts) == 2 else None for e in args[0].args[0].elts]
        for arg in args:
            if isinstance(arg, ast.Starred):
                if isinstance(arg.value, (ast.List, ast.Tuple)):
                    elements += [(e, None) for e in arg.value.elts]
                elif isinstance(arg.value, ast.Name) and ("list", arg.value.id) in bound:
                    elements += bound[("list", arg.value.id)]
                else:
                    elements.append((None, None))  # elements not known
            else:
                elements.append((arg, None))
        for i, (element, block) in enumerate(elements):
            if not isinstance(element, ast.Call):
                continue
            made = [q for q in self.made_by(element.func) if nn_module(q) is None and not is_torch_name(q)]
            if not made:
                continue
            learnable = None
            for before, before_block in reversed(elements[:i]):
                if before_block != block or not isinstance(before, ast.Call):
                    break  # appended in another block (under an if, before a loop): not always the one before
                q = self.imports.qualname(before.func)
                fact = nn_module(q)
                if fact is None:
                    # a class of the project (layer.Linear): whether it is a torch layer with
                    # parameters is asked of its definition, where the project is known
                    mine = [m for m in self.made_by(before.func) if not is_torch_name(m)]
                    learnable = mine[0] if len(mine) == 1 else None
                    break
                if fact.get("params") and fact.get("graph"):
                    learnable = "torch.nn." + q.rsplit(".", 1)[-1]
                    break
                if not fact.get("carries"):
                    break
            if learnable is not None:
                for q in made:
                    if len(self.chained.setdefault(q, [])) < 8:
                        self.chained[q].append([element.lineno, learnable])

    def layer_argument(self, arg: ast.AST, bound: dict) -> None:
        if isinstance(arg, ast.Call):
            made = self.made_by(arg.func)
            self.layers.update(made)
            q = None if made else self.imports.qualname(arg.func)
            if q and not is_torch_name(q):
                self.layer_calls.add(q)  # layers.append(att_for(args)): a factory of another file
        elif isinstance(arg, ast.Name) and arg.id in bound:
            self.layers.update(bound[arg.id])
        elif isinstance(arg, (ast.List, ast.Tuple)):
            for e in arg.elts:
                self.layer_argument(e, bound)
        elif isinstance(arg, (ast.ListComp, ast.GeneratorExp)):
            self.layer_argument(arg.elt, bound)
        elif isinstance(arg, ast.Starred):
            self.layer_argument(arg.value, bound)


_SEQUENTIALS = frozenset({"torch.nn.Sequential", "torch.nn.modules.container.Sequential"})
_CONTAINERS = frozenset({"torch.nn.ModuleList", "torch.nn.Sequential", "torch.nn.ModuleDict",
                         "torch.nn.modules.container.ModuleList", "torch.nn.modules.container.Sequential"})


def _is_getattr(node: ast.Call) -> bool:
    f = node.func
    return isinstance(f, ast.Name) and f.id in ("getattr", "hasattr") and len(node.args) >= 2 and (
        isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
    )


def _is_self_attr(target: ast.AST) -> bool:
    return isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self"


def _returned_instances(func: ast.AST, made_by, complete: bool = False) -> list[str]:
    """The classes a factory function returns new instances of: ``return C(...)``, or
    ``return x`` where ``x = C(...)`` in the function (every branch counts)."""
    bound: dict[str, list[str]] = {}
    aliases: dict[str, list[ast.AST]] = {}  # cls = A if use_sde else B; return cls(...)
    returns: list[ast.AST] = []
    stack = list(func.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            made = made_by(node.value.func)
            for t in node.targets:
                if isinstance(t, ast.Name) and made:
                    bound.setdefault(t.id, []).extend(made)
        elif isinstance(node, ast.Assign) and isinstance(node.value, (ast.Name, ast.Attribute, ast.IfExp)):
            options = [node.value.body, node.value.orelse] if isinstance(node.value, ast.IfExp) else [node.value]
            for t in node.targets:
                if isinstance(t, ast.Name):
                    aliases.setdefault(t.id, []).extend(options)
        if isinstance(node, ast.Return) and node.value is not None:
            returns.append(node.value)
        if isinstance(node, ast.stmt):
            stack.extend(children(node))
    out: list[str] = []
    for value in returns:
        found: list[str] = []
        if isinstance(value, ast.Call):
            found = made_by(value.func)
            if isinstance(value.func, ast.Name) and value.func.id in aliases:
                options = [made_by(option) for option in aliases[value.func.id]]
                if complete and not all(options):
                    return []  # cls = kernel.prediction_strategy or Default: not all known
                found = found + [q for o in options for q in o]
        elif isinstance(value, ast.Name):
            found = bound.get(value.id, [])
        if complete and not found and not (isinstance(value, ast.Constant) and value.value is None):
            return []  # a return the analysis cannot name: the factory's classes are not all known
        out += found
    return sorted(set(out))


def factories_of(tree: ast.Module, imports: ImportMap) -> dict[str, list[str]]:
    """The top-level functions of a file that return only new objects of classes (local or
    imported): name -> qualified class names.  A function with a return the analysis cannot name
    is not listed (what it returns is not known)."""
    s = _Summary(tree, imports)
    for _ in range(2):
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                made = _returned_instances(node, s.made_by, complete=True)
                if made:
                    s.factories[node.name] = made
    return s.factories


def current_summary(imports) -> dict:
    """The summary of the file being analysed (computed once)."""
    summary = getattr(imports, "summary", None)
    if summary is None:
        summary = summarize(imports.current.tree, imports)
        imports.summary = summary
    return summary


def is_layer(imports, class_name: str) -> bool:
    """Are instances of this file's class ``class_name`` made parts of other modules (here or,
    with an index, anywhere in the project)?"""
    qual = f"{imports.module or '__main__'}.{class_name}"
    if qual in current_summary(imports)["layers"]:
        return True
    index = getattr(imports.project, "index", None)
    return index is not None and index.is_layer(qual)


def made_only_without_grad(imports, class_name: str) -> bool:
    """Is every instantiation of this class, in this file and the project, under no_grad?"""
    qual = f"{imports.module or '__main__'}.{class_name}"
    modes = set(current_summary(imports)["made"].get(qual, ()))
    if True in modes:
        return False  # made with grad on in this file: the project's other files change nothing
    index = getattr(imports.project, "index", None)
    if index is not None:
        modes |= index.made_in(qual)
    return bool(modes) and True not in modes
