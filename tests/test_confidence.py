"""Confidence levels, as a user meets them: the default selection reports what is proven; a
finding whose witness takes a step on trust says so and comes with ``--confidence medium|low``
(or the retired GLF010 switches, which mean ``low``); JSON and SARIF carry the level; the table
the levels come from is regenerated from the committed verdicts."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from _cli import codes, graphleaf
from flake8_graphleaf.analysis import confidence
from flake8_graphleaf.analysis.facts import calibrate
from flake8_graphleaf.analysis.findings import Finding

# One proven store (a submodule's output kept on self) and one that rests on an argument
# taken for an activation (the class feeds it to a layer, so it "may be" on the graph).
MODEL = textwrap.dedent("""
    import torch.nn as nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            self.seen = x
            out = self.fc(x)
            self.last = out
            return out
""")
PROVEN = "./model.py:12:9: GLF001"
ON_TRUST = "./model.py:10:9: GLF001"


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    (tmp_path / "model.py").write_text(MODEL)
    return tmp_path


def check(project: Path, *args: str) -> subprocess.CompletedProcess:
    return graphleaf("check", "--no-cache", "--output-format", "concise", *args, ".", cwd=project)


def test_the_default_reports_only_what_is_proven(project):
    r = check(project, "--isolated")
    assert r.returncode == 1, r.stderr
    assert codes(r.stdout) == [PROVEN]
    assert "taken on trust" not in r.stdout


@pytest.mark.parametrize("flags", [["--confidence", "medium"], ["--confidence", "low"], ["--argument-stores"],
                                   ["--extend-select", "GLF010"]])
def test_lower_levels_on_request_say_what_was_taken_on_trust(project, flags):
    r = check(project, "--isolated", *flags)
    assert r.returncode == 1, r.stderr
    assert codes(r.stdout) == [ON_TRUST, PROVEN]
    line = next(x for x in r.stdout.splitlines() if x.startswith(ON_TRUST))
    assert "[medium confidence: taken on trust: argument 'x' is taken to be an activation" in line


@pytest.mark.parametrize("setting", ['confidence = "medium"', "argument-stores = true", 'extend-select = ["GLF010"]'])
def test_the_configuration_chooses_the_level(project, setting):
    (project / "pyproject.toml").write_text(f"[tool.graphleaf]\n{setting}\n")
    assert codes(check(project).stdout) == [ON_TRUST, PROVEN]


def test_noqa_and_ignore_written_for_the_retired_code_keep_working(project):
    text = MODEL.replace("self.seen = x", "self.seen = x  # noqa: GLF010")
    (project / "model.py").write_text(text)
    assert codes(check(project, "--isolated", "--confidence", "low").stdout) == [PROVEN]
    (project / "model.py").write_text(MODEL)
    (project / "pyproject.toml").write_text('[tool.graphleaf]\nconfidence = "low"\nignore = ["GLF010"]\n')
    assert codes(check(project).stdout) == [PROVEN]


def test_json_and_sarif_carry_the_level(project):
    r = graphleaf("check", "--isolated", "--no-cache", "--confidence", "low", "--output-format", "json", ".", cwd=project)
    found = {f["location"]["row"]: f for f in json.loads(r.stdout)}
    assert found[12]["confidence"] == "high" and found[12]["trust"] == []
    assert found[10]["confidence"] == "medium"
    assert [t["kind"] for t in found[10]["trust"]] == ["argument-fed"]
    assert "taken to be an activation" in found[10]["witness"]["assumed"]
    r = graphleaf("check", "--isolated", "--no-cache", "--confidence", "low", "--output-format", "sarif", ".", cwd=project)
    results = {res["locations"][0]["physicalLocation"]["region"]["startLine"]: res
               for res in json.loads(r.stdout)["runs"][0]["results"]}
    assert results[12]["properties"]["precision"] in ("very-high", "high")
    assert results[10]["properties"]["precision"] == "medium"
    assert 0 <= results[10]["rank"] < results[12]["rank"] <= 100


def test_statistics_count_per_level(project):
    r = graphleaf("check", "--isolated", "--no-cache", "--confidence", "low", "--statistics", ".", cwd=project)
    assert "2     GLF001" in r.stdout and "(1 high, 1 medium)" in r.stdout
    assert "confidence: 1 high, 1 medium, 0 low" in r.stdout


def test_flake8_follows_the_same_levels(project):
    base = [sys.executable, "-m", "flake8", "--isolated", "--select=GLF", "."]
    r = subprocess.run(base, capture_output=True, text=True, timeout=300, cwd=project)
    assert codes(r.stdout) == [PROVEN], r.stdout + r.stderr
    r = subprocess.run(base + ["--graphleaf-confidence=medium"], capture_output=True, text=True, timeout=300, cwd=project)
    assert codes(r.stdout) == [ON_TRUST, PROVEN], r.stdout + r.stderr
    r = subprocess.run(base + ["--graphleaf-argument-stores"], capture_output=True, text=True, timeout=300, cwd=project)
    assert codes(r.stdout) == [ON_TRUST, PROVEN], r.stdout + r.stderr


def test_a_bad_level_is_a_usage_error(project):
    r = check(project, "--isolated", "--confidence", "sure")
    assert r.returncode == 2 and "invalid choice: 'sure'" in r.stderr and "Traceback" not in r.stderr
    (project / "pyproject.toml").write_text('[tool.graphleaf]\nconfidence = "sure"\n')
    r = check(project)
    assert r.returncode == 2 and "confidence must be one of high, medium, low" in r.stderr
    assert "Traceback" not in r.stderr


def _finding(*kinds: str) -> Finding:
    f = Finding("GLF001", 1, 0, "m")
    for k in kinds:
        confidence.trust(f, k, f"{k} taken")
    return f


def test_a_kind_lowers_the_level_unless_measured_precise():
    table = {"threshold": 0.9, "min_verdicts": 10, "kinds": {
        "argument-fed": {"true": 19, "false": 1, "precision": 0.95},  # measured precise: does not lower
        "argument": {"true": 5, "false": 5, "precision": 0.5},
        "eval-mode": {"true": 5, "false": 0, "precision": 1.0},  # too few verdicts to say
    }}
    assert confidence.level_of(_finding().trust, table) == "high"
    assert confidence.level_of(_finding("argument-fed").trust, table) == "high"
    assert confidence.level_of(_finding("argument").trust, table) == "medium"
    assert confidence.level_of(_finding("eval-mode").trust, table) == "medium"
    assert confidence.level_of(_finding("never-measured").trust, table) == "medium"
    assert confidence.level_of(_finding("argument", "eval-mode").trust, table) == "low"
    f = confidence.settle(_finding("argument"), table)
    assert f.confidence == "medium" and f.message == "m [medium confidence: taken on trust: argument taken]"
    assert confidence.settle(f, table).message == f.message  # said once


def test_the_table_is_what_the_committed_verdicts_give():
    rows = calibrate.read_rows()
    assert calibrate.render(calibrate.build(rows)) == Path(calibrate.TABLE).read_text(encoding="utf-8")
    assert calibrate.main(["--check"]) == 0


def test_flake8_keeps_noqa_written_for_the_retired_code(project):
    (project / "model.py").write_text(MODEL.replace("self.seen = x", "self.seen = x  # noqa: GLF010"))
    base = [sys.executable, "-m", "flake8", "--isolated", "--select=GLF", "--graphleaf-confidence=low", "."]
    r = subprocess.run(base, capture_output=True, text=True, timeout=300, cwd=project)
    assert codes(r.stdout) == [PROVEN], r.stdout + r.stderr


def test_a_flake8_config_chooses_the_level_for_both_faces(project):
    (project / "setup.cfg").write_text("[flake8]\nextend-select = GLF\ngraphleaf-confidence = medium\n")
    r = subprocess.run([sys.executable, "-m", "flake8", "--select=GLF", "."], capture_output=True, text=True,
                       timeout=300, cwd=project)
    assert codes(r.stdout) == [ON_TRUST, PROVEN], r.stdout + r.stderr
    assert codes(check(project).stdout) == [ON_TRUST, PROVEN]  # graphleaf reads the same [flake8] section


def test_fix_follows_the_selection(project):
    r = graphleaf("fix", "--isolated", "--no-cache", "--unsafe-fixes", ".", cwd=project)
    assert r.returncode == 0, r.stdout + r.stderr
    left = check(project, "--isolated", "--confidence", "low")
    assert codes(left.stdout) == [ON_TRUST]  # the proven store is fixed; the one on trust is not selected
    r = graphleaf("fix", "--isolated", "--no-cache", "--unsafe-fixes", "--confidence", "medium", ".", cwd=project)
    assert r.returncode == 0, r.stdout + r.stderr
    assert codes(check(project, "--isolated", "--confidence", "low").stdout) == []
