"""``graphleaf check`` end to end: the installed command, run as a user runs it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"

BUGGY = '''\
import torch.nn as nn


class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2)

    def forward(self, x):
        self.out = self.fc(x)
        return self.out
'''


def graphleaf_cmd() -> list[str]:
    exe = Path(sys.executable).parent / "graphleaf"
    if exe.exists():
        return [str(exe)]
    found = shutil.which("graphleaf")
    assert found, "the graphleaf console script is not installed (pip install -e .)"
    return [found]


def run(*args, cwd=None, stdin=None, env=None) -> subprocess.CompletedProcess:
    full_env = dict(os.environ)
    full_env.pop("CI", None)
    full_env.update(env or {})
    return subprocess.run(graphleaf_cmd() + [str(a) for a in args], cwd=cwd, input=stdin,
                          capture_output=True, text=True, env=full_env, timeout=300)


def test_same_lines_as_flake8():
    flake8 = subprocess.run([sys.executable, "-m", "flake8", "--select=GLF", "fixtures/"], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    ours = run("check", "--output-format", "concise", "fixtures/", cwd=ROOT)
    assert flake8.stdout.strip(), flake8.stderr
    assert ours.stdout.splitlines() == flake8.stdout.splitlines()
    assert ours.returncode == 1


def test_same_lines_as_flake8_with_noqa_and_non_ascii(tmp_path):
    src = BUGGY.replace("self.out = self.fc(x)", "self.é = 'ü'; self.out = self.fc(x)")
    src += "\n\nclass N(M):\n    def forward(self, x):\n        self.y = self.fc(x)  # noqa: GLF001\n"
    src += "        self.z = self.fc(x)  # noqa\n        self.w = self.fc(x)  # noqa: E501\n"
    (tmp_path / "a.py").write_text(src, encoding="utf-8")
    flake8 = subprocess.run([sys.executable, "-m", "flake8", "--isolated", "--select=GLF", "a.py"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)
    ours = run("check", "--output-format", "concise", "a.py", cwd=tmp_path)
    assert ours.stdout.splitlines() == flake8.stdout.splitlines()
    # flake8 counts UTF-8 bytes: 'é' and 'ü' push 'self.out' from character 23 to column 25
    assert "a.py:10:25: GLF001" in ours.stdout and "a.py:18:9: GLF001" in ours.stdout
    assert ":16:" not in ours.stdout and ":17:" not in ours.stdout


@pytest.mark.parametrize("comment", [
    "# noqa: GLF002",
    "x = 1  # flake8: noqa",
    "# flake8: noqa: GLF002",
    "# noqa:GLF001,GLF002",
])
def test_noqa_edge_cases_match_flake8(tmp_path, comment):
    src = BUGGY.replace("self.out = self.fc(x)", "self.out = self.fc(x)  " + comment) if comment.startswith("# noqa") \
        else comment.split("  ")[0] + "  " + comment.split("  ")[-1] + "\n" + BUGGY if "x = 1" in comment \
        else comment + "\n" + BUGGY
    (tmp_path / "a.py").write_text(src)
    flake8 = subprocess.run([sys.executable, "-m", "flake8", "--isolated", "--select=GLF", "a.py"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)
    ours = run("check", "--output-format", "concise", "a.py", cwd=tmp_path)
    assert ours.stdout.splitlines() == flake8.stdout.splitlines()


def test_exit_codes(tmp_path):
    (tmp_path / "bad.py").write_text(BUGGY)
    (tmp_path / "good.py").write_text("x = 1\n")
    assert run("check", tmp_path / "good.py").returncode == 0
    r = run("check", tmp_path / "bad.py")
    assert r.returncode == 1 and "GLF001" in r.stdout
    assert run("check", "--exit-zero", tmp_path / "bad.py").returncode == 0
    r = run("check", "--select", "NOPE1", tmp_path)
    assert r.returncode == 2 and "matches no graphleaf rule" in r.stderr
    r = run("check", "--output-format", "xml", tmp_path)
    assert r.returncode == 2


def test_bad_inputs_are_reported_and_others_still_checked(tmp_path):
    (tmp_path / "bad.py").write_text(BUGGY)
    (tmp_path / "syntax.py").write_text("def f(:\n    pass\n")
    (tmp_path / "binary.py").write_bytes(b"x = '\xff\xfe'\n")
    (tmp_path / "nulls.py").write_bytes(b"x = 1\x00\n")
    (tmp_path / "dir.py").mkdir()
    (tmp_path / "dir.py" / "inner.py").write_text(BUGGY)
    (tmp_path / "deep.py").write_text("x = " + "(" * 300 + "1" + ")" * 300 + "\n")
    (tmp_path / "huge.py").write_bytes(b"# " + b"x" * (11 * 1024 * 1024) + b"\n")
    r = run("check", "--output-format", "concise", tmp_path, tmp_path / "missing.py", tmp_path / "dir.py")
    assert r.returncode == 1  # a file that cannot be read or parsed is a finding, as E999/E902 in flake8
    assert "Traceback" not in r.stderr + r.stdout
    lines = r.stdout.splitlines()
    for name in ("syntax.py", "binary.py", "nulls.py", "deep.py", "huge.py", "missing.py"):
        hits = [line for line in lines if line.startswith(str(tmp_path / name) + ":")]
        assert len(hits) == 1 and " GLF900 " in hits[0], (name, lines)
    assert str(tmp_path / "syntax.py") + ":1:8: GLF900 SyntaxError: invalid syntax" in lines  # flake8's E999 place
    assert str(tmp_path / "missing.py") + ":1:1: GLF900 could not read: No such file or directory" in lines
    assert any(line.startswith(str(tmp_path / "bad.py") + ":10:9: GLF001") for line in lines)
    assert any("inner.py:10:9: GLF001" in line for line in lines)


def test_deterministic_whatever_jobs_and_hash_seed(tmp_path):
    for i in range(24):
        (tmp_path / f"m{i:02}.py").write_text(BUGGY if i % 3 else "import torch\n")
    outs = set()
    for jobs, seed in ((1, "0"), (4, "1"), (8, "12345")):
        r = run("check", "--output-format", "concise", "-j", jobs, ".", cwd=tmp_path, env={"PYTHONHASHSEED": seed})
        assert r.returncode == 1
        outs.add(r.stdout)
    assert len(outs) == 1
    lines = outs.pop().splitlines()
    assert lines == sorted(lines) and len(lines) == 16


def test_stdin_with_filename(tmp_path):
    r = run("check", "--output-format", "concise", "--stdin-filename", "pkg/model.py", "-", stdin=BUGGY, cwd=tmp_path)
    assert r.returncode == 1
    assert r.stdout.startswith("pkg/model.py:10:9: GLF001 ")
    r = run("check", "-", stdin="x = 1\n", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout == ""


def test_select_ignore_and_statistics(tmp_path):
    (tmp_path / "a.py").write_text(BUGGY)
    assert run("check", "--ignore", "GLF001", tmp_path).returncode == 0
    assert run("check", "--select", "GLF2", tmp_path).returncode == 0
    assert run("check", "--select", "GLF2", "--extend-select", "GLF001", tmp_path).returncode == 1
    # the more specific code wins, as in flake8
    assert run("check", "--ignore", "GLF", "--select", "GLF001", tmp_path).returncode == 1
    r = run("check", "--statistics", "--output-format", "concise", tmp_path)
    assert r.stdout.splitlines()[-1].split()[:2] == ["1", "GLF001"]


def test_text_format_shows_source_and_fix(tmp_path):
    (tmp_path / "a.py").write_text(BUGGY)
    r = run("check", "a.py", cwd=tmp_path)
    assert r.stdout.splitlines()[0].startswith("a.py:10:9: GLF001 ")
    assert "self.out = self.fc(x)" in r.stdout and "^^^^^^^^" in r.stdout
    assert "graphleaf fix" in r.stdout
    assert "Found 1 finding" in r.stderr


def test_quiet_on_a_clean_tree_and_summary(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    r = run("check", tmp_path)
    assert r.returncode == 0 and r.stdout == "" and "no findings" in r.stderr
    r = run("check", "-q", tmp_path)
    assert r.stderr == ""


def test_no_progress_bar_when_piped(tmp_path):
    for i in range(30):
        (tmp_path / f"m{i}.py").write_text(BUGGY)
    r = run("check", "--output-format", "concise", tmp_path)
    assert "\r" not in r.stderr and "[#" not in r.stderr


def test_rules_and_rule_pages():
    r = run("rules")
    assert r.returncode == 0
    codes = [line.split()[0] for line in r.stdout.splitlines()[1:] if line.startswith("GLF")]
    assert codes[:2] == ["GLF001", "GLF002"] and "GLF202" in codes
    r = run("rule", "GLF999")
    assert r.returncode == 2 and "unknown rule code" in r.stderr
    r = run("rule", "glf001")
    page = ROOT / "flake8_graphleaf" / "rule_docs" / "GLF001.md"
    if page.exists():
        assert r.returncode == 0 and r.stdout.startswith(page.read_text(encoding="utf-8").splitlines()[0])
        assert "## Why is this bad?" in r.stdout
    else:
        assert r.returncode == 2 and "no documentation page" in r.stderr


def test_python_dash_m_and_version():
    r = subprocess.run([sys.executable, "-m", "flake8_graphleaf", "--version"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("graphleaf ")


def test_check_and_fix_never_import_torch(tmp_path):
    (tmp_path / "a.py").write_text(BUGGY)
    code = (
        "import sys\n"
        "from flake8_graphleaf.cli import main\n"
        f"main(['check', '-q', '-j', '1', {str(tmp_path)!r}])\n"
        f"main(['fix', '-q', '--diff', '-j', '1', {str(tmp_path)!r}])\n"
        "main(['rules'])\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def test_lazy_subcommand_missing_module_is_a_clear_error(monkeypatch, capsys):
    import importlib

    from flake8_graphleaf.cli import app as cli
    from flake8_graphleaf.cli import options

    real = importlib.import_module

    def fake(name, *a, **k):
        if name == "flake8_graphleaf.cli.verify":
            raise ImportError("No module named 'torch'")
        return real(name, *a, **k)

    monkeypatch.setattr(options.importlib, "import_module", fake)
    assert cli.main(["verify", "whatever"]) == 2
    err = capsys.readouterr().err
    assert "graphleaf verify is not available" in err and "torch" in err


@pytest.mark.parametrize("name", ["explain", "verify"])
def test_lazy_subcommands_run_their_module(name, monkeypatch, capsys):
    import types

    from flake8_graphleaf.cli import app as cli

    mod = types.ModuleType(f"flake8_graphleaf.cli.{name}")
    mod.add_arguments = lambda p: p.add_argument("target")
    mod.run = lambda args: 7 if args.target == "x" else 0
    monkeypatch.setitem(sys.modules, f"flake8_graphleaf.cli.{name}", mod)
    assert cli.main([name, "x"]) == 7
