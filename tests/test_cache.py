"""The findings cache, end to end: ruff's layout, keyed by content, settings and version."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path


from test_cli import BUGGY, run

from flake8_graphleaf.project.cache import Cache, key


def test_layout_and_same_findings_cold_and_warm(tmp_path):
    (tmp_path / "m.py").write_text(BUGGY)
    (tmp_path / "ok.py").write_text("import torch\n")
    cold = run("check", "--output-format", "json", ".", cwd=tmp_path)
    cache = tmp_path / ".graphleaf_cache"
    assert (cache / "CACHEDIR.TAG").read_text().startswith("Signature: 8a477f597d28d172789f06886806bc55")
    assert (cache / ".gitignore").read_text().splitlines()[-1] == "*"
    warm = run("check", "--output-format", "json", ".", cwd=tmp_path)
    assert warm.stdout == cold.stdout and warm.returncode == cold.returncode == 1
    # an edited file is analysed again
    (tmp_path / "m.py").write_text(BUGGY.replace("self.out = self.fc(x)", "out = self.fc(x)").replace(
        "return self.out", "return out"))
    assert run("check", ".", cwd=tmp_path).returncode == 0
    # settings are part of the key
    (tmp_path / "m.py").write_text(BUGGY)
    assert run("check", "--ignore", "GLF001", ".", cwd=tmp_path).returncode == 0
    assert run("check", ".", cwd=tmp_path).returncode == 1


def test_no_cache_cache_dir_and_env(tmp_path):
    (tmp_path / "m.py").write_text(BUGGY)
    run("check", "--no-cache", "m.py", cwd=tmp_path)
    assert not (tmp_path / ".graphleaf_cache").exists()
    run("check", "--cache-dir", "elsewhere", "m.py", cwd=tmp_path)
    assert (tmp_path / "elsewhere" / "CACHEDIR.TAG").exists() and not (tmp_path / ".graphleaf_cache").exists()
    run("check", "m.py", cwd=tmp_path, env={"GRAPHLEAF_CACHE_DIR": str(tmp_path / "env-cache")})
    assert (tmp_path / "env-cache" / "CACHEDIR.TAG").exists()


def test_corrupt_entries_and_read_only_dir(tmp_path):
    (tmp_path / "m.py").write_text(BUGGY)
    first = run("check", "--output-format", "concise", "m.py", cwd=tmp_path)
    for dirpath, _, files in os.walk(tmp_path / ".graphleaf_cache"):
        for f in files:
            if f.endswith(".json"):
                with open(os.path.join(dirpath, f), "w") as fh:
                    fh.write("{not json")
    again = run("check", "--output-format", "concise", "m.py", cwd=tmp_path)
    assert again.stdout == first.stdout and "Traceback" not in again.stderr
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        r = run("check", "--output-format", "concise", "--cache-dir", ro / "c", "m.py", cwd=tmp_path)
        assert r.stdout == first.stdout and r.returncode == 1 and "Traceback" not in r.stderr
    finally:
        ro.chmod(stat.S_IRWXU)


def test_store_api(tmp_path):
    c = Cache.open(tmp_path, enabled=True)
    k = key(b"source bytes", ("GLF001",))
    assert c.get("summary", k) is None
    assert c.put("summary", k, {"classes": ["M"], "n": 1})
    assert c.get("summary", k) == {"classes": ["M"], "n": 1}
    assert c.get("findings", k) is None  # kinds are separate
    assert key(b"a") != key(b"b") and key(b"a") == key(b"a")
    off = Cache.open(tmp_path, enabled=False)
    assert not off.put("summary", k, 1) and off.get("summary", k) is None
    assert not c.put("summary", k, object())  # not JSON-able: refused, nothing raised
    assert c.get("summary", k) == {"classes": ["M"], "n": 1}


def test_an_edited_dependency_invalidates_the_entry(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "base.py").write_text("import torch.nn as nn\n\n\nclass Base(nn.Module):\n    pass\n")
    (pkg / "m.py").write_text("import torch.nn as nn\n\nfrom .base import Base\n\n\nclass M(Base):\n"
                              "    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(2, 2)\n\n"
                              "    def forward(self, x):\n        self.out = self.fc(x)\n        return self.out\n")
    first = run("check", "--output-format", "concise", "pkg/m.py", cwd=tmp_path)
    assert first.returncode == 1 and "GLF001" in first.stdout
    (pkg / "base.py").write_text("class Base:\n    pass\n")  # no longer a module
    warm = run("check", "--output-format", "concise", "pkg/m.py", cwd=tmp_path)
    cold = run("check", "--no-cache", "--output-format", "concise", "pkg/m.py", cwd=tmp_path)
    assert (warm.returncode, warm.stdout) == (cold.returncode, cold.stdout)


def test_fix_edits_built_only_when_shown_and_same_from_the_cache(tmp_path):
    """Text output never builds the copy-safe edits (they are stored without them); JSON built
    from that cache entry, and JSON from worker processes, carry the same edits as a cold run."""
    for i in range(4):
        (tmp_path / f"m{i}.py").write_text(BUGGY)
    cold = run("check", "--no-cache", "--output-format", "json", ".", cwd=tmp_path).stdout
    edits = [item["fix"]["edits"] for item in json.loads(cold)]
    assert edits and all(e and "__getstate__" in e[0]["content"] for e in edits)
    assert run("check", ".", cwd=tmp_path).returncode == 1  # fills the cache, text output
    stored = [json.loads(p.read_text()) for p in (tmp_path / ".graphleaf_cache").rglob("*.json")]
    fixes = [f["fix"] for entry in stored for f in entry.get("data", {}).get("findings", []) if f.get("fix")]
    assert fixes and all(fix["edits"] is None for fix in fixes)
    assert run("check", "--output-format", "json", ".", cwd=tmp_path).stdout == cold
    assert run("check", "--no-cache", "-j", "2", "--output-format", "json", ".", cwd=tmp_path).stdout == cold
    assert run("check", "-j", "2", "--output-format", "sarif", ".", cwd=tmp_path).returncode == 1


def test_an_edited_checkout_never_reads_old_entries(tmp_path):
    """The key mixes in the installation's own sources (size and mtime of each file), so an
    editable install whose analysis changed does not read what the old code wrote."""
    from flake8_graphleaf.project import cache as store

    before = key("same", b"content")
    source = Path(store.__file__)
    st = source.stat()
    try:
        os.utime(source, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
        store._BUILD = None
        assert key("same", b"content") != before
    finally:
        os.utime(source, ns=(st.st_atime_ns, st.st_mtime_ns))
        store._BUILD = None
    assert key("same", b"content") == before


TRAINER = '''import torch.nn as nn
import torch.nn.functional as F


class Trainer:
    def __init__(self, model):
        self.model = model

    def step(self, x, y):
        loss = F.mse_loss(self.model(x), y)
        self.last_loss = loss{detach}
'''
SCRIPT = '''import copy

import torch
import torch.nn as nn
from training import Trainer

trainer = Trainer(nn.Linear(4, 1))
trainer.step(torch.randn(8, 4), torch.randn(8, 1))
snapshot = copy.deepcopy(trainer)
'''


def test_the_same_text_beside_different_neighbours_is_not_one_entry(tmp_path):
    # two identical scripts, each next to its own training.py: only the leaky one's copy raises
    for name, detach in (("clean", ".detach()"), ("leaky", "")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "training.py").write_text(TRAINER.format(detach=detach))
        (tmp_path / name / "train.py").write_text(SCRIPT)
    for _ in range(2):  # cold, then warm
        r = run("check", "-j", "1", "--output-format", "concise", ".", cwd=tmp_path)
        assert "leaky/train.py:9:12: GLF202" in r.stdout, r.stdout
        assert "clean/train.py" not in r.stdout, r.stdout
