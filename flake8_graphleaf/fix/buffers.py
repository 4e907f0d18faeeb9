"""Fixes for buffer updates (GLF004), matched to the store: ``.detach()`` of an existing graph tensor
(``self.relative_bias = self.pos_emb``: ``torch.no_grad()`` would not detach a tensor that already has
history), ``with torch.no_grad():`` around a new computation (an in-place update, a container item, a
value from several lines).  Safe when ``forward`` does not read the buffer afterwards (reachability,
not text order); :mod:`.attach` uses the copy-safe state instead when it does."""

from __future__ import annotations

import ast

from ..analysis.findings import SAFE, UNSAFE, Finding, Fix
from .context import Context, alone_on_lines, at, method_self_name, reachable_after, self_attr_nodes, statement, wrap
from .cst import NoFix, wrap_no_grad
from .tensors import certainly_tensor

# Values that are an existing object: evaluating them computes nothing, so no_grad around them does nothing.
_EXISTING = (ast.Name, ast.Attribute, ast.Starred)


def _existing(value: ast.AST) -> bool:
    """Is ``value`` an existing object (a name, an attribute, an item of one), not a new computation?"""
    while isinstance(value, ast.Subscript):
        value = value.value
    return isinstance(value, _EXISTING) or (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
                                            and value.func.attr in ("get", "pop") and _existing(value.func.value))


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
    value = None
    if kind == "attr" and isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and stmt.value is not None:
        if isinstance(stmt, ast.Assign) and not (len(stmt.targets) == 1 and stmt.targets[0] is node):
            return None
        value = stmt.value
        if alone and certainly_tensor(value, ctx, method):
            return Fix(applicability, "assign .detach() of the new value" + why,
                       (ctx.edit(value, wrap(ctx, value) + ".detach()"),))
    if kind in ("register_buffer", "setattr") and isinstance(node, ast.Call):
        n = 1 if kind == "register_buffer" else 2
        value = node.args[n] if len(node.args) > n and not isinstance(node.args[n], ast.Starred) else None
        # register_buffer takes a tensor or None, and the analysis saw a graph tensor here: a tensor.
        if value is not None and (kind == "register_buffer" or certainly_tensor(value, ctx, method)):
            verb = "register" if kind == "register_buffer" else "set"
            return Fix(applicability, f"{verb} .detach() of the value" + why,
                       (ctx.edit(value, wrap(ctx, value) + ".detach()"),))
    if value is not None and _existing(value) and not isinstance(stmt, ast.AugAssign):
        # (``self.buf += t`` is an in-place update: no_grad around it records no history, whatever t is)
        # no_grad does not detach a tensor that already has history, and .detach() needs a tensor.
        raise NoFix("the buffer is set to an existing graph tensor (torch.no_grad() would not detach it), "
                    "and the value is not certainly one tensor (.detach() needs one)")
    if kind in ("inplace", "container", "attr", "setattr", "register_buffer"):
        # The whole statement (several lines, a value from an argument) under torch.no_grad(), with libcst.
        line, col = ctx.text.start(stmt)
        return Fix(applicability, "update the buffer under torch.no_grad()" + why, (wrap_no_grad(ctx, line, col),))
    return None
