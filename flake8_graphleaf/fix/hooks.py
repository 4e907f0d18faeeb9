"""Fix for a forward hook that stores a graph tensor (GLF003): ``.detach()`` of the stored value in
the hook.  Whether that is safe depends on who reads the attribute (:mod:`.attach` decides); when
something back-propagates through it, the copy-safe fix on the holder's class is used instead."""

from __future__ import annotations

import ast

from ..analysis.findings import UNSAFE, Finding, Fix
from .context import Context, alone_on_lines, at, statement, wrap
from .tensors import certainly_tensor


def hook_detach(f: Finding, ctx: Context) -> Fix | None:
    node = at(ctx.tree, f.line, f.col, (ast.Attribute, ast.Call, ast.Subscript))
    if node is None:
        return None
    stmt = statement(node, ctx.parents)
    if stmt is None or not alone_on_lines(ctx, stmt):
        return None
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and stmt.targets[0] is node:
        value = stmt.value
    elif isinstance(stmt, ast.AnnAssign) and stmt.target is node and stmt.value is not None:
        value = stmt.value
    else:
        return None
    func = ctx.parents.get(stmt)
    while func is not None and not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        func = ctx.parents.get(func)
    if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    if not (certainly_tensor(value, ctx, func) or _tensor_method_of_output(value, func)):
        return None
    return Fix(UNSAFE, f"store .detach() in '{f.attribute}' in the hook (readers lose its gradient)",
               (ctx.edit(value, wrap(ctx, value) + ".detach()"),))


def _tensor_method_of_output(value, func) -> bool:
    """``output.mean(0)`` in a forward hook: a tensor method on the hooked module's output gives a
    tensor (the original ran it, so the output is a tensor, not a tuple)."""
    from .tensors import _TENSOR_METHODS

    params = func.args.posonlyargs + func.args.args
    if not params or not isinstance(value, ast.Call) or not isinstance(value.func, ast.Attribute):
        return False
    recv = value.func.value
    return (isinstance(recv, ast.Name) and recv.id == params[-1].arg and value.func.attr in _TENSOR_METHODS)
