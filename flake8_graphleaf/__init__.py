"""flake8-graphleaf: find, fix and verify code that breaks ``copy.deepcopy(model)``.

The analysis (``flake8_graphleaf.analysis``) knows nothing of flake8, the CLI or
output formats; ``plugin`` and ``cli`` are thin front ends over it.
"""

__version__ = "0.1.0"
