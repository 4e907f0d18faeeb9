"""The project index the fixer asks who reads an attribute (``attribute_reads``, ``dynamic_access``)."""

from __future__ import annotations

from ..project.index import ProjectIndex
from ..project.resolver import shared_resolver


def project_index(paths: list[str]) -> ProjectIndex:
    """The index over the checked paths: files are summarised when a question names them."""
    return ProjectIndex.build(list(paths))


def forget_written(path: str, project: ProjectIndex | None) -> None:
    """``path`` was just written by a fix: the files fixed after it in this process see its new
    text (a copy in ``main.py`` whose store in ``model.py`` was fixed first no longer fails)."""
    shared_resolver().forget(path)
    if project is not None:
        project.forget(path)
