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
    registered = False  # module.register_buffer(name, value): a tensor (or None) by register_buffer's contract
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and stmt.targets[0] is node:
        value = stmt.value
    elif isinstance(stmt, ast.AnnAssign) and stmt.target is node and stmt.value is not None:
        value = stmt.value
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "register_buffer" \
            and len(node.args) >= 2 and not isinstance(node.args[1], ast.Starred):
        value, registered = node.args[1], True
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr" \
            and len(node.args) == 3 and not isinstance(node.args[2], ast.Starred):
        value = node.args[2]
    else:
        return None
    func = ctx.parents.get(stmt)
    while func is not None and not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        func = ctx.parents.get(func)
    if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    if not (registered or certainly_tensor(value, ctx, func) or _tensor_method_of_output(value, func)
            or _output_of_tensor_layer(value, func, f, ctx)):
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


def _output_of_tensor_layer(value, func, f: Finding, ctx: Context) -> bool:
    """``output`` itself, in a forward hook registered on a layer that returns one tensor
    (``self.fc.register_forward_hook(hook)`` with ``self.fc = nn.Linear(...)``)."""
    from .tensors import _TENSOR_MODULES

    params = func.args.posonlyargs + func.args.args
    if not params or not (isinstance(value, ast.Name) and value.id == params[-1].arg):
        return False
    info = ctx.classes.get(f.class_name or "")
    line = f.data.get("registered_at")
    if info is None or not line:
        return False
    for n in ast.walk(info.node):
        if (isinstance(n, ast.Call) and getattr(n, "lineno", None) == line and isinstance(n.func, ast.Attribute)
                and n.func.attr == "register_forward_hook"):
            recv = n.func.value
            if isinstance(recv, ast.Attribute) and isinstance(recv.value, ast.Name) and recv.value.id == "self":
                ctor = info.facts.submodule_ctors.get(recv.attr, "")
                return ctor.rsplit(".", 1)[-1] in _TENSOR_MODULES
    return False
