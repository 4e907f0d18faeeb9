"""Machine-readable formats: SARIF (validated against the official 2.1.0 schema), ruff-shaped
JSON, and GitHub workflow commands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from test_cli import BUGGY, ROOT, run

SCHEMA = Path(__file__).parent / "data" / "sarif-schema-2.1.0.json"
NON_ASCII = BUGGY.replace("self.out = self.fc(x)", "self.é = 'ü'; self.out = self.fc(x)")


@pytest.fixture
def project(tmp_path):
    (tmp_path / "model.py").write_text(NON_ASCII, encoding="utf-8")
    (tmp_path / "broken.py").write_text("def f(:\n")
    return tmp_path


def test_sarif_validates_and_carries_fixes(project):
    jsonschema = pytest.importorskip("jsonschema")
    r = run("check", "--output-format", "sarif", ".", cwd=project)
    assert r.returncode == 1  # findings, broken.py among them (GLF900)
    doc = json.loads(r.stdout)
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.validators.validator_for(schema)(schema).validate(doc)
    run_ = doc["runs"][0]
    rules = [rule["id"] for rule in run_["tool"]["driver"]["rules"]]
    by_rule = {res["ruleId"]: res for res in run_["results"]}
    assert set(by_rule) == {"GLF001", "GLF900"}
    res = by_rule["GLF001"]
    assert rules[res["ruleIndex"]] == "GLF001"
    loc = res["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"]["uri"] == "model.py"
    assert loc["region"]["startLine"] == 10 and loc["region"]["startColumn"] == 23  # characters, 1-based
    change = res["fixes"][0]["artifactChanges"][0]
    assert change["replacements"] and change["artifactLocation"]["uri"] == "model.py"
    assert run_["invocations"][0]["executionSuccessful"] is False


def test_sarif_of_all_fixtures_validates():
    jsonschema = pytest.importorskip("jsonschema")
    r = run("check", "--output-format", "sarif", "fixtures/", cwd=ROOT)
    doc = json.loads(r.stdout)
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.validators.validator_for(schema)(schema).validate(doc)
    assert len(doc["runs"][0]["results"]) > 10


def test_json_has_ruff_shape(project):
    r = run("check", "--output-format", "json", "model.py", cwd=project)
    items = json.loads(r.stdout)
    assert len(items) == 1
    item = items[0]
    assert {"code", "message", "filename", "location", "end_location", "fix"} <= set(item)
    assert item["code"] == "GLF001"
    assert item["filename"] == str(project / "model.py")
    assert item["location"] == {"row": 10, "column": 23}
    assert item["end_location"] == {"row": 10, "column": 31}
    assert item["fix"]["applicability"] in ("safe", "unsafe")
    edit = item["fix"]["edits"][0]
    assert set(edit) == {"content", "location", "end_location"}
    assert set(edit["location"]) == {"row", "column"}


def test_json_edits_apply_to_the_fixed_file(tmp_path):
    """Applying the JSON edits by hand gives what one fix round writes."""
    (tmp_path / "m.py").write_text(BUGGY)
    items = json.loads(run("check", "--output-format", "json", "m.py", cwd=tmp_path).stdout)
    lines = BUGGY.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    text = BUGGY
    edits = [e for it in items for e in it["fix"]["edits"]]
    for e in sorted(edits, key=lambda e: (e["location"]["row"], e["location"]["column"]), reverse=True):
        a = offsets[e["location"]["row"] - 1] + e["location"]["column"] - 1
        b = offsets[e["end_location"]["row"] - 1] + e["end_location"]["column"] - 1
        text = text[:a] + e["content"] + text[b:]
    r = run("fix", "m.py", cwd=tmp_path)
    assert r.returncode == 0
    assert (tmp_path / "m.py").read_text() == text


def test_github_annotations(project):
    r = run("check", "--output-format", "github", ".", cwd=project)
    lines = r.stdout.splitlines()
    assert lines[0] == "::error file=./broken.py,line=1,col=7,title=GLF900::GLF900 SyntaxError: invalid syntax"
    assert lines[1].startswith("::error file=./model.py,line=10,col=23,endLine=10,endColumn=31,title=GLF001::GLF001 ")
    assert all("\n" not in line and "\r" not in line for line in lines)


def test_statistics_with_machine_formats_go_to_stderr(project):
    r = run("check", "--output-format", "json", "--statistics", "model.py", cwd=project)
    json.loads(r.stdout)
    assert "GLF001" in r.stderr
