"""``verify --model`` on a model built from several files of a project: every file that a class of
the built model comes from (its modules, their bases, hook holders and functions, helper objects
held on a module) is fixed, not only the file that defines the model callable, and the fixed
project is imported from a mirror of it, so that the fixed files import each other.

The project is the folder of the target's top package (or, for a file outside any package, the
file's folder); files elsewhere (torch, site-packages) are never touched.  The mirror holds every
``.py`` file of that folder (virtual environments, hidden and cache folders left out); while the
fixed model is built and run the original modules of the project are out of ``sys.modules`` and
come back afterwards.

Imports torch only inside the functions (through the model it is given)."""

from __future__ import annotations

import importlib
import inspect
import os
import shutil
import sys
from dataclasses import dataclass, field
from types import ModuleType

from ..targets import package_of

_SKIP_DIRS = {"__pycache__", "node_modules", "site-packages", "build", "dist"}


@dataclass
class ProjectFix:
    root: str  # the project folder (mirrored)
    path_entry: str  # the folder to put on sys.path (root's parent for a package)
    files: list[str]  # the files fixed (absolute), the target's first
    mirror: str = ""
    originals: dict[str, str] = field(default_factory=dict)  # text before the fix per absolute path
    sources: dict[str, str] = field(default_factory=dict)  # fixed text per absolute original path
    results: dict[str, object] = field(default_factory=dict)  # FixResult per absolute original path
    saved: dict[str, ModuleType] = field(default_factory=dict)
    path_added: bool = False


def project_of(module: ModuleType) -> tuple[str, str] | None:
    """(project folder, sys.path entry) of the target's module, or None when it has no file."""
    file = getattr(module, "__file__", None)
    if not file:
        return None
    full = os.path.realpath(file)
    pkg = package_of(full)
    if pkg is not None:
        dotted, entry = pkg
        return os.path.join(entry, dotted.split(".")[0]), entry
    folder = os.path.dirname(full)
    return folder, folder


def _inside(path: str | None, root: str) -> bool:
    if not path:
        return False
    full = os.path.realpath(path)
    return full == root or full.startswith(root.rstrip(os.sep) + os.sep)


def _source_file(obj) -> str | None:
    try:
        return inspect.getsourcefile(obj)
    except (TypeError, OSError):
        return None


def model_files(model, root: str) -> list[str]:
    """The project files the built model's classes come from (each class's own file and its
    bases' files), hook functions and holders, and the classes of plain objects held on a module."""
    import torch

    types: list[type] = []
    funcs: list = []

    def add(obj) -> None:
        if inspect.isfunction(obj) or inspect.ismethod(obj):
            funcs.append(obj)
            if inspect.ismethod(obj):
                types.extend(type(obj.__self__).__mro__)
        elif not isinstance(obj, (torch.Tensor, int, float, str, bool, bytes, type(None), list, tuple, dict, set)):
            types.extend(type(obj).__mro__)

    for m in model.modules():
        types.extend(type(m).__mro__)
        for name in ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks"):
            for hook in (getattr(m, name, None) or {}).values():
                add(hook)
        for value in vars(m).values():
            if not isinstance(value, torch.nn.Module) and hasattr(value, "__dict__") and not inspect.isclass(value):
                add(value)
    out: list[str] = []
    for obj in types + funcs:
        path = _source_file(obj)
        if _inside(path, root) and not _inside(path, _OURS):
            full = os.path.realpath(path)
            if full not in out:
                out.append(full)
    return out


# This package itself is never part of the project under test (a target inside its checkout).
_OURS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))


def _python_files(root: str) -> list[str]:
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIP_DIRS
                         and os.path.realpath(os.path.join(folder, d)) != _OURS
                         and not os.path.isfile(os.path.join(folder, d, "pyvenv.cfg")))
        found += [os.path.join(folder, f) for f in sorted(files) if f.endswith(".py")]
    return found


def fix_project(module: ModuleType, model, unsafe: bool, fixer, workdir: str) -> ProjectFix | None:
    """Fix every project file the model comes from and write the fixed project into a mirror under
    ``workdir``.  None when the model comes from the target's file alone (the one-file path does)."""
    where = project_of(module)
    if where is None:
        return None
    root, entry = (os.path.realpath(p) for p in where)
    target = os.path.realpath(module.__file__)
    files = [f for f in model_files(model, root) if f != target]
    if not files:
        return None
    files.insert(0, target)
    from ...fix.readers import project_index

    every = _python_files(root)
    index = project_index(every)
    pf = ProjectFix(root=root, path_entry=entry, files=files)
    for path in files:
        with open(path, encoding="utf-8") as fh:
            source = fh.read()
        pf.originals[path] = source
        res = fixer(source, path, unsafe=unsafe, project=index, options=_options(path))
        pf.results[path] = res
        pf.sources[path] = res.source
    _fix_in_other_files(pf, every)
    pf.mirror = os.path.join(workdir, "project")
    if os.path.isdir(pf.mirror):
        shutil.rmtree(pf.mirror)
    top = os.path.join(pf.mirror, os.path.relpath(root, entry)) if root != entry else pf.mirror
    for path in every:
        dest = os.path.join(top, os.path.relpath(path, root))
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        if path in pf.sources:
            with open(dest, "w", encoding="utf-8") as fh:
                fh.write(pf.sources[path])
        else:
            shutil.copyfile(path, dest)
    return pf


def _fix_in_other_files(pf: ProjectFix, every: list[str]) -> None:
    """A helper object's class in another file of the project gets the copy-safe state there (as
    ``graphleaf fix`` does it); the findings it caused move from left to applied."""
    from ...fix.foreign import fix_classes, requests, settle_moved

    wanted = requests([f for p in pf.files for f, _ in pf.results[p].skipped])
    done: dict[tuple[str, str], str] = {}
    for path, classes in wanted.items():
        if path not in every:
            continue
        if path not in pf.sources:
            with open(path, encoding="utf-8") as fh:
                pf.originals[path] = pf.sources[path] = fh.read()
        new, made = fix_classes(pf.sources[path], path, classes, _options(path))
        if made:
            pf.sources[path] = new
            if path not in pf.files:
                pf.files.append(path)
            done.update({(path, cls): why for cls, why in made.items()})
    for path in list(pf.files):
        res = pf.results.get(path)
        if res is None:
            from ...fix.fixer import FixResult

            pf.results[path] = FixResult(pf.sources[path])
            continue
        res.skipped[:] = settle_moved(res.skipped, res.applied, done)


def _options(path: str):
    """The analysis options ``graphleaf fix --confidence low`` uses for ``path``: its module name and
    the whole-program view, so that a class judged by its use in other files is judged the same;
    every level, as verify's runs before and after prove or refute each fix."""
    from ...analysis import Options
    from ...project.resolver import shared_resolver

    return Options(confidence="low", **shared_resolver().options_for(path))  # the run is the proof


def changed(pf: ProjectFix) -> bool:
    return any(pf.sources[p] != pf.originals[p] for p in pf.files)


def import_fixed(pf: ProjectFix, module: ModuleType) -> ModuleType:
    """Import the target's module from the mirror, with the project's other modules from there too.
    The original modules of the project leave ``sys.modules`` until :func:`restore`."""
    for name, mod in list(sys.modules.items()):
        path = getattr(mod, "__file__", None)
        if _inside(path, pf.root) and not _inside(path, _OURS):
            pf.saved[name] = sys.modules.pop(name)
    entry = pf.mirror
    sys.path.insert(0, entry)
    pf.path_added = True
    rel = os.path.relpath(os.path.realpath(module.__file__), pf.path_entry)
    name = module.__name__
    if name.startswith("_graphleaf_target_"):  # a file outside any package, loaded under its own name
        from ..targets import exec_file

        return exec_file(os.path.join(entry, rel), name.replace("_graphleaf_target_", "_graphleaf_fixed_", 1))
    importlib.invalidate_caches()
    return importlib.import_module(name)


def restore(pf: ProjectFix) -> None:
    for name, mod in list(sys.modules.items()):
        if _inside(getattr(mod, "__file__", None), pf.mirror):
            sys.modules.pop(name, None)
    sys.modules.update(pf.saved)
    pf.saved.clear()
    if pf.path_added:
        try:
            sys.path.remove(pf.mirror)
        except ValueError:
            pass
        pf.path_added = False
