"""Legacy weight_norm applied only under a constructor option (``if scale_weight_norm:``), judged
with torch: where every construction in the project leaves the option off, the module never
holds the legacy weight and its copy works, so the finding is the opt-in GLF010 ("behind an
option"); where one construction turns it on, the copy raises and GLF101 is reported."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from _imported import deepcopy_works, imported

LAYERS = '''\
import torch.nn as nn
from torch.nn.utils import weight_norm


class Conv(nn.Module):
    def __init__(self, c, scale_weight_norm=False):
        super().__init__()
        self.conv = nn.Conv1d(c, c, 3, padding=1)
        if scale_weight_norm:
            self.conv = weight_norm(self.conv)

    def forward(self, x):
        return self.conv(x)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = Conv(4)
        self.b = Conv(4, scale_weight_norm=FLAG)

    def forward(self, x):
        return self.b(self.a(x))
'''


def _project(tmp_path: Path, flag: str) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "layers.py").write_text(LAYERS.replace("FLAG", flag))
    return tmp_path


def _codes(cwd: Path, *extra: str) -> list[str]:
    r = subprocess.run([sys.executable, "-m", "flake8_graphleaf", "check", "--isolated", "--no-cache",
                        "--output-format", "concise", *extra, "."], capture_output=True, text=True, timeout=300, cwd=cwd)
    assert "Traceback" not in r.stderr, r.stderr
    return [line.split(" ", 2)[1] for line in r.stdout.splitlines() if ": GLF" in line]


def _copies(cwd: Path) -> bool:
    torch = pytest.importorskip("torch")
    with imported(cwd, "pkg.layers") as layers:
        model = layers.Net()
        model(torch.randn(1, 4, 5)).sum().backward()
        return deepcopy_works(model)


def test_an_option_no_construction_sets_is_opt_in(tmp_path):
    cwd = _project(tmp_path, "False")
    assert _codes(cwd) == []
    assert _codes(cwd, "--argument-stores") == ["GLF101"]  # --confidence low: an option taken on trust
    flake8 = subprocess.run([sys.executable, "-m", "flake8", "--isolated", "--select=GLF", "."], capture_output=True,
                            text=True, timeout=300, cwd=cwd)
    assert flake8.stdout == "", flake8.stdout
    assert _copies(cwd)


def test_a_construction_that_sets_it_is_reported(tmp_path):
    cwd = _project(tmp_path, "True")
    assert _codes(cwd) == ["GLF101"]
    assert not _copies(cwd)
