"""Attaching fixes to findings: each finding that has one gets a :class:`Fix` of text edits.

The builders live in one module per fix family (``stores``, ``copysafe``, ``hooks``, ``buffers``,
``legacy_norm``, ``deepcopy``, ``processes``; ``foreign`` for fixes made in another file); ``context``, ``usage``, ``cst`` and ``tensors`` are what they share.

A *safe* fix never changes what the program computes, nor what any reader of the attribute sees,
including readers in other files of the project and code outside the checked paths
(:mod:`.usage` decides, from the project index):

- the copy-safe fix (:mod:`.copysafe`): a ``__getstate__`` that gives copies detached values; the
  live object is unchanged, so it is safe for every reader;
- a store that becomes a local variable, when the attribute is private and nothing in the project
  reads it (and no dynamic attribute access could);
- ``.detach()`` of the stored value, when the attribute is private and every reader in the project
  only inspects it (``.shape``, ``.item()``, ``.detach()``, ...);
- ``.detach()`` (or ``torch.no_grad()``) of a buffer update that ``forward`` does not read afterwards.

Everything else is *unsafe*: each description says what changes.  A finding with no fix may carry
the reason in ``data["no_fix"]``.
"""

from __future__ import annotations

import ast
import os
import re

from ..analysis import Options, analyze_file
from ..analysis.program.copysafe_state import on_self, stored_name
from ..analysis.findings import SAFE, UNSAFE, Finding, Fix
from ..analysis.program.imports import ImportMap
from ..analysis.program.modules import ClassInfo
from ..analysis.program.textpos import Text
from .buffers import fix_buffer
from .context import Context
from .copysafe import ALL, BUFFERS, copysafe_edit, described
from .cst import NoFix
from .deepcopy import fix_deepcopy
from .hooks import hook_detach
from .legacy_norm import fix_legacy, fix_weight_drop
from .no_grad import fix_no_grad_call
from .processes import fix_process_send
from .shapes import known_shape
from .stores import container_detach, detached_mirror, item_detach, rename_to_local
from .usage import ProjectReads, is_private, usage_of

STORE_RULES = ("GLF001", "GLF002", "GLF003")


def attach_fixes(tree: ast.Module, text: Text, findings: list[Finding], classes: dict[str, ClassInfo],
                 imports: ImportMap, project=None, filename: str = "", withhold=None) -> None:
    """``withhold(finding) -> bool``: findings that get no fix (the fixer's, for fixes that were tried
    and did not remove their finding)."""
    ctx = Context(tree, text, classes, imports)
    ctx.project = ProjectReads(project, filename) if project is not None else None
    copysafe: dict[str, list[tuple[Finding, str, Fix | None]]] = {}
    for f in findings:
        if withhold is not None and withhold(f):
            f.fix = None
            f.data["no_fix"] = "the fix did not remove the finding"
            continue
        try:
            code = f.data.get("code_if_resolved", f.code)
            if f.data.get("kind") == "made":
                # where a kept or sent tensor was made: the store's or the send's fix comes first
                # (the fixer applies this one only where the copy or send still fails then)
                f.fix = fix_no_grad_call(f, ctx) if f.data.get("entry") else _made_detach(f, ctx)
                if f.fix is None:
                    f.data.setdefault("no_fix", "fixed where it is stored or sent")
                continue
            if f.data.get("local"):
                f.data.setdefault("no_fix", "a value the program uses is in it: copy what is needed, detached")
                continue
            if f.data.get("kind") == "helper":
                local = _helper_here(f, ctx)
                if local is not None:  # the helper's class is in this file: it gets the copy-safe state
                    copysafe.setdefault(local[0], []).append((f, local[1], None))
                else:
                    _helper_elsewhere(f, ctx)
                continue
            if code in STORE_RULES:
                choice = _choose_store_fix(f, ctx, code)
                if isinstance(choice, tuple):  # ("copysafe", name, fallback)
                    copysafe.setdefault(_holder(f, ctx), []).append((f, choice[1], choice[2]))
                else:
                    f.fix = choice
                continue
            if code == "GLF004":
                choice = _choose_buffer_fix(f, ctx)
                if isinstance(choice, tuple):
                    copysafe.setdefault(f.class_name, []).append((f, choice[1], choice[2]))
                else:
                    f.fix = choice
                continue
            builder = _BUILDERS.get(code)
            if builder is not None:
                f.fix = builder(f, ctx)
        except NoFix as exc:
            f.fix = None
            f.data["no_fix"] = str(exc)
        except (ValueError, AttributeError, IndexError, KeyError):  # a fix we cannot build is no fix
            f.fix = None
    for class_name, items in copysafe.items():
        names: list[str] = []
        for _, name, _ in items:
            if name not in names:
                names.append(name)
        try:
            how, build = copysafe_edit(ctx, class_name, names, {n: known_shape(ctx, n) for n in names})
        except NoFix as exc:
            for f, _, fallback in items:
                f.fix = fallback
                f.data["no_fix"] = f"copy-safe fix not possible: {exc}"
            continue
        quoted = described(names)
        verb, _, method = how.partition(":")  # "extend:__reduce__": the class's own copy method is extended
        fix = Fix(SAFE, f"{verb} {class_name}.{method or '__getstate__'} so that copies (copy.deepcopy, pickle, torch.save) get "
                        f"detached values of {quoted}; the live object keeps its graph tensors, so nothing the "
                        "program computes changes", build=_built_later(build))
        kept = [f.data["kept_attached"] for f, _, _ in items if f.data.get("kept_attached")]
        if kept:
            fix.description += f" ({kept[0]})"
        for f, _, _ in items:
            f.fix = fix


def _made_detach(f: Finding, ctx: Context) -> Fix | None:
    """``.detach()`` where the tensor was made (``return [encoder(x).detach() for x in items]``):
    unsafe, as every user of the value then gets it without its gradient."""
    node = next((n for n in ast.walk(ctx.tree) if isinstance(n, ast.expr) and getattr(n, "lineno", None) == f.line
                 and n.col_offset == f.col), None)
    if isinstance(node, (ast.ListComp, ast.GeneratorExp)) and isinstance(node.elt, ast.Call):
        target = node.elt
    elif isinstance(node, ast.Call) and not (isinstance(node.func, ast.Attribute) and node.func.attr == "detach"):
        target = node
    else:
        return None
    return Fix(UNSAFE, "detach the tensor where it is made (every user of the value then gets it without its "
                       "gradient)", (ctx.edit(target, ctx.text.segment(target) + ".detach()"),))


def _holder(f: Finding, ctx: Context) -> str | None:
    """The class of this file whose copies the copy-safe fix changes: the storing method's own
    class, or (a store the copy graph followed into an object it knows, such as a hook filling
    ``model.activations[name]``) the class of the object stored into."""
    if f.class_name in ctx.classes and on_self(f, ctx.classes):
        return f.class_name
    holder = f.data.get("holder_class")
    if holder not in ctx.classes:
        return None
    return holder if f.data.get("holder_attr") or _PLAIN_STORE.fullmatch(f.attribute or "") else None


_PLAIN_STORE = re.compile(r"[A-Za-z_]\w*\.[A-Za-z_]\w*(\[\.\.\.\])?")


def _store_statement_outside_value(ctx: Context, detach: Fix) -> set[int]:
    """The nodes of the storing statements a ``.detach()`` fix edits, except the stored value: the
    target ``self.x``, the name in ``register_buffer("x", v)`` / ``setattr(obj, "x", v)`` are the
    store, not readers; a read of ``self.x`` inside the value (a recurrence) is one."""
    out: set[int] = set()
    edited = {(e.line, e.col) for e in detach.edits}
    # the statements whose lines hold an edit (the file's index of them: no walk per fix)
    stmts = {id(s): s for line in sorted({line for line, _ in edited}) for s in ctx.simple_statements_at(line)}
    for stmt in stmts.values():
        values = [v for v in ast.walk(stmt) if isinstance(v, ast.expr) and hasattr(v, "lineno")
                  and (v.lineno, ctx.text.char_col(v.lineno, v.col_offset)) in edited]
        if not values:
            continue
        inside = {id(n) for v in values for n in ast.walk(v)}
        out |= {id(n) for n in ast.walk(stmt) if id(n) not in inside}
    return out


def _choose_store_fix(f: Finding, ctx: Context, code: str):
    """A Fix, None, or ("copysafe", name, fallback Fix | None) for a store finding."""
    holder = _holder(f, ctx)
    info = ctx.classes.get(holder or f.class_name or "")
    # the attribute of the holder the store is reached through (a closure's dict the model holds)
    name = (f.data.get("holder_attr") if holder is not None and holder != f.class_name else None) \
        or stored_name(f, info.node if info is not None else ctx.tree)
    mine = holder is not None
    if code == "GLF003":
        candidates = [hook_detach(f, ctx)]
    elif code == "GLF001":
        # a store the copy graph's run found (a training step's model.last_out = model(x) on the
        # model it is given) takes a local variable as a forward's store does
        candidates = [rename_to_local(f, ctx) if f.data.get("kind") in ("attr", "copy-graph") else None,
                      detached_mirror(f, ctx)]
    else:
        candidates = [rename_to_local(f, ctx), container_detach(f, ctx) or item_detach(f, ctx)]
    rename, detach = (None, candidates[0]) if code == "GLF003" else candidates
    if name is None:
        fallback = detach
        if rename is not None:  # a rename we cannot tie to one attribute name is never proven safe
            fallback = Fix(UNSAFE, rename.description + " (its readers cannot be checked)", rename.edits)
        if mine and code != "GLF003":
            # A name made at run time (setattr(self, f"_last_{k}", v)): copies detach every graph tensor of the state.
            return ("copysafe", ALL, fallback)
        return fallback
    private = is_private(name)
    method = ctx.method(f) if code != "GLF003" else None
    if rename is not None and private:  # a public attribute is never removed: no need to look for readers
        skip = set(map(id, ast.walk(method))) if method is not None else set()
        use = usage_of(ctx, name, skip)
        if use.none:
            return Fix(SAFE, rename.description + "; nothing in the project reads it", rename.edits)
    if detach is not None and private:
        edited = {(e.line, e.col) for e in detach.edits}
        skip = {id(n) for n in ast.walk(ctx.tree) if isinstance(n, ast.Attribute)
                and (n.lineno, ctx.text.char_col(n.lineno, n.col_offset)) in edited}
        use = usage_of(ctx, name, skip)
        if use.unknown is None and use.all_inspection:
            what = ", ".join(use.readers) if use.readers else "no reader"
            return Fix(SAFE, f"store .detach() in '{name}': every reader in the project only inspects it ({what})",
                       detach.edits)
    fallback = None
    why = ("a public attribute may be read outside the checked paths" if not private
           else "readers in the project use its value or its gradient")
    if detach is not None:
        # Never cut a gradient the program uses: a reader in the checked paths that uses the value
        # (a loss summing a stored regularizer, the next step of a recurrence) keeps it attached,
        # whatever the setting; the copy-safe state is the fix then.
        use = usage_of(ctx, name, _store_statement_outside_value(ctx, detach))
        users = [r for r in use.readers if not r.endswith("(inspection)")]
        if users:
            f.data["kept_attached"] = (f"no .detach(): {users[0]} uses '{name}'"
                                       + (f" (and {len(users) - 1} more)" if len(users) > 1 else "")
                                       + ", and its gradient may reach a loss")
            detach = None
    if detach is not None:
        fallback = Fix(UNSAFE, f"{detach.description}; {why}", detach.edits)
    elif rename is not None:
        skip = set(map(id, ast.walk(method))) if method is not None else set()
        readers = usage_of(ctx, name, skip).readers
        if not readers:
            fallback = Fix(UNSAFE, f"{rename.description}; {why}", rename.edits)
        else:  # not even unsafe: the project's own readers would read what is no longer stored
            f.data["no_fix"] = (f"'{name}' is read elsewhere in the project ({', '.join(readers[:3])}): a local "
                                "variable would change what those reads see")
            return ("copysafe", name, None) if mine else None
    if mine:
        return ("copysafe", name, fallback)
    if fallback is None:
        f.data["no_fix"] = f.data.get("kept_attached") or (
            "the store is not on the object whose class is defined here (no __getstate__ to add), "
            "and the value is not certainly one tensor")
    return fallback


_HELD = re.compile(r"[A-Za-z_]\w*\.[A-Za-z_]\w*\.([A-Za-z_]\w*)")


def _held_name(f: Finding) -> str | None:
    """``self.action_dist.distribution`` (a helper object's attribute): ``distribution``."""
    m = _HELD.match(f.attribute or "")
    return m.group(1) if m else None


def _helper_here(f: Finding, ctx: Context) -> tuple[str, str] | None:
    """(class, attribute) when the helper object's class is defined in this file."""
    qual, name = f.data.get("helper_class") or "", _held_name(f)
    module, _, cls = qual.rpartition(".")
    if name is None or cls not in ctx.classes or (module and module != (ctx.imports.module or module)):
        return None
    return cls, name


def _helper_elsewhere(f: Finding, ctx: Context) -> None:
    """A helper class of another file: its file gets the fix (``graphleaf fix`` makes it there when
    that file is among the checked ones, see :mod:`.foreign`); the finding names where."""
    from ..analysis.program.project_view import resolve

    qual, name = f.data.get("helper_class") or "", _held_name(f)
    found = resolve(getattr(ctx.imports, "project", None), qual) if qual else None
    path = getattr(getattr(found, "module", None), "path", None)
    if path and name:
        f.data["helper_path"] = path
        f.data["helper_attr"] = name
        f.data["no_fix"] = (f"the tensor is kept by {qual} (line {f.data['helper_line']}), a class of "
                            f"{os.path.basename(path)}: its fix is made in that file (when it is checked too)")
    else:
        f.data["no_fix"] = (f"the tensor is kept by {qual} (line {f.data['helper_line']}), "
                            "a class the fix of this file does not change")


def _choose_buffer_fix(f: Finding, ctx: Context):
    """GLF004: the buffer's own fix (``.detach()`` of an existing graph tensor, ``torch.no_grad()``
    around a new computation) when it is safe; else the copy-safe state (copies get the buffers
    detached, the live module keeps what it computes), with the buffer's own fix as the fallback."""
    try:
        own = fix_buffer(f, ctx)
    except NoFix as exc:
        own = None
        f.data["no_fix"] = str(exc)
    if own is not None and own.applicability == SAFE:
        return own
    if f.class_name in ctx.classes and on_self(f, ctx.classes):
        return ("copysafe", BUFFERS, own)
    return own


def _built_later(build):
    """The edits of a copy-safe fix, made when a front end first needs them (``fix``, ``--diff``,
    JSON and SARIF output); one that cannot be built after all is no edit, and the fixer skips it."""
    def edits():
        try:
            return (build(),)
        except (NoFix, ValueError, AttributeError, IndexError, KeyError):
            return ()
    return edits


_BUILDERS = {
    "GLF005": fix_weight_drop,
    "GLF101": fix_legacy,
    "GLF102": fix_legacy,
    "GLF201": fix_deepcopy,
    "GLF301": fix_process_send,
}


# The kinds of fix each code's findings can get (``graphleaf rules``; each rule page's "Fix safety"
# says when which applies, and tests/test_cli.py checks that the two agree). Codes not here get none.
FIX_KINDS = {
    "GLF001": ("safe", "unsafe"), "GLF002": ("safe", "unsafe"), "GLF003": ("safe", "unsafe"),
    "GLF004": ("safe", "unsafe"), "GLF101": ("unsafe",), "GLF102": ("unsafe",), "GLF201": ("unsafe",),
    "GLF301": ("safe", "unsafe"),
}


def fix_kinds(code: str) -> tuple[str, ...]:
    return FIX_KINDS.get(code, ())


def analyze_with_fixes(source: str, filename: str = "<unknown>", options: Options | None = None,
                       project=None, withhold=None) -> list[Finding]:
    """:func:`flake8_graphleaf.analysis.analyze_source`, with each finding's fix attached.
    ``project`` is the project index (None: every attribute may be read elsewhere); ``withhold``:
    see :func:`attach_fixes`."""
    view = options.project if options is not None else None
    tree = view.tree_of(filename, source) if view is not None else None  # parsed already as an import
    result = analyze_file(tree if tree is not None else ast.parse(source, filename=filename), source, options)
    if result.findings:
        attach_fixes(result.tree, Text(source), result.findings, result.classes, result.imports, project, filename,
                     withhold)
    return result.findings
