"""One module per rule family.  Each rule module lists, next to its checks, the codes
it reports (``RULES``: code -> one-line summary) and small valid / invalid examples
(``EXAMPLES``) that the test-suite runs."""

from __future__ import annotations

import ast

from ..findings import Finding
from ..evaluator.flow import overwritten_later, resets_of


def finding(code: str, node: ast.AST, message: str, **extra) -> Finding:
    return Finding(
        code=code,
        line=node.lineno,
        col=node.col_offset,
        message=message,
        end_line=getattr(node, "end_lineno", None),
        end_col=getattr(node, "end_col_offset", None),
        **extra,
    )


ARGUMENT_ONLY = "GLF010"


def argument_only(f: Finding) -> Finding:
    """The finding under the opt-in code: its only evidence is an argument that reaches no
    learnable computation (GLF010 names the rule it would have been)."""
    f.data["code_if_resolved"] = f.code
    f.message = f"{f.code} argument-only: {f.message} (the argument reaches no learnable computation here)"
    f.code = ARGUMENT_ONLY
    return f


def eval_only(f: Finding) -> Finding:
    """The finding under the opt-in code: the store runs only in eval mode (``if not
    self.training:``), which ordinary use runs under ``no_grad``; that it runs with grad on is a
    guess. The copy graph reports it under its own code where the program's calls show it."""
    f.data["code_if_resolved"] = f.code
    f.message = (f"{f.code} eval-only: {f.message} (the store runs only in eval mode, ordinarily under "
                 "torch.no_grad(): only an eval forward with grad on keeps the graph)")
    f.code = ARGUMENT_ONLY
    if f.witness is not None:
        f.witness["assumed"] = "an eval-mode forward (not self.training) runs with grad enabled"
    return f


def on_trust(f: Finding, guess: str) -> Finding:
    """The finding under the opt-in code: a step of its chain is taken on trust (``guess``: a
    callable whose semantics the analysis does not have, taken to carry its arguments' history)."""
    f.data["code_if_resolved"] = f.code
    f.message = f"{f.code} on trust: {f.message} (a step is a guess: {guess} is taken to carry its arguments' history)"
    f.code = ARGUMENT_ONLY
    return f


def decides_own_copy(f: Finding, cls: str) -> Finding:
    """The finding under the opt-in code: the class's objects decide what their copies hold (a
    ``__deepcopy__`` / ``__reduce_ex__`` of the class, or one a method binds on the object), so
    that a copy meets the non-leaf tensor is not shown."""
    f.data["code_if_resolved"] = f.code
    f.message = f"{f.code} own copy: {f.message} ({cls} decides what its copies hold: it has its own __deepcopy__)"
    f.code = ARGUMENT_ONLY
    if f.witness is not None:
        f.witness["assumed"] = f"{cls}'s own __deepcopy__ copies the computed tensor"
    return f


def cleared_by_program(f: Finding, where: str) -> Finding:
    """The finding under the opt-in code: every run of the program that runs the store takes the
    tensor away again (at ``where``: the holder's owner resets it after the call) before the
    run ends and before any copy or send; that it is kept is only the class-level contract."""
    f.data["code_if_resolved"] = f.code
    f.message = (f"{f.code} cleared by the program: {f.message} (every run of the program that makes this store "
                 f"clears it again, at {where}, before any copy)")
    f.code = ARGUMENT_ONLY
    if f.witness is not None:
        f.witness["assumed"] = (f"the class is used without the reset at {where} that every call the program makes "
                                "is followed by")
    return f


def behind_unset_option(f: Finding, option: str, given: str) -> Finding:
    """The finding under the opt-in code: the call runs only under ``if <option>:`` in the
    class's constructor, and every construction the project makes passes a value that skips it
    (``given``): that a user turns it on is the guess."""
    f.data["code_if_resolved"] = f.code
    f.message = (f"{f.code} behind an option: {f.message} (it runs only when '{option}' is set, and every "
                 f"construction in the project passes {given})")
    f.code = ARGUMENT_ONLY
    if f.witness is not None:
        f.witness["assumed"] = f"a construction outside the project sets '{option}'"
    return f


def drop_overwritten(findings: list[Finding], runner=None, methods: dict | None = None) -> list[Finding]:
    """Drop store findings whose value is replaced or cleared before it can outlive the method
    (see flow.overwritten_later: a later assignment, ``del``, ``.clear()``, a reset helper, a
    ``finally``); the methods are the runner's class's, or ``methods``."""

    reported = {(f.line, f.col) for f in findings}
    methods = methods if methods is not None else runner.info.facts.methods
    resetters = None
    kept = []
    for f in findings:
        func = methods.get(f.data.get("method", ""))
        target = f.data.pop("node", None)
        if func is not None and target is not None and f.data.get("kind") in ("attr", "container"):
            if resetters is None:
                resetters = {name: resets_of(m) for name, m in methods.items()}
            text = f.attribute or ""
            if f.data.get("kind") == "container":
                text = text.split("[", 1)[0]
            if overwritten_later(func, target, text, reported, resetters):
                continue
        kept.append(f)
    return kept


def origin_text(value) -> str:
    return "from " + (value.origin or "a computation on the autograd graph")


def all_rules() -> dict[str, str]:
    from . import construction, deepcopy_calls, forward_stores, hooks, legacy_norm, process_boundary, pruning

    out: dict[str, str] = {}
    for mod in (forward_stores, hooks, construction, legacy_norm, pruning, deepcopy_calls, process_boundary):
        out.update(mod.RULES)
    out["GLF900"] = "the file could not be read or parsed"
    return dict(sorted(out.items()))


def all_examples() -> list[tuple[str, str, list[str]]]:
    """(rule module, source, expected codes) for every example next to the rules."""
    from . import (construction, copy_graph, deepcopy_calls, forward_stores, function_roots, hooks, legacy_norm,
                   process_boundary, pruning)

    out = []
    for mod in (forward_stores, function_roots, hooks, construction, legacy_norm, pruning, deepcopy_calls, process_boundary,
                copy_graph):
        for source, codes in mod.EXAMPLES:
            out.append((mod.__name__.rsplit(".", 1)[-1], source, codes))
    return out
