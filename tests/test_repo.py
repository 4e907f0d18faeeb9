"""The repository keeps its promises: CI runs exactly the commands README.md starts with."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    return re.findall(r"```sh\n(.+?)\n```", text, flags=re.S)[:2]


def test_readme_starts_with_install_and_test_commands() -> None:
    install_run, tests = readme_commands()
    assert "pip install" in install_run and "fixtures/example" in install_run
    assert "pytest" in tests and "torch==2.13.0" in tests


def test_ci_runs_the_readme_commands_verbatim() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    for command in readme_commands():
        assert command in ci, f"CI does not run: {command}"


def test_every_rule_has_a_doc_page_in_ruffs_shape() -> None:
    from flake8_graphleaf.analysis.rules import all_rules

    for code in all_rules():
        page = ROOT / "docs" / "rules" / f"{code}.md"
        text = page.read_text()
        for heading in ("## What it does", "## Why is this bad?", "## Fix safety"):
            assert heading in text, f"{page.name} lacks {heading}"
        if code != "GLF900":
            assert "## Example" in text and "## Use instead" in text, page.name
