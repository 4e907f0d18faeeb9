"""The analysis makes no reference cycles: when a file's check ends, its trees, runs, walkers and
class facts are freed by reference counting. The CLI runs with the cyclic collector almost off
(cli/runner.GC_THRESHOLDS) because of this; a cycle would keep every checked file's tree alive
until a collection (it once held ~700 MB of garbage on torch and cost a quarter of the run).

Each case checks a folder the way a user does, with the collector disabled, then collects with
DEBUG_SAVEALL and asserts that nothing of the analysis (its own objects, ast nodes) was garbage."""

from __future__ import annotations

import gc
import os
import sys

import pytest

from flake8_graphleaf.cli import main

# the analysis, the project view and the fixer (the CLI's argparse parser has cycles of its own,
# made once per command)
ANALYSIS = ("flake8_graphleaf.analysis", "flake8_graphleaf.project", "flake8_graphleaf.fix")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _cyclic_garbage(argv: list[str]) -> list[str]:
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    old_argv = sys.argv
    try:
        sys.argv = ["graphleaf", *argv]
        try:
            main()
        except SystemExit:
            pass
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        found = [o for o in gc.garbage
                 if type(o).__module__.startswith((*ANALYSIS, "ast"))
                 or type(o).__name__ in ("function", "method") and getattr(
                     getattr(o, "__func__", o), "__module__", "").startswith(ANALYSIS)]
        names = sorted({f"{type(o).__module__}.{type(o).__qualname__}" if type(o).__name__ not in ("function", "method")
                        else getattr(o, "__qualname__", "") for o in found})
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        sys.argv = old_argv
        if was:
            gc.enable()
    return names


@pytest.mark.parametrize("folder", [
    "fixtures/projects/copygraph",
    "fixtures/projects/wholeprogram",
    "fixtures/lint",
    "fixtures/incidents",
])
def test_checking_a_folder_leaves_no_cyclic_garbage(folder, capsys):
    names = _cyclic_garbage(["check", "--isolated", "--no-cache", "-j1", "--exit-zero", "-q",
                             os.path.join(ROOT, folder)])
    capsys.readouterr()
    assert names == [], f"reference cycles left by the analysis: {names[:20]}"


def test_fixing_leaves_no_cyclic_garbage(tmp_path, capsys):
    import shutil

    shutil.copytree(os.path.join(ROOT, "fixtures", "lint"), tmp_path / "lint")
    names = _cyclic_garbage(["fix", "--isolated", "--no-cache", "-j1", "--unsafe-fixes", "--diff", str(tmp_path / "lint")])
    capsys.readouterr()
    assert names == [], f"reference cycles left by the fixer: {names[:20]}"
