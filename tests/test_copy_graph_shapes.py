"""Two shapes of the copy graph, each a small project run by torch with its clean twins.

- ``layer_cache``: a key/value cache filled by attention layers kept in an nn.ModuleList
  (transformers' DynamicCache, set 8's c06). The decoder's forward runs each layer of
  ``nn.ModuleList([Attention(d, i) for i in range(n)])``; each layer's forward calls the cache's
  ``update()``, which appends what it computed. The prompt's pass runs with grad on, so
  ``copy.deepcopy(cache)`` in run.py raises: GLF002 at the first appends (the lines that stored
  them) and GLF202 at the copy naming cache.py. Twin: the prefill under ``torch.no_grad()``.
- ``beam_stacks``: a tree beam that copies its hypotheses' stacks each step (set 8's c03,
  concode's TreeBeam). The decoder (another file) hands ``advance()`` its cell's output; the beam
  pushes it onto the copied stacks, and the next step's ``copy.deepcopy(old[k])`` raises. Found
  from the script's run three imports away (run -> model -> decoder -> beam): GLF002 at the push,
  GLF202 at the copy. Twins: the decode under ``torch.no_grad()``, the state pushed detached.

Each twin reports nothing and runs; each broken project reports its lines and raises."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROJECTS = ROOT / "fixtures" / "projects"
GRAD_SWITCH = "torch.no_grad() if no_grad else torch.enable_grad()"


def _project(tmp_path: Path, name: str, edit: tuple[str, str, str] | None) -> Path:
    """A copy of the fixture, with ``edit`` = (file, old text, new text) made in it (a twin)."""
    project = tmp_path / name
    shutil.copytree(PROJECTS / name, project)
    if edit is not None:
        path = project / edit[0]
        path.write_text(path.read_text().replace(edit[1], edit[2]))
    return project


# each case twice: what check says (the default run), and the project run with torch, which must
# fail or pass as the check said (slow: .ci/run runs it after the default run)
PHASES = ["check", pytest.param("run", marks=[pytest.mark.slow, pytest.mark.torch])]


def _check_and_run(project: Path, twin: bool, expected: list[str], mentions: list[str], ran_ok: str,
                   phase: str) -> None:
    if phase == "run":
        _run(project, twin, ran_ok)
        return
    r = subprocess.run([sys.executable, "-m", "flake8_graphleaf", "check", "--isolated", "--no-cache",
                        "--output-format", "concise", "."], capture_output=True, text=True, timeout=300, cwd=project)
    if twin:
        assert r.returncode == 0 and r.stdout == "", r.stdout
    else:
        got = sorted(line.removeprefix("./").split(" ", 2)[0] + " " + line.split(" ", 2)[1] for line in r.stdout.splitlines())
        assert got == expected, r.stdout
        for text in mentions:
            assert text in r.stdout, r.stdout


def _run(project: Path, twin: bool, ran_ok: str) -> None:
    pytest.importorskip("torch")
    ran = subprocess.run([sys.executable, "run.py"], capture_output=True, text=True, timeout=300, cwd=project)
    if twin:
        assert ran.returncode == 0 and ran_ok in ran.stdout, ran.stderr
    else:
        assert ran.returncode != 0 and "graph leaves" in ran.stderr, ran.stderr


@pytest.mark.parametrize("phase", PHASES)
@pytest.mark.parametrize("twin", [False, True])
def test_a_cache_filled_by_the_layers_of_a_module_list(tmp_path, twin, phase):
    project = _project(tmp_path, "layer_cache", ("run.py", GRAD_SWITCH, "torch.no_grad()") if twin else None)
    # the prefill's call (its result thrown away) is where torch.no_grad() goes: the twin's edit
    _check_and_run(project, twin, ["cache.py:12:13: GLF002", "cache.py:13:13: GLF002", "run.py:16:9: GLF201",
                                   "run.py:18:16: GLF202"],
                   ["cache.keys[...] (GLF002 at cache.py:12, stored by KVCache.update)",
                    "main() -> Decoder.forward -> Attention.forward -> KVCache.update",
                    "model(...) runs a forward with grad on and only looks at its result"], "copied", phase)


@pytest.mark.parametrize("phase", PHASES)
@pytest.mark.parametrize("twin", [None, "no_grad", "detach"])
def test_a_beam_copying_stacks_that_hold_the_decoder_state(tmp_path, twin, phase):
    edit = {"no_grad": ("run.py", GRAD_SWITCH, "torch.no_grad()"),
            "detach": ("beam.py", "output[prev[i]].unsqueeze(0)", "output[prev[i]].unsqueeze(0).detach()")}.get(twin)
    project = _project(tmp_path, "beam_stacks", edit)
    _check_and_run(project, bool(twin), ["beam.py:22:24: GLF202", "beam.py:26:17: GLF002"],
                   ["main() -> Parser.predict -> Decoder.predict -> TreeBeam.advance"], "decoded", phase)
