"""A forward that calls a submodule's other methods (blitz's Bayesian layers: the weight
sampler's ``sample()`` and ``log_posterior()``), judged with torch.

The sampler keeps the sampled weight and its scale on itself, and the layer keeps the
posterior's log-likelihood: all three are computed from parameters with grad on, so after a
training step ``copy.deepcopy(model)`` raises. The package has no copy site of its own (a library):
the findings come from the layer's forward. ``graphleaf fix`` gives both classes a copy-safe
``__getstate__`` (the sampler's in its own file); the fixed program computes the same loss and
gradients bit for bit, and the copy works. The twin keeps detached values: nothing reported,
and the copy works."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "fixtures" / "projects" / "submodule_methods"


def _graphleaf(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "flake8_graphleaf", *args], capture_output=True, text=True,
                          timeout=300, cwd=cwd)


def test_the_library_reports_what_the_submodule_methods_keep(tmp_path):
    shutil.copytree(FIXTURE / "pkg", tmp_path / "p" / "pkg")  # the library alone: no copy site
    r = _graphleaf("check", "--isolated", "--no-cache", "--output-format", "concise", "pkg", cwd=tmp_path / "p")
    lines = sorted(r.stdout.splitlines())
    assert r.returncode == 1, r.stdout + r.stderr
    assert [line.split(" keeps")[0] for line in lines] == [
        "pkg/layer.py:17:13: GLF001 'self.weight_sampler.sigma' (Sampler)",
        "pkg/layer.py:17:13: GLF001 'self.weight_sampler.w' (Sampler)",
        "pkg/layer.py:18:9: GLF001 'self.log_variational_posterior' (BayesLinear)",
    ], r.stdout
    # Sampler.sample() is public and nothing in Sampler calls it: a root of its own, taken to run
    # with grad on (medium); the layer's forward, which does call it, proves the same stores above
    medium = _graphleaf("check", "--isolated", "--no-cache", "--output-format", "concise", "--confidence", "medium",
                        "pkg", cwd=tmp_path / "p")
    assert sorted(line.split(" keeps")[0] for line in medium.stdout.splitlines() if "sampler.py" in line) == [
        "pkg/sampler.py:16:9: GLF001 'self.sigma' (Sampler)",
        "pkg/sampler.py:17:9: GLF001 'self.w' (Sampler)",
    ], medium.stdout
    assert "[medium confidence: taken on trust: sample(), which nothing in its class calls" in medium.stdout
    assert ("(from parameter self.rho) by Sampler.sample() line 16; copy.deepcopy(model) will raise after forward "
            "(it copies the Sampler object in 'self.weight_sampler' with BayesLinear)") in r.stdout
    flake8 = subprocess.run([sys.executable, "-m", "flake8", "--isolated", "--select=GLF", "pkg"], capture_output=True,
                            text=True, timeout=300, cwd=tmp_path / "p")
    assert sorted(line.split(" ", 2)[:2] for line in flake8.stdout.splitlines()) == sorted(
        line.split(" ", 2)[:2] for line in lines), flake8.stdout


def test_with_the_training_script_the_copy_graph_names_the_copy(tmp_path):
    shutil.copytree(FIXTURE, tmp_path / "p")
    r = _graphleaf("check", "--isolated", "--no-cache", "--output-format", "concise", ".", cwd=tmp_path / "p")
    for where in ("pkg/sampler.py:16:9: GLF001 'self.sigma'", "pkg/sampler.py:17:9: GLF001 'self.w'",
                  "pkg/layer.py:18:9: GLF001 'self.log_variational_posterior'", "train.py:18:8: GLF202"):
        assert where in r.stdout, r.stdout
    assert "copy.deepcopy(model) at train.py:18 will raise (it reaches it as model.weight_sampler.sigma)" in r.stdout, r.stdout


@pytest.mark.slow
def test_the_fix_keeps_the_numbers_and_the_copy_works(tmp_path):
    pytest.importorskip("torch")
    shutil.copytree(FIXTURE, tmp_path / "p")
    before = subprocess.run([sys.executable, "train.py"], capture_output=True, text=True, timeout=300, cwd=tmp_path / "p")
    assert before.returncode != 0 and "graph leaves" in before.stderr, before.stderr
    fixed = _graphleaf("fix", "--isolated", "--no-cache", "pkg", cwd=tmp_path / "p")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "def __getstate__" in (tmp_path / "p" / "pkg" / "sampler.py").read_text()
    assert "def __getstate__" in (tmp_path / "p" / "pkg" / "layer.py").read_text()
    after = subprocess.run([sys.executable, "train.py"], capture_output=True, text=True, timeout=300, cwd=tmp_path / "p")
    assert after.returncode == 0, after.stderr
    assert after.stdout.splitlines()[0] == before.stdout.splitlines()[0]  # loss and gradients, bit for bit
    assert after.stdout.splitlines()[1] == "copied True"
    again = _graphleaf("check", "--isolated", "--no-cache", "pkg", cwd=tmp_path / "p")
    assert again.returncode == 0, again.stdout


def _twin(tmp_path):
    """The fixture with the sampler keeping detached copies of what it computes and the layer
    keeping the posterior's value as a float."""
    shutil.copytree(FIXTURE, tmp_path / "p")
    sampler = tmp_path / "p" / "pkg" / "sampler.py"
    sampler.write_text(sampler.read_text()
                       .replace("        self.sigma = torch.log1p(torch.exp(self.rho))\n"
                                "        self.w = self.mu + self.sigma * self.eps_w\n"
                                "        return self.w\n",
                                "        sigma = torch.log1p(torch.exp(self.rho))\n"
                                "        w = self.mu + sigma * self.eps_w\n"
                                "        self.sigma, self.w = sigma.detach(), w.detach()\n"
                                "        return w\n"))
    layer = tmp_path / "p" / "pkg" / "layer.py"
    layer.write_text(layer.read_text().replace("self.weight_sampler.log_posterior()",
                                               "self.weight_sampler.log_posterior().item()"))
    train = tmp_path / "p" / "train.py"
    train.write_text(train.read_text().replace(" + 1e-3 * model.log_variational_posterior", ""))


def test_the_twin_that_keeps_detached_values_is_clean(tmp_path):
    """The twin (_twin): nothing is reported."""
    _twin(tmp_path)
    r = _graphleaf("check", "--isolated", "--no-cache", ".", cwd=tmp_path / "p")
    assert r.returncode == 0 and r.stdout == "" and "All clear" in r.stderr, r.stdout


@pytest.mark.slow  # the twin run with torch: the copy after a training step works, as checked above
@pytest.mark.torch
def test_the_twin_that_keeps_detached_values_copies(tmp_path):
    pytest.importorskip("torch")
    _twin(tmp_path)
    ran = subprocess.run([sys.executable, "train.py"], capture_output=True, text=True, timeout=300, cwd=tmp_path / "p")
    assert ran.returncode == 0 and "copied True" in ran.stdout, ran.stderr
