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


def readme_first_lint() -> list[str]:
    """The lint command README.md's first command ends with (after its install), as words."""
    import shlex

    install_run = readme_commands()[0]
    words = shlex.split(install_run.split("&&")[-1])
    assert words[0] == "flake8" and words[-1] == "fixtures/example/", words
    return words


def _lint(words: list[str], path: str, cwd: Path):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", *words[:-1], path], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def test_readme_shows_what_its_first_command_prints():
    words = readme_first_lint()
    shown = re.search(r"```sh\n.+?\n```\n.*?```text\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)
    r = _lint(words, words[-1], ROOT)
    assert r.returncode == 1
    assert r.stdout == shown, ("README.md's expected output is not what the command prints "
                               "(python docs/cli_examples.py writes it again):\n" + r.stdout)


def test_readme_first_command_fails_on_files_it_cannot_check(tmp_path):
    """flake8's own E999 / E902 stay on (--select=GLF would turn them off: exit 0 on all of these)."""
    words = readme_first_lint()
    (tmp_path / "syntax.py").write_text("def f(:\n    pass\n")
    (tmp_path / "binary.py").write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00")
    (tmp_path / "latin.py").write_bytes(b"s = '\xe9t\xe9'\n")
    (tmp_path / "fine.py").write_text("x = 1\n")
    for name, code in [("syntax.py", "E999"), ("binary.py", "E999"), ("missing.py", "E902"), ("latin.py", "GLF900")]:
        r = _lint(words, name, tmp_path)
        assert r.returncode == 1, (name, r.stdout, r.stderr)
        assert f" {code} " in r.stdout and "Traceback" not in r.stderr, (name, r.stdout)
    assert _lint(words, "fine.py", tmp_path).returncode == 0
