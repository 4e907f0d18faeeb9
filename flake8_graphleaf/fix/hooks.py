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
    if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)) or not certainly_tensor(value, ctx, func):
        return None
    return Fix(UNSAFE, f"store .detach() in '{f.attribute}' in the hook (readers lose its gradient)",
               (ctx.edit(value, wrap(ctx, value) + ".detach()"),))
