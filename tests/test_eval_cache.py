"""A cache written only when not training, read through a ``@property`` (gpytorch's
``InducingPointKernel._inducing_mat``, gpytorch#784), judged with torch.

fixtures/projects/eval_cache/acquire.py fits the model, puts it in eval mode and differentiates
its prediction (grad on): the kernel keeps the inducing-point matrix with its graph, and
``get_fantasy_model``'s ``copy.deepcopy(self)`` raises. Which side of ``if not self.training:``
runs is decided by the program's own ``.train()`` / ``.eval()`` calls, so the twins are clean: the
prediction under ``torch.no_grad()`` (the cache keeps no graph), and a model never put in eval
mode (the cache is never written). ``graphleaf fix`` makes the copy work with the same numbers."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "fixtures" / "projects" / "eval_cache"
PREDICT = "    value = model(candidates).sum()\n    value.backward()\n"


def _graphleaf(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "flake8_graphleaf", *args], capture_output=True, text=True,
                          timeout=300, cwd=cwd)


def _check(cwd: Path) -> list[str]:
    r = _graphleaf("check", "--isolated", "--no-cache", "--output-format", "concise", ".", cwd=cwd)
    assert r.returncode in (0, 1) and "Traceback" not in r.stderr, r.stderr
    return sorted(line.split(" ", 2)[0] + " " + line.split(" ", 2)[1] for line in r.stdout.splitlines() if ": GLF" in line)


def _run(cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "acquire.py"], capture_output=True, text=True, timeout=300, cwd=cwd)


def _twin(tmp_path: Path, old: str, new: str) -> Path:
    shutil.copytree(FIXTURE, tmp_path / "p")
    script = tmp_path / "p" / "acquire.py"
    text = script.read_text()
    assert old in text
    script.write_text(text.replace(old, new))
    return tmp_path / "p"


def test_the_eval_mode_cache_is_reported_at_its_store_and_at_the_copy(tmp_path):
    shutil.copytree(FIXTURE, tmp_path / "p")
    assert _check(tmp_path / "p") == ["./gp/kernels.py:27:13: GLF001", "./gp/models.py:21:15: GLF202"]
    r = _graphleaf("check", "--isolated", "--no-cache", "--output-format", "json", ".", cwd=tmp_path / "p")
    store = next(f for f in json.loads(r.stdout) if f["code"] == "GLF001")
    witness = store["witness"]  # reached through the property, with grad on, from the kernel's parameter
    assert witness["reached"].endswith("InducingPointKernel.forward -> InducingPointKernel._inducing_mat") and witness["grad"] == "enabled", witness
    assert "nn.Parameter" in witness["source"] and "requires_grad=True" not in witness["source"], witness
    flake8 = subprocess.run([sys.executable, "-m", "flake8", "--isolated", "--select=GLF", "."], capture_output=True,
                            text=True, timeout=300, cwd=tmp_path / "p")
    assert sorted(line.split(" ", 2)[:2] for line in flake8.stdout.splitlines()) == [
        ["./gp/kernels.py:27:13:", "GLF001"], ["./gp/models.py:21:15:", "GLF202"]], flake8.stdout


TWINS = {
    # the prediction under no_grad: the cache is written, without a graph
    "no_grad": (PREDICT, "    with torch.no_grad():\n        value = model(candidates).sum()\n"
                         "    candidates.grad = torch.zeros_like(candidates)\n"),
    # never put in eval mode: the cache is never written
    "training_only": ("    model.eval()\n", ""),
}


@pytest.mark.parametrize("twin", sorted(TWINS))
def test_the_clean_twins_report_nothing_and_copy(tmp_path, twin):
    cwd = _twin(tmp_path, *TWINS[twin])
    assert _check(cwd) == []
    pytest.importorskip("torch")  # the static half ran; the run needs torch
    r = _run(cwd)
    assert r.returncode == 0 and "copied True" in r.stdout, r.stderr


def test_a_mode_set_by_train_false_counts_as_eval(tmp_path):
    cwd = _twin(tmp_path, "    model.eval()\n", "    model.train(False)\n")
    assert _check(cwd) == ["./gp/kernels.py:27:13: GLF001", "./gp/models.py:21:15: GLF202"]


@pytest.mark.slow
def test_the_copy_raises_and_the_fix_keeps_the_numbers(tmp_path):
    pytest.importorskip("torch")
    shutil.copytree(FIXTURE, tmp_path / "p")
    cwd = tmp_path / "p"
    before = _run(cwd)
    assert before.returncode != 0 and "graph leaves" in before.stderr, before.stderr
    assert "copy.deepcopy(self)" in before.stderr  # at the line reported GLF202
    fixed = _graphleaf("fix", "--isolated", "--no-cache", ".", cwd=cwd)
    # the store is fixed; the copy site has no edit of its own (it was reported before the fix)
    assert "GLF001 fixed" in fixed.stdout and "Fixed 1 finding" in fixed.stdout, fixed.stdout + fixed.stderr
    assert "def __getstate__" in (cwd / "gp" / "kernels.py").read_text()
    after = _run(cwd)
    assert after.returncode == 0, after.stderr
    assert after.stdout.splitlines()[0] == before.stdout.splitlines()[0]  # prediction and gradient, bit for bit
    assert after.stdout.splitlines()[1] == "copied True"
    assert _check(cwd) == []


IFEXP = ("        if not self.training:\n            self._cached_kernel_mat = res\n",
         "        self._cached_kernel_mat = res if not self.training else None\n")


@pytest.mark.parametrize("eval_mode", [True, False])
def test_a_conditional_expression_on_the_mode_is_decided_too(tmp_path, eval_mode):
    """``res if not self.training else None``: in eval mode the graph is kept and the copy graph
    reports the copy; in training mode (the model never put in eval mode) the attribute holds
    None and the program's copy works, so the copy graph reports no copy. (The class-level
    GLF001 of the store itself stays there: a class's own run does not know who puts it in
    which mode, and a conditional expression's eval side is not yet marked eval-only.)"""
    cwd = _twin(tmp_path, *(TWINS["training_only"] if not eval_mode else (PREDICT, PREDICT)))
    kernels = cwd / "gp" / "kernels.py"
    text = kernels.read_text()
    assert IFEXP[0] in text
    kernels.write_text(text.replace(*IFEXP))
    found = _check(cwd)
    assert ("./gp/models.py:21:15: GLF202" in found) is eval_mode, found
    if eval_mode:
        assert found == ["./gp/kernels.py:26:9: GLF001", "./gp/models.py:21:15: GLF202"], found
    pytest.importorskip("torch")
    r = _run(cwd)
    assert (r.returncode == 0) is (not eval_mode), r.stderr
