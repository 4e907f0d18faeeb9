"""Tensors made in one function and deep-copied by another that a chain of calls hands them to,
as users run it and with torch: a test input made non-leaf by ``.to(dtype=)`` and copied by a
harness in another file, and a model output put in a batch dict that a post-transform
(through ``Compose``) copies item by item. Each is reported where it is made and at the copy
(GLF201); each twin (a leaf made after the conversion, a detached output) runs clean and is
not reported."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

HARNESS = '''\
import copy


def run_test(model, inputs):
    if not isinstance(inputs, tuple):
        inputs = (inputs,)
    inputs_copy = copy.deepcopy(inputs)
    return model(*inputs_copy)
'''

TESTS = '''\
import torch

from harness import run_test


class Rsqrt(torch.nn.Module):
    def forward(self, x):
        return x.rsqrt()


def test_rsqrt():
    x = {made}
    run_test(Rsqrt(), x)


test_rsqrt()
print("ok")
'''

TRANSFORMS = '''\
import copy


class CopyItemsd:
    def __init__(self, keys, names):
        self.keys, self.names = keys, names

    def __call__(self, data):
        d = dict(data)
        for key, new_key in zip(self.keys, self.names):
            d[new_key] = copy.deepcopy(d[key])
        return d


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, data):
        for t in self.transforms:
            data = t(data)
        return data
'''

ENGINE = '''\
import torch
import torch.nn as nn

from transforms import Compose, CopyItemsd


def evaluate(model, batches, post):
    results = []
    for batch in batches:
        batch["pred"] = {pred}
        results.append(post(batch))
    return results


evaluate(nn.Conv2d(1, 1, 3, padding=1), [{"image": torch.randn(1, 1, 6, 6)}],
         Compose([CopyItemsd(keys=["pred"], names=["pred_raw"])]))
print("ok")
'''


def _check(path: Path):
    return subprocess.run([sys.executable, "-m", "flake8_graphleaf", "check", "--isolated", "--no-cache",
                           "--output-format", "concise", str(path)], capture_output=True, text=True, timeout=300,
                          cwd=ROOT)


def _run(path: Path, script: str):
    return subprocess.run([sys.executable, script], cwd=path, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("clean", [False, True])
def test_a_test_input_copied_by_a_harness(tmp_path, clean):
    made = ("torch.rand(4, 3, dtype=torch.float64, requires_grad=True)" if clean
            else "torch.rand(4, 3, requires_grad=True).to(dtype=torch.float64)")
    (tmp_path / "harness.py").write_text(HARNESS)
    (tmp_path / "test_ops.py").write_text(TESTS.replace("{made}", made))
    r = _check(tmp_path)
    if clean:
        assert r.returncode == 0 and r.stdout == "", r.stdout
    else:
        assert "test_ops.py:12:5: GLF201 'x' is or holds a tensor on the autograd graph" in r.stdout, r.stdout
        assert "copy.deepcopy(inputs) at harness.py:7 will raise" in r.stdout, r.stdout
        assert "harness.py:7:19: GLF201 copy.deepcopy(inputs) will raise: it copies a tensor" in r.stdout, r.stdout
        assert "made by test_rsqrt() at test_ops.py:12 and passed on" in r.stdout, r.stdout


@pytest.mark.slow  # the tests run with torch: the check above, confirmed at run time
@pytest.mark.torch
@pytest.mark.parametrize("clean", [False, True])
def test_a_test_input_copied_by_a_harness_runs_as_judged(tmp_path, clean):
    pytest.importorskip("torch")
    made = ("torch.rand(4, 3, dtype=torch.float64, requires_grad=True)" if clean
            else "torch.rand(4, 3, requires_grad=True).to(dtype=torch.float64)")
    (tmp_path / "harness.py").write_text(HARNESS)
    (tmp_path / "test_ops.py").write_text(TESTS.replace("{made}", made))
    ran = _run(tmp_path, "test_ops.py")
    assert (ran.returncode == 0) == clean, ran.stderr
    if not clean:
        assert "graph leaves" in ran.stderr, ran.stderr


@pytest.mark.parametrize("clean", [False, True])
def test_a_batch_item_copied_by_a_post_transform(tmp_path, clean):
    pred = 'model(batch["image"]).detach()' if clean else 'model(batch["image"])'
    (tmp_path / "transforms.py").write_text(TRANSFORMS)
    (tmp_path / "engine.py").write_text(ENGINE.replace("{pred}", pred))
    r = _check(tmp_path)
    if clean:
        assert r.returncode == 0 and r.stdout == "", r.stdout
    else:
        assert "engine.py:10:9: GLF201 'batch' is or holds a tensor on the autograd graph" in r.stdout, r.stdout
        assert "transforms.py:11:26: GLF201 copy.deepcopy(d[key]) will raise: it copies a tensor" in r.stdout, r.stdout


@pytest.mark.slow  # the engine run with torch: the check above, confirmed at run time
@pytest.mark.torch
@pytest.mark.parametrize("clean", [False, True])
def test_a_batch_item_copied_by_a_post_transform_runs_as_judged(tmp_path, clean):
    pytest.importorskip("torch")
    pred = 'model(batch["image"]).detach()' if clean else 'model(batch["image"])'
    (tmp_path / "transforms.py").write_text(TRANSFORMS)
    (tmp_path / "engine.py").write_text(ENGINE.replace("{pred}", pred))
    ran = _run(tmp_path, "engine.py")
    assert (ran.returncode == 0) == clean, ran.stderr
    if not clean:
        assert "graph leaves" in ran.stderr, ran.stderr
