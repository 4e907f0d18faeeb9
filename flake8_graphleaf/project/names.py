"""The dotted module name of a file, from the ``__init__.py`` files around it."""

from __future__ import annotations

import os


def module_name_for(path: str, packages: dict | None = None) -> tuple[str | None, bool, str | None]:
    """(dotted module name, is a package's __init__, the root folder above its top package)
    of a file, judged from the ``__init__.py`` files around it; (None, False, None) for a file
    not named like a module.  ``packages``: whether each folder has an ``__init__.py``, kept by a
    caller that asks for many files of one tree within one command (a tree does not change
    while it is checked)."""
    path = os.path.abspath(path)
    folder, base = os.path.split(path)
    stem, ext = os.path.splitext(base)
    if ext != ".py" or not stem.isidentifier():
        return None, False, None
    is_package = stem == "__init__"
    parts = [] if is_package else [stem]
    while _is_package(folder, packages):
        name = os.path.basename(folder)
        if not name.isidentifier():
            break
        parts.append(name)
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    if not parts:
        return None, False, None
    return ".".join(reversed(parts)), is_package, folder


def _is_package(folder: str, packages: dict | None) -> bool:
    if packages is None:
        return os.path.isfile(os.path.join(folder, "__init__.py"))
    found = packages.get(folder)
    if found is None:
        found = packages[folder] = os.path.isfile(os.path.join(folder, "__init__.py"))
    return found
