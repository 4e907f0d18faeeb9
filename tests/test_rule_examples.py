"""The valid / invalid examples kept next to each rule (Fixit style).

An example's expected codes name each finding once; a code ending in ``?`` is a finding whose
witness takes a step on trust (analysis/confidence.py): it is reported at ``--confidence low``,
and in the default selection only where the calibration table measured every such step precise.
"""

from __future__ import annotations

import textwrap

import pytest

from flake8_graphleaf.analysis import Options, analyze_source
from flake8_graphleaf.analysis.rules import all_examples, all_rules

EXAMPLES = all_examples()


def _codes(findings) -> list[str]:
    return sorted(f.code + ("?" if f.trust else "") for f in findings)


@pytest.mark.parametrize("module,source,codes", EXAMPLES, ids=[f"{m}-{i}" for i, (m, _, _) in enumerate(EXAMPLES)])
def test_example(module: str, source: str, codes: list[str]) -> None:
    """Each example gives exactly its codes at every level; the default selection is its ``high`` ones."""
    source = textwrap.dedent(source)
    every = analyze_source(source, options=Options(confidence="low"))
    assert _codes(every) == sorted(codes)
    default = analyze_source(source)
    assert _codes(default) == _codes([f for f in every if f.confidence == "high"])
    assert all(f.confidence == "high" for f in default)


def test_every_rule_has_a_valid_and_an_invalid_example() -> None:
    invalid = {c.rstrip("?") for _, _, codes in EXAMPLES for c in codes}
    modules_with_valid = {m for m, _, codes in EXAMPLES if not codes}
    for code in all_rules():
        if code in ("GLF900", "GLF010"):
            continue
        assert code in invalid, f"{code} has no invalid example"
    assert modules_with_valid == {m for m, _, _ in EXAMPLES}
