"""GLF005: a non-leaf tensor stored on a module when it is built (``__init__``, the
helpers it calls, or a function that patches modules with ``setattr``)."""

from __future__ import annotations

import ast
import re

from .. import messages, witness
from ..findings import Finding
from ..evaluator.flow import Store, Walker
from ..program.grad_mode import function_grad_mode
from ..evaluator.graph_tensors import GRAPH, MODULE, NOTHING, Evaluator, Value, looks_like_module_name, looks_like_parameter
from ..program.imports import ImportMap
from ..evaluator.scopes import ClassRunner, self_name
from ..program.stmtwalk import lines_matching, walk
from . import drop_overwritten, finding

RULES = {"GLF005": "non-leaf tensor stored on a module at construction"}

EXAMPLES = [
    (
        """
import torch, torch.nn as nn
class Gaussian(nn.Module):
    def __init__(self, n, device="cpu"):
        super().__init__()
        self.log_std = nn.Parameter(torch.zeros(n)).to(device)  # on a GPU: a copy, not the parameter
        self.mean = nn.Parameter(torch.zeros(n, device=device))  # made where it lives: a parameter
""",
        ["GLF005"],
    ),
    (
        """
import torch.nn as nn
class Scaled(nn.Linear):
    def __init__(self, n):
        super().__init__(n, n)
        self.w2 = self.weight * 2
""",
        ["GLF005"],
    ),
    (
        """
import torch.nn as nn
def weight_drop(module, name):
    w = getattr(module, name)
    del module._parameters[name]
    module.register_parameter(name + "_raw", nn.Parameter(w.data))
    setattr(module, name, w.clone())
""",
        ["GLF005"],
    ),
    (
        """
import torch, torch.nn as nn
class Scaled(nn.Linear):
    def __init__(self, n):
        super().__init__(n, n)
        with torch.no_grad():
            self.w2 = self.weight * 2
        self.w3 = nn.Parameter(self.weight.detach().clone())
""",
        [],
    ),
    (
        # the parameters of a module the constructor is given, concatenated: a non-leaf at once
        """
import torch, torch.nn as nn
class ODEProblem(nn.Module):
    def __init__(self, vector_field):
        super().__init__()
        self.vf = vector_field
        self.vf_params = torch.cat([p.contiguous().flatten() for p in self.vf.parameters()])
""",
        ["GLF005"],
    ),
]


def _message(target: str, value: Value, class_name: str | None = None) -> str:
    return messages.store(
        messages.holder(target, class_name), "is set, while the module is built, to",
        value.origin or "a computation on the autograd graph",
        messages.copy_clause("copy.deepcopy of the module", when="even before training"),
        "compute it in forward, wrap it in nn.Parameter, or build it under torch.no_grad()")


def _target(store: Store) -> str:
    if store.kind in ("setattr", "register_buffer") and store.name_node is not None:
        name = store.name_node
        if isinstance(name, ast.Constant) and isinstance(name.value, str):
            return f"{store.text}.{name.value}"
        return f"{store.text}.<{ast.unparse(name)}>"
    return store.text


def removes_parameter(scope) -> bool:
    """Does this function (or class) delete a registered Parameter before replacing it?"""
    if scope is None:
        return False
    for n in walk(scope):
        if isinstance(n, ast.Delete) and "_parameters" in ast.unparse(n):
            return True
        if isinstance(n, ast.Call):
            f = n.func
            if isinstance(f, ast.Name) and f.id == "delattr":
                return True
            if isinstance(f, ast.Attribute) and f.attr in ("pop", "__delitem__") and "_parameters" in ast.unparse(f.value):
                return True
    return False


def _sink(out: list[Finding], class_name: str | None, scope=None, runner_path=lambda: ""):
    def sink(store: Store, func) -> None:
        if store.value.kind != GRAPH:
            return
        on_self = func is not None and store.root == self_name(func)
        if not on_self and store.root_value.kind != MODULE:
            return
        if store.kind == "inplace" or (store.attr or "").startswith("__"):
            return
        if not on_self or store.kind == "setattr":
            # Setting a plain tensor where a Parameter is registered raises TypeError; only
            # code that first removes the Parameter (weight drop) really stores the tensor.
            named = store.name_node
            literal = isinstance(named, ast.Constant) and isinstance(named.value, str)
            if (not literal or looks_like_parameter(named.value)) and not removes_parameter(scope):
                return
        target = _target(store)
        f = finding("GLF005", store.node, _message(target, store.value, class_name), class_name=class_name, attribute=target,
                    data={"kind": store.kind, "method": getattr(func, "name", ""), "node": store.node})
        f.witness = witness.make(
            store.value, store.node, store.stmt, reached=(runner_path() or getattr(func, "name", "__init__")) + ", while the module is built",
            grad=store.grad, kept="nothing later in the constructor replaces it",
            copied=witness.copied_text(target, buffer=store.kind == "register_buffer") + ", even before training")
        out.append(f)

    return sink


def check(runner: ClassRunner) -> list[Finding]:
    out: list[Finding] = []
    skip = getattr(runner, "forward_reached", set())
    runner.run_construction(_sink(out, runner.info.node.name, runner.info.node, runner.path), skip)
    return drop_overwritten(out, runner)


def check_functions(tree: ast.Module, imports: ImportMap, source: str | None = None) -> list[Finding]:
    """Module-level functions that patch modules (``setattr(module, name, ...)``)."""
    out: list[Finding] = []
    lines = lines_matching(source, _SETATTR, "setattr") if source is not None else None
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if lines is not None and not any(node.lineno <= n <= (node.end_lineno or node.lineno) for n in lines):
            continue  # its text never says setattr(
        if not any(
            isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "setattr" for n in walk(node)
        ):
            continue
        ev = Evaluator(imports, None, None, set())
        args = node.args
        for a in args.posonlyargs + args.args + args.kwonlyargs:
            ev.env[a.arg] = Value(MODULE, a.arg) if looks_like_module_name(a.arg) else NOTHING
        ev.grad = function_grad_mode(node, imports)
        ev.building = True
        sink = _sink(out, None, node)
        Walker(ev, lambda store: sink(store, None)).run(node.body)
    for f in out:
        f.data.pop("node", None)
    return out


_SETATTR = re.compile(r"\bsetattr\s*\(")
