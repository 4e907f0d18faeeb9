"""docs/install.md's ``repo: local`` pre-commit set-up, run as written: the installed ``graphleaf``
(this checkout's, editable) runs on the staged files. Nothing is cloned or built, so no network."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from test_cli import BUGGY, ROOT

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
}


def documented_local_config() -> str:
    text = (ROOT / "docs" / "install.md").read_text(encoding="utf-8")
    m = re.search(r"<!-- tests/test_precommit_local.py runs this block as it is -->\n```yaml\n(.*?)```", text, re.S)
    assert m, "docs/install.md lost its repo: local block"
    assert "repo: local" in m.group(1)
    assert m.group(1) in (ROOT / "README.md").read_text(encoding="utf-8"), "README.md shows another repo: local"
    return m.group(1)


def test_repo_local_hook_reports_staged_findings(tmp_path):
    pytest.importorskip("pre_commit")
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    env = dict(os.environ, **GIT_ENV, PRE_COMMIT_HOME=str(tmp_path / "cache"))
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")  # where graphleaf is
    env.pop("CI", None)
    repo = tmp_path / "project"
    repo.mkdir()
    files = {".pre-commit-config.yaml": documented_local_config(), "model.py": BUGGY, "build/skipped.py": BUGGY,
             "clean.py": "x = 1\n"}
    subprocess.run(["git", "init", "-q", "."], cwd=repo, check=True, env=env)
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    subprocess.run(["git", "add", *files], cwd=repo, check=True, env=env)

    def hook() -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "pre_commit", "run", "graphleaf"], cwd=repo, env=env,
                              capture_output=True, text=True, timeout=300)

    r = hook()
    assert r.returncode == 1, r.stdout + r.stderr
    assert "model.py:10:9: GLF001" in r.stdout
    assert "skipped.py" not in r.stdout  # build/ is excluded, also when pre-commit names it
    (repo / "model.py").write_text("x = 2\n")
    subprocess.run(["git", "add", "model.py"], cwd=repo, check=True, env=env)
    r = hook()
    assert r.returncode == 0, r.stdout + r.stderr
