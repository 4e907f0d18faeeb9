"""Dicts an object holds, in the copy graph, as users run it and with torch: a trainer that
merges each step's returned dict into ``self.callback_metrics`` and deep-copies that dict at the
epoch's end, and a module that logs a metric object into ``self.logged[name]`` that the trainer
copies (the metric's ``update()`` accumulating a graph tensor).  Each broken project raises at
its copy and is reported at the store and at the copy; each twin (detached values) runs clean
and is not reported."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

MODEL = '''\
import torch
import torch.nn as nn
import torch.nn.functional as F


class MeanSquaredError:
    def __init__(self):
        self.sum_squared_error = torch.tensor(0.0)

    def __call__(self, preds, target):
        {detach}
        self.sum_squared_error += torch.sum((preds - target) ** 2)


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.Linear(5, 1)
        self.mse = MeanSquaredError()
        self.logged = {}

    def forward(self, x):
        return self.layer(x)

    def training_step(self, batch):
        x, y = batch
        out = self(x)
        loss = F.mse_loss(out, y)
        self.mse(out, y)
        self.logged["mse"] = self.mse
        return {"loss": loss, "pred": out}
'''

TRAINER = '''\
from copy import deepcopy

import torch


class Trainer:
    def __init__(self):
        self.callback_metrics = {}

    def fit(self, model, loader):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for batch in loader:
            optimizer.zero_grad()
            output = model.training_step(batch)
            output["loss"].backward()
            optimizer.step()
            self.callback_metrics.update({merged})
        snapshot = deepcopy(self.callback_metrics)
        logged = deepcopy(model.logged)
        return snapshot, logged
'''

RUN = '''\
import torch

from model import Regressor
from trainer import Trainer


def main():
    loader = [(torch.randn(4, 5), torch.randn(4, 1)) for _ in range(2)]
    Trainer().fit(Regressor(), loader)
    print("fit ok")


if __name__ == "__main__":
    main()
'''


def _project(tmp_path: Path, clean: bool) -> Path:
    (tmp_path / "model.py").write_text(MODEL.replace("{detach}", "preds = preds.detach()" if clean else "pass"))
    (tmp_path / "trainer.py").write_text(TRAINER.replace(
        "{merged}", "{k: v.detach() for k, v in output.items()}" if clean else "output"))
    (tmp_path / "run.py").write_text(RUN)
    return tmp_path


@pytest.mark.parametrize("clean", [False, True])
def test_dicts_an_object_holds_reach_the_copy(tmp_path, clean):
    project = _project(tmp_path, clean)
    r = subprocess.run([sys.executable, "-m", "flake8_graphleaf", "check", "--isolated", "--no-cache",
                        "--output-format", "concise", str(project)], capture_output=True, text=True, timeout=300,
                       cwd=ROOT)
    if clean:
        assert r.returncode == 0 and r.stdout == "", r.stdout
    else:
        assert "trainer.py:17:13: GLF002 'self.callback_metrics' is given a tensor" in r.stdout, r.stdout
        assert "trainer.py:18:20: GLF202 deepcopy(self.callback_metrics) will raise" in r.stdout, r.stdout
        assert "model.py:12:9: GLF001 'self.sum_squared_error' (MeanSquaredError) keeps a tensor" in r.stdout, r.stdout
        assert "deepcopy(model.logged) at trainer.py:19" in r.stdout, r.stdout


@pytest.mark.slow  # the project run with torch: the check above, confirmed at run time
@pytest.mark.torch
@pytest.mark.parametrize("clean", [False, True])
def test_dicts_an_object_holds_reach_the_copy_at_run_time(tmp_path, clean):
    pytest.importorskip("torch")
    project = _project(tmp_path, clean)
    ran = subprocess.run([sys.executable, "run.py"], cwd=project, capture_output=True, text=True, timeout=300)
    if clean:
        assert ran.returncode == 0 and "fit ok" in ran.stdout, ran.stderr
    else:
        assert ran.returncode != 0 and "graph leaves" in ran.stderr, ran.stderr
