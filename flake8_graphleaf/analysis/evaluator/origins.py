"""Where a value a function was given came from: the parameter an expression comes from, the call
that passed it, and the statement of the caller that made it (the copy graph's "copy-arg" sinks and
the stores that only keep what they were given, :mod:`.heap`)."""

from __future__ import annotations

import ast

from ..program.stmtwalk import walk
from ..values import Value

def _params(func) -> set[str]:
    a = func.args
    return {p.arg for p in a.posonlyargs + a.args + a.kwonlyargs}


def _passed_parameter(func, arg: ast.AST, line: int, depth: int = 0) -> str | None:
    """The parameter of ``func`` the copied expression comes from: itself (``inputs``), through an
    item or attribute (``d[key]``), or through a local bound from it before the copy
    (``d = dict(data)``); None when it is made here."""
    root = arg
    while isinstance(root, (ast.Subscript, ast.Attribute)):
        root = root.value
    if not isinstance(root, ast.Name) or depth > 3:
        return None
    if root.id in _params(func):
        return root.id
    bound = _bound_before(func.body, root, line, items=False)
    if bound is None:
        return None
    names = {n.id for n in walk(bound.value) if isinstance(n, ast.Name)} & _params(func)
    if len(names) != 1:
        return None
    return _passed_parameter(func, ast.Name(id=names.pop()), bound.lineno, depth + 1)


def _caller_made(frame, name: str, value: Value):
    """Where the caller chain made what ``frame``'s function got as its parameter ``name``: (the
    frame of the function that made it, the statement or argument that made it there, the argument
    as written, the call that passed it on), or None where a call does not show it."""
    call = None
    while frame.caller is not None:
        call = getattr(frame.caller, "calling", None)
        given = _argument_for(frame.func, name, call, frame.self_atom is not None) if call is not None else None
        if given is None:
            return None
        frame = frame.caller
        if isinstance(given, ast.Name) and frame.func is not None and given.id in _params(frame.func):
            name = given.id
            continue
        break
    else:
        return None
    body = frame.func.body if frame.func is not None else frame.program.current.tree.body
    if _loop_target(body, given, call):
        # Detection(b, s, e) for ... in zip(boxes, scores, embeddings): the item passed at the call
        return frame, given, given, call
    where = _made_in(value, body, call.lineno) or _bound_before(body, given, call.lineno) or given
    return frame, where, given, call


def _loop_target(body: list, given: ast.AST, call: ast.Call) -> bool:
    """Is ``given`` a name that a ``for`` loop or a comprehension around ``call`` binds to the items
    of what it iterates?"""
    if not isinstance(given, ast.Name):
        return False
    for stmt in body:
        for n in walk(stmt):
            if isinstance(n, (ast.For, ast.AsyncFor, ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)) and (
                    n.lineno <= call.lineno <= (n.end_lineno or n.lineno)):
                targets = [n.target] if isinstance(n, (ast.For, ast.AsyncFor)) else [g.target for g in n.generators]
                if any(isinstance(t, ast.Name) and t.id == given.id for target in targets for t in ast.walk(target)):
                    return True
    return False


def _given_to(frame, stmt, value: Value) -> tuple | None:
    """A store that keeps what the function was given (``self.values = values``): (path, what made
    it) in the caller that made the tensor, or None."""
    if frame.func is None or frame.caller is None or not isinstance(stmt, ast.Assign):
        return None
    if not (isinstance(stmt.value, ast.Name) and stmt.value.id in _params(frame.func)):
        return None  # only the argument itself, stored as it came (not what the function computes from it)
    name = stmt.value.id
    found = _caller_made(frame, name, value)
    if found is None:
        return None
    return found[0].ctx.path, found[1]


def _made_in(value: Value, body: list, line: int):
    """The last step of the value's witness trail that is a statement of ``body`` before ``line``
    (``batch["pred"] = model(batch["image"])``), or None."""
    ids = {id(n) for stmt in body for n in walk(stmt)}
    steps = [node for step_line, _target, node, *_path in value.trail if id(node) in ids and step_line < line]
    return steps[-1] if steps else None


def _argument_for(func, name: str, call: ast.Call, method: bool):
    """The expression ``call`` passes for ``func``'s parameter ``name``, or None."""
    for k in call.keywords:
        if k.arg == name:
            return k.value
    params = [p.arg for p in func.args.posonlyargs + func.args.args]
    if method and params:
        params = params[1:]
    if name in params:
        i = params.index(name)
        if i < len(call.args) and not any(isinstance(a, ast.Starred) for a in call.args[: i + 1]):
            return call.args[i]
    return None


def _bound_before(body: list, given: ast.AST, line: int, items: bool = True):
    """The last assignment of the name ``given`` (or of an item or attribute of it) before
    ``line`` in ``body`` (walked whole), or None."""
    if not isinstance(given, ast.Name):
        return None
    best = None
    for stmt in body:
        for n in walk(stmt):
            if isinstance(n, ast.Assign) and n.lineno < line and any(
                    _rooted(t, given.id) if items else isinstance(t, ast.Name) and t.id == given.id for t in n.targets):
                if best is None or n.lineno > best.lineno:
                    best = n
    return best


def _rooted(target: ast.AST, name: str) -> bool:
    """``name = ...``, or a store into it: ``name["pred"] = ...``, ``name.out = ...``."""
    while isinstance(target, (ast.Subscript, ast.Attribute)):
        target = target.value
    return isinstance(target, ast.Name) and target.id == name
