"""The conventions a ruff or flake8 user expects, end to end (the installed command in a
subprocess), side by side with ruff where it has the same flag."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from test_cli import BUGGY, ROOT, run

HAS_GIT = shutil.which("git") is not None


def ruff(*args, cwd):
    try:
        import ruff as _  # noqa: F401
    except ImportError:
        pytest.skip("ruff is not installed (pip install '.[test]')")
    return subprocess.run([sys.executable, "-m", "ruff", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=120)


def flake8(*args, cwd):
    return subprocess.run([sys.executable, "-m", "flake8", "--isolated", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


SYNTAX = "import os\n\nx = (1,\ny = 2\n"


def test_syntax_error_is_a_finding_at_flake8s_place_exit_1_or_0(tmp_path):
    (tmp_path / "se.py").write_text(SYNTAX)
    ours = run("check", "--output-format", "concise", "se.py", cwd=tmp_path)
    theirs = flake8("--select=E999", "se.py", cwd=tmp_path)
    (line,) = ours.stdout.splitlines()
    assert line == theirs.stdout.strip().replace("E999", "GLF900")  # se.py:3:6: ... SyntaxError: '(' was never closed
    assert ours.returncode == 1 and theirs.returncode == 1
    assert ruff("check", "--isolated", "--no-cache", "se.py", cwd=tmp_path).returncode == 1
    assert run("check", "--exit-zero", "se.py", cwd=tmp_path).returncode == 0
    assert ruff("check", "--isolated", "--no-cache", "--exit-zero", "se.py", cwd=tmp_path).returncode == 0
    # fix reports the same place, and exits as check does
    fixed = run("fix", "se.py", cwd=tmp_path)
    assert line.split(" GLF900")[0] + " GLF900 SyntaxError" in fixed.stdout + fixed.stderr
    assert fixed.returncode == 1
    assert run("fix", "--exit-zero", "se.py", cwd=tmp_path).returncode == 0


def test_exit_2_only_for_usage_and_configuration(tmp_path):
    (tmp_path / "m.py").write_text(BUGGY)
    assert run("check", "--select", "GLF999", "m.py", cwd=tmp_path).returncode == 2
    assert run("check", "--no-such-flag", cwd=tmp_path).returncode == 2
    (tmp_path / "pyproject.toml").write_text("[tool.graphleaf]\nbogus = 1\n")
    r = run("check", "--exit-zero", "m.py", cwd=tmp_path)
    assert r.returncode == 2 and "unknown key" in r.stderr


def test_missing_path_and_bad_encoding_say_so(tmp_path):
    (tmp_path / "latin.py").write_bytes(b"x = 1\ny = 2\ns = '\xe9t\xe9'\n")
    r = run("check", "--output-format", "concise", "nope.py", "latin.py", cwd=tmp_path)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "nope.py:1:1: GLF900 could not read: No such file or directory" in r.stdout
    (bad,) = [l for l in r.stdout.splitlines() if l.startswith("latin.py")]
    assert "not UTF-8" in bad and "line 3" in bad and "coding" in bad
    assert "0 files checked" in r.stderr  # refused files are not "checked"


BINARIES = {
    "nul.py": b"\x7fELF\x02\x01\x01\x00\x00\x00\xe9\x08",  # a NUL: flake8 says E999 of its own
    "png.py": b"\x89PNG\r\n\x1a\n\x01\x02\x03\x04\x05\x06\x07\x08\x09\x10\x11x = 1\n",  # no NUL, control bytes
}


def test_binary_file_is_not_told_to_declare_an_encoding(tmp_path):
    for name, raw in BINARIES.items():
        (tmp_path / name).write_bytes(raw)
    r = run("check", "--output-format", "concise", *BINARIES, cwd=tmp_path)
    assert r.returncode == 1
    for name in BINARIES:
        (line,) = [l for l in r.stdout.splitlines() if l.startswith(name)]
        assert "GLF900" in line and "a binary file" in line and "coding" not in line, line


def test_flake8_face_reports_a_latin1_file_flake8_passes(tmp_path):
    """flake8 reads bytes that are not UTF-8 as Latin-1 and says nothing; Python refuses to import
    such a file. The plugin reports it (GLF900), with the advice the CLI gives; a binary file is
    flake8's E999 (NUL) or told it is binary, never given a coding line."""
    (tmp_path / "latin.py").write_bytes(b"x = 1\ny = 2\ns = '\xe9t\xe9'\n")
    (tmp_path / "utf8.py").write_text("s = '\u00e9t\u00e9'\n", encoding="utf-8")
    (tmp_path / "declared.py").write_bytes(b"# -*- coding: latin-1 -*-\ns = '\xe9t\xe9'\n")
    for name, raw in BINARIES.items():
        (tmp_path / name).write_bytes(raw)
    r = subprocess.run([sys.executable, "-m", "flake8", "--isolated", "--extend-select=GLF", "."], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    lines = r.stdout.splitlines()
    assert r.returncode == 1
    (latin,) = [l for l in lines if l.startswith("./latin.py")]
    assert "GLF900" in latin and "byte 0xe9 on line 3 is not UTF-8" in latin and "coding" in latin
    assert not [l for l in lines if l.startswith(("./utf8.py", "./declared.py"))]
    for name in BINARIES:
        hits = [l for l in lines if l.startswith(f"./{name}")]
        assert hits and all("coding" not in l for l in hits), hits
        assert any("E999" in l or "a binary file" in l for l in hits), hits


def test_newer_syntax_names_the_python_it_needs(tmp_path):
    (tmp_path / "new.py").write_text("type Vector = list[float]\n\ndef f[T](x: T) -> T:\n    return x\n")
    r = run("check", "--output-format", "concise", "new.py", cwd=tmp_path)
    if sys.version_info >= (3, 12):
        assert r.returncode == 0 and r.stdout == ""
    else:
        assert r.returncode == 1
        assert "needs Python 3.12" in r.stdout and f"this is Python 3.{sys.version_info[1]}" in r.stdout


@pytest.mark.parametrize("command", ["check", "fix", "rules", "rule", "explain", "verify"])
def test_every_subcommand_has_help(command):
    r = run(command, "--help")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"usage: graphleaf {command}")


def test_add_noqa_is_idempotent_and_merges(tmp_path):
    src = BUGGY.replace("self.out = self.fc(x)", "self.out = self.fc(x)  # noqa: E501")
    src += "\n\nclass N(M):\n    def forward(self, x):\n        self.y = self.fc(x)\n        return self.y\n"
    (tmp_path / "m.py").write_text(src)
    r = run("check", "--add-noqa", "m.py", cwd=tmp_path)
    assert r.returncode == 0 and "Added 2 noqa directives" in r.stderr
    once = (tmp_path / "m.py").read_text()
    assert "self.out = self.fc(x)  # noqa: E501, GLF001\n" in once
    assert "self.y = self.fc(x)  # noqa: GLF001\n" in once
    r = run("check", "--add-noqa", "m.py", cwd=tmp_path)
    assert "Added 0 noqa directives" in r.stderr and (tmp_path / "m.py").read_text() == once
    assert run("check", "m.py", cwd=tmp_path).returncode == 0
    assert flake8("--select=GLF", "m.py", cwd=tmp_path).stdout == ""
    # ruff, the same way
    (tmp_path / "f.py").write_text("import os\n")
    for _ in range(2):
        ruff("check", "--isolated", "--no-cache", "--select", "F401", "--add-noqa", "f.py", cwd=tmp_path)
    assert (tmp_path / "f.py").read_text() == "import os  # noqa: F401\n"


@pytest.mark.skipif(not HAS_GIT, reason="needs git")
def test_diffs_apply_with_git_apply(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "model.py").write_text(BUGGY)
    (tmp_path / "f.py").write_text("import os\n")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    for args in (("fix", "--diff"), ("check", "--diff"), ("fix", "--diff", ".")):
        r = run(*args, cwd=tmp_path)
        assert r.returncode == 1 and r.stdout.startswith("--- a/pkg/model.py\n+++ b/pkg/model.py\n"), r.stdout
        check = subprocess.run(["git", "apply", "--check", "-"], input=r.stdout, cwd=tmp_path, text=True,
                               capture_output=True)
        assert check.returncode == 0, check.stderr
    assert (tmp_path / "pkg" / "model.py").read_text() == BUGGY  # --diff writes nothing
    # stdin: a real diff, named by --stdin-filename
    r = run("fix", "--diff", "--stdin-filename", "pkg/model.py", "-", cwd=tmp_path, stdin=BUGGY)
    assert r.stdout.startswith("--- a/pkg/model.py\n")
    subprocess.run(["git", "apply", "-"], input=r.stdout, cwd=tmp_path, text=True, check=True)
    assert (tmp_path / "pkg" / "model.py").read_text() != BUGGY
    assert run("check", "pkg", cwd=tmp_path).returncode == 0
    theirs = ruff("check", "--isolated", "--no-cache", "--select", "F401", "--diff", "f.py", cwd=tmp_path)
    assert theirs.returncode == 1
    subprocess.run(["git", "apply", "--check", "-"], input=theirs.stdout, cwd=tmp_path, text=True, check=True)


def test_check_fix_and_show_fixes(tmp_path):
    (tmp_path / "m.py").write_text(BUGGY)
    r = run("check", "--fix", "--show-fixes", "m.py", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Fixed 1 finding:" in r.stderr and "1 x GLF001" in r.stderr
    assert (tmp_path / "m.py").read_text() != BUGGY
    assert run("check", "m.py", cwd=tmp_path).returncode == 0
    # what --fix reports afterwards is what a check of the fixed file reports
    unsafe = BUGGY.replace("return self.out", "return self.out\n\n    def read(self):\n        return self.out")
    (tmp_path / "u.py").write_text(unsafe)
    r = run("check", "--fix", "--output-format", "concise", "u.py", cwd=tmp_path)
    again = run("check", "--output-format", "concise", "u.py", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (again.returncode, again.stdout)
    r = run("check", "--fix", "--unsafe-fixes", "u.py", cwd=tmp_path)
    assert r.returncode == 0 and run("check", "u.py", cwd=tmp_path).returncode == 0


def test_output_file_like_ruff(tmp_path):
    (tmp_path / "m.py").write_text(BUGGY)
    r = run("check", "--output-format", "json", "--output-file", "out/glf.json", "m.py", cwd=tmp_path)
    assert r.returncode == 1 and r.stdout == ""
    (item,) = json.loads((tmp_path / "out" / "glf.json").read_text())
    assert item["code"] == "GLF001"
    (tmp_path / "se.py").write_text(SYNTAX)
    theirs = ruff("check", "--isolated", "--no-cache", "--output-file", "ruff.txt", "se.py", cwd=tmp_path)
    assert theirs.returncode == 1 and (tmp_path / "ruff.txt").read_text()
    r = run("fix", "--no-unsafe-fixes", "--output-format", "json", "-o", "left.json", "m.py", cwd=tmp_path)
    assert json.loads((tmp_path / "left.json").read_text()) == []


def test_statistics_like_ruff(tmp_path):
    (tmp_path / "m.py").write_text(BUGGY)
    (tmp_path / "se.py").write_text(SYNTAX)
    r = run("check", "--statistics", "--output-format", "concise", ".", cwd=tmp_path)
    stats = [l.split() for l in r.stdout.splitlines() if not l.startswith("./")]
    assert ["1", "GLF001", "[*]"] == stats[0][:3] and ["1", "GLF900"] == stats[1][:2]
    theirs = ruff("check", "--isolated", "--no-cache", "--statistics", "se.py", cwd=tmp_path)
    assert theirs.returncode == 1 and "invalid-syntax" in theirs.stdout
    r = run("fix", "--statistics", "--diff", ".", cwd=tmp_path)
    assert "1     fixed 0     left  GLF001" in r.stderr and "0     fixed 1     left  GLF900" in r.stderr


def test_fix_output_format_and_exit_zero(tmp_path):
    (tmp_path / "se.py").write_text(SYNTAX)
    r = run("fix", "--output-format", "json", "se.py", cwd=tmp_path)
    assert r.returncode == 1
    (item,) = json.loads(r.stdout)
    assert item["code"] == "GLF900" and item["location"] == {"row": 3, "column": 5}  # ruff's column
    assert run("fix", "--exit-zero", "se.py", cwd=tmp_path).returncode == 0


def test_show_settings_and_show_files(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.graphleaf]\nignore = ["GLF2"]\n')
    (tmp_path / "a.py").write_text(BUGGY)
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "b.py").write_text(BUGGY)
    r = run("check", "--show-settings", cwd=tmp_path)
    assert r.returncode == 0 and "ignore" in r.stdout and "GLF2" in r.stdout and "pyproject.toml" in r.stdout
    r = run("check", "--show-files", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.splitlines() == [os.path.join(".", "a.py")]


def test_flake8_config_is_read_when_there_is_no_tool_graphleaf(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_m.py").write_text(BUGGY)
    (tmp_path / "m.py").write_text(BUGGY)
    (tmp_path / "setup.cfg").write_text("[flake8]\nextend-select = GLF\nper-file-ignores =\n"
                                       "    tests/*.py: GLF001,E501\n")
    ours = run("check", "--output-format", "concise", ".", cwd=tmp_path)
    theirs = subprocess.run([sys.executable, "-m", "flake8", "--select=GLF", "."], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)
    assert ours.stdout.splitlines() == theirs.stdout.splitlines() == [
        l for l in ours.stdout.splitlines() if l.startswith("./m.py")]
    assert ours.stdout
    # [tool.graphleaf] wins over the flake8 config
    (tmp_path / "pyproject.toml").write_text("[tool.graphleaf]\nselect = [\"GLF\"]\n")
    ours = run("check", "--output-format", "concise", ".", cwd=tmp_path)
    assert any(l.startswith("./tests/") for l in ours.stdout.splitlines())


def test_sarif_rules_and_json_urls(tmp_path):
    (tmp_path / "m.py").write_text(BUGGY)
    doc = json.loads(run("check", "--output-format", "sarif", "m.py", cwd=tmp_path).stdout)
    rules = {r["id"]: r for r in doc["runs"][0]["tool"]["driver"]["rules"]}
    rule = rules["GLF001"]
    assert rule["helpUri"].endswith("/docs/rules/GLF001.md")
    assert rule["fullDescription"]["text"].startswith("Checks for")
    assert rule["help"]["markdown"].startswith("# graph-tensor-on-module (GLF001)")
    assert "Why is this bad?" in rule["help"]["text"] and rule["helpUri"] in rule["help"]["text"]
    assert rule["properties"]["precision"] in ("very-high", "high", "medium", "low")
    assert "pytorch" in rule["properties"]["tags"]
    (item,) = json.loads(run("check", "--output-format", "json", "m.py", cwd=tmp_path).stdout)
    assert item["url"] == rule["helpUri"]


def test_sarif_gives_each_rule_its_help_once():
    """The bundled example: 4 results of 2 rules. Each rule its page once, the user's part of it
    (up to "How the analysis decides"), its links absolute; 127 KB before, when every rule's whole
    page came twice (text and markdown)."""
    out = run("check", "--output-format", "sarif", "fixtures/example/", cwd=ROOT).stdout
    doc = json.loads(out)
    run_ = doc["runs"][0]
    ids = [r["id"] for r in run_["tool"]["driver"]["rules"]]
    named = sorted({res["ruleId"] for res in run_["results"]})
    assert len(run_["results"]) == 4 and ids == named == ["GLF002", "GLF202"]
    for rule in run_["tool"]["driver"]["rules"]:
        markdown = rule["help"]["markdown"]
        assert "## Fix safety" in markdown and "## How the analysis decides" not in markdown
        assert "](../" not in markdown and len(rule["help"]["text"]) < len(markdown)
    assert all("help" not in res and "helpUri" not in res for res in run_["results"])
    assert len(out.encode()) < 40_000, len(out.encode())
