"""Runs every rule over one file's ``ast`` tree.  Knows nothing of flake8, the CLI, fixes or torch.

Cost model: flake8 has already parsed the file; a cheap text gate drops files
that cannot have a finding, and only module classes and functions that mention
``deepcopy`` are walked.  No second parser runs.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from .evaluator.effects import function_effect
from .evaluator.flow import resets_of
from .evaluator.forward_results import forward_items
from .program.copysafe_state import drop_covered
from .findings import Finding
from .program.grad_mode import eval_call_with_grad
from .program.imports import ImportMap
from .program.project_view import ParsedModule, ProjectView
from .program.modules import collect_classes
from . import confidence
from .rules import construction, copy_graph, deepcopy_calls, forward_stores, function_roots, hooks, legacy_norm, process_boundary, pruning
from .evaluator.scopes import ClassRunner

# A file that mentions none of these cannot have a finding.
# "def forward": a class whose module base comes from another file of the project
# (``from .base import BaseNet``) needs no torch word of its own.
GATE_WORDS = ("torch", "nn.", "Module", "deepcopy", "hook", "weight_norm", "spectral_norm", "def forward")


@dataclass(frozen=True)
class Options:
    module_bases: frozenset[str] = field(default_factory=frozenset)
    # The file's dotted module name (relative imports resolve with it) and whether it is a
    # package's __init__; the whole-program view the file is analysed in (None: on its own).
    module: str | None = None
    is_package: bool = False
    project: ProjectView | None = field(default=None, compare=False)
    # The lowest confidence level reported (analysis/confidence.py): "high" (the default: only
    # what is proven), "medium" or "low".
    confidence: str = confidence.DEFAULT
    # The file's path (a top-level module it imports is looked up next to it first, as Python does).
    path: str | None = field(default=None, compare=False)


@dataclass
class FileAnalysis:
    """One file's findings, and the facts the rules worked from (the fixer builds its edits on them)."""

    tree: ast.AST
    source: str | None
    findings: list[Finding]
    classes: dict = field(default_factory=dict)
    imports: ImportMap | None = None
    module: ParsedModule | None = None  # imports.current, held here (the map holds it weakly)


def analyze_source(source: str, filename: str = "<unknown>", options: Options | None = None) -> list[Finding]:
    """Parse ``source`` and return its findings; raises SyntaxError (or ValueError for a NUL
    byte) if it does not parse."""
    return analyze_file(ast.parse(source, filename=filename), source, options).findings


def analyze_tree(tree: ast.AST, source: str | None = None, options: Options | None = None) -> list[Finding]:
    """The findings of an already parsed file (flake8 hands us its tree)."""
    return analyze_file(tree, source, options).findings


def findings_of(parsed: ParsedModule, project: ProjectView | None, module_bases: frozenset[str] = frozenset()) -> FileAnalysis:
    """The analysis of another file of the program (a class a copy site here copies is defined
    there), once per file and process."""
    memo = parsed.memo
    if "file_analysis" not in memo:
        memo["file_analysis"] = FileAnalysis(parsed.tree, None, [])  # while it runs (a cycle of copies)
        options = Options(module_bases=module_bases, module=parsed.name, is_package=parsed.path.endswith("__init__.py"),
                          project=project, path=parsed.path, confidence="low")  # a copy here takes its cause's level
        memo["file_analysis"] = analyze_file(parsed.tree, None, options)
    return memo["file_analysis"]


def _copied_elsewhere(options: Options) -> bool:
    """Does another file of the project import this one and copy or send something (its run
    may reach this file's objects: a plain class with no torch word of its own)?"""
    project = options.project
    return project is not None and bool(options.module) and bool(
        project.users_of(options.module, copy_graph.WORDS, options.path or ""))


def analyze_file(tree: ast.AST, source: str | None = None, options: Options | None = None) -> FileAnalysis:
    options = options or Options()
    if source is not None and not any(w in source for w in GATE_WORDS) and not _copied_elsewhere(options):
        return FileAnalysis(tree, source, [])
    imports = ImportMap(tree, options.module, options.is_package, options.project)
    module = ParsedModule.of(options.module or "__main__", options.path or "<current>", tree, imports)
    imports.current = module  # held by ``module`` below while the analysis runs, then by the FileAnalysis
    imports.module_bases = options.module_bases
    imports.effect_of = function_effect
    imports.forward_items_of = forward_items
    imports.findings_of = findings_of
    # the program's evidence that an eval-mode forward runs with grad on (rules/forward_stores)
    imports.eval_with_grad = eval_call_with_grad(tree, imports, source)
    classes = collect_classes(tree, imports, options.module_bases)
    findings: list[Finding] = []
    module_classes = {n for n, c in classes.items() if c.facts.is_module}
    calls: dict = {}
    runners: dict[str, ClassRunner] = {}
    for info in classes.values():
        if not info.facts.is_module:
            continue
        runner = runners[info.node.name] = ClassRunner(info, imports, module_classes, calls)
        findings += forward_stores.check(runner)
        findings += construction.check(runner)
    findings = forward_stores.settle_arguments(findings, runners, calls)
    if source is None or "setattr" in source:
        findings += construction.check_functions(tree, imports, source)
    if any(isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) for s in tree.body):
        findings += function_roots.check(tree, imports, module_classes, source)
    if source is None or "register_forward" in source or "register_module_forward" in source:
        findings += hooks.check(tree, imports, classes, module_classes, source)
    if any(info.local_bases or info.facts.bases for info in classes.values()):
        findings += hooks.check_inherited(tree, imports, classes, module_classes, source)
    if source is None or "weight_norm" in source or "spectral_norm" in source or "WeightNorm" in source:
        findings += legacy_norm.check(tree, imports, classes, source)
    if source is None or "utils.prune" in source or any(v.startswith(pruning.PREFIX[:-1]) for v in imports.names.values()):
        findings += pruning.check(tree, imports)
    if source is None or any(m in source for m in ("__getstate__", "__deepcopy__", "__reduce")):
        findings = drop_covered(findings, classes)
    reset_elsewhere(findings, classes)
    for f in findings:
        confidence.note_assumed(f)  # before the copy sites and the copy graph weigh the stores
    if source is None or any(w in source for w in deepcopy_calls.WORDS):
        findings += deepcopy_calls.check(tree, imports, classes, module_classes, findings, source)
    if source is None or any(w in source for w in process_boundary.WORDS):
        findings += process_boundary.check(tree, imports, module_classes, source)
    # also without a copy of its own: another file may copy its objects
    # the copy graph's runs are shared between the files of one process, unless this file's classes
    # were collected with extra module bases that another file's run of it would not know
    for f in findings:
        confidence.note_assumed(f)
    findings = copy_graph.settle(tree, imports, classes, module_classes, findings, source,
                                 reuse=not options.module_bases)
    unique: dict[tuple, Finding] = {}
    for f in findings:
        confidence.note_assumed(f)
        # one call of a helper's method may keep tensors on several of its attributes: one each
        helper = f.attribute if f.data.get("kind") == "helper" else None
        key = (f.line, f.col, f.code, helper)
        seen = unique.setdefault(key, f)
        if seen is f:
            continue
        if seen.class_name != f.class_name and _defines(classes.get(f.class_name), f.line):
            # one store reported for a subclass and for the class whose method makes it: the
            # latter's (its fix covers the subclasses too), with the surer proof of the two (a
            # subclass's forward that calls the method shows what a public root takes on trust)
            if confidence.better(seen, f):
                f.trust, f.witness = list(seen.trust), seen.witness
                f.data.pop("public_root", None)
            unique[key] = f
        elif seen.class_name != f.class_name and _defines(classes.get(seen.class_name), seen.line):
            if confidence.better(f, seen):
                seen.trust, seen.witness = list(f.trust), f.witness
                seen.data.pop("public_root", None)
        elif confidence.better(f, seen):
            unique[key] = f  # the same store proven by another path (the copy graph's run)
    result = sorted((f for f in map(confidence.settle, unique.values())
                     if confidence.selected(f.confidence, options.confidence)), key=lambda f: f.sort_key)
    return FileAnalysis(tree, source, result, classes, imports, module)


RESETTABLE = ("GLF001", "GLF002", "GLF003")


def reset_elsewhere(findings: list[Finding], classes: dict) -> None:
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
            confidence.trust(f, "reset-elsewhere", f"'{attr}' is taken to be kept until a copy, although "
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
                    out.update(node.func.attr for node in ast.walk(stmt)
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
                for node in ast.walk(stmt):
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
    for node in ast.walk(stmt):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Name) and f.id == me:
            return True
        if (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == me
                and (f.attr in facts.submodules or f.attr == "forward")):
            return True
    return False


def _defines(info, line: int) -> bool:
    """Is ``line`` in the body of the class ``info`` (None: a class of no file here)?"""
    return info is not None and info.node.lineno <= line <= (info.node.end_lineno or info.node.lineno)
