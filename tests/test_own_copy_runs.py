"""Classes that decide their own copies, judged with torch: a weight-normed layer that binds its
own ``__deepcopy__`` on the object (fourierflow's fix: drop the computed weight around the copy)
copies fine, so its legacy ``weight_norm(self)`` moves to the opt-in GLF010; the same layer
without it raises at the copy and keeps GLF101.  ``isinstance(hook, WeightNorm)`` only names
the legacy class and is never reported."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

LAYER = '''\
import copy

import torch
import torch.nn as nn
from torch.nn.utils import weight_norm
from torch.nn.utils.weight_norm import WeightNorm


class WNLinear(nn.Linear):
    def __init__(self, n, m):
        super().__init__(n, m)
        weight_norm(self)
        {bind}

    def _fix_weight_norm_deepcopy(self):
        def __deepcopy__(self, memo):
            weights = {}
            for hook in self._forward_pre_hooks.values():
                if isinstance(hook, WeightNorm):
                    weights[hook.name] = getattr(self, hook.name)
                    delattr(self, hook.name)
            own = self.__deepcopy__
            del self.__deepcopy__
            result = copy.deepcopy(self)
            for name, value in weights.items():
                setattr(self, name, value)
            self.__deepcopy__ = own
            return result

        self.__deepcopy__ = __deepcopy__.__get__(self, self.__class__)


layer = WNLinear(3, 2)
layer(torch.randn(4, 3)).sum().backward()
copy.deepcopy(layer)
print("copied")
'''


@pytest.mark.parametrize("bound", [True, False])
def test_a_layer_binding_its_own_deepcopy(tmp_path, bound):
    path = tmp_path / "layer.py"
    path.write_text(LAYER.replace("{bind}", "self._fix_weight_norm_deepcopy()" if bound else "pass"))
    args = [sys.executable, "-m", "flake8_graphleaf", "check", "--isolated", "--no-cache", "--output-format", "concise"]
    r = subprocess.run([*args, str(path)], capture_output=True, text=True, timeout=300, cwd=ROOT)
    opt_in = subprocess.run([*args, "--argument-stores", str(path)], capture_output=True, text=True, timeout=300,
                            cwd=ROOT)
    assert ":19:" not in r.stdout + opt_in.stdout  # isinstance(hook, WeightNorm) names the class only
    if bound:
        assert r.stdout == "", r.stdout
        assert ("layer.py:12:9: GLF101 " in opt_in.stdout
                and "taken on trust: WNLinear's own __deepcopy__ is taken to copy" in opt_in.stdout), opt_in.stdout
    else:
        assert "layer.py:12:9: GLF101 legacy torch.nn.utils.weight_norm" in r.stdout, r.stdout


@pytest.mark.slow  # the layer run with torch: the two outcomes the check above gives, confirmed
@pytest.mark.torch
@pytest.mark.parametrize("bound", [True, False])
def test_a_layer_binding_its_own_deepcopy_copies_and_the_other_raises(tmp_path, bound):
    pytest.importorskip("torch")
    path = tmp_path / "layer.py"
    path.write_text(LAYER.replace("{bind}", "self._fix_weight_norm_deepcopy()" if bound else "pass"))
    ran = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300)
    if bound:
        assert ran.returncode == 0 and "copied" in ran.stdout, ran.stderr
    else:
        assert ran.returncode != 0 and "graph leaves" in ran.stderr, ran.stderr
