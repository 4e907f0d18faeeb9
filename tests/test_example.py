"""The bundled example as a user meets it: it crashes in its EMA copy, `graphleaf fix`
repairs it, and the fixed script runs to the end."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytestmark = pytest.mark.torch

EXAMPLE = Path(__file__).resolve().parent.parent / "fixtures" / "example" / "train_with_ema.py"


def test_example_crashes_then_runs_after_fix(tmp_path: Path) -> None:
    script = tmp_path / EXAMPLE.name
    shutil.copy(EXAMPLE, script)
    before = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path)
    assert before.returncode != 0
    assert "Only Tensors created explicitly by the user (graph leaves)" in before.stderr

    fixed = subprocess.run(
        [sys.executable, "-m", "flake8_graphleaf", "fix", str(script)], capture_output=True, text=True, cwd=tmp_path
    )
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    # self.features is public (code elsewhere may read it): the copy-safe __getstate__, not a rename
    assert 'for name in ("features", "_buffers"):' in script.read_text()

    after = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path)
    assert after.returncode == 0, after.stderr
    check = subprocess.run(
        [sys.executable, "-m", "flake8_graphleaf", "check", str(script)], capture_output=True, text=True, cwd=tmp_path
    )
    assert check.returncode == 0, check.stdout
