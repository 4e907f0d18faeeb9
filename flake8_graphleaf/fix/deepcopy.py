"""Fix for ``copy.deepcopy`` of a graph tensor (GLF201): ``t.detach().clone()`` (unsafe); of a value that
is not certainly one tensor (a dict, an item of one): the copy made of a detached copy of it
(:mod:`.detached`; unsafe too: the copy's tensors no longer require grad)."""

from __future__ import annotations

import ast

from ..analysis.findings import UNSAFE, Finding, Fix
from .context import Context, at, wrap
from .detached import detached_tree
from .tensors import certainly_tensor


# -- GLF201 ----------------------------------------------------------------------------
def fix_deepcopy(f: Finding, ctx: Context) -> Fix | None:
    call = at(ctx.tree, f.line, f.col, ast.Call)
    if call is None or len(call.args) != 1 or call.keywords:
        return None
    arg = call.args[0]
    scope = ctx.parents.get(call)
    while scope is not None and not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        scope = ctx.parents.get(scope)
    if certainly_tensor(arg, ctx, scope):
        caveat = "the copy no longer requires grad"
    elif isinstance(arg, ast.Call) and not isinstance(arg.func, ast.Attribute) or (
        isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute) and arg.func.attr in ("forward", "__call__")
    ):
        caveat = "the copy no longer requires grad; if the model returns a tuple or dict, copy each item instead"
    else:
        # a container or an item of one (copy.deepcopy({k: v for k, v in ctx.items()}), d[key]): its
        # graph tensors detached in what is copied, whatever its shape; the original keeps them
        text = detached_tree(ctx, arg) if not isinstance(arg, (ast.GeneratorExp, ast.Starred)) else None
        if text is None:
            return None
        return Fix(UNSAFE, "copy detached tensors (torch.utils._pytree.tree_map_only rebuilds the tuples, lists and "
                           "dicts with each graph tensor .detach()ed; the copy's tensors no longer require grad, the "
                           "original keeps its graph)", (ctx.edit(arg, text),))
    return Fix(UNSAFE, f"copy the tensor with .detach().clone() ({caveat})",
               (ctx.edit(call, wrap(ctx, arg) + ".detach().clone()"),))
