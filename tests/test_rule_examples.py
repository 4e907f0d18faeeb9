"""The valid / invalid examples kept next to each rule (Fixit style)."""

from __future__ import annotations

import textwrap

import pytest

from flake8_graphleaf.analysis import Options, analyze_source
from flake8_graphleaf.analysis.rules import all_examples, all_rules

EXAMPLES = all_examples()


@pytest.mark.parametrize("module,source,codes", EXAMPLES, ids=[f"{m}-{i}" for i, (m, _, _) in enumerate(EXAMPLES)])
def test_example(module: str, source: str, codes: list[str]) -> None:
    """Each example gives exactly its codes; the opt-in GLF010 only with ``argument_stores``."""
    source = textwrap.dedent(source)
    got = sorted(f.code for f in analyze_source(source, options=Options(argument_stores=True)))
    assert got == sorted(codes)
    default = sorted(f.code for f in analyze_source(source))
    assert default == sorted(c for c in codes if c != "GLF010")


def test_every_rule_has_a_valid_and_an_invalid_example() -> None:
    invalid = {c for _, _, codes in EXAMPLES for c in codes}
    modules_with_valid = {m for m, _, codes in EXAMPLES if not codes}
    for code in all_rules():
        if code == "GLF900":
            continue
        assert code in invalid, f"{code} has no invalid example"
    assert modules_with_valid == {m for m, _, _ in EXAMPLES}
