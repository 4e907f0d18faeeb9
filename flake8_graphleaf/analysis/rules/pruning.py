"""GLF103: ``torch.nn.utils.prune`` leaves a non-leaf weight on the module.

Pruning re-parametrizes ``module.weight`` as ``weight_orig * weight_mask``, stored as a
plain attribute and recomputed by a forward pre-hook.  From the pruning call until
``prune.remove(module, name)`` makes it permanent, ``copy.deepcopy`` of the model
raises (an EMA, SWA or checkpoint-averaging copy taken between pruning epochs, as
Lightning's ModelPruning callback does).  A call followed, in the same function, by
``prune.remove`` of the same module is not reported, nor one whose modules a later loop
removes (over the list ``global_unstructured`` was given, or over the same iterable as the
pruning loop).
"""

from __future__ import annotations

import ast

from ..facts.sinks import PRUNE_PREFIX as PREFIX, PRUNERS
from ..findings import Finding
from ..program.imports import ImportMap
from ..program.stmtwalk import own_nodes, scopes_with_classes, walk
from .. import messages, witness
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
    (
        """
import torch.nn.utils.prune as prune
def sparsify(model):
    pairs = [(m, "weight") for m in model.modules() if isinstance(m, nn.Linear)]
    prune.global_unstructured(pairs, pruning_method=prune.L1Unstructured, amount=0.3)
    for module, name in pairs:
        prune.remove(module, name)
""",
        [],
    ),
    (
        """
import torch.nn.utils.prune as prune
def sparsify(model, kept):
    pairs = [(m, "weight") for m in model.modules() if isinstance(m, nn.Linear)]
    prune.global_unstructured(pairs, pruning_method=prune.L1Unstructured, amount=0.3)
    for module, name in kept:
        prune.remove(module, name)
""",
        ["GLF103"],
    ),
    (
        """
import torch.nn.utils.prune as prune
def sparsify(model):
    for m in model.modules():
        prune.l1_unstructured(m, "weight", 0.3)
    for m in model.modules():
        prune.remove(m, "weight")
""",
        [],
    ),
]



def check(tree: ast.Module, imports: ImportMap) -> list[Finding]:
    out: list[Finding] = []
    for scope, cls in scopes_with_classes(tree):
        calls = []
        removed: set[str] = set()
        removals = []
        loops: dict[int, ast.For] = {}  # id of a call -> the innermost for loop around it
        for node in own_nodes(scope):
            if isinstance(node, ast.For):
                for inner in walk(node):
                    if isinstance(inner, ast.Call):
                        loops[id(inner)] = node  # walked outer first: the inner loop wins
            if not isinstance(node, ast.Call):
                continue
            qual = imports.qualname(node.func) or ""
            if not qual.startswith(PREFIX):
                continue
            name = qual[len(PREFIX):]
            if name == "remove" and node.args:
                removed.add(ast.unparse(node.args[0]))
                removals.append(node)
            elif name in PRUNERS:
                calls.append((node, name))
        for node, name in calls:
            target = ast.unparse(node.args[0]) if node.args else ""
            if name != "global_unstructured" and target and target in removed and not _loop_variable(node, loops):
                continue
            if any(_removes_the_same(node, name, r, loops) for r in removals):
                continue
            param = _param_name(node)
            what = f"{target}.{param}" if target and param else "the pruned weights"
            out.append(_pruned(node, what, cls,
                finding(
                    "GLF103", node,
                    messages.store(f"torch.nn.utils.prune.{name}", f"makes {what}", "orig * mask",
                                   messages.copy_clause("copy.deepcopy of the model", when="in between"),
                                   "call prune.remove() before copying, or copy with state_dict()",
                                   by="until prune.remove()", tensor="a non-leaf tensor"),
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


def _loop_variable(call: ast.Call, loops: dict) -> bool:
    """Is the module ``call`` prunes the variable of a loop around it (then a removal of the same
    name counts only in that loop, or in a loop over the same iterable: _removes_the_same)?"""
    loop = loops.get(id(call))
    return loop is not None and bool(call.args) and isinstance(call.args[0], ast.Name) and call.args[0].id in {
        n.id for n in walk(loop.target) if isinstance(n, ast.Name)}


def _removes_the_same(call: ast.Call, name: str, removal: ast.Call, loops: dict) -> bool:
    """Does ``removal`` (a later ``prune.remove``) make permanent what ``call`` pruned: a loop over
    the list ``global_unstructured`` was given (``for module, name in parameters_to_prune:``), or
    a loop over the same iterable as the loop of the pruning call, removing its loop variable's
    module (``for m in model.modules(): ... prune.remove(m, "weight")``)?"""
    if removal.lineno < call.lineno or not removal.args:
        return False
    loop = loops.get(id(removal))
    if loop is None:
        return False
    names = {n.id for n in walk(loop.target) if isinstance(n, ast.Name)}
    if not (isinstance(removal.args[0], ast.Name) and removal.args[0].id in names):
        return False
    iterated = ast.unparse(loop.iter)
    if name == "global_unstructured":
        return bool(call.args) and ast.unparse(call.args[0]) == iterated
    own = loops.get(id(call))
    if own is loop:
        return ast.unparse(call.args[0]) == removal.args[0].id if call.args else False
    return own is not None and ast.unparse(own.iter) == iterated and (
        _param_name(call) is None or _param_name(call) == _param_name(removal))


def _param_name(call: ast.Call) -> str | None:
    node = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "name"), None)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None
