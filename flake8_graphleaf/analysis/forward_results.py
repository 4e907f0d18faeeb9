"""What a submodule's ``forward`` returns, element by element.

``self.loss, self.acc = self.decoder(hs, ys)``: a call of a submodule gives a graph tensor, but
when the submodule's class is the program's (this file's or another's) and its ``forward`` returns
a tuple, some elements never carry history (an accuracy from ``th_accuracy``, a float from
``.item()``, a shape).  The class's ``forward`` is run once with no argument live and once with each
argument live (a graph tensor); an element is history-free when it is in every run.

Only a tuple in which some element does carry history is used: a forward whose result the
analysis does not follow at all says nothing.
"""

from __future__ import annotations

import ast

from .values import ARG, NOTHING, Value
from .helper_objects import program_class


def forward_items(imports, qualname: str, depth: int = 0) -> tuple[bool, ...] | None:
    """Per element of the tuple ``qualname``'s forward returns: may it carry history?  None when
    unknown (not a class of the program, no forward of its own, no tuple, nothing followed)."""
    from .scopes import ClassRunner

    if depth > 1:
        return None
    found = program_class(imports, qualname)
    if found is None:
        return None
    parsed, info, module_classes = found
    memo = parsed.memo
    key = ("forward_items", info.node.name)
    if key in memo:
        return memo[key]
    memo[key] = None  # recursion: unknown
    func = info.facts.methods.get("forward") if info.facts.is_module else None
    if func is None or sum(1 for _ in ast.walk(func)) > 3000:
        return None
    args = func.args
    names = [a.arg for a in (args.posonlyargs + args.args)[1:]]
    may: list[bool] | None = None
    for live in [None, *names]:
        runner = ClassRunner(info, parsed.imports, module_classes, depth=depth + 1)
        pos = [Value(ARG, f"#{n}") if n == live else NOTHING for n in names]
        result = runner.run_with(func, pos, {}, lambda store, f: None, True)
        if result.items is None:
            return None
        flags = [item.kind >= ARG for item in result.items]
        if may is None:
            may = flags
        elif len(flags) != len(may):
            return None
        else:
            may = [a or b for a, b in zip(may, flags)]
    if not may or not any(may) or all(may):
        return None
    memo[key] = tuple(may)
    return memo[key]
