"""What is left after every file is written: a copy or a send in one file fails because of a store in
another (``copy.deepcopy(model)`` in main.py, ``self.cache = out`` in model.py). Each file is fixed
with the others as they were on disk, so its copy sites are still reported when the store's fix in
the other file removes them; and a send fixed in its file is judged there without the other files'
runs that found it. Once all are written, the files that were fixed or left findings are checked
again, as ``graphleaf check`` would: a finding that is gone is not "left", and a fixed one that is
still there is left, "the fix did not remove the finding"."""

from __future__ import annotations

from ..project.resolver import forget_shared
from .attach import analyze_with_fixes
from .fixer import NOT_REMOVED
from .readers import project_index
from .writer import SourceError, read_source


def _key(f) -> tuple:
    return f.code, f.line, f.col


def recheck(reports, paths: list[str], options_for) -> None:
    """Update each report's ``left`` (and ``applied``) from a fresh analysis of its file on disk.
    ``reports``: the fix reports (``path``, ``applied``, ``left``, ``error``, ``written``);
    ``paths``: every checked file; ``options_for(path)``: the analysis options of a file."""
    todo = [r for r in reports if not r.error and (r.left or r.applied)]
    if not todo or not any(r.written for r in reports):
        return
    forget_shared()  # the files written since the fix began are read again
    project = project_index(list(paths))
    for r in todo:
        try:
            text = read_source(r.path).text
            now = analyze_with_fixes(text, r.path, options_for(r.path), project)
        except (SourceError, SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        found = {_key(f): f for f in now}
        kept = []
        for f, why in r.left:
            g = found.get(_key(f))
            if g is None:
                continue  # removed by a fix made in another file
            if why.startswith("no automatic fix") and g.fix is None:
                why = "no automatic fix" + (f": {g.data['no_fix']}" if g.data.get("no_fix") else "")
                f = g
            kept.append((f, why))
        left = {_key(f) for f, _ in kept}
        still = [f for f in r.applied if r.written and _key(f) in found and _key(f) not in left
                 and found[_key(f)].code == f.code and found[_key(f)].message == f.message]
        if still:
            r.applied = [f for f in r.applied if f not in still]
            kept += [(found[_key(f)], NOT_REMOVED) for f in still]
        r.left = kept
