"""Multi-file projects in fixtures/projects/: the SAFE fixes alone (no --unsafe-fixes) make them run,
with the same printed values (float.hex, bit for bit) and gradients as before, in subprocesses."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from test_cli import ROOT, run

PROJECTS = ROOT / "fixtures" / "projects"

pytestmark = [pytest.mark.torch, pytest.mark.slow]


def _python(cwd, env_extra=None):
    env = dict(os.environ, **(env_extra or {}))
    return subprocess.run([sys.executable, "train.py"], cwd=cwd, capture_output=True, text=True, env=env, timeout=300)


def test_probe_train_runs_after_the_safe_fixes_with_the_same_values(tmp_path):
    pytest.importorskip("torch")
    proj = tmp_path / "probe_train"
    shutil.copytree(PROJECTS / "probe_train", proj)
    reference = _python(proj, {"NO_EMA": "1"})  # the original, without the copy that crashes
    assert reference.returncode == 0, reference.stderr
    crash = _python(proj)
    assert crash.returncode != 0 and "graph leaves" in crash.stderr

    fixed = run("fix", ".", cwd=proj)  # safe fixes only
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "0 left" in fixed.stdout and "unsafe" not in fixed.stdout
    # train.py reads probe.last, model.aux_loss, tap.feat: nothing was renamed away
    text = (proj / "model.py").read_text()
    assert "self.last = out" in text and "self.feat = output" in text and "self.aux_loss = (" in text

    after = _python(proj)
    assert after.returncode == 0, after.stderr
    ref_lines = reference.stdout.splitlines()
    new_lines = after.stdout.splitlines()
    assert [ln for ln in new_lines if not ln.startswith("ema ")] == ref_lines  # every loss and gradient, bitwise
    assert any(ln.startswith("ema ") for ln in new_lines)
    assert _python(proj, {"NO_EMA": "1"}).stdout == reference.stdout

    again = run("fix", ".", cwd=proj)
    assert "Fixed 0 findings in 0 files" in again.stdout
    assert run("check", ".", cwd=proj).returncode == 0
    unsafe = run("fix", "--unsafe-fixes", "--diff", ".", cwd=proj)
    assert unsafe.stdout == ""  # nothing is left for an unsafe fix either


def test_a_reader_in_another_file_keeps_a_private_attribute(tmp_path):
    """`_last` is private, but train.py reads it: the rename is not safe, the copy-safe fix is."""
    (tmp_path / "model.py").write_text(
        "import torch.nn as nn\n\n\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.fc = nn.Linear(2, 2)\n\n    def forward(self, x):\n        self._last = self.fc(x)\n"
        "        return self._last\n")
    (tmp_path / "train.py").write_text("from model import M\nm = M()\nprint(m._last.sum())\n")
    r = run("fix", ".", cwd=tmp_path)
    text = (tmp_path / "model.py").read_text()
    assert "self._last = self.fc(x)" in text and 'state["_last"] = detached(state["_last"])' in text, r.stdout
    # alone, the same file gets the rename (private, nothing reads it)
    os.remove(tmp_path / "train.py")
    (tmp_path / "model.py").write_text(text.split("\n    def __getstate__")[0] + "\n")
    r = run("fix", ".", cwd=tmp_path)
    assert "self._last" not in (tmp_path / "model.py").read_text(), r.stdout


def test_a_helper_class_in_another_file_is_fixed_in_that_file(tmp_path):
    """model.py holds an ActionDist (dists.py) that keeps a graph tensor: the finding is in
    model.py, the copy-safe state goes into dists.py, and the fixed project copies after a step
    and computes what it computed (bitwise, in a subprocess)."""
    proj = tmp_path / "multifile"
    shutil.copytree(PROJECTS / "multifile", proj)
    prog = ("import copy, torch\nfrom netpkg.model import make_model, make_inputs\n"
            "m = make_model(); out = m(*make_inputs()); out.sum().backward()\n"
            "print([float(v).hex() for v in out.flatten()], [float(p.grad.sum()).hex() for p in m.parameters()])\n"
            "try:\n    copy.deepcopy(m); print('copied')\nexcept RuntimeError as e:\n    print('raises', 'graph leaves' in str(e))\n")
    before = subprocess.run([sys.executable, "-c", prog], cwd=proj, capture_output=True, text=True, timeout=300)
    assert before.returncode == 0 and before.stdout.splitlines()[-1] == "raises True", before.stderr
    original = (proj / "netpkg" / "dists.py").read_text()
    diff = run("fix", "--diff", ".", cwd=proj)
    assert "+++ b/netpkg/dists.py" in diff.stdout and "def __getstate__" in diff.stdout
    assert (proj / "netpkg" / "dists.py").read_text() == original  # --diff writes nothing
    r = run("fix", ".", cwd=proj)
    assert "netpkg/model.py:19:16: GLF001 fixed: add ActionDist.__getstate__ in dists.py" in r.stdout, r.stdout
    assert "0 left" in r.stdout, r.stdout
    assert "def __getstate__" in (proj / "netpkg" / "dists.py").read_text()
    after = subprocess.run([sys.executable, "-c", prog], cwd=proj, capture_output=True, text=True, timeout=300)
    assert after.returncode == 0, after.stderr
    assert after.stdout.splitlines()[0] == before.stdout.splitlines()[0]  # outputs and gradients, bit for bit
    assert after.stdout.splitlines()[-1] == "copied"
    again = run("fix", ".", cwd=proj)
    assert "Fixed 0 findings in 0 files" in again.stdout, again.stdout
