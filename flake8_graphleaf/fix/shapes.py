"""What an attribute holds, as far as this file shows it: one tensor, a list of tensors or a dict of
tensors.  The copy-safe fix writes a few lines for these shapes (``state["x"] = detached(...)``)
and the generic walker (lists, tuples, named tuples, dicts and plain objects, recursively) only for
attributes whose shape the file does not show.

A shape is known only when *every* write of ``<anything>.name`` in the file agrees with it:

- ``tensor``: each assignment is ``None`` or certainly one tensor (:func:`.tensors.certainly_tensor`);
- ``list``: assigned ``[]``, ``list()`` or a list display of tensors, and filled with
  ``.append(t)`` / ``.insert(i, t)`` / ``[i] = t`` of tensors;
- ``dict``: assigned ``{}``, ``dict()`` or a dict display of tensors, and filled with ``[k] = t``.

Anything else (``+=``, ``.extend(...)``, a value of another kind, a ``setattr`` with this name,
the same name on another object with another shape) gives no shape.
"""

from __future__ import annotations

import ast

from .context import Context
from .tensors import certainly_tensor

TENSOR, LIST, DICT = "tensor", "list", "dict"


def _function_of(node: ast.AST, ctx: Context):
    cur = ctx.parents.get(node)
    while cur is not None and not isinstance(cur, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        cur = ctx.parents.get(cur)
    return cur


def _named(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == name


def _empty(value: ast.AST, kind: str) -> bool:
    if kind == LIST and isinstance(value, ast.List) and not value.elts:
        return True
    if kind == DICT and isinstance(value, ast.Dict) and not value.keys:
        return True
    return (isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and not value.args
            and not value.keywords and value.func.id == kind)


def _tensor(value: ast.AST, ctx: Context) -> bool:
    return certainly_tensor(value, ctx, _function_of(value, ctx))


def _assigned(value: ast.AST, ctx: Context) -> str | None:
    """The shape one assignment gives (None: not one this module knows; "none": ``None``)."""
    if isinstance(value, ast.Constant) and value.value is None:
        return "none"
    if _empty(value, LIST) or (isinstance(value, ast.List) and all(_tensor(e, ctx) for e in value.elts)):
        return LIST
    if _empty(value, DICT) or (isinstance(value, ast.Dict) and all(k is not None for k in value.keys)
                               and all(_tensor(v, ctx) for v in value.values)):
        return DICT
    return TENSOR if _tensor(value, ctx) else None


def known_shape(ctx: Context, name: str) -> str | None:
    """``tensor``, ``list`` or ``dict`` when every write of ``.name`` in the file agrees; else None.
    Once per file and name (every class of a file that stores ``.last`` asks the same question)."""
    if name not in ctx.shapes:
        ctx.shapes[name] = _known_shape(ctx, name)
    return ctx.shapes[name]


def _known_shape(ctx: Context, name: str) -> str | None:
    made: set[str] = set()
    items = False  # filled item by item: [k] = t, .append(t), .insert(i, t)
    for n in ast.walk(ctx.tree):
        if isinstance(n, (ast.Assign, ast.AnnAssign)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            for t in targets:
                if isinstance(t, (ast.Tuple, ast.List)) and any(_named(e, name) for e in ast.walk(t)):
                    return None  # unpacked into it: no shape from here
                if _named(t, name):
                    if n.value is None:
                        continue  # an annotation alone
                    shape = _assigned(n.value, ctx)
                    if shape is None:
                        return None
                    made.add(shape)
                elif isinstance(t, ast.Subscript) and _named(t.value, name):
                    if not _tensor(n.value, ctx):
                        return None
                    items = True
        elif isinstance(n, ast.AugAssign) and (_named(n.target, name) or (
                isinstance(n.target, ast.Subscript) and _named(n.target.value, name))):
            return None
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and _named(n.func.value, name):
            if n.func.attr in ("append", "insert"):
                if not n.args or not _tensor(n.args[-1], ctx):
                    return None
                items = True
                made.add("append")
            elif n.func.attr in ("extend", "update", "setdefault", "__setitem__", "add"):
                return None
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "setattr" \
                and len(n.args) >= 2 and isinstance(n.args[1], ast.Constant) and n.args[1].value == name:
            return None
    made.discard("none")
    if made == {TENSOR} and not items:
        return TENSOR
    if made in ({LIST}, {LIST, "append"}):
        return LIST
    if made == {DICT}:
        return DICT
    return None
