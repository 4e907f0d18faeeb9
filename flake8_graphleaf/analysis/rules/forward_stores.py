"""GLF001, GLF002, GLF004: a graph tensor kept on the module by ``forward`` (or a
method reached from it)."""

from __future__ import annotations

import ast

from ..findings import Finding
from ..flow import Store
from ..graph_tensors import ARG, GRAPH, MODULE
from ..scopes import ClassRunner, self_name
from . import drop_overwritten, finding, origin_text

RULES = {
    "GLF001": "graph tensor stored on the module in forward (or a method reached from it)",
    "GLF002": "graph tensor put into a container held on the module",
    "GLF004": "registered buffer reassigned from, or updated in place with, a graph tensor",
}

EXAMPLES = [
    (
        """
import torch.nn as nn
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
    def forward(self, x):
        self.cache = self.lin(x)
        return self.cache
""",
        ["GLF001"],
    ),
    (
        """
import torch.nn as nn
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
    def forward(self, x):
        out = self.lin(x)
        self.cache = out.detach()
        self.shape = out.shape
        return out
""",
        [],
    ),
    (
        """
import torch.nn as nn
class Enc(nn.Module):
    def forward(self, x):
        self.features = []
        self.features.append(self.conv(x))
        return self.features
""",
        ["GLF002"],
    ),
    (
        """
import torch, torch.nn as nn
class Norm(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("running_mean", torch.zeros(4))
    def forward(self, x):
        self.running_mean = 0.9 * self.running_mean + 0.1 * x.mean(0)
        return x - self.running_mean
""",
        ["GLF004"],
    ),
    (
        """
import torch, torch.nn as nn
class Norm(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("running_mean", torch.zeros(4))
    def forward(self, x):
        with torch.no_grad():
            self.running_mean.mul_(0.9).add_(0.1 * x.mean(0))
        return x - self.running_mean
""",
        [],
    ),
]


def check(runner: ClassRunner) -> list[Finding]:
    facts = runner.info.facts
    out: list[Finding] = []

    def sink(store: Store, func: ast.FunctionDef) -> None:
        f = classify(store, func, facts, runner.info.node.name)
        if f is not None:
            out.append(f)

    runner.forward_reached = runner.run_forward(sink)
    return drop_overwritten(out, runner)


def _describe(value) -> tuple[str, str]:
    """('is' | 'may be', origin) for a message."""
    if value.kind == GRAPH:
        return "is", origin_text(value)
    return "may be", origin_text(value)


def classify(store: Store, func: ast.FunctionDef, facts, class_name: str) -> Finding | None:
    value = store.value
    if not (value.kind == GRAPH or (value.kind == ARG and store.grad)):
        return None
    on_self = store.root == self_name(func)
    if not on_self and store.root_value.kind != MODULE:
        return None
    attr = store.attr
    buffer = on_self and attr in facts.buffers
    where, origin = _describe(value)
    maybe = "" if value.kind == GRAPH else " if it is"
    target = store.text
    extra = {"class_name": class_name, "attribute": target}
    extra["data"] = {"kind": store.kind, "method": func.name, "value_kind": value.kind, "root": store.root, "node": store.node}
    if store.kind in ("attr", "setattr"):
        if store.kind == "setattr":
            name = store.name_node
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                target = f"{store.text}.{name.value}"
                buffer = on_self and name.value in facts.buffers
            else:
                target = f"{store.text}.<{ast.unparse(name)}>"
            extra["attribute"] = target
        if buffer and target == f"{store.root}.{attr}" or (store.kind == "setattr" and buffer):
            return finding(
                "GLF004", store.node,
                f"buffer '{target}' is reassigned from a tensor that {where} on the autograd graph ({origin}); "
                f"the buffer then has a grad_fn and copy.deepcopy(model) will raise after forward{maybe}: "
                "assign .detach() of the new value, or update it under torch.no_grad()",
                **extra,
            )
        if on_self and attr in facts.params and target == f"{store.root}.{attr}":
            return None  # nn.Module.__setattr__ refuses a non-Parameter here: a TypeError, not our bug
        return finding(
            "GLF001", store.node,
            f"'{target}' keeps a tensor that {where} on the autograd graph ({origin}); "
            f"copy.deepcopy(model) will raise after forward{maybe}: use a local variable, or store .detach()",
            **extra,
        )
    if store.kind == "container":
        if buffer:
            return finding(
                "GLF004", store.node,
                f"buffer '{target}' is updated in place with a tensor that {where} on the autograd graph ({origin}); "
                f"the buffer then has a grad_fn and copy.deepcopy(model) will raise after forward{maybe}: "
                "update it under torch.no_grad(), or with .detach() of the new value",
                **extra,
            )
        how = "by " + (f".{store.method}()" if store.method not in ("__setitem__", "+=") else
                       ("item assignment" if store.method == "__setitem__" else "+="))
        return finding(
            "GLF002", store.node,
            f"'{target}' is given a tensor that {where} on the autograd graph ({origin}) {how}; "
            f"copy.deepcopy(model) will raise after forward{maybe}: build the container in a local variable, "
            "or add .detach()",
            **extra,
        )
    if store.kind == "inplace" and buffer:
        return finding(
            "GLF004", store.node,
            f"buffer '{target}' is updated in place (.{store.method}()) with a tensor that {where} on the autograd graph "
            f"({origin}); the buffer then has a grad_fn and copy.deepcopy(model) will raise after forward{maybe}: "
            "update it under torch.no_grad(), or with .detach() of the new value",
            **extra,
        )
    if store.kind == "register_buffer":
        return finding(
            "GLF004", store.node,
            f"buffer registered from a tensor that {where} on the autograd graph ({origin}); "
            f"copy.deepcopy(model) will raise after forward{maybe}: register .detach() of it",
            **extra,
        )
    return None
