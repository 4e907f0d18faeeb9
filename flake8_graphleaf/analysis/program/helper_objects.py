"""Helper state objects: objects of the program's non-module classes that a module holds
(``self.action_dist = make_proba_distribution(...)``, ``self.state = DecoderState()``).
``copy.deepcopy(model)`` copies them with the module, so a graph tensor that one of their methods
keeps on the object (``self.distribution = Categorical(logits=action_logits)``) breaks the copy
just as a store on the module does.

The module's runner (:class:`.scopes.ClassRunner`) follows ``self.<helper>.<method>(...)`` calls
made with graph tensors: it runs that method of the helper's class (found in this file or another
file of the program, never imported) with the values passed, and reports each store of a graph
tensor on the helper object at the call, in the module's file.
"""

from __future__ import annotations

import ast

from .copysafe_state import OWN_COPY
from .modules import ClassInfo, collect_classes
from .project_view import resolve_from
from .stmtwalk import walk


def file_classes(parsed) -> tuple[dict[str, ClassInfo], set[str]]:
    """(classes, names of the module classes) of a parsed file of the program, collected once
    (kept in the file's memo)."""
    memo = parsed.memo
    if "classes" not in memo:
        classes = collect_classes(parsed.tree, parsed.imports)
        memo["classes"] = (classes, {n for n, c in classes.items() if c.facts.is_module})
    return memo["classes"]


def program_class(imports, qualname: str):
    """(parsed file, the class's ClassInfo, the file's module classes) of a class of the program
    (this file or another, never imported), or None."""
    module, _, name = qualname.rpartition(".")
    current = getattr(imports, "current", None)
    if current is not None and module == current.name and name in current.defs:
        parsed = current
    else:
        found = resolve_from(imports, qualname)  # a module beside the importing file first
        parsed = found.module if found is not None else None
    if parsed is None:
        return None
    classes, module_classes = file_classes(parsed)
    info = classes.get(name)
    return (parsed, info, module_classes) if info is not None else None


def helper_class(imports, qualname: str, module: bool = False) -> tuple[ClassInfo, object, set[str]] | None:
    """(class info, its file's ImportMap, its file's module classes) of a non-module class of
    the program (``module``: of a module class, a submodule whose other methods a forward
    calls: ``self.weight_sampler.sample()``), or None when it cannot be found, is not of that
    kind or decides its own copies."""
    found = program_class(imports, qualname)
    if found is None:
        return None
    parsed, info, module_classes = found
    if info.facts.is_module != module or copies_itself(info):
        return None
    return info, parsed.imports, module_classes


COPY_PROTOCOL = ("__getstate__", *OWN_COPY)


def copies_itself(info: ClassInfo) -> bool:
    """The class (or a base of its file) decides what a copy holds: it is not judged here
    (gpytorch's prediction strategy returns None from ``__deepcopy__``)."""
    return any(name in info.facts.methods for name in COPY_PROTOCOL) or binds_own_copy(info)


def binds_own_copy(info: ClassInfo) -> bool:
    """Does the constructor (or a method of the object it calls) put a copy method on the object
    itself (``self.__deepcopy__ = __deepcopy__.__get__(self, cls)``, fourierflow's weight-norm fix)? ``copy.deepcopy`` looks
    ``__deepcopy__`` up on the object, so the instance's own one decides what a copy holds."""
    found = info.facts.binds_own_copy
    if found is None:
        found = False
        methods = info.facts.methods
        todo, seen = ["__init__"], set()  # the constructor and the methods it calls on self
        while todo and not found:
            method = methods.get(todo.pop())
            if method is None or method.name in seen or not method.args.args:
                continue
            seen.add(method.name)
            me = method.args.args[0].arg
            for n in walk(method):
                if isinstance(n, ast.Assign) and any(
                        isinstance(t, ast.Attribute) and t.attr in OWN_COPY and isinstance(t.value, ast.Name)
                        and t.value.id == me for t in n.targets):
                    found = True
                elif (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name)
                      and n.func.value.id == me):
                    todo.append(n.func.attr)
        info.facts.binds_own_copy = found
    return found


def returns_self(func: ast.FunctionDef) -> bool:
    """``return self``: the call gives the helper object back (its state is what matters)."""
    me = func.args.args[0].arg if func.args.args else None
    return any(isinstance(n, ast.Return) and isinstance(n.value, ast.Name) and n.value.id == me
               for n in walk(func))


def reads_runtime_state(info: ClassInfo, func: ast.FunctionDef) -> bool:
    """Does ``func`` (or a method of the object it calls) read an attribute that a method other
    than ``__init__`` assigns: state a fresh run of the method cannot know?"""
    methods = info.facts.methods
    changed: set[str] = set()
    for name, m in methods.items():
        if name == "__init__" or not m.args.args:
            continue
        me = m.args.args[0].arg
        for n in walk(m):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, (ast.AugAssign, ast.AnnAssign)) else []
            for t in targets:
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == me:
                    changed.add(t.attr)
    todo, seen, read = [func], set(), set()
    while todo:
        m = todo.pop()
        if id(m) in seen or not m.args.args:
            continue
        seen.add(id(m))
        me = m.args.args[0].arg
        for n in walk(m):
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == me:
                read.add(n.attr)
                if n.attr in methods:
                    todo.append(methods[n.attr])
    return bool(read & changed)


def settle_given(imports, info: ClassInfo, depth: int = 0) -> None:
    """Complete ``info.facts.injected`` with what its bases in other files were given
    (``self.scorers`` filled in a base's ``__init__``) and with the wrappers this class built
    around those (``self.search = Search(scorers=self.scorers.copy())``): see given_models.
    Done once per class."""
    f = info.facts
    if f.given_settled:
        return
    f.given_settled = True
    if depth > 8:
        return
    bases = [(imports, b) for b in info.base_infos]
    for qual in f.bases:
        found = program_class(imports, qual)
        if found is not None and found[1] is not info:
            bases.append((found[0].imports, found[1]))
    for base_imports, base in bases:
        settle_given(base_imports, base, depth + 1)
        f.injected |= base.facts.injected
        f.given_models |= base.facts.given_models
    for attr, sources in f.wraps.items():
        if sources & f.given_models:
            f.given_models.add(attr)
            f.injected.add(attr)


def inherited_forward(imports, info: ClassInfo):
    """The ``forward`` a module class without one of its own inherits from a base of the
    program in another file (``Representation.forward`` calling ``self._plain_forward``, which
    the subclass defines), or None: torch's own, or none found."""
    found = inherited_method(imports, info, "forward")
    return found[0] if found is not None else None


def inherited_method(imports, info: ClassInfo, name: str, depth: int = 0):
    """(function, its file's ImportMap) of the method ``name`` that ``info``'s class inherits
    from a base of the program in another file (``self.compute_features(...)`` defined by the
    base class), or None: not the program's, or none found."""
    if depth > 4:
        return None
    for qual in info.facts.bases:  # ancestors in other files, through this file's bases too
        found = program_class(imports, qual)
        if found is None or found[1] is info:
            continue
        parsed, base, _ = found
        func = base.facts.methods.get(name)
        if func is not None:
            return func, parsed.imports
        deeper = inherited_method(parsed.imports, base, name, depth + 1)
        if deeper is not None:
            return deeper
    return None


def overrides(imports, info: ClassInfo, name: str, limit: int = 30) -> list[tuple[ClassInfo, object, set[str]]]:
    """The subclasses, in other files of the program, of this file's class ``info`` that define
    the method ``name`` (which ``info`` leaves abstract): [(class info, its file's ImportMap, its
    file's module classes)]. ``self.weight()`` in a base class's ``forward`` runs one of them, on
    an object of that subclass. Empty when the class's name is in more than ``limit`` files (the
    cost stays bounded) or the program has no index."""
    current = getattr(imports, "current", None)
    project = getattr(imports, "project", None)
    index = getattr(project, "index", None)
    module = getattr(imports, "module", None)
    if current is None or index is None or not module or not hasattr(project, "parsed_path"):
        return []
    memo = current.memo.setdefault("overrides", {})
    key = (info.node.name, name)
    if key in memo:
        return memo[key]
    memo[key] = []
    qual = f"{module}.{info.node.name}"
    finder = getattr(index, "subclassing", None)
    paths = [p for p in (finder(info.node.name) if finder else []) if p != getattr(current, "path", None)]
    out = []
    if len(paths) <= limit:
        for path in paths:
            parsed = project.parsed_path(path)
            if parsed is None or parsed is current:
                continue
            classes, module_classes = file_classes(parsed)
            for sub in classes.values():
                if qual in sub.facts.bases and name in sub.facts.methods and name not in _own_copy_names(sub):
                    out.append((sub, parsed.imports, module_classes))
    memo[key] = out
    return out


def _own_copy_names(info: ClassInfo) -> set[str]:
    return set(COPY_PROTOCOL) if copies_itself(info) else set()
