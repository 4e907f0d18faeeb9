"""``graphleaf fix`` on whole files with several problems, run with torch before and after.

The runs with torch (a training script before and after its fix, and by hand) carry the ``slow``
marker (``.ci/run`` runs them after the default run); what ``check`` and ``fix`` say and write on
the same files is asserted in the default run by the ``*_statically`` tests, without torch.

- fixtures/fix/training_script.py: an attention module caching its softmax on ``self``, a forward
  hook filling ``model.activations[name]``, an EMA helper and a best-model ``copy.deepcopy``, and
  clean look-alikes (an int counter, a buffer updated from a detached statistic).  Every proven
  finding is fixed in one run (the copy sites are not blamed on the store fixed first), the fixed
  script runs to its end and prints what the same script with the storing lines detached by hand
  prints.
- fixtures/fix/regularizer.py: a module keeps its regularizer loss on ``self`` and the training step
  adds it to the loss.  No detaching fix is offered at any setting (it would stop the regularizer
  from training); the copy-safe state keeps the training numbers bitwise and makes the copy work.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from test_cli import FIXTURES, run

FIX = FIXTURES / "fix"


def _python(script, cwd):
    return subprocess.run([sys.executable, str(script)], cwd=cwd, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
@pytest.mark.torch
@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
def test_every_problem_of_the_training_script_is_fixed_and_it_prints_the_hand_fixed_numbers(tmp_path, unsafe):
    pytest.importorskip("torch")
    script = tmp_path / "train.py"
    shutil.copyfile(FIX / "training_script.py", script)
    before = _python(script, tmp_path)
    assert before.returncode != 0 and "graph leaves" in before.stderr, before.stderr

    checked = run("check", "--output-format", "json", script.name, cwd=tmp_path)
    findings = json.loads(checked.stdout)
    assert {(f["code"], f["location"]["row"]) for f in findings} == {("GLF001", 19), ("GLF003", 65), ("GLF202", 74),
                                                          ("GLF202", 100)}
    fixable = [f for f in findings if f.get("fix") and f["fix"]["applicability"] == "safe"]

    r = run("fix", *(["--unsafe-fixes"] if unsafe else []), script.name, cwd=tmp_path)
    assert "GLF001 fixed" in r.stdout and "GLF003 fixed" in r.stdout and "0 left" in r.stdout, r.stdout
    # check advertised exactly what fix applied (the copy sites go with their stores)
    assert len(fixable) == r.stdout.count(" fixed: "), (checked.stdout, r.stdout)

    hand = tmp_path / "hand.py"
    text = (FIX / "training_script.py").read_text()
    hand.write_text(text.replace("self.last_attn = attn  #", "self.last_attn = attn.detach()  #")
                    .replace("model.activations[name] = output", "model.activations[name] = output.detach()"))
    after, expected = _python(script, tmp_path), _python(hand, tmp_path)
    assert after.returncode == 0, after.stderr
    assert expected.returncode == 0, expected.stderr
    assert after.stdout == expected.stdout and after.stdout.startswith("0 "), after.stdout

    again = run("fix", "--unsafe-fixes", script.name, cwd=tmp_path)
    assert "Fixed 0 findings in 0 files" in again.stdout, again.stdout


@pytest.mark.slow
@pytest.mark.torch
def test_a_stored_regularizer_keeps_its_gradient_and_its_copy_works(tmp_path):
    pytest.importorskip("torch")
    script = tmp_path / "reg.py"
    shutil.copyfile(FIX / "regularizer.py", script)
    before = _python(script, tmp_path)
    assert before.returncode != 0 and "graph leaves" in before.stderr, before.stderr
    losses = before.stdout.splitlines()
    assert len(losses) == 3

    for flags in ([], ["--unsafe-fixes"], ["--unsafe-fixes", "--confidence", "low"]):
        shown = json.loads(run("check", "--output-format", "json", "--confidence", "low", script.name,
                               cwd=tmp_path).stdout)
        store = next(f for f in shown if f["code"] == "GLF001")
        assert store["fix"]["applicability"] == "safe" and "__getstate__" in store["fix"]["message"]
        assert "line 26 uses 'reg_loss'" in store["fix"]["message"]  # the reader that decided it
        diff = run("fix", "--diff", *flags, script.name, cwd=tmp_path).stdout
        assert "def __getstate__" in diff and ".detach()" not in "".join(
            line for line in diff.splitlines() if line.startswith("+") and "reg_loss =" in line)

    run("fix", "--unsafe-fixes", script.name, cwd=tmp_path)
    assert "self.reg_loss = h.abs().mean()\n" in script.read_text()  # the store is untouched
    after = _python(script, tmp_path)
    assert after.returncode == 0, after.stderr
    lines = after.stdout.splitlines()
    assert lines[:3] == losses  # the training numbers, as repr() of the floats: bitwise the same
    assert lines[3].startswith("copied ")


@pytest.mark.slow
@pytest.mark.torch
def test_a_training_step_store_on_the_model_it_is_given_gets_the_model_class_copy_safe_state(tmp_path):
    """``model.last_out = model(x)`` in a function: the class comes from the call sites (the copy
    graph's run), the class gets the copy-safe state, and the function's finding goes with it."""
    pytest.importorskip("torch")
    script = tmp_path / "step.py"
    shutil.copyfile(FIX / "train_step_store.py", script)
    assert _python(script, tmp_path).returncode != 0
    r = run("fix", script.name, cwd=tmp_path)
    assert "GLF001 fixed: add Net.__getstate__" in r.stdout and "0 left" in r.stdout, r.stdout
    after = _python(script, tmp_path)
    assert after.returncode == 0 and after.stdout.strip() == "torch.Size([2, 4])", after.stderr
    assert run("check", script.name, cwd=tmp_path).returncode == 0


def test_every_problem_of_the_training_script_is_fixed_statically(tmp_path):
    """What the slow test above runs with torch, as check and fix say it: the four findings, each
    fixable one fixed in one run (safe, then unsafe on a fresh copy), nothing left after."""
    for unsafe in (False, True):
        script = tmp_path / ("unsafe" if unsafe else "safe") / "train.py"
        script.parent.mkdir()
        shutil.copyfile(FIX / "training_script.py", script)
        checked = run("check", "--output-format", "json", script.name, cwd=script.parent)
        findings = json.loads(checked.stdout)
        assert {(f["code"], f["location"]["row"]) for f in findings} == {
            ("GLF001", 19), ("GLF003", 65), ("GLF202", 74), ("GLF202", 100)}
        fixable = [f for f in findings if f.get("fix") and f["fix"]["applicability"] == "safe"]
        r = run("fix", *(["--unsafe-fixes"] if unsafe else []), script.name, cwd=script.parent)
        assert "GLF001 fixed" in r.stdout and "GLF003 fixed" in r.stdout and "0 left" in r.stdout, r.stdout
        assert len(fixable) == r.stdout.count(" fixed: "), (checked.stdout, r.stdout)
        again = run("fix", "--unsafe-fixes", script.name, cwd=script.parent)
        assert "Fixed 0 findings in 0 files" in again.stdout, again.stdout


def test_a_stored_regularizer_gets_the_copy_safe_state_statically(tmp_path):
    """The slow test's check and fix steps: the copy-safe state at every setting, the store untouched."""
    script = tmp_path / "reg.py"
    shutil.copyfile(FIX / "regularizer.py", script)
    shown = json.loads(run("check", "--output-format", "json", "--confidence", "low", script.name,
                           cwd=tmp_path).stdout)
    store = next(f for f in shown if f["code"] == "GLF001")
    assert store["fix"]["applicability"] == "safe" and "__getstate__" in store["fix"]["message"]
    assert "line 26 uses 'reg_loss'" in store["fix"]["message"]
    for flags in ([], ["--unsafe-fixes"], ["--unsafe-fixes", "--confidence", "low"]):
        diff = run("fix", "--diff", *flags, script.name, cwd=tmp_path).stdout
        assert "def __getstate__" in diff and ".detach()" not in "".join(
            line for line in diff.splitlines() if line.startswith("+") and "reg_loss =" in line)
    run("fix", "--unsafe-fixes", script.name, cwd=tmp_path)
    assert "self.reg_loss = h.abs().mean()\n" in script.read_text()


def test_a_training_step_store_gets_the_model_class_copy_safe_state_statically(tmp_path):
    script = tmp_path / "step.py"
    shutil.copyfile(FIX / "train_step_store.py", script)
    r = run("fix", script.name, cwd=tmp_path)
    assert "GLF001 fixed: add Net.__getstate__" in r.stdout and "0 left" in r.stdout, r.stdout
    assert run("check", script.name, cwd=tmp_path).returncode == 0
