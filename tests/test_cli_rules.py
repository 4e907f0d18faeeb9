"""What ``graphleaf rules`` and ``graphleaf rule CODE`` tell a user, the rule pages' shape, and
the usage a bad flag gets."""

from __future__ import annotations

import csv
import re

import pytest

from test_cli import ROOT, run

PAGES = ROOT / "flake8_graphleaf" / "rule_docs"
# ruff's order: the user's answer first, the analysis's details last
ORDER = ["What it does", "Why is this bad?", "Example", "Use instead", "Fix safety", "Options",
         "How the analysis decides"]


def _sections(text: str) -> list[str]:
    return re.findall(r"^## (.+)$", text, flags=re.M)


def _section(text: str, name: str) -> str:
    m = re.search(rf"^## {re.escape(name)}\n(.*?)(?=^## |\Z)", text, flags=re.M | re.S)
    return m.group(1) if m else ""


def _rules_table() -> dict[str, dict[str, str]]:
    r = run("rules")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    header = lines[0].split()
    assert header == ["code", "selected", "fix", "levels", "summary"]
    rows = {}
    for line in lines[1:]:
        if not line.startswith("GLF"):
            continue
        code, selected, fix, levels, _summary = re.split(r"\s{2,}", line, maxsplit=4)
        rows[code] = {"selected": selected, "fix": fix, "levels": levels}
    return rows


def test_every_rule_page_has_ruffs_sections_in_ruffs_order():
    from flake8_graphleaf.analysis.rules import all_rules

    for code in all_rules():
        text = (PAGES / f"{code}.md").read_text(encoding="utf-8")
        found = _sections(text)
        assert all(name in ORDER for name in found), (code, found)
        assert found == [name for name in ORDER if name in found], (code, found)
        required = ["What it does", "Why is this bad?", "Fix safety", "Options"]
        if code != "GLF900":  # an unreadable file has no code to show
            required += ["Example", "Use instead"]
        assert set(required) <= set(found), (code, set(required) - set(found))
        # the answer first: the reason within the first screen, whatever the analysis's details
        why = text.splitlines().index("## Why is this bad?")
        assert why < 20, f"{code}: 'Why is this bad?' at line {why + 1}"


def test_rules_lists_selection_fix_and_levels():
    rows = _rules_table()
    from flake8_graphleaf.analysis.rules import all_rules

    assert list(rows) == list(all_rules())
    assert rows["GLF001"] == {"selected": "default", "fix": "safe/unsafe", "levels": "high/medium/low"}
    assert rows["GLF010"]["selected"] == "opt-in"
    assert rows["GLF101"]["fix"] == "unsafe" and rows["GLF103"]["fix"] == "none"
    assert rows["GLF103"]["levels"] == "high" and rows["GLF900"]["levels"] == "-"


def test_rules_fix_column_agrees_with_each_pages_fix_safety():
    for code, row in _rules_table().items():
        if code == "GLF010":
            assert row["fix"] == "its code's"
            continue
        text = _section((PAGES / f"{code}.md").read_text(encoding="utf-8"), "Fix safety")
        kinds = set() if row["fix"] == "none" else set(row["fix"].split("/"))
        assert ("safe" in kinds) == bool(re.search(r"\*\*Safe\b|are \*\*safe\*\*", text)), code
        assert ("unsafe" in kinds) == bool(re.search(r"\*\*Unsafe\b|\*\*unsafe\*\*", text)), code
        if not kinds:
            assert re.search(r"No (automatic )?fix", text), code


def test_rules_levels_cover_the_levels_the_judged_findings_were_reported_at():
    lines = (ROOT / "docs" / "precision-verdicts" / "steps.tsv").read_text(encoding="utf-8").splitlines()
    seen: dict[str, set[str]] = {}
    for row in csv.DictReader(lines[1:], delimiter="\t"):
        if row["reported"] != "no" and row["code"].startswith("GLF") and row["code"] != "GLF010":
            seen.setdefault(row["code"], set()).add(row["confidence"])
    rows = _rules_table()
    assert len(seen) >= 8
    for code, levels in seen.items():
        assert levels <= set(rows[code]["levels"].split("/")), (code, levels, rows[code]["levels"])


def test_rule_page_links_open_from_a_terminal():
    r = run("rule", "GLF001")
    assert r.returncode == 0
    assert "](" not in r.stdout and "../" not in r.stdout
    fixes = ROOT / "docs" / "fixes.md"
    assert f"docs/fixes.md ({fixes})" in r.stdout  # a clone: the file itself
    assert f"This page: {PAGES / 'GLF001.md'}" in r.stdout
    assert "Online: https://github.com/" in r.stdout and r.stdout.rstrip().endswith("/docs/rules/GLF001.md")


def test_rule_page_links_without_a_clone_are_urls(tmp_path):
    from flake8_graphleaf.cli.output import DOCS_URL
    from flake8_graphleaf.cli.rules import terminal_page

    page = "see [docs/fixes.md](../../docs/fixes.md#copy-safe), [Confidence](#confidence), [x](https://e.org/y)"
    assert terminal_page(page, tmp_path / "site-packages" / "flake8_graphleaf" / "rule_docs") == (
        f"see docs/fixes.md ({DOCS_URL}docs/fixes.md#copy-safe), Confidence (#confidence), x (https://e.org/y)")


def test_project_urls_name_the_repository_the_links_point_to():
    from flake8_graphleaf.cli.output import REPO_URL

    assert f'Repository = "{REPO_URL}"' in (ROOT / "pyproject.toml").read_text(encoding="utf-8")


@pytest.mark.parametrize("command", ["check", "fix", "rules", "rule", "explain", "verify"])
def test_a_bad_flag_prints_the_subcommands_usage(command):
    if command in ("explain", "verify"):
        pytest.importorskip("torch")  # without it they say what to install, whatever the flags
    args = [command, "--bogus"] + (["GLF001"] if command == "rule" else [])
    r = run(*args)
    assert r.returncode == 2
    assert r.stderr.startswith(f"usage: graphleaf {command}"), r.stderr
    assert f"graphleaf {command}: error: unrecognized arguments: --bogus" in r.stderr
    assert "Traceback" not in r.stderr
