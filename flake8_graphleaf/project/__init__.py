"""The whole checked project: a per-file summary index (classes, bases, attribute stores and reads,
calls) built from the analysis, and the on-disk cache keyed by content hash that keeps it.

Uses :mod:`flake8_graphleaf.analysis`; used by :mod:`~flake8_graphleaf.fix`, :mod:`~flake8_graphleaf.cli`,
:mod:`~flake8_graphleaf.runtime` and :mod:`~flake8_graphleaf.plugin`.  Never imports torch.
"""
