"""What a copy or a send reaches, as the program shows it (fixtures/projects/reach/, issue 37): each
shape is a small multi-file project whose run.py raises at a copy or a process boundary, and a clean
twin made by one edit. ``graphleaf check`` and flake8 report exactly the lines listed (the store, the
copy or send, and where a tensor that code only passes on was made), the twin nothing; with torch,
the project raises and its twin runs, and ``graphleaf fix --unsafe-fixes`` makes the broken one run.

- ``train_step``: a training step in another file keeps ``model.last_out = model(x)`` on the
  ``nn.Sequential`` the script gives it (a torch module is an object of the heap);
- ``callbacks``: a plain trainer calls its callbacks with ``{"loss": loss}``; a loss history
  appends it; the regressor object deep-copies itself (parameters from every call site, a list
  made with ``list(callbacks)``);
- ``cached_posterior``: a ``functools.cached_property`` keeps the net's output in the object's
  ``__dict__``;
- ``reduce_protocol``: a ``__reduce__`` hands its values to the copy (run, not matched); the
  tensor was made by the script at the constructor call;
- ``deepcopy_protocol``: a ``__deepcopy__`` that deep-copies the decoder state a beam hypothesis
  keeps (a copy of an object is another object of its class; a loop's lists made again);
- ``checkpointed``: a store inside a re-entrant ``torch.utils.checkpoint`` function: a leaf after
  forward, a graph tensor once backward recomputes it;
- ``pool_bank``: a ``Pool.starmap`` of embeddings a helper returns (a process pool pickles every
  task's arguments);
- ``extractor``: a plain feature extractor registers hooks on ``model.named_modules()`` that fill
  its own dict;
- ``context_dict``: a per-step context dict copied without its loss;
- ``ema_engine``: an EMA helper in ``engine/ema.py`` deep-copies the model its constructor is given,
  whose class in ``models/backbone.py`` keeps its features: the copy names the store's file and
  line (the store names no copy of another file: which of the other files' runs a front end sees
  for a file depends on the files checked with it, and flake8 and ``graphleaf check`` must agree).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROJECTS = ROOT / "fixtures" / "projects" / "reach"
LEAVES = "graph leaves"
SERIALIZE = "Cowardly refusing to serialize non-leaf tensor"

# shape -> (the findings "file:line:col: CODE", what the run raises, the twin's edit)
SHAPES = {
    "train_step": (["run.py:12:8: GLF202", "steps.py:5:5: GLF001"], LEAVES,
                   ("steps.py", "model.last_out = model(x)\n    loss = F.mse_loss(model.last_out, y)",
                    "out = model(x)\n    model.last_out = out.detach()\n    loss = F.mse_loss(out, y)")),
    "callbacks": (["loggers.py:6:9: GLF002", "run.py:19:16: GLF202"], LEAVES,
                  ("loggers.py", 'outputs["loss"])', 'outputs["loss"].item())')),
    "cached_posterior": (["posterior.py:13:16: GLF001", "run.py:11:10: GLF202"], LEAVES,
                         ("posterior.py", "self.net(self.x).squeeze(-1)", "self.net(self.x).squeeze(-1).detach()")),
    "reduce_protocol": (["records.py:4:9: GLF001", "run.py:10:22: GLF201", "run.py:11:12: GLF202"], LEAVES,
                        ("records.py", "(self.inputs, self.values)", "(self.inputs, self.values.detach())")),
    "deepcopy_protocol": (["hypothesis.py:16:17: GLF202", "hypothesis.py:19:9: GLF001", "search.py:11:17: GLF201"],
                          LEAVES, ("hypothesis.py", "copy.deepcopy(self.state, memo)",
                                   "copy.deepcopy(self.state.detach(), memo)")),
    "checkpointed": (["blocks.py:14:9: GLF001", "run.py:15:8: GLF202"], LEAVES,
                     ("blocks.py", "self.inner_out = self.inner(x)\n        return torch.relu(self.inner_out)",
                      "h = self.inner(x)\n        self.inner_out = h.detach()\n        return torch.relu(h)")),
    "pool_bank": (["embed.py:5:12: GLF301", "run.py:13:17: GLF301"], SERIALIZE,
                  ("embed.py", "[encoder(x) for x in items]", "[encoder(x).detach() for x in items]")),
    "extractor": (["features.py:11:13: GLF003", "run.py:13:10: GLF202"], LEAVES,
                  ("run.py", "backup = copy.deepcopy(extractor)",
                   "extractor.features = {k: v.detach() for k, v in extractor.features.items()}\n"
                   "backup = copy.deepcopy(extractor)")),
    "ema_engine": (["engine/ema.py:8:20: GLF202", "models/backbone.py:12:9: GLF001"], LEAVES,
                   ("models/backbone.py", "self.features = torch.relu(self.stem(x))\n        return self.head(self.features)",
                    "features = torch.relu(self.stem(x))\n        return self.head(features)")),
    "context_dict": (["run.py:11:20: GLF201", "run.py:8:5: GLF201"], LEAVES,
                     ("run.py", 'copy.deepcopy({k: v for k, v in ctx.items() if k != "loss"})',
                      '{k: v.detach().clone() if torch.is_tensor(v) else v for k, v in ctx.items() if k != "loss"}')),
}


# the store no fix may detach, and what fix --unsafe-fixes does instead: the loss is computed from
# ctx["logits"], so the dict keeps it attached; the copy is made of the dict with its graph tensors
# detached (what the twin does by hand)
COPY_SITE_FIX = {
    "context_dict": "run.py:11:20: GLF201 fixed: copy detached tensors",
}


def _project(tmp_path: Path, name: str, twin: bool) -> Path:
    project = tmp_path / name
    shutil.copytree(PROJECTS / name, project)
    if twin:
        file, old, new = SHAPES[name][2]
        path = project / file
        text = path.read_text()
        assert old in text, (name, old)
        path.write_text(text.replace(old, new))
    return project


def _found(stdout: str) -> list[str]:
    return sorted(line.removeprefix("./").split(" ", 2)[0] + " " + line.split(" ", 2)[1]
                  for line in stdout.splitlines() if ": GLF" in line)


def _check(project: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "flake8_graphleaf", "check", "--isolated", "--no-cache",
                           "--output-format", "concise", "."], capture_output=True, text=True, timeout=300, cwd=project)


def _run(project: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "run.py"], capture_output=True, text=True, timeout=300, cwd=project)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_the_shape_is_reported_and_its_twin_is_not(tmp_path, name):
    expected, _, _ = SHAPES[name]
    r = _check(_project(tmp_path / "broken", name, False))
    assert r.returncode == 1 and _found(r.stdout) == expected, r.stdout
    flake8 = subprocess.run([sys.executable, "-m", "flake8", "--isolated", "--select=GLF", "."], capture_output=True,
                            text=True, timeout=300, cwd=tmp_path / "broken" / name)
    assert _found(flake8.stdout) == expected, flake8.stdout  # the plugin says the same
    if name == "ema_engine":  # the copy names the store of the other file
        assert "GLF001 at models/backbone.py:12, stored by Backbone.forward" in r.stdout, r.stdout
    twin = _check(_project(tmp_path / "twin", name, True))
    assert twin.returncode == 0 and twin.stdout == "", twin.stdout


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SHAPES))
def test_the_shape_raises_its_twin_runs_and_the_fix_makes_it_run(tmp_path, name):
    pytest.importorskip("torch")
    _, error, _ = SHAPES[name]
    broken = _project(tmp_path / "broken", name, False)
    ran = _run(broken)
    assert ran.returncode != 0 and error in ran.stderr, ran.stderr
    twin = _run(_project(tmp_path / "twin", name, True))
    assert twin.returncode == 0 and "copied" in twin.stdout, twin.stderr
    fixed = subprocess.run([sys.executable, "-m", "flake8_graphleaf", "fix", "--isolated", "--no-cache",
                            "--unsafe-fixes", "."], capture_output=True, text=True, timeout=300, cwd=broken)
    assert fixed.returncode in (0, 1), fixed.stderr
    after = _run(broken)
    if name in COPY_SITE_FIX:
        assert COPY_SITE_FIX[name] in fixed.stdout and 'ctx["logits"] = model(batch["x"])' in (
            broken / "run.py").read_text(), fixed.stdout
    assert after.returncode == 0 and "copied" in after.stdout, (fixed.stdout + fixed.stderr, after.stderr)
