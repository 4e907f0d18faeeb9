"""What calling a function of the program gives, for autograd.

:func:`function_effect` runs a top-level function's body (this file's or another's, found through
:mod:`..program.project_view`) with each parameter in turn as a graph tensor: ``make_pad_mask(lengths)``
never returns history, ``to_device(m, x)`` returns only ``x``'s, ``th_accuracy(...)`` returns a
float, a function that calls a module always returns history.  Results are memoised on the
defining file.  The evaluator reaches this module through ``ImportMap.effect_of`` (installed by
the analysis), so that the expression semantics do not import the statement walker.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from .flow import Walker
from ..program.grad_mode import function_grad_mode
from .graph_tensors import ARG, GRAPH, LEAF, NOTHING, Evaluator, Value
from ..program.project_view import Definition
from ..program.stmtwalk import walk


@dataclass(frozen=True)
class Effect:
    """What calling a function gives, for autograd: ``graph`` (always history, e.g. it calls a
    module), the parameters whose history passes to the result, and whether the result is no
    tensor at all (a float, a bool, a string)."""

    graph: bool = False
    leaf: bool = False  # returns parameters (nn.Parameter(...), leaves that require grad)
    passes: tuple[str, ...] = ()
    # for a function returning a tuple of known length: the parameters each element passes on
    items: tuple[tuple[str, ...], ...] | None = None
    # the parameters (and, per tuple element, ``kept_items``) passed on *unchanged*: what still
    # carries its history when the call runs under no_grad (a list of them, the tensor itself)
    kept: tuple[str, ...] = ()
    kept_items: tuple[tuple[str, ...], ...] | None = None
    params: tuple[str, ...] = ()  # positional parameter names, in order
    keyword_only: tuple[str, ...] = ()
    # the parameters whose history reaches the result only through a callable the function
    # does not know (``fn(val)`` with ``fn`` a parameter): a step on trust at the call site
    guessed: tuple[str, ...] = ()


NO_HISTORY = Effect()


def function_effect(definition: Definition, depth: int = 0) -> Effect | None:
    """The :class:`Effect` of a top-level function, judged by running its body with each
    parameter in turn as a graph tensor.  None when the function is too large to judge."""
    if depth > 3:
        return None
    func = definition.node
    if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    memo = definition.module.memo
    key = ("effect", func.name)
    if key in memo:
        return memo[key]
    memo[key] = None  # recursion: unknown
    result = _judge_function(definition, depth)
    memo[key] = result
    return result


def _judge_function(definition: Definition, depth: int) -> Effect | None:
    func = definition.node
    if sum(1 for _ in walk(func)) > 4000:
        return None
    args = func.args
    positional = [a.arg for a in args.posonlyargs + args.args]
    keyword_only = [a.arg for a in args.kwonlyargs]
    names = positional + keyword_only + [a.arg for a in (args.vararg, args.kwarg) if a is not None]
    imports = definition.module.imports
    grad = function_grad_mode(func, imports)

    def run(live: str | None, with_grad: bool = True) -> Value:
        ev = Evaluator(imports, None, None, set())
        ev.depth = depth + 1
        ev.grad = grad and with_grad
        for n in names:
            # under no_grad, a graph tensor that comes out again was passed on unchanged
            ev.env[n] = (Value(ARG if with_grad else GRAPH, f"#{n}") if n == live else NOTHING)
        return Walker(ev, lambda store: None).run(func.body)

    if not grad:
        return NO_HISTORY
    base = run(None)
    if base.kind == GRAPH:
        return Effect(graph=True, params=tuple(positional), keyword_only=tuple(keyword_only))
    if base.kind == LEAF:
        return Effect(leaf=True, params=tuple(positional), keyword_only=tuple(keyword_only))
    guessed: list[str] = []
    given = {f"{p}(...)" for p in names}  # a call of a callable the function is given (fn(val), map(fn, val))

    def judged(n: str) -> Value:
        v = run(n)
        if v.kind >= ARG and (v.guess in given or any(i.guess in given and i.kind >= ARG for i in v.items or ())):
            guessed.append(n)
        return v

    passes, kept = _per_parameter(names, base, judged, ARG)
    kept_names, kept_items = _per_parameter(names, base, lambda n: run(n, with_grad=False), GRAPH)
    return Effect(passes=tuple(passes[0]), params=tuple(positional), keyword_only=tuple(keyword_only),
                  items=kept, kept=tuple(kept_names[0]), kept_items=kept_items, guessed=tuple(guessed))


def _per_parameter(names, base: Value, run, kind: int):
    """([params whose history reaches the result], per tuple element the same, or None)."""
    whole: list[str] = []
    items: list[list[str]] | None = [[] for _ in base.items] if base.items is not None else None
    for n in names:
        v = run(n)
        if v.kind >= kind:
            whole.append(n)
        if items is not None:
            if v.items is None or len(v.items) != len(items):
                items = None
            else:
                for i, item in enumerate(v.items):
                    if item.kind >= kind:
                        items[i].append(n)
    return (whole,), (tuple(tuple(i) for i in items) if items is not None else None)
