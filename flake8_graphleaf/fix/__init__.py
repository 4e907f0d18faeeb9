"""Findings to edits to files: the fix builders, the fixer loop, the atomic writer.

Uses :mod:`flake8_graphleaf.analysis` and nothing above it; never imports torch.
:mod:`.attach` gives each finding its :class:`~flake8_graphleaf.analysis.Fix`; :mod:`.fixer`
applies them to a source until nothing changes; :mod:`.writer` reads and writes files
atomically, keeping encoding, newlines and mode.
"""

from .attach import analyze_with_fixes, attach_fixes
from .fixer import FixResult, fix_source

__all__ = ["FixResult", "analyze_with_fixes", "attach_fixes", "fix_source"]
