"""GLF003: a forward hook that stores a graph tensor where ``copy.deepcopy`` reaches it.

``deepcopy(model)`` copies the hook dicts of every submodule.  A plain function or a
lambda is copied as is (its closure is not walked), but a bound method drags in its
``__self__`` and a callable object is copied whole.  So a hook's store is a finding
when it lands on the hooked module, on the hook's own object (bound method or
callable object), or on a module whose method defined the closure.  A bound method
``self.forward`` that a base class registers is the subclass's override when the
subclass has one (:func:`check_inherited`: the base may be in another file).  Backward hooks
get gradients, which are leaves: they are not checked.
"""

from __future__ import annotations

import ast
import os

from .. import messages, witness
from ..findings import Finding
from ..confidence import trust
from ..program.grad_mode import grad_mode_of
from ..evaluator.flow import Store, Walker
from ..program.grad_mode import function_grad_mode
from ..evaluator.graph_tensors import ARG, GRAPH, MODULE, Evaluator, Value
from ..program.imports import ImportMap
from ..program.modules import ClassInfo
from ..program.stmtwalk import Parents, parent_map, walk, walk_lines, word_lines
from ..program.textscan import has_any
from . import finding, origin_text

RULES = {"GLF003": "forward hook stores a graph tensor where deepcopy of the model reaches it"}

EXAMPLES = [
    (
        """
import torch.nn as nn
class Saver:
    def __init__(self, layer):
        layer.register_forward_hook(self.hook)
    def hook(self, module, inputs, output):
        self.hidden = output
""",
        ["GLF003"],
    ),
    (
        """
import torch.nn as nn
def attach(model):
    activations = {}
    def hook(module, inputs, output):
        activations["x"] = output
    model.layer.register_forward_hook(hook)
    return activations
""",
        [],
    ),
    (
        """
import torch, torch.nn as nn
class Hasher:
    def __init__(self, layer):
        self.hashes = []
        layer.register_forward_hook(self.hook)
    @torch.no_grad()
    def hook(self, module, inputs, output):
        self.hashes.append(output.cpu().sum())
""",
        [],
    ),
    (
        """
import torch, torch.nn as nn
class Keeper:
    def __init__(self, layer):
        self.outputs = []
        layer.register_forward_hook(self.hook)
    @torch.no_grad()
    def hook(self, module, inputs, output):
        self.outputs.append(output)
""",
        ["GLF003"],
    ),
    (
        """
import torch.nn as nn
class Hook:
    def __init__(self):
        self.stored = {}
    def forward(self, module, input, output):
        pass
    def register(self, module):
        return module.register_forward_hook(self.forward)
class InputKeeper(Hook):
    def forward(self, module, input, output):
        self.stored["input"] = input
""",
        ["GLF003?"],
    ),
    (
        """
import torch.nn as nn
class Hook:
    def __init__(self):
        self.stored = {}
    def forward(self, module, input, output):
        pass
    def register(self, module):
        return module.register_forward_hook(self.forward)
class InputKeeper(Hook):
    def forward(self, module, input, output):
        self.stored["input"] = tuple(x.detach() for x in input)
    def backward(self, module, grad_input, grad_output):
        self.stored["grad"] = grad_output
""",
        [],
    ),
    (
        """
import torch.nn as nn
class Saver:
    def __init__(self, layer):
        layer.register_full_backward_hook(self.hook)
    def hook(self, module, grad_input, grad_output):
        self.grad = grad_output[0]
""",
        [],
    ),
    (
        # a hook registered by script code whose every later call runs under no_grad: that it
        # fires with grad on is taken on trust (the program shows the opposite)
        """
import torch, torch.nn as nn
def main():
    net = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    net[0].outs = []
    def save(m, x, y):
        m.outs.append(y)
    net[0].register_forward_hook(save)
    with torch.no_grad():
        net(torch.randn(1, 2))
    print(len(net[0].outs))
main()
""",
        ["GLF003?"],
    ),
    (
        # ... and where a later call runs with grad on, the store is proven
        """
import torch, torch.nn as nn
def main():
    net = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    net[0].outs = []
    def save(m, x, y):
        m.outs.append(y)
    net[0].register_forward_hook(save)
    net(torch.randn(1, 2)).sum().backward()
main()
""",
        ["GLF003"],
    ),
]

FORWARD = {"register_forward_hook": "forward", "register_forward_pre_hook": "pre",
           "register_module_forward_hook": "forward", "register_module_forward_pre_hook": "pre"}


class _Hook:
    def __init__(self, func, bound: bool, owner: ClassInfo | None, skip: int, self_name: str | None):
        self.func = func  # FunctionDef or Lambda
        self.bound = bound
        self.owner = owner
        self.skip = skip  # leading parameters bound by functools.partial
        self.self_name = self_name
        self.bound_keywords: set[str] = set()  # parameters functools.partial binds by keyword


def check(tree: ast.AST, imports: ImportMap, classes: dict[str, ClassInfo], module_classes: set[str],
          source: str | None = None) -> list[Finding]:
    calls = []
    lines = word_lines(source, FORWARD)  # a call of one of them has its name on one of these lines
    if lines is None:
        nodes, parents = walk(tree), None
    else:
        nodes, partial = walk_lines(tree, lines)
        parents = Parents(tree, partial)
    for node in nodes:
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name in FORWARD:
                calls.append((node, FORWARD[name]))
    if not calls:
        return []
    if parents is None:
        parents = parent_map(tree)
    out: list[Finding] = []
    for call, kind in calls:
        hook_expr = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "hook"), None)
        if hook_expr is None:
            continue
        with_kwargs = _with_kwargs(call)
        scope, cls = _enclosing(call, parents, classes)
        hook = _resolve(hook_expr, scope, cls, tree, classes, parents, 0)
        if hook is None:
            continue
        # Global hooks (register_module_forward_hook) live in a dict of torch's, not on any
        # module: deepcopy(model) reaches only what they store on the module they get.
        is_global = "register_module_" in ast.unparse(call.func)
        found = _check_hook(hook, kind, with_kwargs, imports, module_classes, call, is_global)
        if found and (cls is None or not cls.facts.is_module):
            where = _fired_only_without_grad(call, scope if scope is not None else tree, parents, imports)
            for f in found:
                if where is not None:
                    trust(f, "hook-output", f"the model is taken to run with grad on when the hook fires, though every "
                                            f"call after its registration in {where} runs under torch.no_grad()")
        out += found
    return out


# Calls that run no model: what follows a hook's registration may call them with grad on.
_NO_MODEL_CALLS = frozenset({
    "print", "len", "range", "enumerate", "zip", "str", "int", "float", "bool", "list", "dict", "tuple", "set",
    "isinstance", "open", "format", "sorted", "min", "max", "sum", "abs", "round", "repr", "getattr", "setattr",
    "hasattr", "iter", "next", "map", "filter", "any", "all", "type", "super",
    "append", "extend", "item", "cpu", "numpy", "tolist", "detach", "write", "close", "save", "savefig", "plot",
    "show", "figure", "format", "join", "split", "keys", "values", "items", "update", "register_forward_hook",
    "register_forward_pre_hook", "register_full_backward_hook", "register_backward_hook", "remove",
})


def _runs_no_model_with_grad(node: ast.AST, grad: bool, imports, without: list) -> bool:
    """False when a call under ``node`` that may run a model runs with grad on; ``without[0]``
    counts those that run under no_grad. (A function of the module, not a closure: no cycle.)"""
    if isinstance(node, (ast.With, ast.AsyncWith)):
        inner = grad
        for item in node.items:
            if isinstance(item.context_expr, ast.Call):
                inner = grad_mode_of(item.context_expr, imports, inner)
        return all(_runs_no_model_with_grad(child, inner, imports, without) for child in node.body)
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
        return True  # defined, not run here
    if isinstance(node, ast.Call):
        f = node.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
        qual = imports.qualname(f) or ""
        if name not in _NO_MODEL_CALLS and not qual.startswith("torch."):
            if grad:
                return False
            without[0] += 1
    return all(_runs_no_model_with_grad(child, grad, imports, without) for child in ast.iter_child_nodes(node))


def _fired_only_without_grad(call: ast.Call, scope: ast.AST, parents, imports) -> str | None:
    """Where a hook registered by script code (a plain function, or the module level) can only
    fire under ``torch.no_grad()``: every call after the registration that may run a model is
    inside a no_grad block, and at least one is; the function returns nothing a caller could run
    with grad on. The name of the function ("module-level code"), or None."""
    body = getattr(scope, "body", None)
    if not isinstance(body, list):
        return None
    stmt = call
    while stmt is not None and parents.get(stmt) is not scope:
        stmt = parents.get(stmt)
    if stmt is None or stmt not in body:
        return None
    after = body[body.index(stmt) + 1:]
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
            isinstance(n, ast.Return) and n.value is not None for s in after for n in ast.walk(s)):
        return None  # a caller gets something back: it may run the model with grad on
    without = [0]
    if all(_runs_no_model_with_grad(s, True, imports, without) for s in after) and without[0]:
        return f"{scope.name}()" if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) else "module-level code"
    return None


def check_inherited(tree: ast.AST, imports: ImportMap, classes: dict[str, ClassInfo], module_classes: set[str],
                    source: str | None = None) -> list[Finding]:
    """Hooks a base class registers as ``self.name`` (``module.register_forward_hook(self.forward)``
    in ``Hook.register``), run as the subclass of this file overrides them: the bound method is
    looked up on the object, so a subclass's ``forward`` is the hook that runs, whichever file
    the registering base is in (:func:`check` resolves ``self.name`` in the registering class
    only)."""
    from ..program.helper_objects import program_class

    out: list[Finding] = []
    here_registers = source is None or has_any(source, FORWARD)
    project = getattr(imports, "project", None)
    for info in classes.values():
        current = getattr(imports, "current", None)
        registering = [(m, None, getattr(current, "memo", None)) for m in info.facts.methods.values()
                       if m not in info.node.body] if here_registers else []
        for qual in info.facts.bases:  # ancestors in other files
            found = program_class(imports, qual)
            if found is None or found[1] is info:
                continue
            text = project.text_of(found[0].path) if project is not None else None
            if text is not None and not any(w in text for w in FORWARD):
                continue  # the base's file registers no forward hook
            registering += [(m, found[0].path, found[0].memo) for m in found[1].facts.methods.values()]
        for method, path, memo in registering:
            for call, kind, attr, skip, bound_keywords, with_kwargs in _self_registrations(method, memo):
                hook_def = info.facts.methods.get(attr)
                if hook_def is None or hook_def not in info.node.body:
                    continue  # the base's own method: checked in the base's file
                hook = _Hook(hook_def, True, info, skip, _method_self(hook_def))
                hook.bound_keywords |= bound_keywords
                at = f"{os.path.basename(path)}:{call.lineno}" if path else f"line {call.lineno}"
                out += _check_hook(hook, kind, with_kwargs, imports, module_classes, call, False, at)
    return out


def _with_kwargs(call: ast.Call) -> bool:
    """``register_forward_hook(hook, with_kwargs=True)``: the hook also gets the keyword arguments."""
    return any(k.arg == "with_kwargs" and not (isinstance(k.value, ast.Constant) and not k.value.value)
               for k in call.keywords)


def _self_registrations(method, memo: dict | None = None) -> list:
    """(call, kind, method name, partial's leading arguments, partial's keywords, with_kwargs) of
    each forward-hook registration in ``method`` whose hook is a bound method of ``self``
    (``self.forward``, ``functools.partial(self.hook, name)``); remembered in the memo of the
    method's file (a base's methods are read once, however many subclasses ask)."""
    key = ("self_hooks", id(method))
    if memo is not None and key in memo:
        return memo[key]
    me = _method_self(method) if method.args.args else None
    found = []
    if me is not None:
        for node in walk(method):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name not in FORWARD or "register_module_" in name:
                continue
            expr = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "hook"), None)
            skip, keywords = 0, set()
            if isinstance(expr, ast.Call) and expr.args and (
                    (isinstance(expr.func, ast.Name) and expr.func.id == "partial")
                    or (isinstance(expr.func, ast.Attribute) and expr.func.attr == "partial")):
                skip, keywords = len(expr.args) - 1, {k.arg for k in expr.keywords if k.arg}
                expr = expr.args[0]
            if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == me:
                found.append((node, FORWARD[name], expr.attr, skip, keywords, _with_kwargs(node)))
    if memo is not None:
        memo[key] = found
    return found


def _enclosing(node, parents, classes):
    scope = None
    cls = None
    cur = parents.get(node)
    while cur is not None:
        if scope is None and isinstance(cur, (ast.FunctionDef, ast.AsyncFunctionDef)):
            scope = cur
        if isinstance(cur, ast.ClassDef):
            cls = classes.get(cur.name)
            break
        cur = parents.get(cur)
    return scope, cls


def _inside(node, scope, parents) -> bool:
    cur = parents.get(node)
    while cur is not None:
        if cur is scope:
            return True
        cur = parents.get(cur)
    return False


def _method_self(func) -> str | None:
    params = func.args.posonlyargs + func.args.args
    return params[0].arg if params else None


def _find_def(name: str, scope, tree) -> ast.FunctionDef | None:
    for body in ([scope] if scope is not None else []) + [tree]:
        for n in walk(body) if body is scope else body.body:
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name and n is not scope:
                return n
    return None


def _assigned(name: str, scope, tree, before: int):
    best = None
    for body in ([scope] if scope is not None else []) + [tree]:
        nodes = walk(body) if body is scope else body.body
        for n in nodes:
            if isinstance(n, ast.Assign) and n.lineno <= before and any(
                isinstance(t, ast.Name) and t.id == name for t in n.targets
            ):
                if best is None or n.lineno > best.lineno:
                    best = n
        if best is not None:
            return best.value
    return None


def _resolve(expr, scope, cls: ClassInfo | None, tree, classes, parents, skip: int, depth: int = 0) -> _Hook | None:
    if depth > 5:
        return None
    self_name = _method_self(scope) if scope is not None and cls is not None and scope.args.args else None
    if isinstance(expr, ast.Lambda):
        return _Hook(expr, False, cls, skip, self_name)
    if isinstance(expr, ast.Call):
        callee = expr.func
        last = callee.attr if isinstance(callee, ast.Attribute) else callee.id if isinstance(callee, ast.Name) else ""
        if last == "partial" and expr.args:
            hook = _resolve(expr.args[0], scope, cls, tree, classes, parents, skip + len(expr.args) - 1, depth + 1)
            if hook is not None:
                hook.bound_keywords |= {k.arg for k in expr.keywords if k.arg}
            return hook
        if isinstance(callee, ast.Name) and callee.id in classes:
            target = classes[callee.id]
            call = target.facts.methods.get("__call__")
            return _Hook(call, True, target, skip, _method_self(call)) if call is not None else None
        # A factory: the hook is the nested function it returns.
        factory = None
        owner = None
        if isinstance(callee, ast.Attribute) and self_name and isinstance(callee.value, ast.Name) and callee.value.id == self_name:
            factory = cls.facts.methods.get(callee.attr) if cls else None
            owner = cls
        closure_self = None
        if isinstance(callee, ast.Name):
            factory = _find_def(callee.id, scope, tree)
            if factory is not None and self_name and factory is not scope and _inside(factory, scope, parents):
                # a factory defined inside the method (MILModel's forward_hook(layer_name) in
                # __init__): its hooks see the method's `self` as a closure variable
                owner, closure_self = cls, self_name
        if factory is None:
            return None
        hook_self = closure_self or (_method_self(factory) if owner else None)
        for ret in walk(factory):
            if isinstance(ret, ast.Return) and ret.value is not None:
                if isinstance(ret.value, ast.Lambda):
                    return _Hook(ret.value, False, owner, skip, hook_self)
                if isinstance(ret.value, ast.Name):
                    inner = _find_def(ret.value.id, factory, tree)
                    if inner is not None:
                        return _Hook(inner, False, owner, skip, hook_self)
        return None
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
        if self_name and expr.value.id == self_name and cls is not None:
            meth = cls.facts.methods.get(expr.attr)
            if meth is not None:
                return _Hook(meth, True, cls, skip, _method_self(meth))
            return None
        value = _assigned(expr.value.id, scope, tree, expr.lineno)
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in classes:
            target = classes[value.func.id]
            meth = target.facts.methods.get(expr.attr)
            if meth is not None:
                return _Hook(meth, True, target, skip, _method_self(meth))
        return None
    if isinstance(expr, ast.Name):
        inner = _find_def(expr.id, scope, tree)
        if inner is not None:
            return _Hook(inner, False, cls, skip, self_name)
        value = _assigned(expr.id, scope, tree, expr.lineno)
        if value is not None:
            return _resolve(value, scope, cls, tree, classes, parents, skip, depth + 1)
    return None


def _check_hook(hook: _Hook, kind: str, with_kwargs: bool, imports, module_classes, call, is_global: bool = False,
                registered: str | None = None) -> list[Finding]:
    func = hook.func
    args = func.args
    params = [a.arg for a in args.posonlyargs + args.args]
    if hook.bound:
        params = params[1:]
    params = [p for p in params[hook.skip:] if p not in hook.bound_keywords]
    env: dict[str, Value] = {}
    module_param = params[0] if params else None
    if module_param:
        env[module_param] = Value(MODULE, "the hooked module")
    rest = params[1:]
    for i, p in enumerate(rest):
        last = i == len(rest) - 1
        if kind == "forward" and last:
            env[p] = Value(GRAPH, "output of the hooked module")
        else:
            env[p] = Value(ARG, "input of the hooked module")
    if args.vararg is not None:
        env[args.vararg.arg] = Value(GRAPH if kind == "forward" else ARG, "arguments of the hook")
    facts = hook.owner.facts if hook.owner is not None else None
    owner_is_module = facts is not None and facts.is_module
    self_name = hook.self_name if (hook.bound or owner_is_module) else None
    if self_name is not None and hook.bound:
        self_name = _method_self(func)
    ev = Evaluator(imports, facts, self_name, module_classes)
    ev.env.update(env)
    if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
        ev.grad = function_grad_mode(func, imports)  # @torch.no_grad() def __call__(self, module, inp, out)
    out: list[Finding] = []
    name = getattr(func, "name", "lambda")

    def sink(store: Store) -> None:
        if store.value.kind not in (GRAPH, ARG):
            return
        on_self = self_name is not None and store.root == self_name and not is_global
        on_module = store.root == module_param or (store.root_value.kind == MODULE and store.root not in env)
        if not (on_self or on_module):
            return
        if store.kind == "inplace":
            return
        target = store.text
        if store.kind in ("setattr", "register_buffer") and isinstance(store.name_node, ast.Constant):
            target = f"{store.text}.{store.name_node.value}"
        how = "the hook's own object, a bound method's __self__" if on_self and hook.bound else (
            "the module that owns the closure" if on_self else "the hooked module")
        maybe = store.value.kind != GRAPH
        holder = hook.owner.node.name if hook.owner is not None else "the hooked module"
        trusted = [] if store.value.kind == GRAPH else [(
            "hook-output", f"{origin_text(store.value)[5:]} is taken to be on the graph (the model is taken to run "
                           "with grad on when the hook fires)")]
        out.append(_witnessed(store, kind, name, registered or f"line {call.lineno}", how, target, holder,
            finding(
                "GLF003", store.node,
                messages.store(
                    messages.holder(target, holder if on_self else "the hooked module"),
                    "is given" if store.kind == "container" else "keeps",
                    store.value.origin or "a computation on the autograd graph",
                    messages.copy_clause("copy.deepcopy(model)", maybe=maybe, copies=how), "store .detach()",
                    maybe=maybe, by=f"in {kind} hook '{name}'"),
                class_name=hook.owner.node.name if hook.owner is not None else None,
                attribute=target,
                data={"kind": store.kind, "registered_at": call.lineno, "on_self": on_self, "bound": hook.bound},
                trust=[{"kind": k, "text": t} for k, t in trusted],
            )
        ))

    body = func.body if isinstance(func.body, list) else [ast.Expr(value=func.body, lineno=func.body.lineno, col_offset=func.body.col_offset)]
    Walker(ev, sink).run(body)
    return out


def _witnessed(store: Store, kind: str, name: str, registered: str, how: str, target: str, holder: str, f: Finding) -> Finding:
    root, _, rest = target.partition(".")
    attr = rest.split(".", 1)[0].split("[", 1)[0] or target
    f.witness = witness.make(
        store.value, store.node, store.stmt,
        reached=f"{kind} hook '{name}', registered at {registered}: the hooked module runs it on every call",
        grad=store.grad, kept="the hook does not clear it, and nothing shows it removed before a copy",
        copied=f"copy.deepcopy(model) copies {how}, and with it {root}.__dict__['{attr}']")
    return f
