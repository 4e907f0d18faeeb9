"""One module per rule family.  Each rule module lists, next to its checks, the codes
it reports (``RULES``: code -> one-line summary) and small valid / invalid examples
(``EXAMPLES``) that the test-suite runs."""

from __future__ import annotations

import ast

from ..findings import Finding
from ..confidence import trust
from ..values import guess_step
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


def argument_only(f: Finding, text: str | None = None) -> Finding:
    """Its only evidence is an argument that nothing shows to be an activation: a step on trust."""
    origin = f.data.get("origin") or "the argument"
    return trust(f, "argument", text or f"{origin} is taken to be an activation (nothing in the project shows it)")


def eval_only(f: Finding) -> Finding:
    """The store runs only in eval mode (``if not self.training:``), which ordinary use runs under
    ``no_grad``; that it runs with grad on is taken on trust. The copy graph reports it as proven
    where the program's calls show it."""
    return trust(f, "eval-mode", "the store runs only in eval mode, taken to run with grad on "
                                 "(ordinary eval runs under torch.no_grad())")


def on_trust(f: Finding, guess: str) -> Finding:
    """A step of the chain is a callable whose semantics the analysis does not have (``guess``),
    taken to carry its arguments' history."""
    return trust(f, *guess_step(guess))


def decides_own_copy(f: Finding, cls: str) -> Finding:
    """The class's objects decide what their copies hold (a ``__deepcopy__`` / ``__reduce_ex__``
    of the class, or one a method binds on the object): that a copy meets the tensor is not shown."""
    return trust(f, "own-copy", f"{cls}'s own __deepcopy__ is taken to copy the computed tensor")


def cleared_by_program(f: Finding, where: str) -> Finding:
    """Every run of the program that runs the store takes the tensor away again (at ``where``)
    before the run ends and before any copy or send; that it is kept is only the class-level contract."""
    return trust(f, "reset-skipped", f"the class is taken to be used without the reset at {where} that every "
                                     "call the program makes is followed by")


def behind_unset_option(f: Finding, option: str, given: str) -> Finding:
    """The call runs only under ``if <option>:`` in the class's constructor, and every
    construction the project makes passes a value that skips it (``given``)."""
    if given.startswith("nothing"):
        return trust(f, "unset-option", f"'{option}' is taken to be set by a user of the class (its default skips "
                                        "the call, and no construction in the project sets it)")
    return trust(f, "unset-option", f"'{option}' is taken to be set by a construction outside the project "
                                    f"(every construction in the project passes {given})")


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
    # retired: the opt-in code of guesses is now the lower confidence levels of the real codes;
    # configurations, --select and noqa comments that name it keep working (they mean --confidence low)
    out["GLF010"] = "(retired) the findings below high confidence: naming it selects --confidence low"
    return dict(sorted(out.items()))


# The confidence levels each code's findings can have (``graphleaf rules``, the rule pages), from the
# steps on trust its rule can take (confidence.trust). A code whose findings rest on the program's
# code, copied, followed through calls, or inherited from the store a copy meets can take several
# kinds, so any level; a legacy norm one (an option nobody sets, or a class that decides its own
# copies); a prune call or an unreadable file none. tests/test_cli.py checks the table against the
# levels the judged findings of docs/precision-verdicts/steps.tsv were reported at.
_ANY = ("high", "medium", "low")
LEVELS_OF = {
    "GLF001": _ANY, "GLF002": _ANY, "GLF003": _ANY, "GLF004": _ANY, "GLF005": _ANY,
    "GLF101": ("high", "medium"), "GLF102": ("high", "medium"), "GLF103": ("high",),
    "GLF201": _ANY, "GLF202": _ANY, "GLF301": _ANY,
    "GLF010": ("medium", "low"),  # retired: the name of the lower levels of the codes above
    "GLF900": (),  # not a finding about tensors: no level
}


def levels_of(code: str) -> tuple[str, ...]:
    return LEVELS_OF.get(code, _ANY)


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
