"""Which code of a file may reach a copy or a send, read from the text (never walked): the copy
graph (:mod:`.heap`) starts its runs only from there, and a file that names none costs a text scan."""

from __future__ import annotations

import ast
import os

from ..program.stmtwalk import tree_statements
from ..program.textscan import has, has_any

_SINK_WORDS = ("deepcopy(", "deepcopy as ", "AveragedModel", "ModelEma", "DataLoader", ".put(", ".put_nowait(", "Process(", "spawn(",
               "start_processes(", "Pool(", "ProcessPoolExecutor(")


def _segment(lines: list[str], node: ast.AST) -> str:
    return "\n".join(lines[node.lineno - 1: getattr(node, "end_lineno", node.lineno) or node.lineno])


def _without_docstrings(lines: list[str], tree: ast.AST) -> list[str]:
    """``lines`` with the docstrings' lines blanked: an example in a docstring
    (``>>> ema = copy.deepcopy(model)``) is no copy the run could reach."""
    blank: list[tuple[int, int]] = []
    for node in [tree, *tree_statements(tree)]:
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                    and isinstance(first.value.value, str) and first.lineno > getattr(node, "lineno", 0)
                    and (len(node.body) == 1 or node.body[1].lineno > (first.end_lineno or first.lineno))):
                blank.append((first.lineno, first.end_lineno or first.lineno))
    if not blank:
        return lines
    lines = list(lines)
    for start, end in blank:
        lines[start - 1:end] = [""] * (end - start + 1)
    return lines


def _live_defs(parsed, text: str | None = None) -> set[str]:
    """The file's top-level functions and classes whose code may reach a copy or a send: its text
    names one (``deepcopy``, ``DataLoader``, ``.put(``, ``Process(`` ...), or a function or class
    of this file that may, or a name imported from a file of the program whose text names one
    (read, not parsed). The run starts only from those (and from the module's code when it names
    one of them): the others cannot produce a finding here. Read from the text (without its
    docstrings), walked never."""
    memo = parsed.memo
    if "heap_live" in memo:
        return memo["heap_live"]
    project = getattr(parsed.imports, "project", None)
    if text is None and project is not None:
        text = project.text_of(parsed.path)
    defs = {name: node for name, node in parsed.defs.items()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    if not text:  # no text: every definition may
        memo["heap_live"] = live = set(defs) | {TOP}
        return live
    imported_live = set()
    scope = os.path.join(os.path.dirname(os.path.abspath(parsed.path)), "")  # where a run follows calls
    imported = getattr(parsed.imports, "names", {}) or {}
    if project is not None:
        for local, qual in imported.items():
            if isinstance(qual, str) and local in text and _imported_live(project, qual, scope):
                imported_live.add(local)
    if not imported_live and not has_any(text, _SINK_WORDS):
        memo["heap_live"] = live = set()  # nothing here names a copy or a send, nor imports one that may
        return live
    lines = _without_docstrings(text.split("\n"), parsed.tree)
    texts = {name: _segment(lines, node) for name, node in defs.items()}
    texts[TOP] = "\n".join(_segment(lines, s) for s in parsed.tree.body
                            if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))
    present = [w for w in _SINK_WORDS if has(text, w)]  # a definition's text is a part of the file's
    live = {name for name, t in texts.items() if any(w in t for w in present)} | imported_live
    changed = True
    while changed:
        changed = False
        for name, t in texts.items():
            if name not in live and any(other in t for other in live if other != TOP):
                live.add(name)
                changed = True
    memo["heap_live"] = live
    return live


TOP = "<module>"  # the module's own code, in _live_defs


def may_reach_sink(parsed, text: str | None = None) -> bool:
    """May a run of this file reach a copy or a send (:func:`_live_defs`: its text, or a name it
    imports from a file of the program whose text names one)?"""
    return bool(_live_defs(parsed, text))


def _imported_live(project, qual: str, scope: str = "") -> bool:
    """Is ``qual`` a module of the program, or a name of one, whose text names a copy or a send?
    For a module in the run's scope (the file's folder and below, where a run follows calls),
    also one that imports such a module of its folder a few steps on (S2SModel -> ProdDecoder
    -> the beam that copies); a run does not follow calls elsewhere, so there its own text decides.
    Once per name and scope (the files of one folder import much the same names)."""
    memo = getattr(project, "memo", None)
    if memo is None:
        return _find_imported_live(project, qual, scope)
    key = ("imported-live", qual, scope)
    found = memo.get(key)
    if found is None:
        found = memo[key] = _find_imported_live(project, qual, scope)
    return found


def _find_imported_live(project, qual: str, scope: str) -> bool:
    for module in (qual, qual.rpartition(".")[0]):
        if module:
            path = project.located(module) if scope else None
            in_scope = path is not None and os.path.abspath(path).startswith(scope)
            found = project.reaches(module, _SINK_WORDS) if in_scope else project.mentions(module, _SINK_WORDS)
            if found is not None:
                return found
    return False
