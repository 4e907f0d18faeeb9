"""The copy-safe fix: the class gets (or extends) a ``__getstate__`` that hands ``copy.deepcopy``,
``pickle`` and ``torch.save(model)`` a detached value of the named attributes, while the live object
keeps its graph tensors.  Nothing the program computes changes, so the fix is safe whoever reads the
attribute (a loss summed by the training loop, the next ``forward`` call, code we cannot see).

What a copy gets for each named attribute: a tensor with a ``grad_fn`` is replaced by its
``.detach()`` (same storage, no graph); lists, tuples (named tuples too) and dicts are rebuilt with
their items treated the same way, recursively; anything else is left as it is.  A leaf tensor is
copied as ``copy.deepcopy`` always copies it.

Where the file shows each named attribute's shape (one tensor, a list or a dict of tensors: see
:mod:`.shapes`), the method is small: a ``detached(t)`` of two lines and a line per attribute
(``state["x"] = [detached(t) for t in state["x"]]``).  Otherwise it is the generic walker below.

The generic method, in an ``nn.Module`` subclass or a hook-holder class::

    def __getstate__(self):
        # graphleaf: copies (copy.deepcopy, pickle, torch.save) get detached values of the
        # attributes below; this object keeps its graph tensors.
        base = getattr(super(), "__getstate__", None)  # object has none before Python 3.11
        state = dict((base() if base is not None else self.__dict__) or {})

        def detached(value):
            ...

        for name in ("cache", "loss"):
            if name in state:
                state[name] = detached(state[name])
        return state

``getattr(super(), ...)`` chains to ``nn.Module.__getstate__`` (which drops ``_compiled_call_impl``)
or to any base's, and works on Python 3.10 where ``object`` has no ``__getstate__``.  When a base
class in the same file defines one, the chain is written ``dict(super().__getstate__())``.  A
class that already has a ``__getstate__`` is extended when it is this generated one (its name
list grows; a second run changes nothing) or when it builds a dict from ``self.__dict__`` /
``super().__getstate__()`` and ends with ``return state``; any other ``__getstate__`` gets no fix.
"""

from __future__ import annotations

import ast

from ..analysis.evaluator.copy_protocol import handed_reads, handed_roots
from .cst import Covered, NoFix, diff_edit, find, indent_unit, parse, replace, torch_name

MARK = "# graphleaf: copies (copy.deepcopy, pickle, torch.save) get detached values of the"

_HELPER = '''def detached(value, seen=()):
    if isinstance(value, {torch}.Tensor):
        return value.detach() if value.grad_fn is not None else value
    if id(value) in seen or isinstance(value, ({torch}.nn.Module, type)):
        return value  # a module's own __getstate__ decides its copy
    seen = seen + (id(value),)
    if isinstance(value, dict):
        items = [(key, item, detached(item, seen)) for key, item in value.items()]
        if all(new is item for _, item, new in items):
            return value
        value = value.copy()
        for key, _, new in items:
            value[key] = new
        return value
    if isinstance(value, (list, tuple)):
        items = [detached(item, seen) for item in value]
        if all(new is item for new, item in zip(items, value)):
            return value
        if isinstance(value, tuple) and hasattr(value, "_fields"):
            return type(value)(*items)
        return type(value)(items)
    if hasattr(value, "__dict__"):
        # a plain object (a distribution, a state holder): a shallow copy with its attributes detached
        items = {{key: detached(item, seen) for key, item in vars(value).items()}}
        if all(items[key] is item for key, item in vars(value).items()):
            return value
        from copy import copy as shallow_copy

        value = shallow_copy(value)
        vars(value).update(items)
        return value
    return value
'''

_LOOP = '''for name in {names}:
    if name in state:
        state[name] = detached(state[name])
'''

# The copy-safe state for attributes whose shape the file shows (see :mod:`.shapes`): one line
# per attribute instead of the generic walker.
_SMALL_HELPER = '''def detached(t):
    return t.detach() if isinstance(t, {torch}.Tensor) and t.grad_fn is not None else t
'''

_SMALL_LINE = {
    "tensor": 'state["{name}"] = detached(state["{name}"])',
    "list": 'state["{name}"] = [detached(t) for t in state["{name}"]]',
    "dict": 'state["{name}"] = {{key: detached(t) for key, t in state["{name}"].items()}}',
}

ALL = "*"  # every entry of the state: attributes named at run time
BUFFERS = "_buffers"  # an nn.Module's registered buffers live in state["_buffers"]


def _names_tuple(names: list[str]) -> str:
    if ALL in names:
        return "list(state)"
    return "(" + ", ".join(f'"{n}"' for n in names) + ("," if len(names) == 1 else "") + ")"


def described(names: list[str]) -> str:
    """The names as the fix's description says them."""
    if ALL in names:
        return "every attribute (their names are made at run time)"
    plain = ", ".join(f"'{n}'" for n in names if n != BUFFERS)
    if BUFFERS in names:
        return f"{plain} and of its buffers" if plain else "its buffers"
    return plain


def _reindent(code: str, unit: str) -> str:
    out = []
    for line in code.splitlines(keepends=True):
        stripped = line.lstrip(" ")
        depth = (len(line) - len(stripped)) // 4
        out.append(unit * depth + stripped)
    return "".join(out)


def _base_defines_getstate(ctx, info) -> bool:
    seen = set()
    todo = list(info.local_bases)
    while todo:
        name = todo.pop()
        if name in seen or name not in ctx.classes:
            continue
        seen.add(name)
        base = ctx.classes[name]
        if any(isinstance(s, ast.FunctionDef) and s.name == "__getstate__" for s in base.node.body):
            return True
        todo += base.local_bases
    return False


def _torch_prelude(ctx) -> tuple[str, str]:
    """(name of torch in the generated code, statement to bind it or "")."""
    name = torch_name(ctx)
    return (name, "") if name else ("torch", "import torch\n")


def new_method(ctx, info, names: list[str]) -> str:
    torch, prelude = _torch_prelude(ctx)
    if _base_defines_getstate(ctx, info):
        head = "state = dict(super().__getstate__())\n"
    else:
        head = ('base = getattr(super(), "__getstate__", None)  # object has none before Python 3.11\n'
                "state = dict((base() if base is not None else self.__dict__) or {})\n")
    body = (
        f"{MARK}\n# attributes below; this object keeps its graph tensors.\n"
        + prelude + head + "\n" + _HELPER.format(torch=torch) + "\n" + _LOOP.format(names=_names_tuple(names))
        + "return state\n"
    )
    self_name = "self"
    code = f"def __getstate__({self_name}):\n" + "".join("    " + ln if ln.strip() else ln for ln in body.splitlines(True))
    return code


def _recognised_start(stmt: ast.stmt) -> bool:
    """``state = self.__dict__.copy()`` and the like: a fresh dict of the instance state."""
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
            and stmt.targets[0].id == "state"):
        return False
    text = ast.unparse(stmt.value).replace(" ", "")
    return text in {
        "self.__dict__.copy()", "dict(self.__dict__)", "copy.copy(self.__dict__)", "{**self.__dict__}",
        "super().__getstate__()", "super().__getstate__().copy()", "dict(super().__getstate__())",
    }


def copysafe_edit(ctx, class_name: str, names: list[str], shapes: dict[str, str] | None = None):
    """(how, build): ``how`` is "add" or "extend"; ``build()`` makes the Edit that makes copies of
    ``class_name`` hold detached values of ``names``.  ``shapes``: name -> "tensor", "list" or
    "dict" where the file shows it; when every name has one, the method is the small one (a line
    per attribute), else the generic walker.  Raises NoFix, from the ``ast`` alone, when there is
    no such fix; only ``build`` uses libcst (``check`` never calls it)."""
    info = ctx.classes.get(class_name)
    if info is None:
        raise NoFix(f"class '{class_name}' is not defined in this file")
    node = info.node
    if any(isinstance(s, (ast.Assign, ast.AnnAssign)) and any(isinstance(t, ast.Name) and t.id == "__slots__"
           for t in (s.targets if isinstance(s, ast.Assign) else [s.target])) for s in node.body):
        raise NoFix(f"class '{class_name}' has __slots__")
    own = {s.name: s for s in node.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
    for other in ("__reduce_ex__", "__reduce__", "__deepcopy__"):
        if other in own:
            return f"extend:{other}", _protocol_fix(ctx, class_name, own[other], list(names), shapes or {})
    names = list(names)
    small = _small_entries(ctx, info, names, shapes or {})
    if ALL in names:
        names = [ALL]
    elif info.facts.is_module and BUFFERS not in names:
        names.append(BUFFERS)  # a buffer reassigned in forward lives in _buffers, not in __dict__
    getstate = next((s for s in node.body if isinstance(s, ast.FunctionDef) and s.name == "__getstate__"), None)
    if getstate is None:
        if small is not None:
            return "add", lambda: _add_small(ctx, info, class_name, small)
        return "add", lambda: _add_method(ctx, info, class_name, names)
    if _is_small(getstate):
        have = _small_names(getstate)
        if small is None:
            # a name whose shape the file does not show: the small method becomes the generic one,
            # for its names and the new ones
            merged = [ALL] if ALL in names else [n for n in have if n != BUFFERS] + [
                n for n in names if n not in have and n != BUFFERS]
            if ALL not in merged and (BUFFERS in have or BUFFERS in names):
                merged.append(BUFFERS)
            return "extend", lambda: _replace_method(ctx, info, getstate, merged)
        missing = [(n, k) for n, k in small if n not in have]
        if not missing:
            raise Covered("already covered")
        return "extend", lambda: _extend_small(ctx, getstate, missing)
    # An existing __getstate__: ours (extend its list) or a recognisable one (extend it).
    for n in ast.walk(getstate):
        if not (isinstance(n, ast.For) and isinstance(n.target, ast.Name) and n.target.id == "name"):
            continue
        if _every_entry(n.iter):
            raise Covered("already covered")
        if isinstance(n.iter, ast.Tuple) and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in n.iter.elts):
            have = [e.value for e in n.iter.elts]
            merged = [ALL] if ALL in names else have + [x for x in names if x not in have]
            if BUFFERS in merged:  # kept last, after the attribute names
                merged = [x for x in merged if x != BUFFERS] + [BUFFERS]
            if sorted(merged) == sorted(have):
                raise Covered("already covered")
            if merged == have:
                raise Covered("already covered")
            return "extend", lambda: _extend_ours(ctx, n, merged)
    body = getstate.body
    first = next((s for s in body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))), None)
    last = body[-1]
    used = {x.id for x in ast.walk(getstate) if isinstance(x, ast.Name)}
    if (first is None or not _recognised_start(first) or not (isinstance(last, ast.Return) and isinstance(last.value, ast.Name)
            and last.value.id == "state") or used & {"detached", "name", "key", "item", "items", "new", "seen", "shallow_copy"}):
        raise NoFix(f"'{class_name}.__getstate__' is not one the fixer can extend (it should build "
                    "`state` from self.__dict__ or super().__getstate__() and end with `return state`)")
    return "extend", lambda: _extend_theirs(ctx, getstate, last, names)


def _handed_over(method: ast.FunctionDef, names: list[str]) -> list[ast.Attribute]:
    """The ``self.<name>`` reads that a ``__reduce__`` returns or a ``__deepcopy__`` deep-copies, as
    they are (``(Prediction, (self.inputs, self.values))``, ``copy.deepcopy(self.state, memo)``)."""
    me = method.args.args[0].arg if method.args.args else "self"
    found = handed_reads(handed_roots(method), me) or []
    return [n for n in found if n.attr in names or ALL in names]


def _protocol_fix(ctx, class_name: str, method: ast.FunctionDef, names: list[str], shapes: dict):
    """A class whose own ``__reduce__`` / ``__deepcopy__`` decides what a copy gets: that method is
    extended, not bypassed: what it hands the copy of each named attribute goes through
    ``detached()`` (the generic walker), so copies get detached values and the object keeps its
    graph tensors. Raises NoFix where it hands over none of them as they are."""
    reads = _handed_over(method, names)
    if not reads:
        raise NoFix(f"'{class_name}.{method.name}' does not hand the attribute over as it is")
    if "detached" in {x.id for x in ast.walk(method) if isinstance(x, ast.Name)}:
        raise Covered("already covered")

    def build():
        import libcst as cst

        module, _ = parse(ctx)
        torch, prelude = _torch_prelude(ctx)
        fdef = find(ctx, cst.FunctionDef, method.lineno, None, lambda f: f.name.value == method.name)
        targets = [find(ctx, cst.Attribute, r.lineno, ctx.text.char_col(r.lineno, r.col_offset)) for r in reads]

        class Wrap(cst.CSTTransformer):
            def leave_Attribute(self, original, updated):
                if any(original is t for t in targets):
                    return cst.Call(func=cst.Name("detached"), args=[cst.Arg(updated)])
                return updated

        new = fdef.visit(Wrap())
        small = all(shapes.get(r.attr) == "tensor" for r in reads)  # one tensor each: the two-line helper
        helper = prelude + (_SMALL_HELPER if small else _HELPER).format(torch=torch)
        stmts = cst.parse_module(_reindent(helper, indent_unit(ctx)), config=module.config_for_parsing).body
        body = list(new.body.body)
        at = 1 if body and isinstance(body[0], cst.SimpleStatementLine) and isinstance(
            body[0].body[0], cst.Expr) and isinstance(body[0].body[0].value, cst.SimpleString) else 0
        new = new.with_changes(body=new.body.with_changes(body=body[:at] + list(stmts) + body[at:]))
        return replace(ctx, fdef, new)
    return build


def _every_entry(node) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "list" \
        and len(node.args) == 1 and isinstance(node.args[0], ast.Name) and node.args[0].id == "state"


def _add_method(ctx, info, class_name: str, names: list[str]):
    return _add_code(ctx, info, class_name, new_method(ctx, info, names))


def _add_code(ctx, info, class_name: str, code: str):
    """The class with the method ``code`` (written with 4-space indents) added at its end."""
    import libcst as cst

    module, _ = parse(ctx)
    target = find(ctx, cst.ClassDef, info.node.lineno, None, lambda c: c.name.value == class_name)
    method = cst.parse_statement(_reindent(code, indent_unit(ctx)), config=module.config_for_parsing)
    method = method.with_changes(leading_lines=[cst.EmptyLine(indent=False)])
    body = target.body
    return replace(ctx, target, target.with_changes(body=body.with_changes(body=list(body.body) + [method])))


def _extend_ours(ctx, loop_node: ast.For, merged: list[str]):
    import libcst as cst

    module, _ = parse(ctx)
    loop = find(ctx, cst.For, loop_node.lineno, ctx.text.char_col(loop_node.lineno, loop_node.col_offset))
    return diff_edit(ctx.text.source, module.deep_replace(loop.iter, cst.parse_expression(_names_tuple(merged))).code)


def _extend_theirs(ctx, getstate: ast.FunctionDef, last: ast.Return, names: list[str]):
    import libcst as cst

    module, _ = parse(ctx)
    torch, prelude = _torch_prelude(ctx)
    extra = prelude + _HELPER.format(torch=torch) + "\n" + _LOOP.format(names=_names_tuple(names))
    stmts = cst.parse_module(_reindent(extra, indent_unit(ctx)), config=module.config_for_parsing).body
    ret = find(ctx, cst.SimpleStatementLine, last.lineno, ctx.text.char_col(last.lineno, last.col_offset))
    fdef = find(ctx, cst.FunctionDef, getstate.lineno, None, lambda f: f.name.value == "__getstate__")
    new_body = []
    for s in fdef.body.body:
        if s is ret:
            new_body += [stmts[0].with_changes(leading_lines=[cst.EmptyLine(indent=False)])] + list(stmts[1:])
        new_body.append(s)
    return replace(ctx, fdef, fdef.with_changes(body=fdef.body.with_changes(body=new_body)))


# -- the small copy-safe state: attributes whose shape the file shows -------------------------------

def _registered_buffers(ctx, info) -> set[str]:
    """Names the class registers as buffers (``self.register_buffer("name", ...)``): their values
    live in ``state["_buffers"]``, not under their own name."""
    out = set()
    for n in ast.walk(info.node):
        if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "register_buffer"
                and n.args and isinstance(n.args[0], ast.Constant) and isinstance(n.args[0].value, str)):
            out.add(n.args[0].value)
    return out | set(getattr(info.facts, "buffers", ()) or ())


def _small_entries(ctx, info, names: list[str], shapes: dict[str, str]) -> list[tuple[str, str]] | None:
    """[(state key, shape)] for the small method, or None when a name's shape is not known."""
    if ALL in names:
        return None
    buffers = _registered_buffers(ctx, info) if info.facts.is_module else set()
    out: list[tuple[str, str]] = []
    for name in names:
        if name == BUFFERS or name in buffers:
            entry = (BUFFERS, "dict")  # registered buffers: detached by name in state["_buffers"]
        elif shapes.get(name) in _SMALL_LINE:
            entry = (name, shapes[name])
        else:
            return None
        if entry not in out:
            out.append(entry)
    # a base class this file does not show may keep its own state in ways only the walker handles
    if info.local_bases and _base_defines_getstate(ctx, info):
        return None
    return out


def _small_lines(entries: list[tuple[str, str]]) -> str:
    code = ""
    for name, shape in entries:
        code += f'if state.get("{name}") is not None:\n    ' + _SMALL_LINE[shape].format(name=name) + "\n"
    return code


def _small_method(ctx, info, entries: list[tuple[str, str]]) -> str:
    torch, prelude = _torch_prelude(ctx)
    quoted = ", ".join(f"'{n}'" for n, _ in entries if n != BUFFERS)
    what = (f"{quoted} and the buffers" if quoted and any(n == BUFFERS for n, _ in entries)
            else quoted or "the buffers")
    if info.facts.is_module or _base_defines_getstate(ctx, info):
        head = "state = dict(super().__getstate__())\n"
    elif not info.node.bases:
        head = "state = self.__dict__.copy()\n"
    else:
        head = ('base = getattr(super(), "__getstate__", None)  # object has none before Python 3.11\n'
                "state = dict((base() if base is not None else self.__dict__) or {})\n")
    body = ("# graphleaf: copies (copy.deepcopy, pickle, torch.save) get detached values of\n"
            f"# {what}; this object keeps its graph tensors.\n" + prelude + head + "\n"
            + _SMALL_HELPER.format(torch=torch) + "\n" + _small_lines(entries) + "return state\n")
    return "def __getstate__(self):\n" + "".join("    " + ln if ln.strip() else ln for ln in body.splitlines(True))


def _add_small(ctx, info, class_name: str, entries):
    return _add_code(ctx, info, class_name, _small_method(ctx, info, entries))


def _is_small(getstate: ast.FunctionDef) -> bool:
    """The small method this module writes: a nested ``detached(t)`` and ``return state``."""
    inner = [s for s in getstate.body if isinstance(s, ast.FunctionDef)]
    last = getstate.body[-1]
    return (len(inner) == 1 and inner[0].name == "detached" and [a.arg for a in inner[0].args.args] == ["t"]
            and isinstance(last, ast.Return) and isinstance(last.value, ast.Name) and last.value.id == "state")


def _small_names(getstate: ast.FunctionDef) -> set[str]:
    out = set()
    for n in ast.walk(getstate):
        if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store) and isinstance(n.slice, ast.Constant):
            out.add(n.slice.value)
    return out


def _extend_small(ctx, getstate: ast.FunctionDef, entries):
    import libcst as cst

    module, _ = parse(ctx)
    last = getstate.body[-1]
    stmts = cst.parse_module(_reindent(_small_lines(entries), indent_unit(ctx)), config=module.config_for_parsing).body
    ret = find(ctx, cst.SimpleStatementLine, last.lineno, ctx.text.char_col(last.lineno, last.col_offset))
    fdef = find(ctx, cst.FunctionDef, getstate.lineno, None, lambda f: f.name.value == "__getstate__")
    new_body = []
    for s in fdef.body.body:
        if s is ret:
            new_body += list(stmts)
        new_body.append(s)
    return replace(ctx, fdef, fdef.with_changes(body=fdef.body.with_changes(body=new_body)))


def _replace_method(ctx, info, getstate: ast.FunctionDef, names: list[str]):
    import libcst as cst

    module, _ = parse(ctx)
    fdef = find(ctx, cst.FunctionDef, getstate.lineno, None, lambda f: f.name.value == "__getstate__")
    method = cst.parse_statement(_reindent(new_method(ctx, info, names), indent_unit(ctx)),
                                 config=module.config_for_parsing)
    return replace(ctx, fdef, method.with_changes(leading_lines=fdef.leading_lines))
