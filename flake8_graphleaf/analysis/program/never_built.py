"""Classes the program can never build: a constructor that reads a name nothing binds.

``assert(out_size == 1)`` at the top level of ``__init__``, where no parameter, local, module-level
binding or builtin is called ``out_size``, raises NameError on every construction: no object of
the class exists, so nothing its ``forward`` would store is ever kept (the analysis would
otherwise judge the forward of a class that cannot run).

Only what is certain counts: a class defined at the module's top level (no enclosing function
whose locals it could see), a name read by a simple statement at the top level of ``__init__``
(not under ``if`` / ``try`` / a loop, not inside a lambda, a comprehension or a nested function),
bound nowhere in ``__init__`` (nor declared ``global`` / ``nonlocal`` there), bound nowhere at the
module's top level (imports, assignments, definitions, also under ``if`` / ``try``), not assigned
by a ``global`` declaration of any function of the module, and not a builtin. A module with a
star import, or that writes its own namespace (``globals()``, ``exec``, ``vars()``), is never
judged.
"""

from __future__ import annotations

import ast
import builtins

_BUILTINS = frozenset(dir(builtins)) | {"__file__", "__name__", "__doc__", "__spec__", "__loader__", "__package__",
                                        "__path__", "__builtins__", "__class__", "__annotations__", "__dict__"}
_NESTED = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.FunctionDef,
           ast.AsyncFunctionDef, ast.ClassDef)
_SIMPLE = (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Assert, ast.Return)


def _bound(node: ast.AST) -> set[str]:
    """Every name a tree binds (or declares global / nonlocal), at any depth."""
    out: set[str] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            out.add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(n.name)
        elif isinstance(n, ast.arg):
            out.add(n.arg)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            out.update((a.asname or a.name).split(".", 1)[0] for a in n.names)
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            out.update(n.names)
        elif isinstance(n, ast.ExceptHandler) and n.name:
            out.add(n.name)
        elif isinstance(n, ast.MatchAs) and n.name:
            out.add(n.name)
        elif isinstance(n, ast.MatchStar) and n.name:
            out.add(n.name)
        elif isinstance(n, ast.MatchMapping) and n.rest:
            out.add(n.rest)
    return out


def _top_names(tree: ast.Module) -> set[str]:
    """The names the module's top-level statements bind (remembered on the tree)."""
    cached = getattr(tree, "_graphleaf_top_names", None)
    if cached is not None:
        return cached
    out: set[str] = set()
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(stmt.name)
            continue
        out |= _bound(stmt)
    tree._graphleaf_top_names = out
    return out


def _open_namespace(tree: ast.Module) -> set[str] | None:
    """The names functions of the module declare global; None when the module's namespace cannot
    be known (a star import, ``globals()``, ``exec``). A walk of the whole file, asked only when
    a constructor reads a name the top level does not bind (remembered on the tree)."""
    cached = getattr(tree, "_graphleaf_open_namespace", False)
    if cached is not False:
        return cached
    out: set[str] | None = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names):
            out = None
            break
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("globals", "exec", "vars",
                                                                                         "locals", "eval"):
            out = None
            break
        if isinstance(n, ast.Global):
            out.update(n.names)
    tree._graphleaf_open_namespace = out
    return out


def _reads(stmt: ast.stmt):
    """The names a simple statement reads, outside nested scopes (a local variable's annotation
    is not evaluated)."""
    todo = [stmt] if not isinstance(stmt, ast.AnnAssign) else [n for n in (stmt.target, stmt.value) if n is not None]
    while todo:
        n = todo.pop()
        if isinstance(n, _NESTED):
            continue
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            yield n
        todo.extend(ast.iter_child_nodes(n))


def unbound_in_constructor(tree: ast.Module, cls: ast.ClassDef) -> ast.Name | None:
    """The first name ``cls.__init__`` reads on every construction that nothing binds (every
    construction raises NameError there), or None."""
    if cls not in tree.body:
        return None
    init = next((s for s in cls.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
                 and s.name == "__init__"), None)
    if init is None:
        return None
    a = init.args
    params = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs + [v for v in (a.vararg, a.kwarg) if v]}
    local: set[str] | None = None  # what __init__ binds: walked only for a name nothing else binds
    for stmt in init.body:
        if not isinstance(stmt, _SIMPLE):
            if isinstance(stmt, (ast.Pass, ast.Import, ast.ImportFrom, ast.Global, ast.Nonlocal)):
                continue
            return None  # a compound statement, a raise, a del: what follows may not run, or be bound there
        for name in _reads(stmt):
            if name.id in params or name.id in _BUILTINS or name.id in _top_names(tree):
                continue
            if local is None:
                local = _bound(init) - {init.name}
            if name.id in local:
                continue
            declared = _open_namespace(tree)
            if declared is None:
                return None
            if name.id not in declared:
                return name
        if isinstance(stmt, ast.Return):
            return None
    return None
