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

What code outside the class assigns to it is not seen (``model.flag = True``).
"""

from __future__ import annotations

import ast

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
    for node in ast.walk(func):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AnnAssign, ast.AugAssign)) and getattr(node, "value", None) is not None else []
        for t in targets:
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == me:
                value = _UNKNOWN if isinstance(node, ast.AugAssign) else _literal(node.value)
                out.append((t.attr, value, id(node) in top, node.lineno))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr":
            return [(None, _UNKNOWN, False, 0)]  # names computed at run time: nothing is settled
    return sorted(out, key=lambda a: a[3])


def _methods(info, imports) -> list:
    """The class's methods, its local bases' (already merged in facts.methods), and those of
    its bases in other files."""
    from .helper_objects import program_class

    methods = list(info.facts.methods.values())
    for qual in info.facts.bases:
        found = program_class(imports, qual)
        if found is not None:
            methods += [m for m in found[1].facts.methods.values() if m not in methods]
    return methods


def settled(info, imports, roots: set[str]) -> dict[str, object]:
    """attribute -> the literal it holds whenever a forward root runs (see the module's doc)."""
    methods = _methods(info, imports)
    init_values: dict[str, object] = {}
    per_method: list[tuple[str, list]] = []
    for m in methods:
        found = _assignments(m)
        if found and found[0][0] is None:
            return {}
        per_method.append((m.name, found))
        if m.name == "__init__":
            for attr, value, top, _line in found:
                if top and attr not in init_values:
                    init_values[attr] = value
    out = {}
    for attr, value in init_values.items():
        if value is _UNKNOWN:
            continue
        ok = True
        for name, found in per_method:
            mine = [(v, top) for a, v, top, _l in found if a == attr]
            if not mine or name == "__init__" and all(v == value and v is not _UNKNOWN for v, _ in mine):
                continue
            if all(v is not _UNKNOWN and v == value for v, _ in mine):
                continue
            last_top = [v for v, top in mine if top]
            if name in roots or not last_top or last_top[-1] is _UNKNOWN or last_top[-1] != value:
                ok = False  # changed for good, or changed in a forward root itself
                break
        if ok:
            out[attr] = value
    return out


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
