"""The incident scripts (fixtures/incidents/) fixed by ``graphleaf fix`` and run: a graph tensor
sent to another process (a queue, Process args) or a dataset of tensors that require grad given to
a DataLoader with workers.  Before the fix the script fails; after it, it runs and prints what its
clean twin prints (the twin is the hand-fixed script)."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from test_cli import FIXTURES, run

pytestmark = [pytest.mark.torch, pytest.mark.slow]
INCIDENTS = FIXTURES / "incidents"


def _python(script, cwd, timeout=600):
    return subprocess.run([sys.executable, str(script)], cwd=cwd, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("name, unsafe, fails_fast", [
    ("mp_spawn_args", False, True),     # safe: the spawned process gets the values, the parent keeps its tensor
    ("mp_queue", False, False),         # safe: the put item is detached (before: the reader waits forever)
    ("dataloader_workers", True, True), # unsafe: the dataset is built from detached tensors
])
def test_process_boundary_incident_runs_after_the_fix(tmp_path, name, unsafe, fails_fast):
    pytest.importorskip("torch")
    script = tmp_path / f"{name}.py"
    shutil.copyfile(INCIDENTS / f"{name}.py", script)
    if fails_fast:
        before = _python(script, tmp_path)
        assert before.returncode != 0, before.stdout
    r = run("fix", *(["--unsafe-fixes"] if unsafe else []), script.name, cwd=tmp_path)
    assert "GLF301 fixed" in r.stdout and "0 left" in r.stdout, r.stdout
    after = _python(script, tmp_path)
    assert after.returncode == 0, after.stderr
    clean = _python(INCIDENTS / f"{name}_clean.py", tmp_path)
    assert clean.returncode == 0, clean.stderr
    assert after.stdout == clean.stdout
    again = run("fix", *(["--unsafe-fixes"] if unsafe else []), script.name, cwd=tmp_path)
    assert "Fixed 0 findings in 0 files" in again.stdout, again.stdout


@pytest.mark.parametrize("name, fixed", [
    ("trainer_wrapper", "GLF001 fixed: add Trainer.__getstate__"),   # a plain trainer's last loss
    ("ema_helper", "GLF002 fixed: add EMA.__getstate__"),             # EMA shadows updated with grad on
    ("beam_search", "GLF001 fixed: add Hypothesis.__getstate__"),     # a hypothesis deep-copying itself
    ("hook_closure", "GLF003 fixed: add Net.__getstate__"),           # a hook's closure dict the model holds
])
def test_copy_graph_incident_runs_after_the_safe_fix(tmp_path, name, fixed):
    """The copy graph's findings get the copy-safe fix (the holder's class gets a __getstate__
    that detaches its copies' tensors): before it the script raises in copy.deepcopy, after it
    it runs and prints what the hand-fixed twin prints; the live object keeps its graph tensors."""
    pytest.importorskip("torch")
    script = tmp_path / f"{name}.py"
    shutil.copyfile(INCIDENTS / f"{name}.py", script)
    before = _python(script, tmp_path)
    assert before.returncode != 0 and "graph leaves" in before.stderr, before.stderr
    r = run("fix", script.name, cwd=tmp_path)
    assert fixed in r.stdout and "0 left" in r.stdout, r.stdout
    after = _python(script, tmp_path)
    assert after.returncode == 0, after.stderr
    clean = _python(INCIDENTS / f"{name}_clean.py", tmp_path)
    assert clean.returncode == 0, clean.stderr
    assert after.stdout == clean.stdout
