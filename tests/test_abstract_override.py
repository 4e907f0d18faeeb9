"""A base class's forward keeps what ``self.weight()`` gives, a method the base leaves abstract
and a subclass in another file defines from its parameters (nflows' LinearCache / LULinear
shape, a round-9 miss): ``self`` is one of the subclasses, so the call is run on each of them.
Judged with torch: the eval-mode pass with grad on makes ``copy.deepcopy`` raise; ``graphleaf
fix`` makes it work with the same numbers; a program whose only subclass returns a detached
weight is silent, and its copy works."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from _cli import codes as _codes
from _cli import graphleaf as _graphleaf

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "fixtures" / "projects" / "abstract_override"




def test_the_base_store_is_reported_naming_the_subclass(tmp_path):
    # The store runs only under `if not self.training and self.using_cache:`: that an eval pass
    # runs with grad on is a step taken on trust (medium). run.py shows such a pass and the copy,
    # but in another file than the classes, where the copy graph does not follow it yet.
    shutil.copytree(FIXTURE, tmp_path / "p")
    r = _graphleaf("check", "--isolated", "--no-cache", "--output-format", "concise", "--confidence", "medium", ".",
                   cwd=tmp_path / "p")
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert _codes(r.stdout) == ["./flows/base.py:25:17: GLF001"], r.stdout
    assert "in LULinear.weight()" in r.stdout and "[medium confidence: taken on trust: the store runs only in eval" in r.stdout
    r = _graphleaf("check", "--isolated", "--no-cache", "--output-format", "json", "--confidence", "medium", ".",
                   cwd=tmp_path / "p")
    (found,) = json.loads(r.stdout)
    assert found["witness"]["source"].startswith("parameter self.lower, in LULinear.weight()"), found["witness"]
    assert found["confidence"] == "medium" and [t["kind"] for t in found["trust"]] == ["eval-mode"]
    flake8 = subprocess.run([sys.executable, "-m", "flake8", "--isolated", "--select=GLF", "--graphleaf-confidence=medium",
                             "."], capture_output=True, text=True, timeout=300, cwd=tmp_path / "p")
    assert _codes(flake8.stdout) == ["./flows/base.py:25:17: GLF001"], flake8.stdout


def _only_the_detached_subclass(tmp_path):
    shutil.copytree(FIXTURE, tmp_path / "p")
    (tmp_path / "p" / "flows" / "lu.py").unlink()
    run = tmp_path / "p" / "run.py"
    run.write_text(run.read_text().replace("from flows.lu import LULinear\n", "LULinear = None\n"))


def test_with_only_the_detached_subclass_nothing_is_reported(tmp_path):
    _only_the_detached_subclass(tmp_path)
    r = _graphleaf("check", "--isolated", "--no-cache", ".", cwd=tmp_path / "p")
    assert r.returncode == 0 and r.stdout == "", r.stdout + r.stderr


@pytest.mark.slow  # the twin run with torch: the copy works, as the check above says
@pytest.mark.torch
def test_with_only_the_detached_subclass_the_copy_works(tmp_path):
    pytest.importorskip("torch")
    _only_the_detached_subclass(tmp_path)
    ran = subprocess.run([sys.executable, "run.py", "twin"], capture_output=True, text=True, timeout=300,
                         cwd=tmp_path / "p")
    assert ran.returncode == 0 and ran.stdout.startswith("copied True"), ran.stderr


@pytest.mark.slow
def test_the_copy_raises_and_the_fix_keeps_the_numbers(tmp_path):
    pytest.importorskip("torch")
    shutil.copytree(FIXTURE, tmp_path / "p")
    before = subprocess.run([sys.executable, "run.py"], capture_output=True, text=True, timeout=300, cwd=tmp_path / "p")
    assert before.returncode == 0 and before.stdout.startswith("copied False"), before.stderr
    fixed = _graphleaf("fix", "--isolated", "--no-cache", "--confidence", "medium", ".", cwd=tmp_path / "p")
    assert fixed.returncode == 0 and "Traceback" not in fixed.stderr, fixed.stdout + fixed.stderr
    assert "def __getstate__" in (tmp_path / "p" / "flows" / "base.py").read_text()
    after = subprocess.run([sys.executable, "run.py"], capture_output=True, text=True, timeout=300, cwd=tmp_path / "p")
    assert after.returncode == 0, after.stderr
    assert after.stdout.splitlines() == ["copied True", before.stdout.splitlines()[1]]  # same loss, gradients
    again = _graphleaf("check", "--isolated", "--no-cache", "--confidence", "low", ".", cwd=tmp_path / "p")
    assert again.returncode == 0, again.stdout
