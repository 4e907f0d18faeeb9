"""Fixes made in another file than the finding's: a module keeps a graph tensor through a helper
object whose class is defined in another file of the project (``self.action_dist`` of
``shop.dists.CategoricalDist``).  The fix is the copy-safe ``__getstate__`` on that class, in its
own file; the finding stays in the module's file, and disappears once the class decides what its
copies hold (the analysis does not judge a helper class with its own copy protocol).

:func:`requests` collects, from the findings ``graphleaf fix`` left, which classes of which files
need which attributes detached; :func:`fix_classes` makes those edits on one file's text.  The
command line writes them (atomically, as every fix), only into files among the checked ones.
"""

from __future__ import annotations

import ast
import os

from ..analysis import Options, analyze_file
from ..analysis.findings import Finding
from ..analysis.program.textpos import Text
from .context import Context
from .copysafe import copysafe_edit, described
from .cst import Covered, NoFix


def requests(findings: list[Finding]) -> dict[str, dict[str, list[str]]]:
    """{file path: {class name: attribute names}} for the helper findings whose class is elsewhere."""
    out: dict[str, dict[str, list[str]]] = {}
    for f in findings:
        path, name, qual = f.data.get("helper_path"), f.data.get("helper_attr"), f.data.get("helper_class")
        if not (path and name and qual):
            continue
        names = out.setdefault(os.path.realpath(path), {}).setdefault(qual.rpartition(".")[2], [])
        if name not in names:
            names.append(name)
    return out


def fix_classes(source: str, filename: str, wanted: dict[str, list[str]], options: Options | None = None
                ) -> tuple[str, dict[str, str]]:
    """(new text, {class: what its fix does}) with each wanted class given (or extended with) the
    copy-safe state for its names; a class that cannot take it is left out, with no edit."""
    from .fixer import apply_edits

    result = analyze_file(ast.parse(source, filename=filename), source, options)
    classes, imports = result.classes, result.imports
    if imports is None or any(cls not in classes for cls in wanted):
        # a file the analysis skipped (no torch word in it): its classes are collected here
        from ..analysis.program.imports import ImportMap
        from ..analysis.program.modules import collect_classes

        imports = imports or ImportMap(result.tree, getattr(options, "module", None))
        classes = {**collect_classes(result.tree, imports), **classes}
    ctx = Context(result.tree, Text(source), classes, imports)
    edits, done = [], {}
    for cls, names in wanted.items():
        try:
            how, build = copysafe_edit(ctx, cls, names)
            edit = build()
        except Covered:
            # the class's own findings gave it this state in the same run (its file was checked
            # too): the helper's findings are fixed by it as well
            done[cls] = (f"{cls}.__getstate__ in {os.path.basename(filename)} (made for its own findings) gives "
                         f"copies detached values of {described(names)}; the live object keeps its graph "
                         "tensors, so nothing the program computes changes")
            continue
        except (NoFix, ValueError, AttributeError, IndexError, KeyError):
            continue
        edits.append(edit)
        verb, _, method = how.partition(":")
        done[cls] = (f"{verb} {cls}.{method or '__getstate__'} in {os.path.basename(filename)} so that copies (copy.deepcopy, pickle, "
                     f"torch.save) get detached values of {described(names)}; the live object keeps its graph "
                     "tensors, so nothing the program computes changes")
    if not edits:
        return source, done
    new = apply_edits(source, edits)
    try:
        ast.parse(new)
    except SyntaxError:
        return source, {}
    return new, done


def settle_moved(left: list, applied: list, done: dict) -> list:
    """Of the (finding, why) pairs left in a file, move those whose helper class got its copy-safe
    state in its own file (``done``: (real path, class name) -> description) to ``applied``, with
    that fix; return the pairs still left."""
    from ..analysis.findings import SAFE, Fix

    keep = []
    for f, why in left:
        key = (os.path.realpath(f.data.get("helper_path") or ""), (f.data.get("helper_class") or "").rpartition(".")[2])
        if key in done:
            f.fix = Fix(SAFE, done[key])
            applied.append(f)
        else:
            keep.append((f, why))
    return keep
