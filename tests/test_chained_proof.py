"""A layer the project chains right after a torch layer that holds parameters gets that layer's
output as forward's first argument: a store computed from it is proven, reported at the default
level (``high``) with a witness naming the chain (the constructing line and the torch layer).
Which torch layers hold parameters, and which carry their input's history, is a generated torch
fact (``semantics.json``'s ``nn_modules``), regenerated here from the installed torch.  Judged with
torch: the proven stores make ``copy.deepcopy`` raise after a training step; the twins that stay
at a lower level (after a norm without parameters, an element appended under an ``if``, a second
argument no layer gives) copy."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from _cli import codes, graphleaf
from flake8_graphleaf.analysis.facts import torch_facts

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "fixtures" / "projects" / "chained_layers"
PROVEN = ["./neurons.py:14:9: GLF001", "./neurons.py:24:9: GLF001"]
LOWER = ["./neurons.py:36:9: GLF001", "./neurons.py:48:9: GLF001"]


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    shutil.copytree(FIXTURE, tmp_path / "p")
    return tmp_path / "p"


def test_a_layer_chained_after_a_learnable_torch_layer_is_proven(project):
    r = graphleaf("check", "--isolated", "--no-cache", "--output-format", "concise", ".", cwd=project)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert codes(r.stdout) == PROVEN, r.stdout
    assert "taken on trust" not in r.stdout and "may be" not in r.stdout
    r = graphleaf("check", "--isolated", "--no-cache", "--output-format", "json", "--confidence", "low", ".", cwd=project)
    found = {f["location"]["row"]: f for f in json.loads(r.stdout)}
    spike, pulse, gate, cell = (found[line] for line in (14, 24, 36, 48))
    assert spike["confidence"] == pulse["confidence"] == "high" and not spike["trust"] and not pulse["trust"]
    assert "the output of torch.nn.Linear" in spike["witness"]["source"], spike["witness"]
    assert "net.py:8 chains Spike right after it in nn.Sequential" in spike["witness"]["source"]
    assert "the output of torch.nn.Conv1d" in pulse["witness"]["source"] and "net.py:12" in pulse["witness"]["source"]
    # after InstanceNorm1d (no parameters by default) or a BatchNorm1d appended only under an if;
    # a second argument, which nn.Sequential never gives: still taken on trust
    assert gate["confidence"] == cell["confidence"] == "medium"
    assert [t["kind"] for t in gate["trust"]] == [t["kind"] for t in cell["trust"]] == ["argument-chained"]


def test_flake8_reports_the_same(project):
    base = [sys.executable, "-m", "flake8", "--isolated", "--select=GLF", "."]
    r = subprocess.run(base, capture_output=True, text=True, timeout=300, cwd=project)
    assert codes(r.stdout) == PROVEN, r.stdout + r.stderr
    r = subprocess.run(base + ["--graphleaf-confidence=medium"], capture_output=True, text=True, timeout=300, cwd=project)
    assert codes(r.stdout) == sorted(PROVEN + LOWER), r.stdout + r.stderr


def test_the_learnable_layer_facts_come_from_torch():
    linear, norm, relu = (torch_facts.nn_module(f"torch.nn.{n}") for n in ("Linear", "InstanceNorm1d", "ReLU"))
    assert linear == {"params": True, "graph": True, "carries": True}
    assert norm["params"] is False and relu == {"params": False, "graph": False, "carries": True}
    assert torch_facts.nn_module("torch.nn.modules.linear.Linear") == linear
    assert torch_facts.nn_module("torch.nn.quantized.Linear") is None and torch_facts.nn_module("mylib.Linear") is None


@pytest.mark.torch
def test_the_nn_module_facts_are_what_the_installed_torch_does():
    torch = pytest.importorskip("torch")
    from flake8_graphleaf.runtime import torch_probe

    with open(torch_probe.TABLE, encoding="utf-8") as fh:
        stored = json.load(fh)["nn_modules"]
    generated = torch_probe.probe_nn_modules(torch)
    diff = torch_probe.differences({"nn_modules": stored}, {"nn_modules": generated})
    assert not diff, "regenerate: python -m flake8_graphleaf.runtime.torch_probe --write\n" + "\n".join(diff[:40])


def test_judged_with_torch_the_proven_stores_break_the_copy_and_the_twins_do_not(project):
    pytest.importorskip("torch")
    ran = subprocess.run([sys.executable, "run.py", "spike", "pulse", "gate", "cell"], capture_output=True, text=True,
                         timeout=300, cwd=project)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == ["spike raises True", "pulse raises True", "gate copied", "cell copied"]


PACKAGE = {
    "pkg/__init__.py": "",
    "pkg/base.py": '''
import torch.nn as nn


class MemoryModule(nn.Module):
    def forward(self, *args):
        return self.step(*args)
''',
    "pkg/neuron/__init__.py": "from .lif import *\n",
    "pkg/layer/__init__.py": "from .conv import *\n",
    "pkg/layer/conv.py": '''
import torch.nn as nn


class Conv2d(nn.Conv2d):
    def forward(self, x):
        return super().forward(x)


class MaxPool2d(nn.MaxPool2d):
    pass
''',
    "pkg/neuron/lif.py": '''
from ..base import MemoryModule


class LIF(MemoryModule):
    def __init__(self):
        super().__init__()
        self.v = None

    def step(self, x):
        self.v = x * 0.9
        return self.v
''',
    "pkg/model.py": '''
import torch.nn as nn

from pkg import layer, neuron


def net():
    return nn.Sequential(LAYER, neuron.LIF())
''',
}


@pytest.mark.parametrize("first, level, layer", [
    ("nn.Conv2d(3, 3, 1)", "high", "torch.nn.Conv2d"), ("nn.MaxPool2d(1)", "medium", None),
    ("layer.Conv2d(3, 3, 1)", "high", "Conv2d (a subclass of torch.nn.Conv2d)"), ("layer.MaxPool2d(1)", "medium", None)])
def test_a_re_exported_class_with_an_inherited_forward(tmp_path, first, level, layer):
    # neuron.LIF is pkg/neuron/lif.py's class through a star import; its forward(*args) is its
    # base's: nn.Sequential gives it one argument, the previous layer's output (a convolution's:
    # on the graph; a pooling layer's, of the model's input: not), also where that layer is a class of
    # the project that subclasses the torch layer
    for name, text in PACKAGE.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text.replace("LAYER", first))
    r = graphleaf("check", "--isolated", "--no-cache", "--output-format", "json", "--confidence", "low", ".",
                  cwd=tmp_path)
    (found,) = json.loads(r.stdout)
    assert found["location"]["row"] == 11 and found["confidence"] == level, found
    if level == "high":
        assert f"the output of {layer}, a layer that holds parameters" in found["witness"]["source"]
        assert "pkg/model.py:8 chains LIF" in found["witness"]["source"]
