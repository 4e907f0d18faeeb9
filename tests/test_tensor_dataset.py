"""A TensorDataset of a tensor that requires grad, handed to a DataLoader with workers in another
file, as a user runs it and with torch: reported where the dataset is built (GLF301, naming the
loader) and at the loader; the worker's batch fails (the collate's stack(out=) or the pickling
of a non-leaf item). The twin builds it from a detached tensor and runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

DATA = '''\
import torch
from torch.utils.data import TensorDataset


def make_dataset(n=8, d=3):
    features = torch.randn((n, d), requires_grad={grad})
    targets = torch.randn((n, 1))
    return TensorDataset(features, targets)
'''

RUN = '''\
from torch.utils.data import DataLoader

from data import make_dataset


def main():
    loader = DataLoader(make_dataset(), batch_size=4, num_workers=1)
    print("batches", sum(1 for _ in loader))


if __name__ == "__main__":
    main()
'''


@pytest.mark.parametrize("grad", [True, False])
def test_a_tensor_dataset_of_a_leaf_that_requires_grad(tmp_path, grad):
    (tmp_path / "data.py").write_text(DATA.replace("{grad}", str(grad)))
    (tmp_path / "run.py").write_text(RUN)
    r = subprocess.run([sys.executable, "-m", "flake8_graphleaf", "check", "--isolated", "--no-cache",
                        "--output-format", "concise", str(tmp_path)], capture_output=True, text=True, timeout=300,
                       cwd=ROOT)
    if grad:
        assert "data.py:8:12: GLF301 TensorDataset(...) holds a tensor that requires grad" in r.stdout, r.stdout
        assert "DataLoader(make_dataset(), ...) at run.py:7" in r.stdout, r.stdout
        assert "run.py:7:14: GLF301 DataLoader(make_dataset(), ...)" in r.stdout, r.stdout
    else:
        assert r.returncode == 0 and r.stdout == "", r.stdout


@pytest.mark.slow  # the loader run with torch (a worker process): the check above, confirmed
@pytest.mark.torch
@pytest.mark.parametrize("grad", [True, False])
def test_a_tensor_dataset_of_a_leaf_that_requires_grad_runs_as_judged(tmp_path, grad):
    pytest.importorskip("torch")
    (tmp_path / "data.py").write_text(DATA.replace("{grad}", str(grad)))
    (tmp_path / "run.py").write_text(RUN)
    ran = subprocess.run([sys.executable, "run.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    if grad:
        assert ran.returncode != 0 and ("stack()" in ran.stderr or "non-leaf" in ran.stderr), ran.stderr
    else:
        assert ran.returncode == 0 and "batches 2" in ran.stdout, ran.stderr


def _fixed_unsafely(tmp_path):
    """The project with the unsafe fix applied (the safe run first: it leaves the dataset alone)."""
    (tmp_path / "data.py").write_text(DATA.replace("{grad}", "True"))
    (tmp_path / "run.py").write_text(RUN)
    safe = subprocess.run([sys.executable, "-m", "flake8_graphleaf", "fix", "--isolated", "--no-cache", str(tmp_path)],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert "requires_grad=True)\n" in (tmp_path / "data.py").read_text(), safe.stdout  # not a safe fix
    fixed = subprocess.run([sys.executable, "-m", "flake8_graphleaf", "fix", "--isolated", "--no-cache",
                            "--unsafe-fixes", str(tmp_path)], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert "TensorDataset(features.detach(), targets.detach())" in (tmp_path / "data.py").read_text(), fixed.stdout


def test_the_unsafe_fix_builds_the_dataset_from_detached_tensors(tmp_path):
    _fixed_unsafely(tmp_path)
    r = subprocess.run([sys.executable, "-m", "flake8_graphleaf", "check", "--isolated", "--no-cache",
                        "--output-format", "concise", str(tmp_path)], capture_output=True, text=True, timeout=300,
                       cwd=ROOT)
    assert r.returncode == 0 and r.stdout == "", r.stdout


@pytest.mark.slow  # the fixed project run with torch (a worker process): the loader runs
@pytest.mark.torch
def test_the_unsafe_fix_builds_the_dataset_from_detached_tensors_and_the_loader_runs(tmp_path):
    pytest.importorskip("torch")
    _fixed_unsafely(tmp_path)
    ran = subprocess.run([sys.executable, "run.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0 and "batches 2" in ran.stdout, ran.stderr
