"""``graphleaf fix --unsafe-fixes`` on a store the copy graph found into a container of an object
the storing code does not own (a training step's ``session.losses.append(loss)``): ``.detach()`` of
what goes in, never where a reader in the checked paths uses the items for a gradient; a reader that
only takes ``len()`` of the list does not count."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PLAIN_STATE = ROOT / "fixtures" / "projects" / "reach" / "plain_state"


def _fix(project: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "flake8_graphleaf", "fix", "--isolated", "--no-cache", "--unsafe-fixes",
                           "."], capture_output=True, text=True, timeout=300, cwd=project)


def test_a_training_steps_list_store_is_detached_by_the_unsafe_fix(tmp_path):
    project = tmp_path / "plain_state"
    shutil.copytree(PLAIN_STATE, project)
    r = _fix(project)
    assert "loop.py:9:5: GLF002 fixed: store .detach() of what goes into 'session.losses'" in r.stdout, r.stdout
    assert "session.losses.append(loss.detach())" in (project / "loop.py").read_text()
    assert "Fixed 0 findings" in _fix(project).stdout  # a second run changes nothing
    safe = tmp_path / "safe"
    shutil.copytree(PLAIN_STATE, safe)
    r = subprocess.run([sys.executable, "-m", "flake8_graphleaf", "fix", "--isolated", "--no-cache", "."],
                       capture_output=True, text=True, timeout=300, cwd=safe)
    assert "session.losses.append(loss)\n" in (safe / "loop.py").read_text(), r.stdout  # unsafe only


def test_no_detach_where_a_reader_uses_the_items_for_a_gradient(tmp_path):
    project = tmp_path / "plain_state"
    shutil.copytree(PLAIN_STATE, project)
    run = project / "run.py"
    run.write_text(run.read_text().replace('    snapshot = copy.deepcopy(session)',
                                           '    sum(session.losses).backward()\n    snapshot = copy.deepcopy(session)'))
    r = _fix(project)
    assert "loop.py:9:5: GLF002 left: no automatic fix: no .detach(): run.py:14 uses 'losses'" in r.stdout, r.stdout
    assert "session.losses.append(loss)\n" in (project / "loop.py").read_text()


@pytest.mark.slow
def test_the_detached_store_keeps_the_training_numbers(tmp_path):
    pytest.importorskip("torch")
    project = tmp_path / "plain_state"
    shutil.copytree(PLAIN_STATE, project)
    loop = project / "loop.py"
    loop.write_text(loop.read_text() + "    print('loss', repr(float(loss)), repr(float(session.model.weight.sum())))\n")
    hand = tmp_path / "hand"
    shutil.copytree(project, hand)
    (hand / "loop.py").write_text((hand / "loop.py").read_text().replace("append(loss)", "append(loss.detach())"))
    _fix(project)
    ran = subprocess.run([sys.executable, "run.py"], capture_output=True, text=True, timeout=300, cwd=project)
    by_hand = subprocess.run([sys.executable, "run.py"], capture_output=True, text=True, timeout=300, cwd=hand)
    assert ran.returncode == 0 and "copied 1" in ran.stdout, ran.stderr
    assert ran.stdout == by_hand.stdout  # the same numbers as the store detached by hand
