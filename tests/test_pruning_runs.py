"""GLF103 as a user runs it, judged with torch: a model pruned with ``global_unstructured`` (or
in a loop) whose pruning a later loop makes permanent copies fine and is not reported; the same
model whose loop removes the pruning of other modules (or none) raises at the copy and is."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

MODEL = '''\
import copy

import torch.nn as nn
import torch.nn.utils.prune as prune


class Pruned(nn.Module):
    def __init__(self, amount=0.3):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 4))
        pairs = [(m, "weight") for m in self.body if isinstance(m, nn.Linear)]
        prune.global_unstructured(pairs, pruning_method=prune.L1Unstructured, amount=amount)
        for module, name in {removed}:
            prune.remove(module, name)

    def forward(self, x):
        return self.body(x)


class LoopPruned(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(6, 5), nn.Linear(5, 4))
        for m in self.body:
            prune.l1_unstructured(m, "weight", 0.3)
        for m in {loop}:
            prune.remove(m, "weight")

    def forward(self, x):
        return self.body(x)


copy.deepcopy(Pruned())
copy.deepcopy(LoopPruned())
print("copied")
'''


@pytest.mark.parametrize("permanent", [True, False])
def test_pruning_made_permanent_by_a_later_loop(tmp_path, permanent):
    text = MODEL.replace("{removed}", "pairs" if permanent else "pairs[:0]").replace(
        "{loop}", "self.body" if permanent else "self.body[:1]")
    path = tmp_path / "model.py"
    path.write_text(text)
    r = subprocess.run([sys.executable, "-m", "flake8_graphleaf", "check", "--isolated", "--no-cache",
                        "--output-format", "concise", str(path)], capture_output=True, text=True, timeout=300, cwd=ROOT)
    if permanent:
        assert r.returncode == 0 and r.stdout == "", r.stdout
    else:
        assert "model.py:12:9: GLF103" in r.stdout and "model.py:25:13: GLF103" in r.stdout, r.stdout


@pytest.mark.slow  # the model run with torch: the check above, confirmed at run time
@pytest.mark.torch
@pytest.mark.parametrize("permanent", [True, False])
def test_pruning_made_permanent_by_a_later_loop_copies_and_the_other_raises(tmp_path, permanent):
    pytest.importorskip("torch")
    path = tmp_path / "model.py"
    path.write_text(MODEL.replace("{removed}", "pairs" if permanent else "pairs[:0]").replace(
        "{loop}", "self.body" if permanent else "self.body[:1]"))
    ran = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300)
    if permanent:
        assert ran.returncode == 0 and "copied" in ran.stdout, ran.stderr
    else:
        assert ran.returncode != 0 and "graph leaves" in ran.stderr, ran.stderr
