"""The fix for a call that runs a module's forward with grad on only to look at its result
(GLF201 with ``entry``: a stride probe ``y = self.forward(zeros)`` read for ``y.shape``, a tracing
pass ``model(example)``): the call under ``torch.no_grad()``, so that the forward stores no graph
tensor. Unsafe: what that forward stores on the model is then a plain tensor, and a program that
reads it for a gradient before the next forward replaces it would train differently."""

from __future__ import annotations

import ast

from .context import Context
from ..analysis.findings import UNSAFE, Fix


def fix_no_grad_call(f, ctx: Context) -> Fix | None:
    call = next((n for n in ast.walk(ctx.tree) if isinstance(n, ast.Call) and n.lineno == f.line
                 and n.col_offset == f.col), None)
    torch_name = next((name for name, qual in ctx.imports.names.items() if qual == "torch"), None)
    if call is None or torch_name is None:
        return None
    stmt = next((s for s in ast.walk(ctx.tree) if isinstance(s, (ast.Expr, ast.Assign)) and s.value is call), None)
    if stmt is None or stmt.lineno != stmt.end_lineno:
        return None  # a statement of one line only: the block it moves into is indented once more
    text = ctx.text
    indent = text.indent_of(stmt.lineno)
    body = text.segment(stmt)
    new = f"with {torch_name}.no_grad():{text.newline()}{indent}    {body}"
    return Fix(UNSAFE, f"run it under {torch_name}.no_grad(): the forward then stores plain tensors on the model "
                       "(unsafe where the program reads one of them for a gradient before the next forward replaces it)",
               (ctx.edit(stmt, new),))
