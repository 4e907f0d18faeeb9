"""The release shape: one version, named by the changelog, and a wheel that carries what the
installed package reads (rule pages, the torch table) and registers its entry points."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile

import pytest

from test_cli import ROOT, run


def test_version_is_written_once_and_the_changelog_names_it():
    from flake8_graphleaf import __version__
    from flake8_graphleaf.plugin import GraphLeafChecker

    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    project = pyproject.split("[project]", 1)[1].split("\n[", 1)[0]
    assert not re.search(r"^version\s*=", project, re.M), "pyproject.toml writes a version of its own"
    assert 'dynamic = ["version"]' in project and 'version = {attr = "flake8_graphleaf.__version__"}' in pyproject
    top = re.search(r"^## (\S+)", (ROOT / "CHANGELOG.md").read_text(encoding="utf-8"), re.M)
    assert top and top.group(1) == __version__
    assert run("--version").stdout.strip() == f"graphleaf {__version__}"
    assert GraphLeafChecker.version == __version__


@pytest.mark.slow
@pytest.mark.network  # pip's isolated build fetches setuptools
def test_wheel_carries_pages_table_and_entry_points(tmp_path):
    from flake8_graphleaf import __version__
    from flake8_graphleaf.analysis.rules import all_rules

    r = subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "-w", str(tmp_path), "--no-deps", "-q"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    (wheel,) = tmp_path.glob("flake8_graphleaf-*.whl")
    assert wheel.name == f"flake8_graphleaf-{__version__}-py3-none-any.whl"
    names = set(zipfile.ZipFile(wheel).namelist())
    for code in all_rules():
        assert f"flake8_graphleaf/rule_docs/{code}.md" in names, code
    assert any(n.startswith("flake8_graphleaf/analysis/facts/") and n.endswith(".json") for n in names)
    info = f"flake8_graphleaf-{__version__}.dist-info"
    meta = zipfile.ZipFile(wheel).read(f"{info}/METADATA").decode()
    assert f"\nVersion: {__version__}\n" in meta
    entry = zipfile.ZipFile(wheel).read(f"{info}/entry_points.txt").decode()
    assert "GLF = flake8_graphleaf.plugin:GraphLeafChecker" in entry and "graphleaf = flake8_graphleaf.cli:entry" in entry
