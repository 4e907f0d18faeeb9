"""Fixes for stores on the module (GLF001, GLF002): rename to a local variable (safe when nothing
else reads it), a detached mirror, ``.detach()`` on container items (unsafe)."""

from __future__ import annotations

import ast

from ..analysis.findings import SAFE, UNSAFE, Finding, Fix
from ..analysis.evaluator.flow import CONTAINER_MUTATORS
from .context import (
    DISPLAYS,
    Context,
    alone_on_lines,
    at,
    fresh_name,
    method_self_name,
    reachable_after,
    read_elsewhere,
    self_attr_nodes,
    self_attribute,
    statement,
    top_statement,
    wrap,
)
from .tensors import certainly_tensor


# -- rename to a local variable (safe) ------------------------------------------------
def rename_to_local(f: Finding, ctx: Context) -> Fix | None:
    found = self_attribute(f, ctx)
    if found is None:
        return None
    method, self_name, attr = found
    nodes = self_attr_nodes(method, self_name, attr)
    if not nodes:
        return None
    first = nodes[0]
    parents = ctx.parents
    only_stores = all(
        isinstance(n.ctx, ast.Store) and not isinstance(parents.get(n), ast.AugAssign) for n in nodes
    )
    if not only_stores:
        # Written before any read on every path: the first use is a plain assignment
        # at the top level of the method, and does not read the attribute itself.
        stmt = top_statement(method, first, parents)
        if not isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            return None
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        if not any(t is first for t in targets):
            return None
        if any(isinstance(n, ast.Attribute) and n.attr == attr for n in ast.walk(stmt.value)):
            return None
    for n in ast.walk(method):  # a string naming the attribute (getattr, hasattr, setattr)
        if isinstance(n, ast.Constant) and n.value == attr:
            return None
    if read_elsewhere(ctx, method, attr):
        return None
    name = fresh_name(attr, method, ctx.tree)
    edits = tuple(ctx.edit(n, name) for n in nodes)
    return Fix(SAFE, f"use a local variable '{name}' instead of '{self_name}.{attr}'", edits)


# -- GLF001 ----------------------------------------------------------------------------
def fix_attr_store(f: Finding, ctx: Context) -> Fix | None:
    if f.data.get("kind") != "attr":
        return None
    fix = rename_to_local(f, ctx)
    if fix is not None:
        return fix
    return detached_mirror(f, ctx)


def detached_mirror(f: Finding, ctx: Context) -> Fix | None:
    found = self_attribute(f, ctx)
    if found is None:
        return None
    method, self_name, attr = found
    target = at(method, f.line, f.col, ast.Attribute)
    if target is None:
        return None
    parents = ctx.parents
    stmt = statement(target, parents)
    if stmt is None or not alone_on_lines(ctx, stmt):
        return None
    desc = f"keep a detached copy in '{self_name}.{attr}' (readers outside forward lose its gradient)"
    later = {id(n) for s in reachable_after(method, stmt) for n in ast.walk(s)}
    later_reads = [
        n for n in self_attr_nodes(method, self_name, attr) if isinstance(n.ctx, ast.Load) and id(n) in later
    ]
    if isinstance(stmt, ast.AugAssign) and stmt.target is target:
        if later_reads or not certainly_tensor(stmt.value, ctx, method):
            return None
        return Fix(UNSAFE, desc, (ctx.edit(stmt.value, wrap(ctx, stmt.value) + ".detach()"),))
    if not isinstance(stmt, (ast.Assign, ast.AnnAssign)):
        return None
    value = stmt.value
    direct = isinstance(stmt, ast.AnnAssign) or (len(stmt.targets) == 1 and stmt.targets[0] is target)
    if value is None or (direct and isinstance(value, DISPLAYS + (ast.IfExp, ast.Constant, ast.Lambda))):
        return None
    if direct and not certainly_tensor(value, ctx, method):
        return None
    if not direct and not _tensor_leaves(value, ctx, method):
        return None
    if direct and not later_reads:
        return Fix(UNSAFE, desc, (ctx.edit(value, wrap(ctx, value) + ".detach()"),))
    # Assign to a local, and keep a detached mirror on the attribute.
    if later_reads and top_statement(method, stmt, parents) is not stmt:
        return None
    name = fresh_name(attr, method, ctx.tree)
    text = ctx.text
    nl = text.newline()
    indent = text.indent_of(stmt.lineno)
    mirror = f"{indent}{self_name}.{attr} = {name}.detach(){nl}"
    end_line = stmt.end_lineno
    if end_line >= len(text.lines) and not text.line(end_line).endswith(("\n", "\r")):
        insert = ctx.insert(end_line, len(text.line(end_line)), nl + mirror.rstrip("\r\n"))
    else:
        insert = ctx.insert(end_line + 1, 0, mirror)
    edits = [ctx.edit(target, name), insert] + [ctx.edit(n, name) for n in later_reads]
    return Fix(UNSAFE, desc, tuple(edits))


def _tensor_leaves(value: ast.AST, ctx: Context, method) -> bool:
    """Does unpacking ``value`` into a tuple target give tensors only?  Known for the
    recurrent layers (output, (h, c)) and for tuple displays of tensors."""
    if isinstance(value, ast.Tuple):
        return all(certainly_tensor(e, ctx, method) for e in value.elts)
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and method is not None:
        parent = ctx.parents.get(method)
        info = ctx.classes.get(parent.name) if isinstance(parent, ast.ClassDef) else None
        if info is not None and isinstance(value.func.value, ast.Name) and value.func.value.id == method_self_name(method):
            ctor = info.facts.submodule_ctors.get(value.func.attr, "")
            return ctor.rsplit(".", 1)[-1] in ("LSTM", "GRU", "RNN")
    return False


# -- GLF002 ----------------------------------------------------------------------------
def fix_container(f: Finding, ctx: Context) -> Fix | None:
    if f.data.get("kind") != "container":
        return None
    found = self_attribute(f, ctx)
    if found is None:
        return None
    method, self_name, attr = found
    fix = rename_to_local(f, ctx)
    if fix is not None:
        return fix
    return container_detach(f, ctx)


def container_detach(f: Finding, ctx: Context) -> Fix | None:
    """Unsafe: detach what goes in, if forward never reads the container back."""
    if f.data.get("kind") != "container":
        return None
    found = self_attribute(f, ctx)
    if found is None:
        return None
    method, self_name, attr = found
    parents = ctx.parents
    for n in self_attr_nodes(method, self_name, attr):
        parent = parents.get(n)
        if isinstance(parent, ast.Attribute) and parent.attr in CONTAINER_MUTATORS:
            continue
        if isinstance(parent, ast.Subscript) and isinstance(parent.ctx, ast.Store):
            continue
        if isinstance(n.ctx, ast.Store):
            continue
        return None
    node = at(method, f.line, f.col, (ast.Call, ast.Subscript))
    value = None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if node.func.attr == "append" and len(node.args) == 1:
            value = node.args[0]
        elif node.func.attr == "insert" and len(node.args) == 2:
            value = node.args[1]
    elif isinstance(node, ast.Subscript):
        stmt = statement(node, parents)
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and stmt.targets[0] is node:
            value = stmt.value
    if value is None or not certainly_tensor(value, ctx, method):
        return None
    return Fix(UNSAFE, f"store .detach() in '{self_name}.{attr}' (readers outside forward lose the gradient)",
               (ctx.edit(value, wrap(ctx, value) + ".detach()"),))


def item_detach(f: Finding, ctx: Context) -> Fix | None:
    """Unsafe: ``.detach()`` what a store the copy graph found puts into a container of an object it
    does not own (``session.losses.append(loss)`` in a training step, ``state.history.append({...,
    "last_loss": loss})``, ``group["lr"] = base * scale``): the tensor when it is certainly one, else
    each entry of a dict / list / tuple display that certainly is one. Readers of the container
    then get the values without their gradient; where a reader in the checked paths uses one for
    a gradient, _choose_store_fix drops this fix."""
    if f.code != "GLF002" or f.data.get("kind") != "copy-graph":
        return None
    method = _enclosing_function(ctx.tree, f.line)
    node = at(method if method is not None else ctx.tree, f.line, f.col, (ast.Call, ast.Subscript, ast.Attribute))
    value = None
    if isinstance(node, ast.Attribute) and isinstance(ctx.parents.get(node), ast.Call):
        node = ctx.parents.get(node)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if node.func.attr in ("append", "add") and len(node.args) == 1 and not node.keywords:
            value = node.args[0]
        elif node.func.attr == "insert" and len(node.args) == 2:
            value = node.args[1]
    elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
        stmt = statement(node, ctx.parents)
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and stmt.targets[0] is node:
            value = stmt.value
    if value is None:
        return None
    if certainly_tensor(value, ctx, method):
        targets = [value]
    elif isinstance(value, ast.Dict):
        targets = [v for v in value.values if v is not None and certainly_tensor(v, ctx, method)]
    elif isinstance(value, (ast.List, ast.Tuple)):
        targets = [v for v in value.elts if not isinstance(v, ast.Starred) and certainly_tensor(v, ctx, method)]
    else:
        targets = []
    if not targets:
        return None
    return Fix(UNSAFE, f"store .detach() of what goes into '{f.attribute or 'the container'}' (its readers get it "
                       "without its gradient)",
               tuple(ctx.edit(v, wrap(ctx, v) + ".detach()") for v in targets))


def _enclosing_function(tree: ast.AST, line: int):
    """The innermost function whose lines hold ``line``, or None."""
    best = None
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.lineno <= line <= (n.end_lineno or n.lineno):
            if best is None or n.lineno >= best.lineno:
                best = n
    return best
