"""Settings a class fixes for good: attributes that hold one constant whenever training runs.

``self.maintain_state = False`` in ``__init__``, set to True only inside a method that resets it
before returning (a validation loop that runs the model step by step), and assigned nowhere
else: outside that method -- in particular in ``forward`` as training calls it -- the attribute
is False, and ``if self.maintain_state: self.rnn_state = ...`` never runs there.

An attribute is *settled* to a constant when

- ``__init__`` of the class (or of one of its bases, this file's or another's) assigns it a
  literal (``True``, ``False``, ``None``, a number, a string), and
- every other assignment of it in the class and its bases assigns the same literal, or sits in a
  method whose last assignment of it (at the method's top level) restores that literal, a method
  that is not itself a forward root.

An attribute ``__init__`` sets from one of its parameters (``self.store_attn = store_attn``) is
settled when every construction of the class the project shows passes the same literal there
(or leaves the literal default), following parameters through the constructors that pass them on
(``TSTEncoder(store_attn=store_attn)`` inside ``TSTiEncoder.__init__``) and locals bound once to a
literal (``store_attn = False``).  A construction through a local bound to classes (``cls = A if
sde else B; cls(dim, **dist_kwargs)``) counts for each; a ``**`` spread is followed to its dict:
a dict display, a local's bindings (dicts or None), a module-level function's parameter through
the calls the project makes of it.  No construction site seen, or one that passes anything
else: not settled.

An assignment of the attribute on any other object (``model.flag = True``,
``module._is_streaming = streaming`` in a loop over submodules, ``setattr(m, "flag", ...)``),
in the class's files or anywhere in the project, means it is not settled: someone else sets it.
"""

from __future__ import annotations

import ast
import re
import weakref

from .stmtwalk import statements, walk

_UNKNOWN = object()


def _literal(node: ast.AST | None):
    if isinstance(node, ast.Constant) and isinstance(node.value, (bool, int, float, str, type(None))):
        return node.value
    return _UNKNOWN


def _self_name(func) -> str | None:
    args = func.args.posonlyargs + func.args.args
    return args[0].arg if args else None


def _assignments(func) -> list[tuple[str, object, bool]]:
    """(attribute, literal or _UNKNOWN, at the method's top level, line) of each ``self.X = ...``,
    in line order; [(None, ...)] when the method sets attributes by computed names."""
    me = _self_name(func)
    if me is None:
        return []
    top = {id(s) for s in func.body}
    out = []
    for node in statements(func):
        if isinstance(node, ast.Expr):
            node = node.value
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AnnAssign, ast.AugAssign)) and getattr(node, "value", None) is not None else []
        for t in targets:
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == me:
                value = _UNKNOWN if isinstance(node, ast.AugAssign) else _literal(node.value)
                out.append((t.attr, value, id(node) in top, node.lineno))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr":
            return [(None, _UNKNOWN, False, 0)]  # names computed at run time: nothing is settled
    return sorted(out, key=lambda a: a[3])


def _tested(methods) -> set[str]:
    """The attributes an ``if`` of the class tests where a branch stores something (``if
    self.flag: self.x = ...`` or ``....append(...)``), or a conditional expression tests: only
    those can decide a finding."""
    out = set()
    for m in methods:
        me = _self_name(m)
        for node in statements(m):
            if isinstance(node, ast.If):
                named = _self_attrs(node.test, me)
                if named and _stores(node):
                    out |= named
            elif isinstance(node, (ast.Assign, ast.Return, ast.Expr, ast.AugAssign, ast.AnnAssign)):
                value = getattr(node, "value", None)
                if isinstance(value, ast.IfExp):  # x = a if self.flag else b
                    out |= _self_attrs(value.test, me)
    return out


def _self_attrs(test: ast.AST, me: str | None) -> set[str]:
    return {n.attr for n in walk(test)
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == me}


def _stores(node: ast.If) -> bool:
    for n in statements(node):
        if isinstance(n, ast.Expr):
            n = n.value
        if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            if any(isinstance(t, (ast.Attribute, ast.Subscript)) for t in targets):
                return True
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in (
                "append", "extend", "update", "insert", "register_buffer", "__setitem__"):
            return True
    return False


def _calls_by_name(parsed) -> dict[str, list]:
    """name -> [(class or None, function, call, callee)] of every call in the file whose callee
    ends with that name, walked once per file. ``callee`` is the node that names it: the call's
    own ``func``, or for a call of a local bound once to classes (``cls = A if sde else B;
    cls(dim, **kw)``) the ``A`` / ``B`` of that binding, so the call counts for both."""
    memo = parsed.memo
    if "calls_by_name" not in memo:
        table: dict[str, list] = {}
        for owner, func in _functions(parsed.tree):
            aliases: dict | None = None
            for call in walk(func):
                if isinstance(call, ast.Call):
                    f = call.func
                    name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
                    if name is not None:
                        table.setdefault(name, []).append((owner, func, call, f))
                    if isinstance(f, ast.Name):
                        if aliases is None:
                            aliases = _class_aliases(func)
                        for named in aliases.get(f.id, ()):
                            table.setdefault(named.id, []).append((owner, func, call, named))
        memo["calls_by_name"] = table
    return memo["calls_by_name"]


def _class_aliases(func) -> dict[str, list[ast.Name]]:
    """Locals bound exactly once, to a name or a conditional expression of names
    (``cls = StateDependentNoise if use_sde else DiagGaussian``): local -> those names."""
    out = {}
    for local, nodes in _bindings(func).items():
        if len(nodes) == 1 and isinstance(nodes[0], ast.Assign) and len(nodes[0].targets) == 1:
            names = _named_alternatives(nodes[0].value)
            if names:
                out[local] = names
    return out


def _named_alternatives(node) -> list[ast.Name]:
    if isinstance(node, ast.Name):
        return [node]
    if isinstance(node, ast.IfExp):
        body, orelse = _named_alternatives(node.body), _named_alternatives(node.orelse)
        return body + orelse if body and orelse else []
    return []


def _param(init, name: str):
    """(position after self, default literal or _UNKNOWN) of an ``__init__`` parameter, or None."""
    args = init.args
    positional = (args.posonlyargs + args.args)[1:]
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    for i, (a, d) in enumerate(zip(positional, defaults)):
        if a.arg == name:
            return i, _literal(d) if d is not None else _UNKNOWN
    for a, d in zip(args.kwonlyargs, args.kw_defaults):
        if a.arg == name:
            return None, _literal(d) if d is not None else _UNKNOWN
    return None


def _bindings(func) -> dict[str, list]:
    """local name -> the statements (and walrus expressions) of ``func`` that bind it, in
    ``walk``'s order."""
    bound: dict[str, list] = {}
    for n in walk(func):
        if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For, ast.With, ast.NamedExpr)):
            for name in dict.fromkeys(t.id for t in _bound_names(n)):
                bound.setdefault(name, []).append(n)
    return bound


def _local_literal(func, name: str):
    """The literal a local is bound to, when the function binds it exactly once, to a literal."""
    bound = _bindings(func).get(name, [])
    if len(bound) == 1 and isinstance(bound[0], ast.Assign) and len(bound[0].targets) == 1:
        return _literal(bound[0].value)
    return _UNKNOWN


def _bound_names(node):
    targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)] if not isinstance(
        node, ast.With) else [i.optional_vars for i in node.items]
    out = []
    for t in targets:
        if t is not None:
            out += [n for n in walk(t) if isinstance(n, ast.Name)]
    return out


def constructed_with(project, module: str, cls: str, name: str, depth: int = 0):
    """The literals every construction of ``module.cls`` seen in the project passes for its
    ``__init__`` parameter ``name`` (a set), or None when one of them is not a literal, or none
    is seen."""
    qual = f"{module}.{cls}"
    key = ("constructed_with", qual, name)
    memo = getattr(project, "memo", None)
    if memo is not None and key in memo:
        return memo[key]
    if memo is not None:
        memo[key] = None  # a cycle of constructors: unknown
    result = _constructed_with(project, module, cls, name, depth)
    if memo is not None:
        memo[key] = result
    return result


def _constructed_with(project, module: str, cls: str, name: str, depth: int):
    if project is None or depth > 4:
        return None
    here = project.parsed(module)
    node = here.defs.get(cls) if here is not None else None
    init = next((m for m in getattr(node, "body", ()) if isinstance(m, ast.FunctionDef) and m.name == "__init__"), None)
    found = _param(init, name) if init is not None else None
    if found is None:
        return None
    position, default = found
    index = getattr(project, "index", None)
    modules = index.modules_making(f"{module}.{cls}", limit=21) if index is not None else [module]
    if module not in modules:
        modules = [module, *modules]
    if len(modules) > 20:
        return None
    values, sites = set(), 0
    for other in modules:
        parsed = project.parsed(other)
        if parsed is None:
            continue
        for owner, func, call, callee in _calls_by_name(parsed).get(cls, ()):
            if not _names_class(callee, parsed, module, cls):
                continue
            sites += 1
            given = next((k.value for k in call.keywords if k.arg == name), None)
            if given is None and position is not None and position < len(call.args):
                given = call.args[position]
                if any(isinstance(a, ast.Starred) for a in call.args[: position + 1]):
                    return None
            if given is None:
                spread = [k.value for k in call.keywords if k.arg is None]
                if default is _UNKNOWN:
                    return None  # no default
                if not spread:
                    values.add(default)
                    continue
                if len(spread) > 1:
                    return None
                passed = _spread_entry(project, parsed, other, owner, func, spread[0], name, default, depth)
                if passed is None:
                    return None  # **kwargs whose entries are not known
                values |= passed
                continue
            value = _literal(given)
            if value is _UNKNOWN and isinstance(given, ast.Name):
                value = _local_literal(func, given.id)
                if value is _UNKNOWN and owner is not None and func.name == "__init__" and _param(func, given.id):
                    passed = constructed_with(project, other, owner.name, given.id, depth + 1)
                    if passed is None or len(passed) != 1:
                        return None
                    value = next(iter(passed))
            if value is _UNKNOWN:
                return None
            values.add(value)
    return values if sites else None


def _spread_entry(project, parsed, module: str, owner, func, node, key: str, default, depth: int):
    """The literals the entry ``key`` of a ``**node`` spread can hold (``default`` where the dict
    has no such entry, or is None): a dict literal; a local bound to dict literals or None (each
    binding counts); a parameter of a module-level function, from what its callers in the
    project pass (or its default). None when any of it is not known."""
    if isinstance(node, ast.Dict):
        return _dict_entry(node, key, default)
    if isinstance(node, ast.Constant) and node.value is None:
        return {default}
    if not isinstance(node, ast.Name) or depth > 4:
        return None
    out: set = set()
    for n in _bindings(func).get(node.id, []):
        targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, ast.AnnAssign) else []
        value = getattr(n, "value", None)
        if value is None or len(targets) != 1 or not isinstance(targets[0], ast.Name):
            return None  # bound otherwise (a loop, a with, a tuple, +=): not known
        entry = _spread_entry(project, parsed, module, owner, func, value, key, default, depth) if isinstance(
            value, (ast.Dict, ast.Constant)) else None
        if entry is None:
            return None
        out |= entry
    args = func.args if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)) else None
    names = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs] if args is not None else []
    if node.id in names:
        if owner is not None:
            return None  # a method's parameter: its callers are not followed
        passed = _passed_to(project, module, func, node.id, key, default, depth + 1)
        if passed is None:
            return None
        out |= passed
    return out or None


def _dict_entry(node: ast.Dict, key: str, default):
    """The literal under ``key`` in a dict display ({default} without it), or None."""
    for k, v in zip(node.keys, node.values):
        if k is None:
            return None  # {**other}
        if not (isinstance(k, ast.Constant) and isinstance(k.value, str)):
            return None
        if k.value == key:
            value = _literal(v)
            return None if value is _UNKNOWN else {value}
    return {default}


def _passed_to(project, module: str, func, param: str, key: str, default, depth: int):
    """The literals the entry ``key`` of the dict the module-level function ``module.func``'s
    parameter ``param`` is given can hold, over every call of it the project shows (its default
    where a call does not pass it); None when one is not known or no call is seen."""
    args = func.args
    positional = [a.arg for a in args.posonlyargs + args.args]
    defaults = dict(zip(positional[len(positional) - len(args.defaults):], args.defaults))
    defaults.update({a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None})
    index = getattr(project, "index", None)
    paths = index.mentioning(func.name) if index is not None else []
    if len(paths) > 20:
        return None
    out, sites = set(), 0
    for path in paths:
        parsed = project.parsed_path(path) if hasattr(project, "parsed_path") else None
        if parsed is None:
            continue
        for owner, caller, call, callee in _calls_by_name(parsed).get(func.name, ()):
            qual = getattr(parsed.imports, "qualname", None)
            if not (qual is not None and qual(callee) == f"{module}.{func.name}") and not (
                    isinstance(callee, ast.Name) and parsed.name == module):
                continue
            sites += 1
            given = next((k.value for k in call.keywords if k.arg == param), None)
            if given is None and param in positional and positional.index(param) < len(call.args):
                given = call.args[positional.index(param)]
            if given is None:
                if any(k.arg is None for k in call.keywords) or any(isinstance(a, ast.Starred) for a in call.args):
                    return None
                given = defaults.get(param)
                if given is None:
                    return None
            entry = _spread_entry(project, parsed, parsed.name, owner, caller, given, key, default, depth)
            if entry is None:
                return None
            out |= entry
    return out if sites else None


def _functions(tree):
    """(class or None, function) for every function of a module, and the module's own body."""
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            for m in node.body:
                if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield node, m
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield None, node
    yield None, ast.Module(body=[s for s in tree.body if not isinstance(s, (ast.ClassDef, ast.FunctionDef,
                                                                                  ast.AsyncFunctionDef))],
                           type_ignores=[])


def _names_class(func: ast.AST, parsed, module: str, cls: str) -> bool:
    if isinstance(func, ast.Name) and parsed.name == module and func.id == cls:
        return True
    qualname = getattr(parsed.imports, "qualname", None)
    return qualname is not None and qualname(func) == f"{module}.{cls}"


class Settled:
    """attribute -> the literal it holds whenever a forward root runs (see the module's doc),
    judged for an attribute only when a test asks about it (``attr in flags``, ``flags[attr]``):
    the constructions of the class and the project's other assignments are looked up then."""

    def __init__(self, info, imports, roots: set[str], methods: list):
        self._info = weakref.ref(info)  # the class holds its Settled (info.flags): no cycle
        self.imports, self.roots, self.methods = imports, roots, methods
        self._known: dict[str, object] = {}
        self._tested = _tested(methods)
        self._per_method: list[tuple[str, list]] | None = None
        self._init: dict[str, tuple[object, object]] = {}  # attr -> (literal or _UNKNOWN, the __init__)

    @property
    def info(self):
        return self._info()

    def __bool__(self) -> bool:
        return bool(self._tested)

    def __contains__(self, attr: str) -> bool:
        return self._value(attr) is not _UNKNOWN

    def __getitem__(self, attr: str):
        value = self._value(attr)
        if value is _UNKNOWN:
            raise KeyError(attr)
        return value

    def _assignments(self) -> list[tuple[str, list]] | None:
        if self._per_method is None:
            per_method = []
            for m in self.methods:
                found = _assignments(m)
                if found and found[0][0] is None:
                    per_method = None  # attributes set by computed names: nothing is settled
                    break
                per_method.append((m.name, found))
                if m.name == "__init__":
                    for attr, value, top, _line in found:
                        if top and attr not in self._init:
                            self._init[attr] = (value, m)
            self._per_method = per_method if per_method is not None else []
            if per_method is None:
                self._init = {}
        return self._per_method

    def _value(self, attr: str):
        if attr in self._known:
            return self._known[attr]
        self._known[attr] = _UNKNOWN
        if attr in self._tested:
            self._known[attr] = self._judge(attr)
        return self._known[attr]

    def _judge(self, attr: str):
        per_method = self._assignments()
        if attr not in self._init:
            return _UNKNOWN
        value, init = self._init[attr]
        if value is _UNKNOWN:
            value = _from_parameter(self.info, self.imports, init, attr)
            if value is _UNKNOWN:
                return _UNKNOWN
        for name, found in per_method:
            mine = [(v, top) for a, v, top, _l in found if a == attr]
            if name == "__init__":
                first = next((i for i, (_v, top) in enumerate(mine) if top), None)
                mine = [m for i, m in enumerate(mine) if i != first]  # the assignment that gave the value
            if not mine or all(v is not _UNKNOWN and v == value for v, _ in mine):
                continue
            last_top = [v for v, top in mine if top]
            if name in self.roots or not last_top or last_top[-1] is _UNKNOWN or last_top[-1] != value:
                return _UNKNOWN  # changed for good, or changed in a forward root itself
        if _set_from_outside(attr, self.imports, self.methods):
            return _UNKNOWN
        return value


def settled(info, imports, roots: set[str], methods: list) -> Settled:
    """The settled attributes of a class (:class:`Settled`; ``methods``: the class's, its local
    bases' and those of its bases in other files)."""
    return Settled(info, imports, roots, methods)


def _assigned_on_others(nodes) -> set[str]:
    """Attributes assigned on an object other than ``self`` / ``cls`` in these trees
    (``model.flag = ...``, ``setattr(module, "flag", ...)``)."""
    out = set()
    for tree in nodes:
        for node in walk(tree):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
                node, (ast.AnnAssign, ast.AugAssign)) else []
            for t in targets:
                if isinstance(t, ast.Attribute) and not (isinstance(t.value, ast.Name) and t.value.id in ("self", "cls")):
                    out.add(t.attr)
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr"
                    and len(node.args) > 1 and isinstance(node.args[1], ast.Constant)
                    and isinstance(node.args[1].value, str)
                    and not (isinstance(node.args[0], ast.Name) and node.args[0].id in ("self", "cls"))):
                out.add(node.args[1].value)
    return out


def _set_from_outside(attr: str, imports, methods) -> bool:
    """Is ``attr`` assigned on an object other than ``self`` somewhere: in the class's own file,
    its bases' methods, or any file of the project that mentions it?"""
    current = getattr(imports, "current", None)
    if current is not None:
        if "assigned_on_others" not in current.memo:
            current.memo["assigned_on_others"] = _assigned_on_others([current.tree])
        if attr in current.memo["assigned_on_others"]:
            return True
    if attr in _assigned_on_others(methods):
        return True
    index = getattr(getattr(imports, "project", None), "index", None)
    if index is not None:
        pattern = re.compile(rf"\.\s*{re.escape(attr)}\s*(?:[-+*/|&]?=)(?!=)|['\"]{re.escape(attr)}['\"]")
        receiver = re.compile(r"(\w+)\s*$")
        for path in index.mentioning(attr):
            text = index.text(path)
            for m in pattern.finditer(text):
                before = text[max(0, m.start() - 80): m.start()]
                if m.group(0)[0] in "'\"":  # setattr(obj, "attr", ...)
                    call = re.search(r"setattr\(\s*(\w+)[^,(]*,\s*$", before)
                    if call is not None and call.group(1) not in ("self", "cls"):
                        return True
                    continue
                word = receiver.search(before)
                if word is None or word.group(1) not in ("self", "cls"):
                    return True
    return False


def _from_parameter(info, imports, init, attr: str):
    """``self.attr = param`` in ``__init__``: the one literal every construction passes, else _UNKNOWN."""
    me = _self_name(init)
    for stmt in init.body:
        if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Attribute)
                and stmt.targets[0].attr == attr and isinstance(stmt.targets[0].value, ast.Name)
                and stmt.targets[0].value.id == me and isinstance(stmt.value, ast.Name)):
            module = getattr(imports, "module", None)
            project = getattr(imports, "project", None)
            if module is None or project is None or init not in info.node.body:
                return _UNKNOWN
            passed = constructed_with(project, module, info.node.name, stmt.value.id)
            return next(iter(passed)) if passed is not None and len(passed) == 1 else _UNKNOWN
    return _UNKNOWN


def test_value(test: ast.AST, self_name: str | None, flags: dict[str, object]):
    """True / False when ``test`` is decided by settled attributes (``self.flag``, ``not
    self.flag``, ``self.x is None``, ``self.mode == "a"``, and / or of those), else None."""
    if not flags or self_name is None:
        return None
    if isinstance(test, ast.Attribute) and isinstance(test.value, ast.Name) and test.value.id == self_name:
        if test.attr in flags:
            return bool(flags[test.attr])
        return None
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = test_value(test.operand, self_name, flags)
        return None if inner is None else not inner
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        left, right = test.left, test.comparators[0]
        if isinstance(left, ast.Attribute) and isinstance(left.value, ast.Name) and left.value.id == self_name \
                and left.attr in flags and _literal(right) is not _UNKNOWN:
            a, b = flags[left.attr], _literal(right)
            op = test.ops[0]
            if isinstance(op, ast.Is):
                return a is b
            if isinstance(op, ast.IsNot):
                return a is not b
            if isinstance(op, ast.Eq):
                return a == b
            if isinstance(op, ast.NotEq):
                return a != b
        return None
    if isinstance(test, ast.BoolOp):
        values = [test_value(v, self_name, flags) for v in test.values]
        if isinstance(test.op, ast.And):
            if any(v is False for v in values):
                return False
            return True if all(v is True for v in values) else None
        if any(v is True for v in values):
            return True
        return False if all(v is False for v in values) else None
    return None
