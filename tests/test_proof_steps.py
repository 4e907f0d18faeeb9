"""Steps of a witness that the analysis computes from the program instead of taking them on
trust (issue 36), each with a twin that stays at a lower level or is cleared, run as a user runs
``graphleaf check`` and flake8 on ``fixtures/projects/proof_steps``:

- a factory given ``requires_grad=v.requires_grad`` requires grad exactly when ``v`` does: a
  detached input gives no leaf (skew.py: Integrator clean, Tracker proven);
- ``getattr(self, name)`` with a name the analysis cannot compute is taken to be a parameter, a
  step on trust (prior.py: Prior medium, Scaled with the name written out proven);
- a helper that passes its argument through a callable it is given (``apply_each(self.detach_fn,
  out)``) takes that callable on trust (extractor.py: Extractor medium, Recorder proven);
- storing into a parameter's own name a value whose history comes only from that parameter keeps
  nothing: ``Module.__setattr__`` raises TypeError where the name holds an nn.Parameter (neuron.py:
  Alpha clean, Beta proven);
- ``super().__call__`` of a class that is no module is not a module's forward (transforms.py:
  RandTransform clean, Copying proven);
- a callable kept from a constructor parameter whose default builds a module (``expfunc=Fourier(3)``)
  is that module, a submodule (basis.py: Galerkin proven; Given, default None, trusted);
- a store in forward under ``if save_feats:`` with ``save_feats=False`` runs only where a caller turns
  the argument on: taken on trust; a call of forward that leaves it at its default (the class's own
  training step) does not run it (routine.py: Routine medium, Always, stored on every call, proven);
- a call site that passes a graph tensor proves a forward argument only where forward, run with that
  call's values (string constants decide ``mode == "norm"``), makes the store with it (revin.py: Model
  passes one only in "denorm" mode, the store is under "norm": medium; Chained: proven);
- a class whose constructor reads a name nothing binds is never built: its forward's store is not
  reported (action.py: TwoHot; OneHot, which takes the name as a parameter, proven).

Judged with torch (run.py): every proven class raises on copy.deepcopy, every cleared or trusted
one copies."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from _cli import codes, graphleaf

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "fixtures" / "projects" / "proof_steps"
PROVEN = ["./action.py:29:9: GLF001", "./basis.py:24:9: GLF001", "./extractor.py:45:9: GLF003", "./neuron.py:24:9: GLF005", "./prior.py:23:9: GLF005",
          "./revin.py:42:13: GLF001", "./routine.py:35:9: GLF001", "./run.py:23:9: GLF202", "./skew.py:33:9: GLF004", "./transforms.py:29:16: GLF201"]
TRUSTED = {"./basis.py:35:9: GLF001": "unknown-callable", "./extractor.py:34:9: GLF003": "unknown-callable", "./prior.py:16:13: GLF005": "unknown-attribute",
           "./revin.py:16:13: GLF001": "argument-fed", "./routine.py:16:13: GLF001": "unset-argument"}


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    shutil.copytree(FIXTURE, tmp_path / "p")
    return tmp_path / "p"


def test_computed_steps_are_proven_and_the_rest_is_trusted_or_clean(project):
    r = graphleaf("check", "--isolated", "--no-cache", "--output-format", "concise", ".", cwd=project)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert codes(r.stdout) == PROVEN, r.stdout
    r = graphleaf("check", "--isolated", "--no-cache", "--output-format", "json", "--confidence", "low", ".",
                  cwd=project)
    found = {f"./{Path(f['filename']).name}:{f['location']['row']}:{f['location']['column']}: {f['code']}": f
             for f in json.loads(r.stdout)}
    assert sorted(found) == sorted(PROVEN + list(TRUSTED)), sorted(found)
    for key, kind in TRUSTED.items():
        f = found[key]
        assert f["confidence"] == "medium" and [t["kind"] for t in f["trust"]] == [kind], f
        assert "taken on trust" in f["message"], f["message"]
    assert "getattr(self, attr) (a name the analysis cannot compute)" in found["./prior.py:16:13: GLF005"]["message"]
    assert "apply_each(...) passes 'val' through a callable" in found["./extractor.py:34:9: GLF003"]["message"]
    assert "'save_feats' is taken to be turned on by a caller of forward() (its default False skips the store)" \
        in found["./routine.py:16:13: GLF001"]["message"]
    for key in PROVEN:
        assert found[key]["confidence"] == "high" and not found[key]["trust"], found[key]
    # the requires_grad source is the layer's output the factory was given, not the factory
    assert found["./skew.py:33:9: GLF004"]["witness"]["source"].startswith("self.scale(...)")
    assert found["./neuron.py:24:9: GLF005"]["witness"]["source_kind"] == "parameter"
    assert "given a graph tensor where a module of the project calls Stats" in \
        found["./revin.py:42:13: GLF001"]["witness"]["source"]


def test_flake8_reports_the_same(project):
    base = [sys.executable, "-m", "flake8", "--isolated", "--select=GLF", "."]
    r = subprocess.run(base, capture_output=True, text=True, timeout=300, cwd=project)
    assert codes(r.stdout) == PROVEN, r.stdout + r.stderr
    r = subprocess.run(base + ["--graphleaf-confidence=medium"], capture_output=True, text=True, timeout=300,
                       cwd=project)
    assert codes(r.stdout) == sorted(PROVEN + list(TRUSTED)), r.stdout + r.stderr


def test_judged_with_torch_the_proven_classes_break_the_copy_and_the_others_do_not(project):
    pytest.importorskip("torch")
    ran = subprocess.run([sys.executable, "run.py"], capture_output=True, text=True, timeout=300, cwd=project)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == [
        "Integrator copied", "Tracker raises True", "Prior copied", "Scaled raises True", "Extractor copied",
        "Recorder raises True", "Alpha copied", "Beta raises True", "RandTransform copied", "Copying raises True",
        "Galerkin raises True", "Routine copied", "Always raises True", "Model copied", "Chained raises True",
        "OneHot raises True", "Given copied", "TwoHot never built: name 'out_size' is not defined"]
