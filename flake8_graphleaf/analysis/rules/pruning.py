"""GLF103: ``torch.nn.utils.prune`` leaves a non-leaf weight on the module.

Pruning re-parametrizes ``module.weight`` as ``weight_orig * weight_mask``, stored as a
plain attribute and recomputed by a forward pre-hook.  From the pruning call until
``prune.remove(module, name)`` makes it permanent, ``copy.deepcopy`` of the model
raises (an EMA, SWA or checkpoint-averaging copy taken between pruning epochs, as
Lightning's ModelPruning callback does).  A call followed, in the same function, by
``prune.remove`` of the same module is not reported.
"""

from __future__ import annotations

import ast

from ..findings import Finding
from ..program.imports import ImportMap
from ..program.stmtwalk import own_nodes, scopes_with_classes
from .. import witness
from . import finding

RULES = {"GLF103": "torch.nn.utils.prune leaves a non-leaf weight until prune.remove"}

EXAMPLES = [
    (
        """
import torch.nn.utils.prune as prune
def sparsify(model, amount=0.3):
    for module in model.modules():
        if isinstance(module, nn.Linear):
            prune.l1_unstructured(module, "weight", amount)
""",
        ["GLF103"],
    ),
    (
        """
from torch.nn.utils import prune
def sparsify_permanently(layer):
    prune.l1_unstructured(layer, name="weight", amount=0.5)
    prune.remove(layer, "weight")
""",
        [],
    ),
]

PRUNERS = frozenset(
    """random_unstructured l1_unstructured random_structured ln_structured global_unstructured
    identity custom_from_mask""".split()
)
PREFIX = "torch.nn.utils.prune."


def check(tree: ast.Module, imports: ImportMap) -> list[Finding]:
    out: list[Finding] = []
    for scope, cls in scopes_with_classes(tree):
        calls = []
        removed: set[str] = set()
        for node in own_nodes(scope):
            if not isinstance(node, ast.Call):
                continue
            qual = imports.qualname(node.func) or ""
            if not qual.startswith(PREFIX):
                continue
            name = qual[len(PREFIX):]
            if name == "remove" and node.args:
                removed.add(ast.unparse(node.args[0]))
            elif name in PRUNERS:
                calls.append((node, name))
        for node, name in calls:
            target = ast.unparse(node.args[0]) if node.args else ""
            if name != "global_unstructured" and target and target in removed:
                continue
            param = _param_name(node)
            what = f"{target}.{param}" if target and param else "the pruned weights"
            out.append(_pruned(node, what, cls,
                finding(
                    "GLF103", node,
                    f"torch.nn.utils.prune.{name} makes {what} a non-leaf tensor (orig * mask) until "
                    "prune.remove(); copy.deepcopy of the model raises in between: call prune.remove() "
                    "before copying, or copy with state_dict()",
                    attribute=what,
                    class_name=cls.name if cls is not None else None,
                )
            ))
    return out


def _pruned(node: ast.Call, what: str, cls, f):
    f.witness = witness.simple(
        f"{ast.unparse(node.func)}: pruning replaces the parameter with {what}_orig * {what}_mask, recomputed by a "
        "forward pre-hook: a non-leaf tensor", "legacy-norm", node,
        reached=f"the call itself, in {cls.name if cls is not None else 'module-level code'}",
        kept="no prune.remove() of it follows", copied=f"copy.deepcopy(model) copies {what}")
    return f


def _param_name(call: ast.Call) -> str | None:
    node = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "name"), None)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None
