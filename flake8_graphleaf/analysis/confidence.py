"""How sure a finding is: its level, from the steps of its witness taken on trust.

The code of a finding says *what* is wrong; its level says *how sure* the analysis is
(CodeQL's ``@precision``, Semgrep's ``confidence``):

``high``    every step is proven: a known grad source, each step a torch op from the generated
            table or program code the analysis ran, the store reached with grad on by a path the
            program shows, the value still there when the call returns;
``medium``  one step is taken on trust (an argument taken for an activation, a public method
            taken to run with grad on, a callable the analysis does not know, an eval-mode-only
            branch, an option nothing in the project sets, ...);
``low``     several.

A step taken on trust is recorded on the finding (:func:`trust`: a kind and one clause of
text); whether a kind lowers the level is *measured*, not decided here: the calibration table
(``facts/confidence.json``, written by ``python -m flake8_graphleaf.analysis.facts.calibrate``
from the judged findings in ``docs/precision-verdicts/``) lists, per kind, how often findings
that took that step were right.  A kind lowers the level unless it was measured at least
``threshold`` precise over at least ``min_verdicts`` judged findings; a kind the table does not
know lowers it too (a step taken on trust is not a proof until measured).

The default selection reports ``high`` only; ``--confidence medium|low`` (and the old
``--argument-stores``, the same as ``low``) adds the lower levels.
"""

from __future__ import annotations

import functools
import json
import os

from .findings import Finding

LEVELS = ("high", "medium", "low")
RANK = {"high": 0, "medium": 1, "low": 2}
DEFAULT = "high"
# The retired opt-in code: the lower levels of the real codes answer to it in configurations,
# --select / --extend-select and noqa comments written for it.
RETIRED = "GLF010"

_TABLE = os.path.join(os.path.dirname(__file__), "facts", "confidence.json")

# What each kind of step takes on trust, for the rule pages and ``graphleaf rules``.
KINDS = {
    "argument": "a method argument that nothing in the project shows to be an activation",
    "argument-fed": "a forward argument taken for an activation because the class feeds it into a layer or parameter",
    "argument-chained": "a forward argument taken for an activation because the class is chained after other layers",
    "metric-input": "a metric's input taken to be a model output given with grad on (by the package's users)",
    "eval-mode": "a store that runs only in eval mode taken to run with grad on",
    "unknown-callable": "a callable whose semantics the analysis does not have, taken to carry its arguments' history",
    "own-copy": "a class with its own __deepcopy__ taken to copy the tensor",
    "reset-elsewhere": "a stored tensor taken to be kept until a copy, although a method of the class clears it after running the model",
    "reset-skipped": "a class used without the reset that every call of the program is followed by",
    "unset-option": "a constructor option that no construction in the project sets, taken to be set by users",
    "hook-output": "a forward hook's input or output taken to be on the graph (the model run with grad on)",
    "unset-argument": "a store that runs only where a caller turns on an argument whose default skips it, taken to be turned on",
    "unknown-attribute": "an attribute of the object read by a name the analysis cannot compute, taken to be a parameter",
    "public-root": "a public method nothing in its class calls, taken to run with grad on as forward does",
}


@functools.lru_cache(maxsize=1)
def table() -> dict:
    """The calibration table: ``{"threshold", "min_verdicts", "kinds": {kind: {"true", "false",
    "precision"}}, "proven": {...}}``; an empty one when the file is missing."""
    try:
        with open(_TABLE, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return {"threshold": 0.9, "min_verdicts": 10, "kinds": {}}


def lowers(kind: str, calibration: dict | None = None) -> bool:
    """Does a step of this kind lower a finding's level? Yes unless measured precise enough."""
    cal = calibration if calibration is not None else table()
    row = cal.get("kinds", {}).get(kind)
    if not row:
        return True
    judged = row.get("true", 0) + row.get("false", 0)
    return judged < cal.get("min_verdicts", 10) or row.get("precision", 0.0) < cal.get("threshold", 0.9)


def trust(f: Finding, kind: str, text: str) -> Finding:
    """Record that ``f``'s chain takes a step of ``kind`` on trust (``text``: one clause)."""
    if not any(t["kind"] == kind for t in f.trust):
        f.trust.append({"kind": kind, "text": text})
    return f


def inherit(f: Finding, cause: Finding) -> Finding:
    """A finding that rests on another (a copy site on the store it meets): its trust steps."""
    for t in cause.trust:
        trust(f, t["kind"], t["text"])
    return f


def note_assumed(f: Finding) -> Finding:
    """A chain through a callable the analysis does not know (the witness's ``assumed``, from
    witness.make) is a step on trust; noted before the rules that weigh findings against each
    other (the copy sites, the copy graph) look at them."""
    if not f.trust and f.witness is not None and f.witness.get("assumed"):
        trust(f, f.witness.get("assumed_kind", "unknown-callable"), f.witness["assumed"])
    return f


def _lowering(steps: list[dict], calibration: dict | None = None) -> int:
    """How many of the steps (one per kind) lower the level."""
    return sum(lowers(t["kind"], calibration) for t in steps)


def level_of(steps: list[dict], calibration: dict | None = None) -> str:
    n = _lowering(steps, calibration)
    return "high" if n == 0 else "medium" if n == 1 else "low"


def settle(f: Finding, calibration: dict | None = None) -> Finding:
    """Give ``f`` its level, and say in its message what a lower level took on trust (once)."""
    note_assumed(f)
    level = level_of(f.trust, calibration)
    if level != "high" and not f.data.get("trust_said"):
        said = "; ".join(t["text"] for t in f.trust if lowers(t["kind"], calibration))
        f.message = f"{f.message} [{level} confidence: taken on trust: {said}]"
        f.data["trust_said"] = True
    f.confidence = level
    if f.witness is not None:
        f.witness.pop("assumed_kind", None)
    if f.witness is not None and f.trust:
        f.witness["assumed"] = "; ".join(t["text"] for t in f.trust)
    return f


def better(a: Finding, b: Finding) -> bool:
    """Is ``a`` surer than ``b`` (fewer steps that lower the level)?"""
    return (_lowering(a.trust), len(a.trust)) < (_lowering(b.trust), len(b.trust))


def selected(level: str, floor: str) -> bool:
    """Is a finding of ``level`` reported when the selection is ``floor`` (high: high only)?"""
    return RANK.get(level, 0) <= RANK.get(floor, 0)


def check_level(text: str, where: str) -> str:
    value = str(text).strip().lower()
    if value not in LEVELS:
        raise ValueError(f"{where}: confidence must be one of {', '.join(LEVELS)}, not {text!r}")
    return value


def precision_words(f: Finding, calibration: dict | None = None) -> tuple[str, float]:
    """SARIF ``properties.precision`` in CodeQL's words, and a rank (0-100): the measured
    precision of the surest thing the finding rests on (its worst step taken on trust, else the
    proven findings of its rule family)."""
    cal = calibration if calibration is not None else table()
    rows = [cal.get("kinds", {}).get(t["kind"]) for t in f.trust]
    measured = [r.get("precision", 0.0) for r in rows if r]
    if f.trust and len(measured) < len(f.trust):
        p = 0.5  # a step nobody has measured
    elif measured:
        p = min(measured)
    else:
        proven = cal.get("proven", {})
        p = proven.get(f.code, proven.get("*", {})).get("precision", 0.9) if isinstance(proven, dict) else 0.9
    level = getattr(f, "confidence", "high")
    if level == "high":
        words = "very-high" if p >= 0.95 else "high"
    else:
        words = "medium" if level == "medium" else "low"
    return words, round(p * 100, 1)
