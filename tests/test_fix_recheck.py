"""``graphleaf fix`` on a project whose copy is in one file and the store it fails on in another: once
every file is written, the files are checked again, so the summary counts what is really left (the
copy site that the store's fix removed is not "left"), and a fix the recheck finds did not work is
left, said so."""

from __future__ import annotations

import subprocess
import sys

import pytest

from test_cli import run

LOGGER = """\
class LossLogger:
    def __init__(self):
        self.train_loss = []

    def on_step(self, loss):
        self.train_loss.append(loss)
"""

MAIN = """\
import copy

import torch

from tracking import LossLogger


def fit(net, logger):
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for _ in range(2):
        loss = net(torch.randn(8, 4)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        logger.on_step(loss)


torch.manual_seed(0)
net = torch.nn.Linear(4, 1)
logger = LossLogger()
fit(net, logger)
clone = copy.deepcopy(logger)
print([float(v).hex() for v in logger.train_loss], [float(v).hex() for v in clone.train_loss])
"""


def _project(tmp_path):
    (tmp_path / "tracking.py").write_text(LOGGER)
    (tmp_path / "main.py").write_text(MAIN)
    return tmp_path


def test_a_copy_site_the_store_fix_removed_is_not_left(tmp_path):
    """main.py is fixed before tracking.py (the order of the paths): when main.py is analysed, the
    store in tracking.py is not fixed yet."""
    proj = _project(tmp_path)
    before = run("check", ".", cwd=proj)
    assert "main.py:22:9: GLF202" in before.stdout and "tracking.py:6:9: GLF002" in before.stdout, before.stdout
    r = run("fix", ".", cwd=proj)
    assert "tracking.py:6:9: GLF002 fixed" in r.stdout, r.stdout
    assert "GLF202 left" not in r.stdout and "Fixed 1 finding in 1 file; 0 left." in r.stdout, r.stdout
    assert r.returncode == 0
    assert run("check", ".", cwd=proj).returncode == 0  # what the summary said: nothing is left
    stats = run("fix", "--statistics", ".", cwd=proj)
    assert "Fixed 0 findings in 0 files; 0 left." in stats.stdout, stats.stdout


@pytest.mark.torch
@pytest.mark.slow
def test_the_rechecked_project_runs_and_its_copy_has_the_values(tmp_path):
    pytest.importorskip("torch")
    proj = _project(tmp_path)
    crash = subprocess.run([sys.executable, "main.py"], cwd=proj, capture_output=True, text=True, timeout=300)
    assert crash.returncode != 0 and "graph leaves" in crash.stderr
    assert "0 left." in run("fix", ".", cwd=proj).stdout
    after = subprocess.run([sys.executable, "main.py"], cwd=proj, capture_output=True, text=True, timeout=300)
    assert after.returncode == 0, after.stderr
    live, copied = after.stdout.strip().split("] [")
    assert live + "]" == "[" + copied  # the copy holds the same losses, bit for bit
