"""``verify --model`` and ``explain`` load a target in a package the same way: a module with
relative imports (``mypkg.model:build``) and a file inside a package (``mypkg/model.py:build``)."""

from __future__ import annotations

import pytest

from test_cli import run

pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.slow]

BASE = "import torch.nn as nn\n\n\nclass BaseModel(nn.Module):\n    pass\n"
MODEL = '''\
import torch
import torch.nn as nn

from .base import BaseModel


class Net(BaseModel):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        self.last = self.fc(x)
        return self.last.sum()


def build():
    return Net()


def make_inputs():
    torch.manual_seed(0)
    return (torch.randn(2, 4),)
'''


@pytest.fixture
def project(tmp_path):
    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "base.py").write_text(BASE)
    (pkg / "model.py").write_text(MODEL)
    return tmp_path


@pytest.mark.parametrize("target", ["mypkg.model:build", "mypkg/model.py:build", "ABS"])
def test_verify_model_in_a_package(project, target):
    if target == "ABS":
        target = str(project / "mypkg" / "model.py") + ":build"
    r = run("verify", "--model", target, "--device", "cpu", cwd=project if not target.startswith("/") else "/")
    assert "relative import" not in r.stdout + r.stderr
    assert r.returncode == 0, r.stdout + r.stderr
    assert "deepcopy PASS" in r.stdout and "1 ok, 0 failed" in r.stdout


@pytest.mark.parametrize("target", ["mypkg.model:build", "mypkg/model.py:build"])
def test_explain_in_a_package(project, target):
    r = run("explain", target, cwd=project)
    assert "relative import" not in r.stdout + r.stderr
    assert "model.last" in r.stdout and "GLF001" in r.stdout, r.stdout + r.stderr
