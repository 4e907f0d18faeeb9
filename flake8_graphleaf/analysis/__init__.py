"""Pure static analysis: source text in, findings out.

Knows nothing of flake8, the ``graphleaf`` command, fixes or file writing, and never imports
torch.  :mod:`.graph_tensors` is the one place that decides what a graph tensor is; :mod:`.flow`
walks a function body in order with its grad mode; :mod:`.scopes` follows ``self.method()``
calls; :mod:`.modules` says which classes are torch modules; :mod:`.imports` resolves names;
:mod:`.rules` holds one module per rule family; :mod:`.file_analysis` runs them over a file.
"""

from .file_analysis import GATE_WORDS, FileAnalysis, Options, analyze_file, analyze_source, analyze_tree
from .findings import SAFE, UNSAFE, Edit, Finding, Fix

__all__ = [
    "GATE_WORDS", "SAFE", "UNSAFE", "Edit", "FileAnalysis", "Finding", "Fix", "Options",
    "analyze_file", "analyze_source", "analyze_tree",
]
