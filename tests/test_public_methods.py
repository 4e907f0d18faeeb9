"""Public methods other than ``forward`` are roots of their own (issue 18): a
``process_support_set`` that keeps the backbone's prototypes on the module (easyfsl's shape), and
an override in another file that calls the base's ``compute_features``. Judged with torch: the
episode the package documents makes ``copy.deepcopy`` raise; ``graphleaf fix`` makes it work
with the same loss and gradients; the twins (``@torch.no_grad()``, ``.detach()``) are silent and copy."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from _cli import codes as _codes
from _cli import graphleaf as _graphleaf

from _imported import deepcopy_works, imported

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "fixtures" / "projects" / "public_methods"
EXPECTED = ["./episode.py:27:16: GLF202", "./fewshot/base.py:19:9: GLF001"]
# the override's store rests on two steps taken on trust: that users call the public method with grad
# on, and that its argument is an activation (low)
ON_TRUST = ["./fewshot/relation.py:9:9: GLF001"]




def test_public_methods_are_roots_with_their_witness(tmp_path):
    shutil.copytree(FIXTURE, tmp_path / "p")
    r = _graphleaf("check", "--isolated", "--no-cache", "--output-format", "concise", ".", cwd=tmp_path / "p")
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert _codes(r.stdout) == EXPECTED
    assert "stored by episode() -> FewShotClassifier.process_support_set" in r.stdout
    r = _graphleaf("check", "--isolated", "--no-cache", "--output-format", "json", ".", cwd=tmp_path / "p")
    base = next(f for f in json.loads(r.stdout) if f["filename"].endswith("base.py"))
    # the program copies it: the copy graph's finding, which names the copy, stands for the public root's
    assert base["witness"]["reached"] == "episode() -> FewShotClassifier.process_support_set", base["witness"]
    assert "copy.deepcopy(model) at episode.py:27" in base["message"]
    # the library alone: the public method is the root
    shutil.copytree(FIXTURE / "fewshot", tmp_path / "lib" / "fewshot")
    r = _graphleaf("check", "--isolated", "--no-cache", "--output-format", "json", ".", cwd=tmp_path / "lib")
    assert not any(f["filename"].endswith("base.py") for f in json.loads(r.stdout))  # no program: not proven
    r = _graphleaf("check", "--isolated", "--no-cache", "--output-format", "json", "--confidence", "medium", ".",
                   cwd=tmp_path / "lib")
    base = next(f for f in json.loads(r.stdout) if f["filename"].endswith("base.py"))
    assert base["witness"]["reached"].startswith("process_support_set() (a public method"), base["witness"]
    assert "self.backbone" in base["witness"]["source"] and base["witness"]["grad"] == "enabled"
    assert "will raise after process_support_set()" in base["message"]
    assert base["confidence"] == "medium" and [t["kind"] for t in base["trust"]] == ["public-root"]
    # the argument-only store is a lower level; the no_grad and detached twins are never reported
    r = _graphleaf("check", "--isolated", "--no-cache", "--output-format", "concise", "--argument-stores", ".",
                   cwd=tmp_path / "p")
    assert _codes(r.stdout) == sorted(EXPECTED + ON_TRUST + ["./fewshot/base.py:31:9: GLF001"])
    flake8 = subprocess.run([sys.executable, "-m", "flake8", "--isolated", "--select=GLF", "."], capture_output=True,
                            text=True, timeout=300, cwd=tmp_path / "p")
    assert _codes(flake8.stdout) == EXPECTED, flake8.stdout  # the same findings as flake8 reports them


def _episode(cwd: Path, which: str = "") -> tuple[bool, str]:
    r = subprocess.run([sys.executable, "episode.py", *([which] if which else [])], capture_output=True, text=True,
                       timeout=300, cwd=cwd)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    return lines[0].startswith("copied True"), lines[-1]


@pytest.mark.slow
@pytest.mark.parametrize("which", ["", "relation"])
def test_the_episode_breaks_the_copy_and_the_fix_keeps_loss_and_gradients(tmp_path, which):
    pytest.importorskip("torch")
    shutil.copytree(FIXTURE, tmp_path / "p")
    copied, numbers = _episode(tmp_path / "p", which)
    assert not copied
    r = _graphleaf("fix", "--isolated", "--no-cache", ".", cwd=tmp_path / "p")
    assert "Traceback" not in r.stderr, r.stderr
    assert _episode(tmp_path / "p", which) == (True, numbers)  # same loss and gradient, bit for bit (repr)
    r = _graphleaf("check", "--isolated", "--no-cache", "--output-format", "concise", ".", cwd=tmp_path / "p")
    assert _codes(r.stdout) == []


def test_the_twins_copy_after_their_public_methods_ran(tmp_path):
    torch = pytest.importorskip("torch")
    shutil.copytree(FIXTURE, tmp_path / "p")
    with imported(tmp_path / "p", "fewshot.relation") as relation:
        model = relation.RelationNetworks()
        model.calibrate(torch.randn(4, 8))  # under @torch.no_grad(): no history
        model.summary_features(torch.randn(4, 8))  # stored .detach()
        model.remember(torch.randn(4, 8))  # data given by the caller: no history
        assert deepcopy_works(model)
        model.process_support_set(torch.randn(5, 8), torch.arange(5))
        assert not deepcopy_works(model)  # the reported store, for contrast
