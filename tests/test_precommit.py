"""The hooks in .pre-commit-hooks.yaml, run for real with ``pre-commit try-repo``.

try-repo installs a repository's committed HEAD (plus changes to tracked files, but not
untracked ones) into a fresh environment from PyPI.  The tests run it on a clean clone of
this checkout's HEAD, so a working tree with work in progress gives the same result as CI.
They need the network: deselect with -m 'not network'.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from test_cli import BUGGY, ROOT

pytestmark = [pytest.mark.network, pytest.mark.slow]

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
}


def _pre_commit() -> list[str]:
    pytest.importorskip("pre_commit")
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: try-repo needs one")
    return [sys.executable, "-m", "pre_commit"]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("pre-commit-home")


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    _pre_commit()
    target = tmp_path_factory.mktemp("clone") / "graphleaf"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(target)], check=True, env={**os.environ, **GIT_ENV})
    if not (target / ".pre-commit-hooks.yaml").exists():
        pytest.fail(".pre-commit-hooks.yaml is not committed")
    return target


def _env(cache: Path) -> dict:
    env = dict(os.environ)
    env.update(GIT_ENV)
    env["PRE_COMMIT_HOME"] = str(cache)
    env.pop("CI", None)
    return env


def _repo(tmp_path: Path, files: dict[str, str], env: dict) -> Path:
    repo = tmp_path / "project"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", "."], cwd=repo, check=True, env=env)
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    subprocess.run(["git", "add", *files], cwd=repo, check=True, env=env)
    return repo


def _try(clone: Path, repo: Path, hook: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(_pre_commit() + ["try-repo", str(clone), hook, "--verbose"], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=900)


def test_check_hook_fails_on_a_buggy_model(tmp_path, cache, clone):
    env = _env(cache)
    repo = _repo(tmp_path, {"model.py": BUGGY, "build/skipped.py": BUGGY}, env)
    r = _try(clone, repo, "graphleaf", env)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "model.py:10:9: GLF001" in r.stdout
    assert "skipped.py:" not in r.stdout  # build/ is excluded by default, even when named (--force-exclude)


def test_fix_hook_fixes_the_staged_file(tmp_path, cache, clone):
    env = _env(cache)
    repo = _repo(tmp_path, {"model.py": BUGGY}, env)
    r = _try(clone, repo, "graphleaf-fix", env)
    assert r.returncode == 1, r.stdout + r.stderr  # pre-commit fails a hook that changed files
    assert "files were modified by this hook" in r.stdout
    fixed = (repo / "model.py").read_text()
    # self.out is public (code outside the repository may read it): the safe fix keeps it and
    # gives copies a detached value (the copy-safe __getstate__)
    assert "self.out = self.fc(x)" in fixed and "def __getstate__" in fixed
    subprocess.run(["git", "add", "model.py"], cwd=repo, check=True, env=env)
    again = _try(clone, repo, "graphleaf", env)
    assert again.returncode == 0, again.stdout + again.stderr


def test_commit_without_python_files_passes_quietly(tmp_path, cache, clone):
    env = _env(cache)
    repo = _repo(tmp_path, {"README.md": "# hello\n"}, env)
    for hook in ("graphleaf", "graphleaf-fix"):
        r = _try(clone, repo, hook, env)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "(no files to check)Skipped" in r.stdout
