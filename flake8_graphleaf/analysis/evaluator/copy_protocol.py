"""What a deep copy (or a pickle) of an object reaches on the heap, by its class's copy protocol.

``copy.deepcopy``, ``pickle`` and ``torch.save`` copy what ``__getstate__`` returns when a class
has one, and leave everything to ``__deepcopy__`` / ``__reduce__`` / ``__reduce_ex__`` when it has
those.  The heap follows an object's attributes into what they hold, and:

- a class with no copy protocol of its own: every attribute is copied;
- a ``__getstate__`` that builds the state from ``self.__dict__`` / ``super().__getstate__()`` and
  returns it (the copy-safe fix writes one, users write many): the attributes it detaches, drops
  or clears (:func:`..program.copysafe_state.covered_attributes`) are not reached; every other
  attribute is, with what it holds (a nested module's own stores included);
- any other copy protocol (``__deepcopy__``, ``__reduce_ex__``, a ``__getstate__`` of another form,
  a copy method bound on the instance): the class decides, and the copy is not followed into it.

The stores a copy does not reach because the class's ``__getstate__`` covers them are recorded
(``program.covered``): a store reported by a rule of its own (a training step's
``model.last_out = model(x)``) is not reported when every run found its object's class covering it.
"""

from __future__ import annotations

import ast
from collections import deque

from ..program.copysafe_state import ALL, BUFFERS, covered_attributes, getstate_of
from ..program.helper_objects import binds_own_copy, copies_itself

_STARTS = {
    "self.__dict__.copy()", "dict(self.__dict__)", "copy.copy(self.__dict__)", "{**self.__dict__}",
    "super().__getstate__()", "super().__getstate__().copy()", "dict(super().__getstate__())",
    "dict((base() if base is not None else self.__dict__) or {})",
}


def _state_from_dict(getstate: ast.FunctionDef) -> bool:
    """``state = <the instance state>`` ... ``return state``: a __getstate__ whose result is the
    instance's attributes less what it rewrites."""
    last = getstate.body[-1]
    if not (isinstance(last, ast.Return) and isinstance(last.value, ast.Name) and last.value.id == "state"):
        return False
    for stmt in getstate.body:
        if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
                and stmt.targets[0].id == "state"):
            return ast.unparse(stmt.value).replace(" ", "") in {s.replace(" ", "") for s in _STARTS}
    return False


class Only(frozenset):
    """The attribute names a copy reaches, where the class's own copy method names them (what its
    ``__deepcopy__`` deep-copies, what its ``__reduce__`` returns): every other one is not reached."""


def covers(covered, attr: str) -> bool:
    """Does a copy leave ``attr`` out, by the class's protocol (:func:`covered_by_copy`)?"""
    return attr not in covered if isinstance(covered, Only) else attr in covered


def handed_reads(nodes, me: str) -> list[ast.Attribute] | None:
    """The ``self.<name>`` reads that ``nodes`` hand over as they are (``self.state``, or inside a
    tuple, list or dict display); None where the whole instance is (``self.__dict__``,
    ``vars(self)``, ``self`` itself). What is computed from an attribute (``self.state.detach()``)
    is a new value, not the attribute."""
    for top in nodes:
        for n in ast.walk(top):
            if (isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == me
                    and n.attr == "__dict__") or (isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                                                  and n.func.id == "vars"):
                return None
    out: list[ast.Attribute] = []
    todo = list(nodes)
    while todo:
        n = todo.pop()
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == me:
            out.append(n)
        elif isinstance(n, ast.Name) and n.id == me:
            return None
        elif isinstance(n, (ast.Tuple, ast.List, ast.Set)):
            todo += n.elts
        elif isinstance(n, ast.Dict):
            todo += [v for v in n.values if v is not None]
        elif isinstance(n, ast.Starred):
            todo.append(n.value)
    return out


def handed_roots(method: ast.FunctionDef) -> list[ast.AST]:
    """What a ``__deepcopy__`` passes to a deep copy (each call's first argument), or the arguments
    and state a ``__reduce__`` / ``__reduce_ex__`` returns (each returned tuple after the callable)."""
    if method.name == "__deepcopy__":
        return [c.args[0] for c in ast.walk(method) if isinstance(c, ast.Call) and c.args and (
            (isinstance(c.func, ast.Attribute) and c.func.attr == "deepcopy")
            or (isinstance(c.func, ast.Name) and c.func.id == "deepcopy"))]
    return [e for r in ast.walk(method) if isinstance(r, ast.Return) and isinstance(r.value, ast.Tuple)
            for e in r.value.elts[1:]]


def _self_reads(nodes, me: str) -> set[str] | None:
    found = handed_reads(nodes, me)
    return None if found is None else {n.attr for n in found}


def _protocol_reach(info) -> "Only | None":
    """What a copy reaches through the class's own ``__deepcopy__`` (the attributes it passes to a
    deep copy: ``new.state = copy.deepcopy(self.state, memo)``; what it hands over uncopied is
    shared, not copied) or ``__reduce__`` / ``__reduce_ex__`` (the attributes in what it returns:
    ``copy.deepcopy`` deep-copies the arguments and state a reduce returns). None where the method
    is of another form (it calls its base's, returns what it does not build here) and the heap
    does not follow."""
    methods = info.facts.methods
    for name in ("__reduce_ex__", "__reduce__"):
        method = methods.get(name)
        if method is not None and method.args.args:
            me = method.args.args[0].arg
            returns = [n.value for n in ast.walk(method) if isinstance(n, ast.Return) and n.value is not None]
            if not returns or not all(isinstance(r, ast.Tuple) for r in returns):
                return None
            if any(isinstance(n, ast.Attribute) and n.attr in ("__reduce__", "__reduce_ex__")
                   for n in ast.walk(method)):
                return None  # the base's reduce: the whole instance
            found = _self_reads(handed_roots(method), me)
            return Only(found) if found is not None else frozenset()  # the instance's __dict__: all of it
    method = methods.get("__deepcopy__")
    if method is not None and method.args.args:
        me = method.args.args[0].arg
        copied = [n for n in ast.walk(method) if isinstance(n, ast.Call) and (
            (isinstance(n.func, ast.Attribute) and n.func.attr == "deepcopy")
            or (isinstance(n.func, ast.Name) and n.func.id == "deepcopy"))]
        if any(isinstance(n, ast.Attribute) and n.attr == "__deepcopy__" for n in ast.walk(method)):
            return None  # a base's __deepcopy__ runs too
        if any(isinstance(a, ast.Name) and a.id == me for c in copied for a in c.args):
            return None
        found = _self_reads(handed_roots(method), me)
        return Only(found) if found is not None else frozenset()
    return None


def covered_by_copy(info) -> frozenset | None:
    """The attribute names a copy of the class's objects does not reach (empty: it copies every
    attribute; an :class:`Only`: it reaches those alone), or None when the class's own copy
    protocol decides and the heap does not follow."""
    if info is None or not copies_itself(info):
        return frozenset()
    if not binds_own_copy(info) and any(name in info.facts.methods for name in ("__deepcopy__", "__reduce__",
                                                                               "__reduce_ex__")):
        return _protocol_reach(info)
    getstate = getstate_of(info.node)
    if getstate is None or any(isinstance(s, ast.FunctionDef) and s.name in ("__deepcopy__", "__reduce__",
                                                                              "__reduce_ex__")
                               for s in info.node.body) or not _state_from_dict(getstate):
        return None
    covered = set(covered_attributes(info.node))
    if ALL in covered:
        return None  # every entry detached: nothing on the graph reaches a copy
    if BUFFERS in covered:
        covered |= set(info.facts.buffers)
    return frozenset(covered)


def reach_paths(program, types, flatten) -> list:
    """[(kept, attribute path)] for the graph tensors kept where a deep copy of objects of
    ``types`` goes, each by the shortest way from the copied object (``flatten``: the heap's atoms
    of a set of types).  Records, for each, the object nearest to it on that way and the attribute
    of that object it is reached through (``program.owners``: a hook's closure dict that the model
    holds as ``model.activations`` is the model's ``activations``), which is the class whose copies
    the copy-safe fix changes."""
    todo = deque((atom, (), None) for atom in sorted(flatten(types), key=repr))  # sorted: the same path in every process
    seen: set = set()
    out: list = []
    kept_by: dict = {}
    held_by: dict = {}
    for (holder, attr), kept in program.kept.items():
        kept_by.setdefault(holder, []).append((attr, kept))
    for (holder, attr), held in program.held.items():
        held_by.setdefault(holder, []).append((attr, held))
    while todo:
        atom, steps, owner = todo.popleft()
        if atom in seen or atom[0] not in ("obj", "alloc", "bound", "partial"):
            continue
        seen.add(atom)
        if atom[0] == "bound":
            todo.append((atom[3], steps + ("__self__",), None))  # deepcopy of a bound method copies its __self__
            continue
        if atom[0] == "partial":
            todo += [(a, steps, None) for a in sorted(flatten(program.partials[atom[1]][2]), key=repr)]
            continue
        covered = covered_by_copy(program.class_info(atom[1])) if atom[0] == "obj" else frozenset()
        if covered is None:
            continue  # its own copy protocol decides what a copy holds
        for attr, kept in kept_by.get(atom, ()):
            if covers(covered, attr):
                program.covered.add((kept.path, kept.node.lineno))
                continue
            out.append((kept, steps + (attr,)))
            by = (atom[1], attr) if atom[0] == "obj" else owner
            if by is not None:
                program.owners.setdefault((kept.path, kept.node.lineno, kept.node.col_offset), by)
        for attr, held in held_by.get(atom, ()):
            if not covers(covered, attr):
                by = (atom[1], attr) if atom[0] == "obj" else owner
                todo += [(a, steps + (attr,), by) for a in sorted(held, key=repr)]
    return sorted(out, key=lambda kp: (kp[0].path, kp[0].node.lineno, kp[0].node.col_offset))
