"""A tree beam that copies its hypotheses' stacks each step (set 8's c03, concode's TreeBeam),
judged with torch. The decoder (another file) hands ``advance()`` its cell's output; the beam
pushes it onto the copied stacks, and the next step's ``copy.deepcopy(old[k])`` raises. Found
from the training script's run three imports away (run -> model -> decoder -> beam): GLF002 at
the push, GLF202 at the copy. Twins: the decode under ``torch.no_grad()``, and the state pushed
``.detach()``ed: nothing reported, and the decode runs."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "fixtures" / "projects" / "beam_stacks"


@pytest.mark.parametrize("twin", [None, "no_grad", "detach"])
def test_a_beam_copying_stacks_that_hold_the_decoder_state(tmp_path, twin):
    project = tmp_path / "p"
    shutil.copytree(FIXTURE, project)
    if twin == "no_grad":
        run = project / "run.py"
        run.write_text(run.read_text().replace("torch.no_grad() if no_grad else torch.enable_grad()", "torch.no_grad()"))
    elif twin == "detach":
        beam = project / "beam.py"
        beam.write_text(beam.read_text().replace("output[prev[i]].unsqueeze(0)", "output[prev[i]].unsqueeze(0).detach()"))
    r = subprocess.run([sys.executable, "-m", "flake8_graphleaf", "check", "--isolated", "--no-cache",
                        "--output-format", "concise", "."], capture_output=True, text=True, timeout=300, cwd=project)
    if twin:
        assert r.returncode == 0 and r.stdout == "", r.stdout
    else:
        got = sorted(line.removeprefix("./").split(" ", 2)[0] + " " + line.split(" ", 2)[1] for line in r.stdout.splitlines())
        assert got == ["beam.py:22:24: GLF202", "beam.py:26:17: GLF002"], r.stdout
        assert "main() -> predict() -> predict() -> advance()" in r.stdout, r.stdout
    pytest.importorskip("torch")
    ran = subprocess.run([sys.executable, "run.py"], capture_output=True, text=True, timeout=300, cwd=project)
    if twin:
        assert ran.returncode == 0 and "decoded" in ran.stdout, ran.stderr
    else:
        assert ran.returncode != 0 and "graph leaves" in ran.stderr, ran.stderr
