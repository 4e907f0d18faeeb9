"""The flake8 plugin as users run it: registration, noqa, per-file-ignores, options,
bad input."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

BUGGY = textwrap.dedent(
    """
    import torch.nn as nn


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)

        def forward(self, x):
            self.cache = self.lin(x){comment}
            return x
    """
)


def flake8(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "flake8", "--isolated", *args], capture_output=True, text=True, cwd=tmp_path
    )


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_plugin_is_registered() -> None:
    proc = subprocess.run([sys.executable, "-m", "flake8", "--version"], capture_output=True, text=True)
    assert "flake8-graphleaf" in proc.stdout


def test_reports_with_extend_select_alongside_defaults(tmp_path: Path) -> None:
    write(tmp_path, "m.py", BUGGY.format(comment=""))
    proc = flake8(tmp_path, "--extend-select=GLF", "m.py")
    assert "m.py:11:9: GLF001 'self.cache' (Net) keeps a tensor" in proc.stdout
    assert proc.returncode == 1


@pytest.mark.parametrize("comment", ["  # noqa", "  # noqa: GLF001", "  # noqa:GLF001,E501", "  # NOQA: GLF"])
def test_noqa_silences(tmp_path: Path, comment: str) -> None:
    write(tmp_path, "m.py", BUGGY.format(comment=comment))
    proc = flake8(tmp_path, "--select=GLF", "m.py")
    assert proc.stdout == "" and proc.returncode == 0


def test_noqa_for_another_code_does_not_silence(tmp_path: Path) -> None:
    write(tmp_path, "m.py", BUGGY.format(comment="  # noqa: GLF002"))
    proc = flake8(tmp_path, "--select=GLF", "m.py")
    assert "GLF001" in proc.stdout


def test_per_file_ignores(tmp_path: Path) -> None:
    write(tmp_path, "m.py", BUGGY.format(comment=""))
    proc = flake8(tmp_path, "--select=GLF", "--per-file-ignores=m.py:GLF001", "m.py")
    assert proc.stdout == "" and proc.returncode == 0


def test_module_bases_option(tmp_path: Path) -> None:
    src = textwrap.dedent(
        """
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
    )
    write(tmp_path, "m.py", src)
    assert flake8(tmp_path, "--select=GLF", "m.py").stdout == ""
    proc = flake8(tmp_path, "--select=GLF", "--graphleaf-module-bases=FrameworkModule", "m.py")
    assert "GLF001 'self.loss'" in proc.stdout


def test_syntax_error_is_flake8_e999_not_a_traceback(tmp_path: Path) -> None:
    write(tmp_path, "bad.py", "def forward(self:\n    self.x = 1\n")
    write(tmp_path, "good.py", BUGGY.format(comment=""))
    proc = flake8(tmp_path, "--select=GLF,E999", "bad.py", "good.py")
    assert "bad.py:1" in proc.stdout and "E999" in proc.stdout
    assert "good.py:11:9: GLF001" in proc.stdout
    assert "Traceback" not in proc.stderr


def test_deeply_nested_file_does_not_crash(tmp_path: Path) -> None:
    expr = "(" * 90 + "x" + ")" * 90
    write(tmp_path, "deep.py", f"import torch.nn as nn\nclass M(nn.Module):\n    def forward(self, x):\n        self.y = {expr}\n        return x\n")
    proc = flake8(tmp_path, "--select=GLF", "deep.py")
    assert "Traceback" not in proc.stderr
    assert proc.returncode in (0, 1)


def test_file_without_torch_is_skipped_cheaply(tmp_path: Path) -> None:
    write(tmp_path, "plain.py", "def f(x):\n    return x + 1\n")
    proc = flake8(tmp_path, "--select=GLF", "plain.py")
    assert proc.returncode == 0 and proc.stdout == ""
