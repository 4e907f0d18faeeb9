"""A parameter made with ``requires_grad=False`` (MiniRocket's random kernels, a NeRF field's
bounding box), judged with torch: what forward computes from it and a plain input has no
grad_fn, so keeping it on ``self`` copies fine and nothing is reported. The same class whose
``unfreeze()`` turns the parameter's grad on keeps a graph tensor: GLF001, and deepcopy raises."""

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


class Features(nn.Module):
    def __init__(self, c_in):
        super().__init__()
        self.kernels = nn.Parameter(torch.randn(8, c_in, 3), requires_grad=False)
        self.scale = nn.Parameter(torch.ones(1))
        self.scale.requires_grad_(False)

    def unfreeze(self):
        self.kernels.requires_grad_({flag})

    def forward(self, x):
        c = torch.conv1d(x, self.kernels) * self.scale
        self.biases = torch.quantile(c.flatten(1), 0.5, dim=1)
        return c.relu().mean(-1)


model = Features(2)
{call}
model(torch.randn(4, 2, 16))
copy.deepcopy(model)
print("copied")
'''


@pytest.mark.parametrize("frozen", [True, False])
def test_a_frozen_parameter_is_no_grad_source(tmp_path, frozen):
    path = tmp_path / "rocket.py"
    path.write_text(MODEL.replace("{flag}", "False" if frozen else "True")
                    .replace("{call}", "" if frozen else "model.unfreeze()"))
    r = subprocess.run([sys.executable, "-m", "flake8_graphleaf", "check", "--isolated", "--no-cache",
                        "--output-format", "concise", str(path)], capture_output=True, text=True, timeout=300, cwd=ROOT)
    if frozen:
        assert r.returncode == 0 and r.stdout == "", r.stdout
    else:
        assert "rocket.py:19:9: GLF001 'self.biases' (Features) keeps a tensor on the autograd graph (from parameter " \
               "self.kernels)" in r.stdout, r.stdout


@pytest.mark.slow  # the model run with torch: the check above, confirmed at run time
@pytest.mark.torch
@pytest.mark.parametrize("frozen", [True, False])
def test_a_frozen_parameter_is_no_grad_source_at_run_time(tmp_path, frozen):
    pytest.importorskip("torch")
    path = tmp_path / "rocket.py"
    path.write_text(MODEL.replace("{flag}", "False" if frozen else "True")
                    .replace("{call}", "" if frozen else "model.unfreeze()"))
    ran = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300)
    if frozen:
        assert ran.returncode == 0 and "copied" in ran.stdout, ran.stderr
    else:
        assert ran.returncode != 0 and "graph leaves" in ran.stderr, ran.stderr
