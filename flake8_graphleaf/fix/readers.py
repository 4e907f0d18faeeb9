"""The project index the fixer asks who reads an attribute (``attribute_reads``, ``dynamic_access``)."""

from __future__ import annotations

from ..project.index import ProjectIndex


def project_index(paths: list[str]) -> ProjectIndex:
    """The index over the checked paths: files are summarised when a question names them."""
    return ProjectIndex.build(list(paths))
