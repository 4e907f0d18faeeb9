"""fixtures/projects/metricbase: torchmetrics' forward contract (the batch value is computed with
grad enabled and cached in ``_forward_cache``). flake8 and graphleaf check report exactly the
marked lines; running it shows the cache really keeps a graph tensor, and its twin does not."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from test_project_fixtures import marked, parse

ROOT = Path(__file__).resolve().parent.parent
PROJECT = ROOT / "fixtures" / "projects" / "metricbase"


@pytest.mark.parametrize("command", [
    [sys.executable, "-m", "flake8", "--isolated", "--select=GLF"],
    [sys.executable, "-m", "flake8_graphleaf", "check", "--isolated", "--no-cache", "--output-format", "concise"],
])
def test_reports_exactly_the_marked_lines(command):
    r = subprocess.run(command + [str(PROJECT)], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert marked(PROJECT) == {("torchmetrics/metric.py", 22, "GLF001")}
    assert parse(r.stdout, PROJECT) == marked(PROJECT), r.stdout + r.stderr


@pytest.mark.slow  # the fixture run with torch: the marked lines above, confirmed at run time
@pytest.mark.torch
def test_the_cache_keeps_the_graph_and_the_twin_does_not():
    pytest.importorskip("torch")
    script = """
import copy, torch
from torchmetrics import DetachedMean, MeanSquaredError
preds = torch.nn.Linear(3, 1)(torch.randn(4, 3)).squeeze(-1)
mse = MeanSquaredError()
loss = mse(preds, torch.zeros(4))
loss.backward()
assert mse._forward_cache.grad_fn is not None and mse.total.item() == 4
assert mse.sum_squared_error.grad_fn is None  # the states are merged under no_grad
try:
    copy.deepcopy(mse)
except RuntimeError as exc:
    assert "graph leaves" in str(exc)
else:
    raise AssertionError("deepcopy should raise")
mse.reset()
copy.deepcopy(mse)
mean = DetachedMean()
mean(preds.detach() * torch.ones(4, requires_grad=True))
copy.deepcopy(mean)
"""
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=PROJECT, timeout=300)
    assert r.returncode == 0, r.stderr
