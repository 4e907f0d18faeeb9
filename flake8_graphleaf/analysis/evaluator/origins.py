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
    made = _made_in(value, body, call.lineno) or _bound_before(body, given, call.lineno)
    loop = _loop_around(body, given, call)
    if loop is not None and (made is None or made.lineno < loop.lineno):
        # Detection(b, s, e) for ... in zip(boxes, scores, embeddings): the item passed at the call
        # (not the line before the loop that made the whole sequence)
        return frame, given, given, call
    return frame, made or given, given, call


def _loop_around(body: list, given: ast.AST, call: ast.Call):
    """The ``for`` loop or comprehension around ``call`` that binds the name ``given`` to the items
    of what it iterates, or None."""
    if not isinstance(given, ast.Name):
        return None
    for stmt in body:
        for n in walk(stmt):
            if isinstance(n, (ast.For, ast.AsyncFor, ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)) and (
                    n.lineno <= call.lineno <= (n.end_lineno or n.lineno)):
                targets = [n.target] if isinstance(n, (ast.For, ast.AsyncFor)) else [g.target for g in n.generators]
                if any(isinstance(t, ast.Name) and t.id == given.id for target in targets for t in ast.walk(target)):
                    return n
    return None


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


# what reading a tensor's metadata gives: nothing of its values, so nothing of its gradient
_INSPECTIONS = frozenset({"shape", "size", "dim", "ndim", "ndimension", "dtype", "device", "numel", "is_cuda",
                          "layout"})


def _is_forward(frame) -> bool:
    return (frame.func is not None and frame.func.name in ("forward", "__call__") and frame.info is not None
            and frame.info.facts.is_module and frame.self_atom is not None)


def _inspection_entry(frame) -> tuple | None:
    """The call, outside any module's forward, that ran the forward ``frame`` is in (the outermost
    such call), when its result is only inspected: (path, call); else None."""
    entry = None
    f = frame
    while f is not None and f.caller is not None:
        if _is_forward(f) and not _is_forward(f.caller):
            entry = f.caller
        f = f.caller
    if entry is None or getattr(entry, "calling", None) is None or entry.hook:
        return None
    call = entry.calling
    body = entry.func.body if entry.func is not None else entry.program.current.tree.body
    return (entry.ctx.path, call) if _only_inspected(body, call) else None


def _only_inspected(body: list, call: ast.Call) -> bool:
    """Is ``call``'s result thrown away (a statement of its own) or bound to a name that the code
    after it only inspects (``y.shape[-1]``, ``len(y)``)?"""
    for stmt in body:
        for n in walk(stmt):
            if isinstance(n, ast.Expr) and n.value is call:
                return True
            if isinstance(n, ast.Assign) and n.value is call:
                if len(n.targets) != 1 or not isinstance(n.targets[0], ast.Name):
                    return False
                return _name_only_inspected(body, n.targets[0].id, n)
    return False


def _name_only_inspected(body: list, name: str, bound: ast.Assign) -> bool:
    parents: dict[int, ast.AST] = {}
    uses = []
    for stmt in body:
        for n in walk(stmt):
            for child in ast.iter_child_nodes(n):
                parents[id(child)] = n
            if isinstance(n, ast.Name) and n.id == name and n is not bound.targets[0]:
                if isinstance(n.ctx, ast.Store):
                    return False  # bound again: what it holds then is another matter
                uses.append(n)
    for use in uses:
        parent = parents.get(id(use))
        if isinstance(parent, ast.Attribute) and parent.attr in _INSPECTIONS:
            continue
        if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and parent.func.id == "len":
            continue
        return False
    return True
