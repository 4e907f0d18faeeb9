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

from .graph_tensors import ARG, GRAPH, NOTHING, Value
from .modules import collect_classes
from .project_view import resolve


def forward_items(imports, qualname: str, depth: int = 0) -> tuple[bool, ...] | None:
    """Per element of the tuple ``qualname``'s forward returns: may it carry history?  None when
    unknown (not a class of the program, no forward of its own, no tuple, nothing followed)."""
    from .scopes import ClassRunner

    if depth > 1:
        return None
    module, _, name = qualname.rpartition(".")
    current = getattr(imports, "current", None)
    if current is not None and module == current.name and name in current.defs:
        parsed = current
    else:
        found = resolve(getattr(imports, "project", None), qualname)
        parsed = found.module if found is not None else None
    if parsed is None:
        return None
    memo = parsed.memo
    key = ("forward_items", name)
    if key in memo:
        return memo[key]
    memo[key] = None  # recursion: unknown
    if "classes" not in memo:
        memo["classes"] = collect_classes(parsed.tree, parsed.imports)
    classes = memo["classes"]
    info = classes.get(name)
    func = info.facts.methods.get("forward") if info is not None and info.facts.is_module else None
    if func is None or sum(1 for _ in _walk(func)) > 3000:
        return None
    args = func.args
    names = [a.arg for a in (args.posonlyargs + args.args)[1:]]
    module_classes = {n for n, c in classes.items() if c.facts.is_module}
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


def _walk(node):
    import ast

    return ast.walk(node)


def split_result(value: Value, flags: tuple[bool, ...]) -> Value:
    """The submodule call's result ``value`` as a tuple whose history-free elements hold nothing."""
    items = tuple(Value(value.kind, value.origin) if f else NOTHING for f in flags)
    return Value(value.kind, value.origin, items)
