"""``[tool.graphleaf]`` configuration and file discovery (exclude, .gitignore)."""

from __future__ import annotations

from pathlib import Path

import pytest

from flake8_graphleaf.cli.config import ConfigError, Settings, load
from flake8_graphleaf.cli.files import discover, parse_gitignore
from test_cli import BUGGY, run


def _tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def _found(root: Path, settings: Settings | None = None, paths=(".",), force=False) -> list[str]:
    s = settings or Settings(root=root)
    import os

    old = os.getcwd()
    os.chdir(root)
    try:
        return discover(list(paths), s, force_exclude=force).files
    finally:
        os.chdir(old)


def test_default_excludes_and_gitignore(tmp_path):
    _tree(tmp_path, {
        "src/a.py": "", "src/b.txt": "", ".venv/lib/x.py": "", "build/y.py": "", "node_modules/z.py": "",
        "src/gen/out.py": "", "src/keep.py": "", "logs/l.py": "", ".gitignore": "gen/\n/logs\n*.py\n!keep.py\n!a.py\n",
    })
    (tmp_path / ".git").mkdir()
    assert _found(tmp_path) == ["./src/a.py", "./src/keep.py"]
    s = Settings(root=tmp_path, respect_gitignore=False)
    assert _found(tmp_path, s) == ["./logs/l.py", "./src/a.py", "./src/gen/out.py", "./src/keep.py"]


def test_gitignore_patterns():
    rules = parse_gitignore("# c\n\n*.log\n/top.py\ndocs/**/gen.py\n\\#hash.py\nsub/\n")
    def ignored(path, is_dir=False):
        verdict = False
        for r in rules:
            if (not r.dir_only or is_dir) and r.regex.match(path):
                verdict = not r.negate
        return verdict
    assert ignored("a/b.log") and ignored("top.py") and not ignored("a/top.py")
    assert ignored("docs/gen.py") and ignored("docs/a/b/gen.py") and ignored("#hash.py")
    assert ignored("x/sub", is_dir=True) and not ignored("x/sub")


def test_named_files_are_checked_unless_force_exclude(tmp_path):
    _tree(tmp_path, {"build/y.py": ""})
    assert _found(tmp_path, paths=["build/y.py"]) == ["build/y.py"]
    assert _found(tmp_path, paths=["build/y.py"], force=True) == []
    assert _found(tmp_path, paths=["build"]) == ["build/y.py"]


def test_exclude_and_extend_exclude(tmp_path):
    _tree(tmp_path, {"a/x.py": "", "b/y.py": "", "c/z_test.py": "", "build/w.py": ""})
    s = Settings(root=tmp_path, exclude=["a"], extend_exclude=["*_test.py"])
    assert _found(tmp_path, s) == ["./b/y.py", "./build/w.py"]


def test_config_from_pyproject(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.graphleaf]\nselect = ["GLF0"]\nignore = ["GLF003"]\nunsafe-fixes = true\n'
        'module-bases = ["MyBase"]\nextend-exclude = ["legacy"]\n'
        'per-file-ignores = { "tests/*" = ["GLF001"] }\n'
    )
    (tmp_path / "pkg").mkdir()
    s = load(tmp_path / "pkg")
    assert s.root == tmp_path.resolve() and s.unsafe_fixes and s.module_bases == frozenset({"MyBase"})
    assert s.enabled("GLF001") and not s.enabled("GLF003") and not s.enabled("GLF101")
    assert not s.wanted_for(str(tmp_path / "tests" / "t.py"))("GLF001")
    assert s.wanted_for(str(tmp_path / "src" / "t.py"))("GLF001")


@pytest.mark.parametrize("body, message", [
    ("selekt = ['GLF']", "unknown key"),
    ("unsafe-fixes = 'yes'", "true or false"),
    ("select = 3", "list of codes"),
    ("select = [", "cannot read"),
])
def test_bad_config_is_a_usage_error(tmp_path, body, message):
    (tmp_path / "pyproject.toml").write_text(f"[tool.graphleaf]\n{body}\n")
    with pytest.raises(ConfigError, match=message):
        load(tmp_path)
    (tmp_path / "a.py").write_text("x = 1\n")
    r = run("check", "a.py", cwd=tmp_path)
    assert r.returncode == 2 and "graphleaf: error:" in r.stderr and "Traceback" not in r.stderr


def test_command_line_wins_over_config(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.graphleaf]\nignore = ["GLF001"]\n')
    (tmp_path / "a.py").write_text(BUGGY)
    assert run("check", "a.py", cwd=tmp_path).returncode == 0
    assert run("check", "--ignore", "GLF2", "a.py", cwd=tmp_path).returncode == 1
    assert run("check", "--isolated", "a.py", cwd=tmp_path).returncode == 1
    assert run("check", "--extend-ignore", "GLF2", "a.py", cwd=tmp_path).returncode == 0


FRAMEWORK = """\
import torch.nn as nn
from mylib import FrameworkModule


class Net(FrameworkModule):
    def __init__(self):
        super().__init__()
        self.head = nn.Linear(2, 2)

    def step(self, x):
        return x

    def training_step(self, x):
        self.loss = self.head(x) * 2
        return self.loss
"""


def test_module_bases_from_config(tmp_path):
    (tmp_path / "a.py").write_text(FRAMEWORK)
    assert run("check", "a.py", cwd=tmp_path).returncode == 0
    (tmp_path / "pyproject.toml").write_text('[tool.graphleaf]\nmodule-bases = ["FrameworkModule"]\n')
    r = run("check", "a.py", cwd=tmp_path)
    assert r.returncode == 1 and "GLF001 'self.loss'" in r.stdout
    r = run("check", "--isolated", "--module-bases", "FrameworkModule", "a.py", cwd=tmp_path)
    assert r.returncode == 1
