"""reset-elsewhere: a store on an attribute that the class (or its owner in the file) clears
after running the model takes a step on trust; the store is otherwise reported by its own rule
(GLF001 / GLF002 / GLF003). See :func:`check`."""

from __future__ import annotations

import ast

from ..confidence import trust
from ..evaluator.flow import resets_of
from ..findings import Finding
from ..program.stmtwalk import walk

RESETTABLE = ("GLF001", "GLF002", "GLF003")


def check(findings: list[Finding], classes: dict) -> None:
    """A store on an attribute that another method of the class clears after using it: the method
    runs the model (``self.net(x)``, ``self(x)``) and then resets the attribute (``self.hidden.clear()``,
    ``self.cache = None``, or a call of a method that does: ``self.__clear_masks__()``). Whether the
    tensor is still there when a copy comes then depends on which of the class's methods the program
    calls, which the class's own run does not show (a wrapper that clears its hook's dict after
    reading it, an explainer that clears its masks after the masked forward). A reset alone (a
    ``reset()`` that the next sequence starts with) is not one. The copy graph's run, which follows
    the program's order, proves the store where it sees the copy."""
    cleared_after: dict[str, dict[str, str]] = {}
    after_run: set[str] | None = None
    for f in findings:
        if f.code not in RESETTABLE or not f.class_name or f.class_name not in classes or not f.attribute:
            continue
        if after_run is None:
            after_run = _called_after_running(classes)
        if f.class_name not in cleared_after:
            cleared_after[f.class_name] = _cleared_after_use(classes[f.class_name].facts, after_run)
        attr = f.attribute.split("[", 1)[0].split(".")[-1] if f.attribute.startswith("self.") else (
            f.attribute.split("[", 1)[0].split(".")[0])
        method = cleared_after[f.class_name].get(attr)
        if method is not None and method != f.data.get("method"):
            trust(f, "reset-elsewhere", f"'{attr}' is taken to be kept until a copy, although "
                                                   f"{f.class_name}.{method}() clears it, and the program clears it so after running the model")


def _called_after_running(classes: dict) -> set[str]:
    """The names of the methods that some method of a class of this file calls (on any object:
    ``self._clear_conv_cache()``, ``module.reset_cache()``) in a top-level statement after one
    that runs a model: a cache the file's own classes clear after each use."""
    out: set[str] = set()
    for info in classes.values():
        for name, method in info.facts.methods.items():
            if not method.args.args:
                continue
            me, ran = method.args.args[0].arg, False
            for stmt in method.body:
                if ran:
                    out.update(node.func.attr for node in walk(stmt)
                               if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute))
                elif _runs_model(stmt, me, info.facts):
                    ran = True
    return out


def _cleared_after_use(facts, after_run: set[str] = frozenset()) -> dict[str, str]:
    """attribute -> a method of the class that calls a submodule or the module itself and, in a
    later top-level statement, resets the attribute (itself, or through a method that does); or a
    method that resets it and that a method of the file calls after running a model."""
    methods = facts.methods
    resets = {name: resets_of(m) for name, m in methods.items() if name != "__init__"}
    out: dict[str, str] = {}
    for name, cleared in resets.items():
        if name in after_run:
            for attr in cleared:
                out.setdefault(attr, name)
    for name, method in methods.items():
        if name in ("__init__", "__setstate__", "__getstate__", "__deepcopy__") or not method.args.args:
            continue
        me = method.args.args[0].arg
        ran = False
        for stmt in method.body:
            if ran:
                cleared = set(resets_of(_as_method(stmt, method)))
                for node in walk(stmt):
                    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                            and isinstance(node.func.value, ast.Name) and node.func.value.id == me):
                        cleared |= resets.get(node.func.attr, set())
                for attr in cleared:
                    out.setdefault(attr, name)
            if not ran and _runs_model(stmt, me, facts):
                ran = True
    return out


def _as_method(stmt: ast.stmt, method: ast.FunctionDef) -> ast.FunctionDef:
    """One statement of ``method`` as a method of its own (for :func:`resets_of`)."""
    return ast.FunctionDef(name=method.name, args=method.args, body=[stmt], decorator_list=[], returns=None,
                           type_comment=None, lineno=stmt.lineno, col_offset=0)


def _runs_model(stmt: ast.stmt, me: str, facts) -> bool:
    """Does the statement call a submodule (``self.net(x)``) or the module itself (``self(x)``,
    ``self.forward(x)``)?"""
    for node in walk(stmt):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Name) and f.id == me:
            return True
        if (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == me
                and (f.attr in facts.submodules or f.attr == "forward")):
            return True
    return False
