"""Pure static analysis: source text in, findings out.

Knows nothing of flake8, the ``graphleaf`` command, fixes or file writing, and never imports
torch.  The folders are the steps a finding goes through, and imports only go down them:

1. :mod:`.facts` — torch's semantics (the generated table), Python's names, the copy and send APIs;
2. :mod:`.program` — the program model: imports, the classes and their attributes, the per-file
   summaries and the view of the rest of the program;
3. :mod:`.evaluator` — what each expression holds for autograd (:mod:`.evaluator.graph_tensors`),
   function bodies walked in order (:mod:`.evaluator.flow`), the class runner and the copy
   graph's program runner (:mod:`.evaluator.heap`);
4. :mod:`.witness` — a finding's proof, the chain from its grad source to what the copy reaches;
5. :mod:`.rules` — one module per rule family, deciding which stores are findings;
6. :mod:`.file_analysis` — runs the rules over one file.

Beside them, the vocabulary all steps share: :mod:`.values` (the value lattice),
:mod:`.findings` (what the analysis hands its front ends) and :mod:`.noqa`.
"""

from .file_analysis import GATE_WORDS, FileAnalysis, Options, analyze_file, analyze_source, analyze_tree
from .findings import SAFE, UNSAFE, Edit, Finding, Fix

__all__ = [
    "GATE_WORDS", "SAFE", "UNSAFE", "Edit", "FileAnalysis", "Finding", "Fix", "Options",
    "analyze_file", "analyze_source", "analyze_tree",
]
