"""Everything that imports torch: the deepcopy walk, ``explain``, ``trace_stores``, ``verify``'s engine, targets.

The linter (:mod:`flake8_graphleaf.analysis`, :mod:`~flake8_graphleaf.fix`, :mod:`~flake8_graphleaf.cli`,
:mod:`~flake8_graphleaf.plugin`) never imports this package at import time.  The public names below
are loaded on first use, so ``import flake8_graphleaf.runtime.targets`` or
``flake8_graphleaf.runtime.verify`` does not import torch either:

- :func:`find_graph_tensors` (:mod:`.walk`): the tensors that break ``copy.deepcopy(obj)``;
- :func:`explain`, :func:`format_explanation` (:mod:`.explanation`): the same, with the storing line;
- :func:`trace_stores` (:mod:`.trace`): record stores while code runs;
- :func:`deepcopy_detached` (:mod:`.detached_copy`): a deep copy with every graph tensor detached;
- :func:`run_script` (:mod:`.script`): run a script as ``__main__`` and explain a graph-leaf crash in it.
"""

from __future__ import annotations

import importlib

_LAZY = {
    "find_graph_tensors": "walk",
    "Findings": "findings",
    "GraphTensor": "findings",
    "Problem": "findings",
    "Source": "findings",
    "explain": "explanation",
    "format_explanation": "findings",
    "trace_stores": "trace",
    "StoreLog": "trace",
    "StoreRecord": "trace",
    "deepcopy_detached": "detached_copy",
    "run_script": "script",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
