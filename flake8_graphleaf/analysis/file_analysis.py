"""Runs every rule over one file's ``ast`` tree.  Knows nothing of flake8, the CLI, fixes or torch.

Cost model: flake8 has already parsed the file; a cheap text gate drops files
that cannot have a finding, and only module classes and functions that mention
``deepcopy`` are walked.  No second parser runs.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from .evaluator.effects import function_effect
from .evaluator.forward_results import forward_items
from .program.copysafe_state import drop_covered
from .findings import Finding
from . import witness
from .program.grad_mode import eval_call_with_grad
from .program.imports import ImportMap
from .program.project_view import ParsedModule, ProjectView
from .program.modules import collect_classes
from .program.never_built import unbound_in_constructor
from . import confidence
from .rules import cleared_after_use, construction, copy_graph, deepcopy_calls, forward_stores, function_roots, hooks, legacy_norm, process_boundary, pruning
from .evaluator.scopes import ClassRunner
from .program.textscan import has, has_any

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
    if source is not None and not has_any(source, GATE_WORDS) and not _copied_elsewhere(options):
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
        if unbound_in_constructor(tree, info.node) is not None:
            continue  # every construction raises NameError: no object of the class ever runs
        runner = runners[info.node.name] = ClassRunner(info, imports, module_classes, calls)
        findings += forward_stores.check(runner)
        findings += construction.check(runner)
    findings = forward_stores.settle_arguments(findings, runners, calls)
    if source is None or has(source, "setattr"):
        findings += construction.check_functions(tree, imports, source)
    if any(isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) for s in tree.body):
        findings += function_roots.check(tree, imports, module_classes, source)
    if source is None or has_any(source, ("register_forward", "register_module_forward")):
        findings += hooks.check(tree, imports, classes, module_classes, source)
    if any(info.local_bases or info.facts.bases for info in classes.values()):
        findings += hooks.check_inherited(tree, imports, classes, module_classes, source)
    if source is None or has_any(source, ("weight_norm", "spectral_norm", "WeightNorm")):
        findings += legacy_norm.check(tree, imports, classes, source)
    if source is None or has(source, "utils.prune") or any(v.startswith(pruning.PREFIX[:-1]) for v in imports.names.values()):
        findings += pruning.check(tree, imports)
    if source is None or has_any(source, ("__getstate__", "__deepcopy__", "__reduce")):
        findings = drop_covered(findings, classes)
    cleared_after_use.check(findings, classes)
    for f in findings:
        confidence.note_assumed(f)  # before the copy sites and the copy graph weigh the stores
    if source is None or has_any(source, deepcopy_calls.WORDS):
        findings += deepcopy_calls.check(tree, imports, classes, module_classes, findings, source)
    if source is None or has_any(source, process_boundary.WORDS):
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
    _quote_steps(result, source, options)
    return FileAnalysis(tree, source, result, classes, imports, module)


def _quote_steps(findings: list[Finding], source: str | None, options: Options) -> None:
    """Each witness step as the user wrote it (witness.quote): the checked text, and the
    project's (or the disk's) text of another file a step is in."""
    if not any(f.witness for f in findings):
        return
    project = options.project
    texts: dict = {}

    def text_of(path: str) -> str | None:
        if path not in texts:
            found = project.text_of(path) if project is not None else None
            if found is None:
                try:
                    with open(path, encoding="utf-8", errors="replace") as fh:
                        found = fh.read()
                except OSError:
                    found = None
            texts[path] = found
        return texts[path]

    here = options.path
    text = source if source is not None else text_of(here) if here else None
    for f in findings:
        if f.witness:
            f.witness = witness.quote(f.witness, here, text, text_of)


def _defines(info, line: int) -> bool:
    """Is ``line`` in the body of the class ``info`` (None: a class of no file here)?"""
    return info is not None and info.node.lineno <= line <= (info.node.end_lineno or info.node.lineno)
