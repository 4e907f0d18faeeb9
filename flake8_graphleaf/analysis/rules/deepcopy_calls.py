"""GLF201: ``copy.deepcopy`` of a graph tensor (or of a plain container holding one).
GLF202: ``copy.deepcopy(m)`` / ``AveragedModel(m)`` / timm ``ModelEma*(m)`` where the
class of ``m`` (defined in this file, or in another file of the program) has a finding that
makes the copy fail; the message names the file and line of that finding."""

from __future__ import annotations

import ast
import re

from .. import messages, witness
from ..findings import Finding
from ..evaluator.flow import Walker
from ..program.grad_mode import function_grad_mode
from ..evaluator.graph_tensors import ARG, GRAPH, MODULE, NOTHING, Evaluator, Value, looks_like_module_name, short
from ..values import CLASS_PREFIX
from ..program.imports import ImportMap
from ..program.modules import ClassInfo
from ..facts.sinks import COPIER_NAMES, COPIERS
from ..program.stmtwalk import lines_matching, own_nodes, scopes_at, statements, tree_statements
from ..evaluator.scopes import ClassRunner, is_forward_root, self_name
from ..confidence import _lowering, better, inherit, trust
from . import argument_only, finding, on_trust

RULES = {
    "GLF201": "copy.deepcopy of a tensor that is on the autograd graph",
    "GLF202": "copy.deepcopy (or EMA / SWA wrapper) of a model whose class keeps a graph tensor",
}

WORDS = ("deepcopy", "AveragedModel", "ModelEma")
BREAKING = frozenset({"GLF001", "GLF002", "GLF003", "GLF004", "GLF005", "GLF101", "GLF102", "GLF103"})

EXAMPLES = [
    (
        """
import copy, torch.nn as nn
class Estimator:
    def __init__(self, theta):
        self._theta = theta
    def set_model(self, model="mlp"):
        def build_mlp(theta):
            return nn.Sequential(nn.Linear(theta.shape[1], 4), nn.ReLU(), nn.Linear(4, 1))
        self._build_nn = build_mlp if model == "mlp" else model
        if model == "resnet":
            self._build_nn = self.build_resnet
    def build_resnet(self, theta):
        return nn.Linear(theta.shape[1], 1)
    def train(self):
        self._net = self._build_nn(self._theta)
        self._net(self._theta).sum().backward()
        return copy.deepcopy(self._net)
""",
        [],
    ),
    (
        """
import copy
def snapshot(model, x):
    out = model(x)
    return copy.deepcopy(out)
""",
        ["GLF201"],
    ),
    (
        """
import copy, torch
def snapshot(model, x):
    with torch.no_grad():
        out = model(x)
    return copy.deepcopy(out)
""",
        [],
    ),
    (
        """
import copy
import torch
import torch.nn as nn
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 2)
    def forward(self, x):
        self.last = self.lin(x)
        return self.last
model = Net()
model(torch.randn(1, 2)).sum().backward()
ema = copy.deepcopy(model)
""",
        ["GLF001", "GLF202"],
    ),
    (
        # the same copy made before any forward: the run that made the model judges it clean
        # (the store in forward stays a finding of its own)
        """
import copy
import torch.nn as nn
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 2)
    def forward(self, x):
        self.last = self.lin(x)
        return self.last
model = Net()
ema = copy.deepcopy(model)
""",
        ["GLF001"],
    ),
    (
        """
import copy
import torch.nn as nn
class ConditionDropout(nn.Module):
    def forward(self, samples):
        samples = copy.deepcopy(samples)
        return samples
""",
        ["GLF201?"],
    ),
    (
        """
import copy
import torch.nn as nn
class Snapshot(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 2)
    def forward(self, x):
        before = copy.deepcopy(x)
        return self.lin(x) - before
""",
        ["GLF201?"],
    ),
    (
        # parameters handed on unchanged through the program's helpers (parameter groups for an
        # optimizer picked from a table) are still leaves: the copy copies leaves
        """
import copy
import torch
OPTIMIZERS = {"sgd": torch.optim.SGD}
def dispatch(name, params, lr):
    return OPTIMIZERS[name](params, lr=lr)
def build(model, lr):
    groups = [{"params": [p for p in model.parameters()], "lr": lr}]
    return dispatch("sgd", groups, lr)
def train(model: torch.nn.Module):
    state = {"optimizer": build(model, 0.1), "lr": 0.1}
    return copy.deepcopy(state)
""",
        [],
    ),
    (
        # the helper computes with the parameters: its results have a grad_fn
        """
import copy
import torch
def scaled(params, lr):
    return [p * lr for p in params]
def build(model, lr):
    return scaled([p for p in model.parameters()], lr)
def train(model: torch.nn.Module):
    state = {"steps": build(model, 0.1), "lr": 0.1}
    return copy.deepcopy(state)
""",
        ["GLF201", "GLF201"],  # the copy, and the dict the run saw the tensors put in (the copy graph's)
    ),
    (
        # a parameter whose default is a class: calling it builds a module (no forward ran), so its
        # copy is clean; the module a caller passes in is called, and its output is on the graph
        """
import copy
import torch
import torch.nn as nn
class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2)
    def forward(self, x):
        return self.fc(x)
def train(policy_cls=Policy, policy=None):
    pi = policy_cls()
    target = copy.deepcopy(pi)
    out = policy(torch.randn(1, 2))
    return target, copy.deepcopy(out)
""",
        ["GLF201"],
    ),
]


def _copier(node: ast.Call, imports: ImportMap) -> str | None:
    qual = imports.qualname(node.func)
    if qual in COPIERS:
        return COPIERS[qual]
    last = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id if isinstance(node.func, ast.Name) else ""
    if last in COPIER_NAMES:
        return last
    return None


CALL_TEXT = re.compile(r"\b(deepcopy|AveragedModel|ModelEma\w*)\s*\(")
CALL_WORDS = ("deepcopy", "AveragedModel", "ModelEma")  # each match of CALL_TEXT holds one


def check(
    tree: ast.Module, imports: ImportMap, classes: dict[str, ClassInfo], module_classes: set[str],
    findings: list[Finding], source: str | None = None,
) -> list[Finding]:
    # parents: only what the rule asks of it (the class of a method, the scope of a call)
    parents: dict = {}
    targets: dict[int, tuple[ast.Call, str]] = {}
    if source is not None:
        lines = set().union(*(lines_matching(source, CALL_TEXT, w) for w in CALL_WORDS))
        if not lines:
            return []
        scopes = scopes_at(tree, lines)
    else:
        scopes = [tree] + [s for s in tree_statements(tree) if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for s in tree_statements(tree):
        if isinstance(s, ast.ClassDef):
            for item in s.body:
                parents[item] = s
    for scope in scopes:
        for node in own_nodes(scope):
            if isinstance(node, ast.Call) and node.args:
                kind = _copier(node, imports)
                if kind is not None:
                    targets[id(node)] = (node, kind)
                    parents[node] = scope
    if not targets:
        return []
    parents["module"] = tree
    broken = _broken_classes(classes, findings)
    out: list[Finding] = []
    copying: dict[int, ast.AST] = {}
    for node, kind in targets.values():
        scope = _scope(node, parents)
        copying.setdefault(id(scope), scope)
        if broken or getattr(imports, "project", None) is not None:
            out += _glf202(node, kind, scope, parents, classes, broken, imports)
    # GLF201 needs what each argument holds: walk the functions that copy something.
    for scope in copying.values():
        out += _glf201(scope, parents, classes, imports, module_classes, targets)
    return out


def _scope(node, parents):
    return parents.get(node)


def _class_of(func, parents, classes) -> ClassInfo | None:
    p = parents.get(func)
    if isinstance(p, ast.ClassDef):
        return classes.get(p.name)
    return None


def _glf201(scope, parents, classes, imports, module_classes, targets) -> list[Finding]:
    out: list[Finding] = []
    info = _class_of(scope, parents, classes) if not isinstance(scope, ast.Module) else None
    facts = info.facts if info is not None else None
    sname = self_name(scope) if info is not None else None
    ev = Evaluator(imports, facts, sname, module_classes)
    forward = info is not None and info.facts.is_module and is_forward_root(scope.name, info)
    if isinstance(scope, ast.Module):
        body = [s for s in scope.body if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    else:
        body = scope.body
        runner = ClassRunner(info, imports, module_classes) if info is not None else None
        if runner is not None:
            params = runner._root_params(scope, forward)
        else:
            params = {}
            defaults = _defaults(scope.args)
            for a in scope.args.posonlyargs + scope.args.args + scope.args.kwonlyargs:
                if _is_class_ref(defaults.get(a.arg), classes):
                    # def train(actor_critic=core.MLPActorCritic): a class; calling it builds a module
                    params[a.arg] = Value(MODULE, f"{CLASS_PREFIX}{short(defaults[a.arg])}")
                else:
                    params[a.arg] = Value(MODULE, a.arg) if looks_like_module_name(a.arg) else NOTHING
        ev.env.update(params)
        if sname is not None:
            ev.env.pop(sname, None)
        ev.grad = function_grad_mode(scope, imports)
    seen: set[int] = set()
    ev.fed = set()  # the arguments this function feeds to a learnable computation

    def on_call(node, qual, pos, kw, grad):
        if id(node) not in targets or id(node) in seen or qual != "copy.deepcopy" or not pos:
            return
        value = pos[0]
        if value.kind == GRAPH or (value.kind == ARG and grad and forward):
            seen.add(id(node))
            out.append(_witnessed_copy(value, node, scope, grad,
                finding(
                    "GLF201", node,
                    messages.copied_tensor(f"copy.deepcopy({short(node.args[0])})",
                                           value.origin or "a computation on the autograd graph",
                                           "use .detach().clone()", maybe=value.kind != GRAPH),
                    attribute=short(node.args[0]),
                    data={"value_kind": value.kind, "origin": value.origin, "guess": value.guess},
                )
            ))

    ev.on_call = on_call
    Walker(ev, lambda store: None).run(body)
    # deepcopy of an argument nothing here shows to be an activation (a list of conditioning
    # attributes, a batch): the opt-in code, as for stores
    # and one whose value went through a callable the analysis does not know (an optimizer
    # wrapper given the model): the witness has a guess in it
    out = [on_trust(f, f.data["guess"]) if f.data.get("guess") else f for f in out]
    for f in out:
        if f.data["value_kind"] == ARG:
            if f.data["origin"] not in ev.fed:
                argument_only(f)
            else:
                trust(f, "argument-fed", f"{f.data['origin']} is taken to be an activation: the method feeds it "
                                         "into a layer or parameter")
    return out


def _defaults(args: ast.arguments) -> dict[str, ast.AST]:
    """parameter name -> its default expression."""
    positional = args.posonlyargs + args.args
    out = {a.arg: d for a, d in zip(positional[len(positional) - len(args.defaults):], args.defaults)}
    out.update({a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None})
    return out


def _is_class_ref(node: ast.AST | None, classes: dict) -> bool:
    """Is ``node`` a reference to a class (``MLPActorCritic``, ``core.MLPActorCritic``): a class of
    this file, or a CamelCase name, as classes are spelled?"""
    if isinstance(node, ast.Name):
        name = node.id
    elif isinstance(node, ast.Attribute):
        name = node.attr
    else:
        return False
    return name in classes or (name[:1].isupper() and any(c.islower() for c in name) and "_" not in name)


def _witnessed_copy(value, node: ast.Call, scope, grad: bool, f: Finding) -> Finding:
    where = getattr(scope, "name", None)
    f.witness = witness.make(
        value, node, None, reached=f"{where}()" if where else "module-level code", grad=grad,
        kept="it is the value copied", copied="copy.deepcopy is called on it: tensors with a grad_fn refuse to be copied")
    return f


def _broken_classes(classes: dict[str, ClassInfo], findings: list[Finding]) -> dict[str, tuple[str, Finding, list]]:
    """class name -> (how, the finding that makes deepcopy fail, every store that does: (the
    attributes from an object of the class to it, the finding) each), through submodules and bases."""
    broken: dict[str, tuple[str, Finding]] = {}
    for f in sorted(findings, key=lambda f: f.sort_key):
        if f.code in BREAKING and f.class_name and f.class_name in classes:
            seen = broken.get(f.class_name)
            if seen is None or better(f, seen[1]):  # the surest store: the copy's level is its
                broken[f.class_name] = (f"'{f.class_name}'", f)
    changed = True
    while changed:
        changed = False
        for name, info in classes.items():
            if name in broken:
                continue
            for b in info.local_bases:
                if b in broken:
                    broken[name] = (f"'{name}' (subclass of {broken[b][0]})", broken[b][1])
                    changed = True
                    break
            else:
                for attr, (cls, _line) in info.facts.submodule_classes.items():
                    if cls in broken and cls != name:
                        broken[name] = (f"'{name}' (its self.{attr} is {broken[cls][0]})", broken[cls][1])
                        changed = True
                        break
    own: dict[str, list[Finding]] = {}
    for f in sorted(findings, key=lambda f: f.sort_key):
        if f.code in BREAKING and f.class_name and f.class_name in classes:
            own.setdefault(f.class_name, []).append(f)
    return {name: (how, cause, _stores_of(name, classes, own)) for name, (how, cause) in broken.items()}


def _stores_of(name: str, classes: dict[str, ClassInfo], own: dict[str, list[Finding]]) -> list:
    """Every store that breaks a copy of an object of class ``name``: its own, its bases', its
    submodules' (``("block", "attn", "last_attn")`` from the object); the surest first, then in
    line order."""
    out: list[tuple[tuple, Finding]] = []
    _walk_stores(name, (), frozenset(), classes, own, out, set())
    # the surest first, then in line order
    out.sort(key=lambda sf: (_lowering(sf[1].trust), sf[1].line, sf[1].col))
    return out


def _glf202(node: ast.Call, kind: str, scope, parents, classes, broken, imports) -> list[Finding]:
    arg = node.args[0]
    cls = _class_of_value(arg, node, scope, parents, classes)
    where, files = "", None
    if cls is None:
        remote = _remote_broken(imports, _remote_class(arg, node, scope, parents, imports))
        if remote is None:
            return []
        cls, (how, cause, stores), where, files = remote
    elif cls not in broken or "__deepcopy__" in classes[cls].facts.methods:
        return []  # a class with its own __deepcopy__ decides what a copy gets
    else:
        how, cause, stores = broken[cls]
    at = f"{where}:{cause.line}" if where else f"line {cause.line}"
    copied = short(arg)
    listed = [messages.Store(messages.attribute_path(copied, steps), f.code, f.line, where or None,
                             f"{f.class_name}.{f.data['method']}" if f.data.get("method") and f.class_name else None)
              for steps, f in stores]
    if not where:  # the stores of this file name this copy
        for (steps, f), store in zip(stores, listed):
            messages.name_copy(f, f"{kind}({copied})", node.lineno, reach=store.path)
    reached = next((store.path for (_, f), store in zip(stores, listed) if f is cause), None)
    how = f"{messages.copied_object(copied, cls)}" + (f" and with it {reached}" if reached else "")
    return [inherit(_witnessed_site(node, kind, how, cause, files, at,
        finding(
            "GLF202", node,
            messages.copy_site(f"{kind}({copied})", copied, cls, listed),
            class_name=cls,
            data={"cause_line": cause.line, "cause_code": cause.code, "cause_path": where or None},
        )
    ), cause)]


def _remote_class(arg, at: ast.AST, scope, parents, imports) -> str | None:
    """The qualified name of the class of the program, defined in another file, that ``arg``
    holds: ``Net(...)`` or a name bound to ``Net(...)`` before the copy, ``Net`` imported."""
    call = arg if isinstance(arg, ast.Call) else _bound_call(arg, at, scope, parents) if isinstance(arg, ast.Name) else None
    return imports.qualname(call.func) if call is not None else None


def _bound_call(name: ast.Name, at: ast.AST, scope, parents, accept=lambda call: True) -> ast.Call | None:
    """The call ``name`` was last bound to before ``at`` (``model = Net(...)``), in the scope or
    else the module, among the calls ``accept`` takes."""
    for body in (scope, _module(scope, parents)):
        if body is None:
            continue
        best = None
        for n in _call_assignments(body).get(name.id, ()):
            if n.lineno <= at.lineno and accept(n.value):
                if best is None or n.lineno > best.lineno:
                    best = n
        if best is not None:
            return best.value
    return None


def _call_assignments(body: ast.AST) -> dict[str, list[ast.Assign]]:
    """name -> the ``name = <call>`` statements under ``body``, in statement order (kept on the node:
    every copy site of a file asks the module)."""
    cached = getattr(body, "_graphleaf_call_assigns", None)
    if cached is None:
        cached = {}
        for n in statements(body):
            if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call):
                for target in dict.fromkeys(t.id for t in n.targets if isinstance(t, ast.Name)):
                    cached.setdefault(target, []).append(n)
        body._graphleaf_call_assigns = cached
    return cached


def _remote_broken(imports, qual: str | None):
    """(class name, (how, the finding that breaks the copy), its file) for a class of another
    file of the program whose own analysis finds what makes a copy fail, else None."""
    from ..program.helper_objects import file_classes
    from ..program.project_view import resolve_from

    findings_of = getattr(imports, "findings_of", None)
    project = getattr(imports, "project", None)
    if not qual or findings_of is None or project is None:
        return None
    name = qual.rpartition(".")[2]
    found = resolve_from(imports, qual)
    if found is None or not isinstance(found.node, ast.ClassDef):
        return None
    # the file as it is now (resolve remembers definitions; a fix run may have rewritten it)
    fresh = project.parsed(found.module.name)
    found_module = fresh if fresh is not None and fresh.path == found.module.path else found.module
    analysis = findings_of(found_module, project, getattr(imports, "module_bases", frozenset()))
    classes = analysis.classes or file_classes(found_module)[0]
    if name not in classes or "__deepcopy__" in classes[name].facts.methods:
        return None
    broken = _broken_classes(classes, analysis.findings)
    if name not in broken:
        return None
    here = getattr(imports.current, "path", "") or ""
    return name, broken[name], witness.display_path(found_module.path, here), (found_module.path, here)


def _walk_stores(cls: str, steps: tuple, visiting: frozenset, classes: dict, own: dict, out: list, seen: set) -> None:
    """Put the stores of ``cls``, its bases and its submodules into ``out`` (a module function, not a
    recursive closure: no reference cycle)."""
    if cls in visiting or cls not in classes:
        return
    visiting = visiting | {cls}
    for f in own.get(cls, ()):
        if id(f) not in seen:
            seen.add(id(f))
            path = messages.self_relative(f.attribute or "")
            if f.code == "GLF002" and path[-1:] != ["[]"]:
                path.append("[]")  # an item of the container: model.encoder.features[...]
            out.append((steps + tuple(path), f))
    info = classes[cls]
    for base in info.local_bases:
        _walk_stores(base, steps, visiting, classes, own, out, seen)
    for attr, (sub, _line) in info.facts.submodule_classes.items():
        _walk_stores(sub, steps + (attr,), visiting, classes, own, out, seen)


def _witnessed_site(node: ast.Call, kind: str, how: str, cause: Finding, files: tuple | None, at: str,
                    f: Finding) -> Finding:
    """``files``: (the class's file, this one) when the class is another file's."""
    base = dict(cause.witness) if cause.witness else witness.simple(
        cause.message, "computation", node, "", "", "")
    site = witness.simple("", "", node, "", "", "")["steps"][0]
    if files is not None:  # the chain is in the class's own file; the copy here
        base = witness.rebase(base, *files)
    steps = [list(s) for s in base.get("steps", [])]
    if base.get("step_paths"):
        base["step_paths"] = [*base["step_paths"], None]
    f.witness = {**base, "steps": steps + [site],
                 "copied": f"{kind}({short(node.args[0])}) copies {how}; {cause.code} at {at}: "
                           f"{base.get('copied', '')}".rstrip(": ")}
    return f


def _class_of_value(arg, at: ast.AST, scope, parents, classes) -> str | None:
    if isinstance(arg, ast.Call) and isinstance(arg.func, ast.Name) and arg.func.id in classes:
        return arg.func.id
    if isinstance(arg, ast.Name):
        if not isinstance(scope, ast.Module) and self_name(scope) == arg.id:
            info = _class_of(scope, parents, classes)
            return info.node.name if info is not None else None
        call = _bound_call(arg, at, scope, parents,
                           accept=lambda c: isinstance(c.func, ast.Name) and c.func.id in classes)
        return call.func.id if call is not None else None
    if isinstance(arg, ast.Attribute) and isinstance(arg.value, ast.Name) and not isinstance(scope, ast.Module):
        if self_name(scope) == arg.value.id:
            info = _class_of(scope, parents, classes)
            if info is not None and arg.attr in info.facts.submodule_classes:
                return info.facts.submodule_classes[arg.attr][0]
    return None


def _module(node, parents):
    return parents.get("module")
