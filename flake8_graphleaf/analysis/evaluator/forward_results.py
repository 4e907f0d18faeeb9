"""What a submodule's ``forward`` returns, element by element.

``self.loss, self.acc = self.decoder(hs, ys)``: a call of a submodule gives a graph tensor, but
when the submodule's class is the program's (this file's or another's) and its ``forward`` returns
a tuple, some elements never carry history (an accuracy from ``th_accuracy``, a float from
``.item()``, a shape), and some carry only what an argument brought (a queue the loss returns as
it was given).  The class's ``forward`` is run once with no argument live and once with each
argument live (a graph tensor): an element carries history always (it does in the first run), or
when one of the arguments that reach it is live at the call (:meth:`ForwardItems.carried`).

Only a tuple in which some element can carry history is used: a forward whose result the
analysis does not follow at all says nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..values import ARG, LEAF, NOTHING, Value
from ..program.helper_objects import program_class
from ..program.stmtwalk import walk


@dataclass(frozen=True)
class ForwardItems:
    params: tuple[str, ...]  # forward's positional parameters, after self
    # per element: (carries history whatever the arguments, the parameters whose history reaches it)
    items: tuple[tuple[bool, frozenset], ...]

    def carried(self, pos: list, kw: dict) -> tuple[bool, ...]:
        """Per element: may it carry history, given the values a call passes?"""
        if len(pos) > len(self.params) or any(k not in self.params for k in kw):
            return tuple(always or bool(deps) for always, deps in self.items)  # *args, **kwargs: unknown
        bound = dict(zip(self.params, pos))
        bound.update(kw)
        live = {name for name, value in bound.items() if value.kind >= LEAF}
        return tuple(always or bool(deps & live) for always, deps in self.items)


def forward_items(imports, qualname: str, depth: int = 0) -> ForwardItems | None:
    """The elements of the tuple ``qualname``'s forward returns, or None when unknown (not a
    class of the program, no forward of its own, no tuple, nothing followed)."""
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
    if func is None or sum(1 for _ in walk(func)) > 3000:
        return None
    args = func.args
    names = [a.arg for a in (args.posonlyargs + args.args)[1:]]
    always: list[bool] | None = None
    deps: list[set[str]] = []
    for live in [None, *names]:
        runner = ClassRunner(info, parsed.imports, module_classes, depth=depth + 1)
        pos = [Value(ARG, f"#{n}") if n == live else NOTHING for n in names]
        result = runner.run_with(func, pos, {}, lambda store, f: None, True)
        if result.items is None:
            return None
        flags = [item.kind >= ARG for item in result.items]
        if always is None:
            always, deps = flags, [set() for _ in flags]
        elif len(flags) != len(always):
            return None
        else:
            for i, flag in enumerate(flags):
                if flag and not always[i]:
                    deps[i].add(live)
    if not always or not any(a or d for a, d in zip(always, deps)) or all(always):
        return None
    memo[key] = ForwardItems(tuple(names), tuple((a, frozenset(d)) for a, d in zip(always, deps)))
    return memo[key]
