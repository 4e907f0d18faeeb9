"""``copy.deepcopy`` of a value that is not certainly one tensor (a dict a training step builds, an
item of a dict a transform is given): the unsafe fix copies a detached copy of it, whatever its
shape; the program's own values keep their graph, so training computes the same numbers."""

from __future__ import annotations

import subprocess
import sys

import pytest

from test_cli import run

STEP = """\
import copy

import torch


def train_step(model, opt, batch, history):
    ctx = {"step": batch["step"], "inputs": batch["x"]}
    ctx["logits"] = model(batch["x"])
    ctx["loss"] = torch.nn.functional.cross_entropy(ctx["logits"], batch["y"])
    opt.zero_grad()
    ctx["loss"].backward()
    opt.step()
    history.append(copy.deepcopy({k: v for k, v in ctx.items() if k != "loss"}))
    return ctx["loss"].item()


torch.manual_seed(0)
model = torch.nn.Linear(5, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
history = []
for step in range(3):
    batch = {"step": step, "x": torch.randn(4, 5), "y": torch.randint(0, 3, (4,))}
    print(float.hex(train_step(model, opt, batch, history)))
print([float(h["logits"].sum()).hex() for h in history], [h["logits"].requires_grad for h in history])
"""


def test_a_copied_dict_gets_its_graph_tensors_detached_in_the_copy_only_when_unsafe(tmp_path):
    (tmp_path / "main.py").write_text(STEP)
    safe = run("fix", "--diff", ".", cwd=tmp_path)
    assert safe.stdout == "", safe.stdout  # no safe fix: the copy's tensors no longer require grad
    r = run("fix", "--unsafe-fixes", "--diff", ".", cwd=tmp_path)
    assert ("history.append(copy.deepcopy(torch.utils._pytree.tree_map_only(torch.Tensor, lambda v: v.detach() "
            "if v.grad_fn is not None else v, {k: v for k, v in ctx.items() if k != \"loss\"})))") in r.stdout, r.stdout
    assert 'ctx["logits"] = model(batch["x"])\n' in (tmp_path / "main.py").read_text()  # --diff writes nothing


@pytest.mark.torch
@pytest.mark.slow
def test_the_fixed_copy_runs_and_training_computes_the_same_numbers(tmp_path):
    pytest.importorskip("torch")
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "main.py").write_text(STEP)
    # the same script with the copy made of detached values by hand: what the fixed one must print
    by_hand = tmp_path / "by_hand"
    by_hand.mkdir()
    (by_hand / "main.py").write_text(STEP.replace(
        'copy.deepcopy({k: v for k, v in ctx.items() if k != "loss"})',
        'copy.deepcopy({k: (v.detach() if torch.is_tensor(v) else v) for k, v in ctx.items() if k != "loss"})'))
    want = subprocess.run([sys.executable, "main.py"], cwd=by_hand, capture_output=True, text=True, timeout=300)
    assert want.returncode == 0, want.stderr
    crash = subprocess.run([sys.executable, "main.py"], cwd=proj, capture_output=True, text=True, timeout=300)
    assert crash.returncode != 0 and "graph leaves" in crash.stderr
    fixed = run("fix", "--unsafe-fixes", ".", cwd=proj)
    assert "Fixed 1 finding in 1 file; 0 left." in fixed.stdout, fixed.stdout
    after = subprocess.run([sys.executable, "main.py"], cwd=proj, capture_output=True, text=True, timeout=300)
    assert after.returncode == 0, after.stderr
    assert after.stdout == want.stdout  # every loss and every copied value, bit for bit
    assert after.stdout.splitlines()[-1].endswith("[False, False, False]")
    again = run("fix", "--unsafe-fixes", ".", cwd=proj)
    assert "Fixed 0 findings in 0 files; 0 left." in again.stdout, again.stdout
