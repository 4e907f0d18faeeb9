"""A backbone kept in a plain list (out of the state_dict) and reached through a ``@property``,
judged with torch: the representation a training forward keeps on ``self.rep`` is on the graph
and ``copy.deepcopy(model)`` raises (GLF001); the twin keeps it detached and copies."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

MODEL = '''\
import copy

import torch
import torch.nn as nn


class MultiTask(nn.Module):
    def __init__(self, backbone, heads):
        super().__init__()
        self._backbone = [backbone]
        self.heads = heads

    @property
    def backbone(self):
        return self._backbone[0]

    def forward(self, x):
        rep = self.backbone(x)
        if self.training:
            self.rep = {rep}
        return [head(rep) for head in self.heads]


model = MultiTask(nn.Linear(4, 3), nn.ModuleList([nn.Linear(3, 1), nn.Linear(3, 2)]))
sum(p.sum() for p in model(torch.randn(2, 4))).backward()
copy.deepcopy(model)
print("copied")
'''


@pytest.mark.parametrize("detached", [False, True])
def test_a_property_backbone(tmp_path, detached):
    path = tmp_path / "mtl.py"
    path.write_text(MODEL.replace("{rep}", "rep.detach()" if detached else "rep"))
    r = subprocess.run([sys.executable, "-m", "flake8_graphleaf", "check", "--isolated", "--no-cache",
                        "--output-format", "concise", str(path)], capture_output=True, text=True, timeout=300, cwd=ROOT)
    if detached:
        assert r.returncode == 0 and r.stdout == "", r.stdout
    else:
        assert "mtl.py:20:13: GLF001 'self.rep' (MultiTask) keeps a tensor on the autograd graph (from self.backbone(...))" \
            in r.stdout, r.stdout


@pytest.mark.slow  # the model run with torch: the check above, confirmed at run time
@pytest.mark.torch
@pytest.mark.parametrize("detached", [False, True])
def test_a_property_backbone_runs_as_judged(tmp_path, detached):
    pytest.importorskip("torch")
    path = tmp_path / "mtl.py"
    path.write_text(MODEL.replace("{rep}", "rep.detach()" if detached else "rep"))
    ran = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300)
    if detached:
        assert ran.returncode == 0 and "copied" in ran.stdout, ran.stderr
    else:
        assert ran.returncode != 0 and "graph leaves" in ran.stderr, ran.stderr
