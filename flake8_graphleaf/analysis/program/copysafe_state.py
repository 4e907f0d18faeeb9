"""Which attributes a class's own copy protocol already hands to copies in another form.

``copy.deepcopy``, ``pickle`` and ``torch.save`` copy what ``__getstate__`` returns, not the live
``__dict__``.  A ``__getstate__`` that replaces, drops or detaches ``state["name"]`` (by hand, or the
loop the copy-safe fix writes: ``for name in ("a", "b"): state[name] = ...``), or that clears or
resets ``self.name`` before the state is taken (a distillation wrapper emptying its feature dicts),
makes the store of a graph tensor in ``name`` harmless for copies: its findings are dropped.  A
buffer lives in ``state["_buffers"]``: detaching that entry covers the class's buffer findings
(GLF004), and a loop over every entry of the state (``for name in list(state):``) covers every
attribute, names made at run time (``setattr(self, f"_last_{k}", v)``) included.  So
does naming ``name`` in a class's own ``__deepcopy__`` / ``__reduce__`` / ``__reduce_ex__``
(PairwiseGP sets its cached tensors to None around the copy): such a class decides what a copy gets.
"""

from __future__ import annotations

import ast
import re

from ..findings import Finding
from .stmtwalk import walk

# The rules whose finding is about a value held in the instance ``__dict__``.
COVERABLE = ("GLF001", "GLF002", "GLF003", "GLF010")
# A buffer lives in ``state["_buffers"]``: covered when that entry is detached (GLF004).
BUFFERS = "_buffers"
# Every entry of the state is detached (``for name in list(state): ...``): names made at run time too.
ALL = "*"


def getstate_of(class_node: ast.ClassDef) -> ast.FunctionDef | None:
    for stmt in class_node.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name == "__getstate__":
            return stmt
    return None


def _const_str(node) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


OWN_COPY = ("__deepcopy__", "__reduce__", "__reduce_ex__")


def named_in_own_copy(class_node: ast.ClassDef) -> set[str]:
    """Every attribute name a class's own ``__deepcopy__`` / ``__reduce__(_ex)__`` mentions."""
    out: set[str] = set()
    for stmt in class_node.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name in OWN_COPY:
            for n in walk(stmt):
                if isinstance(n, ast.Attribute):
                    out.add(n.attr)
                elif _const_str(n) and _const_str(n).isidentifier():
                    out.add(_const_str(n))  # type: ignore[arg-type]
    return out


def covered_attributes(class_node: ast.ClassDef) -> set[str]:
    """Names whose entry in the state the class's ``__getstate__`` rewrites, pops, deletes or
    clears, and the names its own ``__deepcopy__`` handles."""
    out: set[str] = named_in_own_copy(class_node)
    method = getstate_of(class_node)
    if method is None:
        return out
    loops: dict[str, list[str]] = {}
    for n in walk(method):
        if isinstance(n, ast.For) and isinstance(n.target, ast.Name) and isinstance(n.iter, (ast.Tuple, ast.List, ast.Set)):
            names = [_const_str(e) for e in n.iter.elts]
            if names and all(names):
                loops[n.target.id] = names  # type: ignore[assignment]
        elif isinstance(n, ast.For) and isinstance(n.target, ast.Name) and _every_key(n.iter) \
                and _detaches_each(n):
            loops[n.target.id] = [ALL]
    for n in walk(method):
        # self.feats.clear() / self.cache = None before the state is taken
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "clear":
            if isinstance(n.func.value, ast.Attribute) and isinstance(n.func.value.value, ast.Name):
                out.add(n.func.value.attr)
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant) and n.value.value is None:
            for target in n.targets:
                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
                    out.add(target.attr)
        key = None
        if isinstance(n, ast.Subscript) and isinstance(n.ctx, (ast.Store, ast.Del)):
            key = n.slice
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "pop" and n.args:
            key = n.args[0]
        if key is None:
            continue
        if _const_str(key):
            out.add(_const_str(key))  # type: ignore[arg-type]
        elif isinstance(key, ast.Name) and key.id in loops:
            out.update(loops[key.id])
    return out


def _detaches_each(loop: ast.For) -> bool:
    """Does the loop over every entry store ``state[name] = <something that detaches>`` (a call
    of ``detached(...)`` or a ``.detach()``)?  Moving tensors (``.cpu()``) keeps their graph."""
    for n in walk(loop):
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Subscript) for t in n.targets):
            for c in walk(n.value):
                if isinstance(c, ast.Call) and ((isinstance(c.func, ast.Name) and c.func.id == "detached")
                                                or (isinstance(c.func, ast.Attribute) and c.func.attr == "detach")):
                    return True
    return False


def _every_key(node) -> bool:
    """``state``, ``list(state)``, ``tuple(state)``, ``state.keys()``: a loop over every entry."""
    if isinstance(node, ast.Call) and not node.keywords:
        if isinstance(node.func, ast.Name) and node.func.id in ("list", "tuple") and len(node.args) == 1:
            return _every_key(node.args[0])
        if isinstance(node.func, ast.Attribute) and node.func.attr == "keys" and not node.args:
            return _every_key(node.func.value)
        return False
    return isinstance(node, ast.Name) and node.id == "state"


_PLAIN = re.compile(r"([A-Za-z_]\w*)\.([A-Za-z_]\w*)(\[\.\.\.\])?")


def stored_name(f: Finding, scope: ast.AST | None = None) -> str | None:
    """The instance attribute a store finding is about: ``self.cache``, ``self.cache[k]``,
    ``setattr(self, "cache", v)``, ``self.__dict__["cache"]`` give ``cache``; ``self.sub.x`` gives None."""
    m = _PLAIN.fullmatch(f.attribute or "")
    if m is None:
        return None
    name = m.group(2)
    if name == "__dict__":
        for node in walk(scope) if scope is not None and not m.group(3) else ():
            if isinstance(node, ast.Subscript) and (node.lineno, node.col_offset) == (f.line, f.col):
                return _const_str(node.slice)
        return None
    return name


def on_self(f: Finding, classes: dict) -> bool:
    """Is the finding's store on the instance the class's own method (or hook) runs for?"""
    if f.code == "GLF003":
        return bool(f.data.get("on_self"))
    info = classes.get(f.class_name or "")
    method = info.facts.methods.get(f.data.get("method", "")) if info is not None else None
    if method is None:
        return False
    params = method.args.posonlyargs + method.args.args
    return bool(params) and f.data.get("root") == params[0].arg


def covered_in_class(name: str, classes: dict, seen: frozenset = frozenset()) -> set[str]:
    """Covered by the class's own ``__getstate__``, and by its bases' (in this file) when it has none
    or its own chains to ``super().__getstate__()``."""
    info = classes.get(name)
    if info is None or name in seen:
        return set()
    own = getstate_of(info.node)
    out = covered_attributes(info.node)
    if own is None or "super" in {n.id for n in walk(own) if isinstance(n, ast.Name)}:
        for base in info.local_bases:
            out |= covered_in_class(base, classes, seen | {name})
    return out


def drop_covered(findings: list[Finding], classes: dict) -> list[Finding]:
    cover: dict[str, set[str]] = {}
    out = []
    for f in findings:
        if f.code in COVERABLE + ("GLF004",) and f.class_name in classes and on_self(f, classes):
            if f.class_name not in cover:
                cover[f.class_name] = covered_in_class(f.class_name, classes)
            covered = cover[f.class_name]
            if ALL in covered:
                continue
            if f.code == "GLF004" and BUFFERS in covered:
                continue
            if f.code != "GLF004" and stored_name(f, classes[f.class_name].node) in covered:
                continue
        out.append(f)
    return out
