"""The ``graphleaf`` command: subcommands, configuration, file discovery and output formats.

Uses :mod:`flake8_graphleaf.fix` and :mod:`flake8_graphleaf.analysis`; ``explain`` and ``verify``
load :mod:`flake8_graphleaf.runtime` (torch) only when they run.  Nothing imports this package.
"""

from .app import entry, main

__all__ = ["entry", "main"]
