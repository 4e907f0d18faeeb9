"""Grad mode from the syntax: ``with torch.no_grad():``, ``@torch.inference_mode()``,
``torch.set_grad_enabled(False)`` and the other switches torch provides, read from the call as
written (its literal argument), for the walker (:mod:`..evaluator.flow`) and the per-file summaries."""

from __future__ import annotations

import ast

from ..facts.torch_names import is_torch_name
from .stmtwalk import statements_breadth_first, walk


def grad_mode_of(call: ast.AST, imports, current: bool) -> bool:
    """Grad mode inside ``with <call>:`` or under a decorator ``@<call>``."""
    func = call.func if isinstance(call, ast.Call) else call
    qual = imports.qualname(func) or ""
    name = qual.rsplit(".", 1)[-1]
    if not is_torch_name(qual):
        return current
    args = call.args if isinstance(call, ast.Call) else []
    first = args[0] if args else None
    if isinstance(call, ast.Call):
        for k in call.keywords:
            if k.arg in ("mode", "enabled"):
                first = k.value
    literal = first.value if isinstance(first, ast.Constant) else None
    if name == "no_grad":
        return False
    if name == "inference_mode":
        return True if (first is not None and literal is False) else (current if (first is not None and literal is None) else False)
    if name == "enable_grad":
        return True
    if name == "set_grad_enabled":
        if literal is False:
            return False
        if literal is True:
            return True
    return current


def function_grad_mode(func: ast.FunctionDef, imports) -> bool:
    grad = True
    for dec in func.decorator_list:
        grad = grad_mode_of(dec, imports, grad)
    return grad


def grad_guard(test: ast.AST, imports) -> tuple[bool | None, bool | None] | None:
    """(grad mode in the body, grad mode in the else branch) of ``if <test>:`` when the test reads
    torch's grad mode (``torch.is_grad_enabled()``, ``not ...``, and / or of it), None for either
    that it leaves as it was; None when the test does not read it."""
    if isinstance(test, ast.Call) and not test.args and (imports.qualname(test.func) or "") == "torch.is_grad_enabled":
        return True, False
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = grad_guard(test.operand, imports)
        return None if inner is None else (inner[1], inner[0])
    if isinstance(test, ast.BoolOp):
        guards = [g for g in (grad_guard(v, imports) for v in test.values) if g is not None]
        if not guards:
            return None
        if isinstance(test.op, ast.And):  # the body runs only when every operand holds
            return next((g[0] for g in guards if g[0] is not None), None), None
        return None, next((g[1] for g in guards if g[1] is not None), None)  # or: the else, when none holds
    return None


def eval_call_with_grad(tree: ast.Module, imports, source: str | None = None) -> int | None:
    """The line of a call of a model that the same function has put in eval mode (``model.eval()``),
    made with grad enabled (not under ``torch.no_grad()``, the function not decorated with it): the
    program's evidence that an eval-mode forward runs with grad on (a hand-written validation pass,
    an acquisition function's gradient through a posterior). None when the file shows none."""
    if source is not None and ".eval()" not in source:
        return None
    # the functions whose lines hold an ``.eval()`` (a function without one puts nothing in eval mode)
    at = [i + 1 for i, line in enumerate(source.split("\n")) if ".eval()" in line] if source is not None else None
    for node in statements_breadth_first(tree):  # walk's order: the first such line is the same
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if at is not None and not any(node.lineno <= n <= (node.end_lineno or n) for n in at):
            continue
        if function_grad_mode(node, imports):
            line = _eval_then_call(node.body, imports, True, set())
            if line is not None:
                return line
    return None


def _eval_then_call(body: list, imports, grad: bool, evald: set) -> int | None:
    for stmt in body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        inner = grad
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            for item in stmt.items:
                inner = grad_mode_of(item.context_expr, imports, inner)
        # the statement's own expressions, then its blocks (a with block in its own grad mode)
        blocks = [getattr(stmt, name) for name in ("body", "orelse", "finalbody") if isinstance(getattr(stmt, name, None), list)]
        blocks += [h.body for h in getattr(stmt, "handlers", [])]
        headers = [v for field, v in ast.iter_fields(stmt) if field not in ("body", "orelse", "finalbody", "handlers")]
        own = [item for v in headers for item in (v if isinstance(v, list) else [v]) if isinstance(item, ast.AST)]
        for node in (n for item in own for n in walk(item)):
            if isinstance(node, ast.Call):
                func = node.func
                if isinstance(func, ast.Attribute) and func.attr in ("eval", "train") and not node.args:
                    (evald.add if func.attr == "eval" else evald.discard)(ast.unparse(func.value))
                elif grad and evald and isinstance(func, (ast.Name, ast.Attribute)) and ast.unparse(func) in evald:
                    return node.lineno
        for block in blocks:
            line = _eval_then_call(block, imports, inner, evald)
            if line is not None:
                return line
    return None
