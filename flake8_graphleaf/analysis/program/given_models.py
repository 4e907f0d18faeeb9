"""Models a class was given rather than built.

``self.model = model`` in ``__init__`` keeps a model the caller made; so do
``for k, v in scorers.items(): self.scorers[k] = v`` (a beam search's scorers) and
``self.search = TimeSyncSearch(scorers=self.scorers.copy())`` (a wrapper built around given
models).  Feeding an argument to such a model says nothing about where the argument comes from
(``graph_tensors.Evaluator._injected``): the class may sit at the top, called with data.

:func:`given_in_init` reads one ``__init__``; the attributes it can only name as "built around
``self.X``" (``X`` set by a base class in another file) are left as ``wraps`` for
:func:`.helper_objects.settle_given` to settle across files.
"""

from __future__ import annotations

import ast

from .stmtwalk import statements, walk
from ..facts.torch_names import looks_like_module_name

# Calls on a given container that give its models (or a copy of the container) back.
_PASS_THROUGH = frozenset({"copy", "values", "items", "get"})


# torch's wrappers keep the module they are given as ``self.module``.
_MODULE_WRAPPERS = frozenset({
    "torch.nn.DataParallel", "torch.nn.parallel.DataParallel", "torch.nn.parallel.data_parallel.DataParallel",
    "torch.nn.parallel.DistributedDataParallel", "torch.nn.parallel.distributed.DistributedDataParallel",
})


def given_in_init(init: ast.FunctionDef, self_name: str, init_args: set[str],
                  known: set[str], bases: list[str] = (), qualname=None) -> tuple[set[str], dict[str, set[str]]]:
    """(attributes that hold given models, attr -> the ``self`` attributes a wrapper built in
    ``__init__`` was given) for one ``__init__``; ``known``: attributes already known to hold
    given models (this class's bases in this file).  An argument kept as it is counts as a
    model when it is named like one (``self.decoder = decoder``; ``self.dim = dim`` is a
    setting)."""
    given_attrs: set[str] = set(known)
    if any(b in _MODULE_WRAPPERS for b in bases) and _wrapper_given(init, self_name, init_args, bases, qualname):
        given_attrs.add("module")  # DataParallel.__init__(self, module=base_kernel, ...)
    given_locals: set[str] = set()
    wraps: dict[str, set[str]] = {}

    def roots(expr: ast.AST) -> tuple[set[str], set[str]]:
        """(init arguments / given locals, self attributes) ``expr`` reads a model from."""
        while True:
            if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in _PASS_THROUGH:
                expr = expr.func.value
            elif isinstance(expr, ast.Subscript):
                expr = expr.value
            elif isinstance(expr, ast.Attribute) and not (isinstance(expr.value, ast.Name) and expr.value.id == self_name):
                expr = expr.value
            else:
                break
        if isinstance(expr, ast.Name):
            model = expr.id in given_locals or (expr.id in init_args and looks_like_module_name(expr.id))
            return ({expr.id} if model else set()), set()
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == self_name:
            return set(), {expr.attr}
        return set(), set()

    body = sorted(statements(init), key=lambda s: (s.lineno, s.col_offset))  # in the order of the text
    for _ in range(2):  # a local may be bound from an attribute given later in the text
        before = (len(given_attrs), len(given_locals))
        for stmt in body:
            if isinstance(stmt, ast.For):
                names, attrs = roots(stmt.iter)
                iterated = stmt.iter
                while isinstance(iterated, ast.Call) and isinstance(iterated.func, ast.Attribute):
                    iterated = iterated.func.value
                if names or attrs & given_attrs or (isinstance(iterated, ast.Name) and iterated.id in init_args):
                    given_locals.update(n.id for n in walk(stmt.target) if isinstance(n, ast.Name))
                continue
            if not isinstance(stmt, ast.Assign):
                continue
            value = stmt.value
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    names, attrs = roots(value)
                    if names or attrs & given_attrs:
                        given_locals.add(target.id)  # scorers = self.scorers.copy()
                elif isinstance(target, ast.Subscript) and _self_attr(target.value, self_name):
                    # self.scorers[k] = v, v a model taken from an argument
                    if isinstance(value, ast.Name) and value.id in given_locals:
                        given_attrs.add(target.value.attr)
                elif _self_attr(target, self_name) and not isinstance(value, ast.Call):
                    kept = value.values if isinstance(value, ast.BoolOp) else [value]  # decoder or Default()
                    if any(roots(v)[0] or roots(v)[1] & given_attrs for v in kept):
                        given_attrs.add(target.attr)  # self.decoder = decoder
                elif _self_attr(target, self_name):
                    # self.search = Search(scorers=scorers): a wrapper around given models
                    for arg in (*value.args, *(k.value for k in value.keywords)):
                        names, attrs = roots(arg)
                        if names & given_locals or attrs & given_attrs:  # not nn.Linear(m, m)
                            given_attrs.add(target.attr)
                        elif attrs:
                            wraps.setdefault(target.attr, set()).update(attrs)
        if (len(given_attrs), len(given_locals)) == before:
            break  # nothing new: a second pass would find nothing either
    return given_attrs - known, {a: s for a, s in wraps.items() if a not in given_attrs}


def _wrapper_given(init: ast.FunctionDef, self_name: str, init_args: set[str], bases, qualname) -> bool:
    """Does ``__init__`` hand one of its arguments to a torch wrapper base's ``__init__`` as the
    module (``super().__init__(module)``, ``DataParallel.__init__(self, module=m)``)?"""
    for node in walk(init):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "__init__"):
            continue
        recv, args = node.func.value, list(node.args)
        if isinstance(recv, ast.Call) and isinstance(recv.func, ast.Name) and recv.func.id == "super":
            pass
        elif qualname is not None and qualname(recv) in _MODULE_WRAPPERS:
            args = args[1:] if args and isinstance(args[0], ast.Name) and args[0].id == self_name else args
        else:
            continue
        given = [k.value for k in node.keywords if k.arg == "module"] or args[:1]
        if given and isinstance(given[0], ast.Name) and given[0].id in init_args:
            return True
    return False


def _self_attr(node: ast.AST, self_name: str) -> bool:
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == self_name
