"""GLF001, GLF002 from functions of the program, not only from ``forward``: a training loop, a
step function or a callback that is given the model and keeps a graph tensor on it.

    def train_step(model: nn.Module, batch):
        out = model(batch)
        model.last_out = out            # GLF001: deepcopy(model) (an EMA, a best-model copy) raises

A parameter is taken for a module only on evidence: its annotation names a module class
(``nn.Module``, a torch layer, a module class of the program), or every call of the function
the project shows passes one (``train_step(Net(), b)``, ``net = Net(); train_step(net, b)``).
The body runs in its own grad mode (``@torch.no_grad()``, ``with torch.no_grad():``); what is
called on the module gives a graph tensor, and only a store on the module of such a value is
reported (the module is what users copy).
"""

from __future__ import annotations

import ast
import re
from bisect import bisect_left

from .. import messages, witness
from ..findings import Finding
from ..evaluator.flow import Store, Walker
from ..program.grad_mode import function_grad_mode
from ..evaluator.graph_tensors import GRAPH, MODULE, NOTHING, Evaluator, Value, looks_like_parameter
from ..program.imports import ImportMap
from ..program.stmtwalk import lines_matching, statements, tree_statements, walk, walk_lines
from . import drop_overwritten, finding

RULES: dict[str, str] = {}  # it reports GLF001 / GLF002 (forward_stores.RULES)

EXAMPLES = [
    (
        """
import torch.nn as nn
def train_step(model: nn.Module, x):
    out = model(x)
    model.last_out = out
    return out.sum()
""",
        ["GLF001"],
    ),
    (
        """
import torch.nn as nn
def train_step(model: nn.Module, x):
    out = model(x)
    model.weight = model.weight.to("cpu")  # a Parameter's name: nn.Module refuses a plain tensor
    model.last_out = out.detach()
    model.history.append(out.item())
    return out.sum()
""",
        [],
    ),
    (
        # a parameter named like a model, but nothing shows it is one: no report
        """
def train_step(model, x):
    out = model(x)
    model.last_out = out
    return out
""",
        [],
    ),
]


def _stores_on_parameters(func) -> set[str]:
    """The parameters the body stores attributes on (``model.x = ...``, ``model.xs.append(...)``)."""
    params = {a.arg for a in func.args.posonlyargs + func.args.args + func.args.kwonlyargs}
    out = set()
    for node in statements(func):
        if isinstance(node, ast.Expr):
            node = node.value
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AnnAssign, ast.AugAssign)) else []
        for t in targets:
            while isinstance(t, (ast.Attribute, ast.Subscript)):
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id in params:
                    out.add(t.value.id)
                t = t.value
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            recv = node.func.value
            if isinstance(recv, ast.Attribute) and isinstance(recv.value, ast.Name) and recv.value.id in params:
                out.add(recv.value.id)
    return out


def _annotated_module(ann: ast.AST | None, imports: ImportMap, module_classes: set[str]) -> bool:
    from ..program.project_view import MODULE_CLASS, class_kind

    if ann is None:
        return False
    if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
        try:
            ann = ast.parse(ann.value, mode="eval").body
        except SyntaxError:
            return False
    if isinstance(ann, ast.Name) and ann.id in module_classes:
        return True
    qual = imports.qualname(ann)
    return qual is not None and class_kind(getattr(imports, "project", None), qual) == MODULE_CLASS


def _passed_modules(func, imports: ImportMap, module_classes: set[str], tree: ast.Module,
                    source: str | None = None) -> set[str]:
    """Parameters every call of ``func`` in this file passes a module to (at least one call)."""
    from ..program.project_view import MODULE_CLASS, class_kind

    params = [a.arg for a in func.args.posonlyargs + func.args.args]
    seen: dict[str, list[bool]] = {}
    for scope, calls in _calls_of(tree, func.name, source).items():
        bound: dict[str, ast.AST] = {}
        for node in statements(tree if scope is None else scope):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                bound[node.targets[0].id] = node.value
        for node in calls:
            given = {p: a for p, a in zip(params, node.args)}
            given.update({k.arg: k.value for k in node.keywords if k.arg})
            for p, a in given.items():
                if isinstance(a, ast.Name):
                    a = bound.get(a.id, a)
                made = a.func if isinstance(a, ast.Call) else None
                is_module = False
                if made is not None:
                    if isinstance(made, ast.Name) and made.id in module_classes:
                        is_module = True
                    else:
                        q = imports.qualname(made)
                        is_module = q is not None and class_kind(getattr(imports, "project", None), q) == MODULE_CLASS
                seen.setdefault(p, []).append(is_module)
    return {p for p, flags in seen.items() if flags and all(flags)}


def _scope_bodies(tree: ast.Module) -> list[tuple[ast.AST, list[ast.stmt]]]:
    """The module (as None: its statements outside functions and classes) and every function,
    with the statements of its body: where calls by plain name are looked for (kept on the
    tree, so the module is None here: the tree holding itself would be a reference cycle)."""
    cached = getattr(tree, "_graphleaf_scope_bodies", None)
    if cached is None:
        top = [s for s in tree.body if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
        cached = tree._graphleaf_scope_bodies = [(None, top)] + [
            (s, s.body) for s in tree_statements(tree) if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return cached


def _all_name_calls(tree: ast.Module) -> dict:
    """function name -> {scope (None: the module): [calls of it by plain name]}, for the whole
    file, walked once."""
    cached = getattr(tree, "_graphleaf_name_calls", None)
    if cached is None:
        cached = {}
        for scope, body in _scope_bodies(tree):
            for stmt in body:
                for node in walk(stmt):
                    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                        cached.setdefault(node.func.id, {}).setdefault(scope, []).append(node)
        tree._graphleaf_name_calls = cached
    return cached


_NON_ASCII = re.compile(r"[^\x00-\x7f]")


def _calls_of(tree: ast.Module, name: str, source: str | None = None) -> dict:
    """{scope: [calls of ``name`` by plain name]} in the file (the module's own code: None).

    With the file's text, only the statements whose lines hold the word ``name`` are walked: a
    call's ``Name`` node is a token of the text, on its line.  A non-ASCII identifier is
    NFKC-normalised (its token may be spelled otherwise), so the lines with a non-ASCII
    character are walked too.  Line numbers are counted on ``\n``: text with ``\r`` in it
    (not this tree's line numbering, perhaps) and no text at all walk the whole file.
    """
    if source is None or "\r" in source:
        return _all_name_calls(tree).get(name, {})
    memo = getattr(tree, "_graphleaf_calls_by_name", None)
    if memo is None:
        memo = tree._graphleaf_calls_by_name = {None: set() if source.isascii() else lines_matching(source, _NON_ASCII)}
    if name not in memo:
        lines = sorted(lines_matching(source, re.compile(rf"\b{re.escape(name)}\b"), name) | memo[None])
        found: dict = {}
        for scope, body in _scope_bodies(tree) if lines else ():
            for stmt in body:
                first = min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", ())])
                i = bisect_left(lines, first)
                if i == len(lines) or lines[i] > stmt.end_lineno:
                    continue  # none of its lines holds the word
                for node in walk_lines(stmt, lines)[0]:  # ast.walk's order, less the subtrees without the word
                    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name:
                        found.setdefault(scope, []).append(node)
        memo[name] = found
    return memo[name]


def check(tree: ast.Module, imports: ImportMap, module_classes: set[str], source: str | None = None) -> list[Finding]:
    out: list[Finding] = []
    for func in tree.body:
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        stored_on = _stores_on_parameters(func)
        if not stored_on:
            continue
        args = func.args
        modules = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs
                   if a.arg in stored_on and _annotated_module(a.annotation, imports, module_classes)}
        if stored_on - modules:
            modules |= _passed_modules(func, imports, module_classes, tree, source) & stored_on
        if not modules:
            continue
        ev = Evaluator(imports, None, None, module_classes)
        for a in args.posonlyargs + args.args + args.kwonlyargs:
            ev.env[a.arg] = Value(MODULE, a.arg) if a.arg in modules else NOTHING
        ev.grad = function_grad_mode(func, imports)
        found: list[Finding] = []

        def sink(store: Store, func=func, found=found, modules=modules) -> None:
            if store.root not in modules or store.value.kind != GRAPH or store.kind not in ("attr", "container", "setattr"):
                return
            if store.kind == "attr" and looks_like_parameter(store.attr or "") and store.text == f"{store.root}.{store.attr}":
                return  # module.weight = <a tensor>: nn.Module.__setattr__ refuses it (TypeError), nothing is kept
            target = store.text if store.kind != "setattr" else f"{store.text}.<{ast.unparse(store.name_node)}>"
            code = "GLF002" if store.kind == "container" else "GLF001"
            how = "is given" if code == "GLF002" else "keeps"
            f = finding(
                code, store.node,
                messages.store(messages.holder(target, None), how,
                               store.value.origin or "a computation on the autograd graph",
                               messages.copy_clause(f"copy.deepcopy({store.root})", when="afterwards"),
                               "use a local variable, or store .detach()",
                               by=f"in {func.name}(), on the module it is given"),
                attribute=target, data={"kind": store.kind, "method": func.name, "node": store.node})
            f.witness = witness.make(
                store.value, store.node, store.stmt,
                reached=f"{func.name}(), given the module as '{store.root}'", grad=store.grad,
                kept=witness.KEPT_AFTER_RETURN,
                copied=witness.copied_text(target, container=store.kind == "container").replace(
                    "copy.deepcopy(model)", f"copy.deepcopy({store.root})"))
            found.append(f)

        Walker(ev, sink).run(func.body)
        out += drop_overwritten(found, methods={func.name: func})
    return out
