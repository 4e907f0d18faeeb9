"""Hook objects whose base class registers ``self.forward`` as a forward hook and whose subclass
(in another file) overrides it: the bound method is looked up on the object, so the subclass's
``forward`` is what runs, and what it keeps on the hook object is copied with the model
(``module._forward_hooks`` holds the bound method, and deepcopy copies its ``__self__``).
Run as a user runs it (``graphleaf check``, flake8) and with torch: the broken project raises at
its copy, the twin (the subclass keeps a detached input) runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

CORE = '''\
import torch.nn as nn


class Hook:
    """A hook object: stores what its backward rule needs."""

    def __init__(self):
        self.stored_tensors = {}

    def forward(self, module, input, output):
        """Forward hook; subclasses keep what they need."""

    def register(self, module):
        return [module.register_forward_hook(self.forward)]

    def remove(self):
        self.stored_tensors.clear()
'''

RULES = '''\
from core import Hook


class InputKeeper(Hook):
    def forward(self, module, input, output):
        self.stored_tensors["input"] = {value}


class Quiet(Hook):
    def backward(self, module, grad_input, grad_output):
        return grad_output
'''

RUN = '''\
import copy

import torch
import torch.nn as nn

from rules import InputKeeper, Quiet

model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
InputKeeper().register(model[2])
Quiet().register(model[0])
model(torch.randn(3, 4)).sum().backward()
copy.deepcopy(model)
print("copied")
'''


def _project(tmp_path: Path, detached: bool) -> Path:
    (tmp_path / "core.py").write_text(CORE)
    value = "tuple(x.detach() for x in input)" if detached else "input"
    (tmp_path / "rules.py").write_text(RULES.replace("{value}", value))
    (tmp_path / "run.py").write_text(RUN)
    return tmp_path


@pytest.mark.parametrize("detached", [False, True])
def test_a_subclass_hook_registered_by_its_base_in_another_file(tmp_path, detached):
    project = _project(tmp_path, detached)
    # the hook keeps the hooked module's input: that the model runs with grad on when it fires is
    # taken on trust (medium; run.py shows it, through a registration the copy graph does not follow)
    r = subprocess.run([sys.executable, "-m", "flake8_graphleaf", "check", "--isolated", "--no-cache",
                        "--output-format", "concise", "--confidence", "medium", str(project)], capture_output=True,
                       text=True, timeout=300, cwd=ROOT)
    f8 = subprocess.run([sys.executable, "-m", "flake8", "--isolated", "--select=GLF", "--graphleaf-confidence=medium",
                         str(project / "rules.py")], capture_output=True, text=True, timeout=300, cwd=project)
    if detached:
        assert r.returncode == 0 and r.stdout == "", r.stdout
        assert f8.stdout == "", f8.stdout
    else:
        assert ("rules.py:6:9: GLF003 'self.stored_tensors' (InputKeeper) is given a tensor that may be on the autograd "
                "graph (from input of the hooked module) in forward hook 'forward'") in r.stdout, r.stdout
        assert "(it copies the hook's own object, a bound method's __self__)" in r.stdout, r.stdout
        assert "core.py" not in r.stdout, r.stdout  # the base's own forward stores nothing
        assert "rules.py:6:9: GLF003" in f8.stdout, f8.stdout
        assert "[medium confidence: taken on trust: input of the hooked module is taken to be on the graph" in r.stdout


@pytest.mark.slow  # the project run with torch: the check above, confirmed at run time
@pytest.mark.torch
@pytest.mark.parametrize("detached", [False, True])
def test_a_subclass_hook_registered_by_its_base_in_another_file_runs_as_judged(tmp_path, detached):
    pytest.importorskip("torch")
    project = _project(tmp_path, detached)
    ran = subprocess.run([sys.executable, "run.py"], cwd=project, capture_output=True, text=True, timeout=300)
    if detached:
        assert ran.returncode == 0 and "copied" in ran.stdout, ran.stderr
    else:
        assert ran.returncode != 0 and "graph leaves" in ran.stderr, ran.stderr


def test_the_witness_names_the_registration_in_the_base_file(tmp_path):
    project = _project(tmp_path, False)
    r = subprocess.run([sys.executable, "-m", "flake8_graphleaf", "check", "--isolated", "--no-cache",
                        "--show-witness", "--confidence", "medium", str(project / "rules.py")], capture_output=True,
                       text=True, timeout=300, cwd=ROOT)
    assert "registered at core.py:14" in r.stdout, r.stdout
