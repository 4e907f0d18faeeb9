"""Importing a package a test wrote (a project under tmp_path) and forgetting it afterwards."""

from __future__ import annotations

import importlib
import sys
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def imported(folder: Path, module: str):
    """``module`` imported from ``folder``; its package is dropped from ``sys.modules`` after, so
    the next test's project of the same name is imported afresh."""
    sys.path.insert(0, str(folder))
    package = module.split(".")[0]
    try:
        yield importlib.import_module(module)
    finally:
        sys.path.remove(str(folder))
        for name in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
            del sys.modules[name]


def deepcopy_works(obj) -> bool:
    """Whether ``copy.deepcopy(obj)`` works; False where it raises the graph-leaf RuntimeError."""
    import copy

    try:
        copy.deepcopy(obj)
        return True
    except RuntimeError as exc:
        assert "graph leaves" in str(exc)
        return False
