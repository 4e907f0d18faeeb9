"""Grad mode from the syntax: ``with torch.no_grad():``, ``@torch.inference_mode()``,
``torch.set_grad_enabled(False)`` and the other switches torch provides, read from the call as
written (its literal argument), for the walker (:mod:`..evaluator.flow`) and the per-file summaries."""

from __future__ import annotations

import ast

from ..facts.torch_names import is_torch_name


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
