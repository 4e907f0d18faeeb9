"""``nn.Parameter(...).to(device)`` in a constructor (AgileRL's log_std, set 8's c04): to any
device but the CPU the move gives a copy with a grad_fn, which is kept instead of the parameter,
so the module cannot be deep-copied (and the optimizer never sees the parameter). Judged with
torch on the meta device (a device other than the CPU that every machine has): GLF005, deepcopy
raises; the twin that makes the parameter on its device copies."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

MODEL = '''\
import copy
import sys

import torch
import torch.nn as nn


class Gaussian(nn.Module):
    def __init__(self, n, device="cpu"):
        super().__init__()
        self.log_std = {made}


model = Gaussian(3, device=sys.argv[1])
copy.deepcopy(model)
print("copied", [name for name, _ in model.named_parameters()])
'''


@pytest.mark.slow
@pytest.mark.parametrize("moved", [True, False])
def test_a_new_parameter_moved_to_a_device(tmp_path, moved):
    path = tmp_path / "dist.py"
    path.write_text(MODEL.replace("{made}", "nn.Parameter(torch.zeros(n)).to(device)" if moved
                                  else "nn.Parameter(torch.zeros(n, device=device))"))
    r = subprocess.run([sys.executable, "-m", "flake8_graphleaf", "check", "--isolated", "--no-cache",
                        "--output-format", "concise", str(path)], capture_output=True, text=True, timeout=300, cwd=ROOT)
    if moved:
        assert "dist.py:11:9: GLF005 'self.log_std' (Gaussian) is set, while the module is built, to a tensor on the autograd graph (from " \
               "nn.Parameter(...).to(...), a copy of the new parameter on any device but the CPU" in r.stdout, r.stdout
    else:
        assert r.returncode == 0 and r.stdout == "", r.stdout
    pytest.importorskip("torch")
    on_cpu = subprocess.run([sys.executable, str(path), "cpu"], capture_output=True, text=True, timeout=300)
    assert on_cpu.returncode == 0 and "copied ['log_std']" in on_cpu.stdout, on_cpu.stderr  # .to(cpu): the parameter
    elsewhere = subprocess.run([sys.executable, str(path), "meta"], capture_output=True, text=True, timeout=300)
    if moved:
        assert elsewhere.returncode != 0 and "graph leaves" in elsewhere.stderr, elsewhere.stderr
    else:
        assert elsewhere.returncode == 0 and "copied ['log_std']" in elsewhere.stdout, elsewhere.stderr
