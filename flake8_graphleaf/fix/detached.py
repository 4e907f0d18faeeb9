"""A detached copy of a value of any shape, written in the user's code: what a copy or a send takes
when the fix cannot tell which item of it is the graph tensor (``pool.starmap(f, [(q, bank) for q in
queries])``, ``copy.deepcopy({k: v for k, v in ctx.items()})``)::

    torch.utils._pytree.tree_map_only(torch.Tensor, lambda v: v.detach() if v.grad_fn is not None else v, X)

torch's own tree map rebuilds the tuples, lists, dicts and named tuples of ``X`` with each tensor
that has a ``grad_fn`` detached (same values, same storage); leaves that require grad, other tensors
and every other object are passed as they are, and ``X`` itself is not changed. An object that is
not a container is passed as it is: if the graph tensor is in one, the finding stays and the fixer
undoes the fix."""

from __future__ import annotations

import ast

from .context import Context


def torch_name(ctx: Context) -> str | None:
    """The name the file binds to the ``torch`` module (``import torch``), or None."""
    return next((name for name, qual in sorted(ctx.imports.names.items()) if qual == "torch"), None)


def detached_tree(ctx: Context, node: ast.AST) -> str | None:
    """The text of a detached copy of ``node``'s value (see the module's doc), or None when the
    file does not import torch."""
    torch = torch_name(ctx)
    if torch is None:
        return None
    return (f"{torch}.utils._pytree.tree_map_only({torch}.Tensor, lambda v: v.detach() if v.grad_fn is not None "
            f"else v, {ctx.text.segment(node)})")
