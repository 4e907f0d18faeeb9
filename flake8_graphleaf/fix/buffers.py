"""Fixes for buffer updates (GLF004): ``.detach()`` or ``with torch.no_grad():``; safe when ``forward``
does not read the buffer afterwards (reachability, not text order)."""

from __future__ import annotations

import ast

from ..analysis.findings import SAFE, UNSAFE, Finding, Fix
from .context import Context, alone_on_lines, at, method_self_name, reachable_after, self_attr_nodes, statement, wrap
from .cst import wrap_no_grad
from .tensors import certainly_tensor


# -- GLF004 ----------------------------------------------------------------------------
def fix_buffer(f: Finding, ctx: Context) -> Fix | None:
    method = ctx.method(f)
    if method is None:
        return None
    self_name = method_self_name(method)
    attr = (f.attribute or "").removeprefix(self_name + ".")
    parents = ctx.parents
    kind = f.data.get("kind")
    node = at(method, f.line, f.col, (ast.Attribute, ast.Call, ast.Subscript))
    if node is None:
        return None
    stmt = statement(node, parents)
    if stmt is None:
        return None
    later = {id(n) for s in reachable_after(method, stmt) for n in ast.walk(s)}
    read_after = any(
        isinstance(n.ctx, ast.Load) and id(n) in later for n in self_attr_nodes(method, self_name, attr)
    )
    applicability = UNSAFE if read_after else SAFE
    why = " (forward reads the buffer afterwards: its gradient history changes)" if read_after else ""
    alone = alone_on_lines(ctx, stmt)
    if alone and kind == "attr" and isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and stmt.value is not None:
        if isinstance(stmt, ast.Assign) and not (len(stmt.targets) == 1 and stmt.targets[0] is node):
            return None
        if certainly_tensor(stmt.value, ctx, method):
            return Fix(applicability, "assign .detach() of the new value" + why,
                       (ctx.edit(stmt.value, wrap(ctx, stmt.value) + ".detach()"),))
    if alone and kind == "register_buffer" and isinstance(node, ast.Call) and len(node.args) >= 2:
        value = node.args[1]
        return Fix(applicability, "register .detach() of the value" + why,
                   (ctx.edit(value, wrap(ctx, value) + ".detach()"),))
    if kind in ("inplace", "container", "attr", "setattr", "register_buffer"):
        # The whole statement (several lines, a value from an argument) under torch.no_grad(), with libcst.
        line, col = ctx.text.start(stmt)
        return Fix(applicability, "update the buffer under torch.no_grad()" + why, (wrap_no_grad(ctx, line, col),))
    return None
