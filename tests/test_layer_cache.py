"""A key/value cache filled by attention layers kept in an nn.ModuleList (transformers'
DynamicCache, set 8's c06), judged with torch. The decoder's forward runs each layer of
``nn.ModuleList([Attention(d, i) for i in range(n)])``; each layer's forward calls the cache's
``update()``, which appends what it computed. The prompt's pass runs with grad on, so the cache
holds graph tensors and ``copy.deepcopy(cache)`` in run.py raises: GLF002 at the first appends
(cache.py, the lines that stored them) and GLF202 at the copy naming cache.py. The twin prefills
under ``torch.no_grad()``: nothing is reported and the copy works."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "fixtures" / "projects" / "layer_cache"
GRAD_SWITCH = "torch.no_grad() if no_grad else torch.enable_grad()"


@pytest.mark.parametrize("twin", [False, True])
def test_a_cache_filled_by_the_layers_of_a_module_list(tmp_path, twin):
    project = tmp_path / "p"
    shutil.copytree(FIXTURE, project)
    if twin:
        run = project / "run.py"
        run.write_text(run.read_text().replace(GRAD_SWITCH, "torch.no_grad()"))
    r = subprocess.run([sys.executable, "-m", "flake8_graphleaf", "check", "--isolated", "--no-cache",
                        "--output-format", "concise", "."], capture_output=True, text=True, timeout=300, cwd=project)
    if twin:
        assert r.returncode == 0 and r.stdout == "", r.stdout
    else:
        got = sorted(line.removeprefix("./").split(" ", 2)[0] + " " + line.split(" ", 2)[1] for line in r.stdout.splitlines())
        assert got == ["cache.py:12:13: GLF002", "cache.py:13:13: GLF002", "run.py:18:16: GLF202"], r.stdout
        assert "(GLF002 at cache.py:12: 'self.keys')" in r.stdout, r.stdout
        assert "main() -> forward() -> forward() -> update()" in r.stdout, r.stdout
    pytest.importorskip("torch")
    ran = subprocess.run([sys.executable, "run.py"], capture_output=True, text=True, timeout=300, cwd=project)
    if twin:
        assert ran.returncode == 0 and "copied" in ran.stdout, ran.stderr
    else:
        assert ran.returncode != 0 and "graph leaves" in ran.stderr, ran.stderr
