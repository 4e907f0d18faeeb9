"""The statements of a heap run (:mod:`.heap`): :class:`HeapWalker` binds what names and attributes
hold as a frame's code runs, and puts each store on the objects the run knows (a display made
again while another name holds the old one is another container; a ``with`` of a pool, a queue or
a context binds its name; ``for a, b in zip(xs, ys)`` binds each name to its own sequence's items)."""

from __future__ import annotations

import ast

from .flow import CONTAINER_MUTATORS, Store, Walker, target_root
from .graph_tensors import GRAPH, NOTHING, join
from .heap_model import EMPTY, MP_CONTEXT, MP_PICKLING, POOL, QUEUE, Kept, flatten

_DISPLAYS = (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)
# calls that do nothing to a module's training state that the run does not see: torch's own
# functions (their effects are the table's), copies, and Python's builtins


class HeapWalker(Walker):
    """The statement walker of a :class:`Frame`: binds what names and attributes hold, and puts
    every store on the program's heap."""

    def __init__(self, frame):  # a heap.Frame
        super().__init__(frame)  # stores go to take(), not a bound method kept on itself (a cycle)
        self.frame = frame

    def _holders(self, root: str) -> frozenset:
        f = self.frame
        if root == f.self_name and f.self_atom is not None:
            return frozenset({f.self_atom})
        return flatten(f.name_types(root))

    def take(self, store: Store) -> None:
        if self._deep_store(store):
            return
        holders = self._holders(store.root)
        if not holders:
            return
        if store.kind == "attr":
            direct = store.text == f"{store.root}.{store.attr}"
            code = "GLF001" if direct else "GLF002"
            self.frame.program.store(holders, store.attr or "", store.value, self.frame, store.node, store.stmt,
                                     store.text, code, direct)
        elif store.kind in ("container", "setattr"):
            attr = store.attr or ("[]" if store.kind == "container" else "<setattr>")
            code = "GLF002" if store.kind == "container" else "GLF001"
            self.frame.program.store(holders, attr, store.value, self.frame, store.node, store.stmt, store.text,
                                     code, False)

    def _deep_store(self, store: Store) -> bool:
        """A store through a path (``self.trainer.metrics.update(out)``, ``wrapper.state.logits =
        y``): on the objects the path leads to, where the run knows them; False to store on the
        root's object as for a one-step path."""
        target = store.target
        f = self.frame
        if store.kind == "container" and isinstance(target, ast.Attribute):
            holders = frozenset(a for a in flatten(f.types_of(target)) if a[0] == "alloc")
            if holders:
                f.program.store(holders, "[]", store.value, f, store.node, store.stmt, store.text, "GLF002", False)
                if not isinstance(target.value, ast.Name):
                    return True
                # self.metrics.update(out): on the dict itself too, so that a copy of the dict
                # alone (deepcopy(self.metrics)) reaches it; and on the object, as a one-step path
        if store.kind == "container" and isinstance(target, ast.Subscript):
            # self.stacks[i].append(state): on the list items the run knows too (a copy of one
            # item, deepcopy(stacks[k]), reaches it), and on the object as for a one-step path
            holders = frozenset(a for a in flatten(f.types_of(target)) if a[0] == "alloc")
            if holders:
                f.program.store(holders, "[]", store.value, f, store.node, store.stmt, store.text, "GLF002", False)
        if store.kind == "attr" and isinstance(target, ast.Attribute) and isinstance(target.value, ast.Attribute):
            holders = frozenset(a for a in flatten(f.types_of(target.value)) if a[0] in ("obj", "alloc"))
            if holders:
                f.program.store(holders, target.attr, store.value, f, store.node, store.stmt, store.text, "GLF001", True)
                return True
        return False

    def do_FunctionDef(self, stmt: ast.FunctionDef) -> None:
        key = id(stmt)
        self.frame.program.functions[key] = (stmt, self.frame, self.frame.ctx)
        self.frame.types[stmt.name] = frozenset({("fn", key)})

    do_AsyncFunctionDef = do_FunctionDef

    def do_With(self, stmt: ast.With) -> None:
        # with mp.get_context("spawn").Pool(2) as pool: the name holds the pool (a queue, a
        # context) for the body
        f = self.frame
        for item in stmt.items:
            if isinstance(item.optional_vars, ast.Name) and isinstance(item.context_expr, ast.Call):
                f.eval(item.context_expr)
                types = flatten(f.types_of(item.context_expr)) & {POOL, QUEUE, MP_CONTEXT, MP_PICKLING}
                if types:
                    f.types[item.optional_vars.id] = frozenset(types)
        super().do_With(stmt)

    def do_Return(self, stmt: ast.Return) -> None:
        super().do_Return(stmt)
        self.frame.returned |= self.frame.types_of(stmt.value)
        value = self.returns
        if (value.kind == GRAPH and stmt.value is not None and not value.trail and self.frame.func is not None
                and self.frame.self_atom is None and value.origin):
            # made in the return expression of a plain function (return [encoder(x) for x in
            # items]): the first step of where the caller's value comes from (a module's forward
            # returning its output is what it is for: not a step to name)
            self.returns = value.then(stmt.lineno, "return ", stmt.value, self.frame.ctx.path)

    def do_Delete(self, stmt: ast.Delete) -> None:
        super().do_Delete(stmt)
        for t in stmt.targets:
            if isinstance(t, ast.Attribute):
                self.frame.program.clear(flatten(self.frame.types_of(t.value)), t.attr, self.frame, stmt)

    def do_For(self, stmt: ast.For) -> None:
        self._bind_elements(stmt.target, stmt.iter)
        super().do_For(stmt)

    def _loop_target_stores(self, target: ast.AST, value, stmt) -> None:
        super()._loop_target_stores(target, value, stmt)
        if isinstance(stmt, (ast.For, ast.AsyncFor)) and isinstance(target, ast.Tuple):
            self._bind_elements(target, stmt.iter)  # what the tuple assignment above could not tell

    def _bind_elements(self, target: ast.AST, iterated: ast.AST) -> None:
        """The loop's name holds the container's elements (what was put in a list the run made),
        or the iterated object itself where the run knows no elements of it; ``for a, b in
        zip(xs, ys)``: each name an element of its own sequence; ``for i, x in enumerate(xs)``: x
        an element of xs."""
        if isinstance(target, ast.Name):
            out: set = set()
            for atom in flatten(self.frame.types_of(iterated)):
                elements = self.frame.program.held.get((atom, "[]")) if atom[0] == "alloc" else None
                out |= elements if elements is not None else {atom}
            self.frame.types[target.id] = frozenset(out)
        elif (isinstance(target, ast.Tuple) and isinstance(iterated, ast.Call) and isinstance(iterated.func, ast.Name)
              and not iterated.keywords and not any(isinstance(t, ast.Starred) for t in target.elts)):
            if iterated.func.id == "zip" and len(iterated.args) == len(target.elts):
                for elt, seq in zip(target.elts, iterated.args):
                    self._bind_elements(elt, seq)
            elif iterated.func.id == "enumerate" and len(target.elts) == 2 and iterated.args:
                self._bind_elements(target.elts[1], iterated.args[0])

    def assign(self, target, value_node, value, stmt) -> None:
        f = self.frame
        types = f.types_of(value_node)
        if isinstance(value_node, _DISPLAYS) and isinstance(target, (ast.Name, ast.Attribute)):
            atom = ("alloc", f.ctx.path, value_node.lineno, value_node.col_offset)
            if isinstance(target, ast.Name) and any(atom in flatten(t) for n, t in f.types.items() if n != target.id):
                # made again (a loop's next pass: candidates = []) while another name still holds
                # the one made before (beams = sorted(candidates)): another object
                atom = atom + ("again",)
            types = flatten(types) | {atom}
            if isinstance(value_node, (ast.List, ast.Set, ast.ListComp, ast.SetComp, ast.Dict, ast.DictComp)):
                f.program.held[(atom, "[]")] = _items_held(f, value_node)
                items = value if value.kind == GRAPH and f.grad else NOTHING
                if items.kind == GRAPH:
                    f.program.kept[(atom, "[]")] = Kept(atom, "[]", "GLF001", target, stmt, items, f.ctx.path,
                                                        f.reached(), ast.unparse(target))
        if isinstance(target, ast.Name):
            f.types[target.id] = types
        elif isinstance(target, (ast.Tuple, ast.List)):
            elements = _tuple_elements(types, len(target.elts))
            for elt, t in zip(target.elts, elements):
                if isinstance(elt, ast.Name):
                    f.types[elt.id] = t
                elif isinstance(elt, ast.Attribute):
                    self._hold(elt, t)
        elif isinstance(target, ast.Attribute):
            self._hold(target, types)
        elif isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
            holders = self._holders(target.value.id)
            if holders and target.value.id != f.self_name:
                for atom in holders:
                    if atom[0] == "alloc":
                        key = (atom, "[]")
                        f.program.held[key] = f.program.held.get(key, EMPTY) | flatten(types)
                f.program.store(holders, "[]", value, f, target, stmt, ast.unparse(target), "GLF002", False)
        elif isinstance(target, ast.Subscript) and isinstance(target.value, ast.Attribute):
            # self.logged[name] = metric: the objects put in a dict or list an object holds (the
            # store itself, of a graph tensor, is the walker's container store)
            added = flatten(types)
            if added:
                for atom in flatten(f.types_of(target.value)):
                    if atom[0] == "alloc":
                        key = (atom, "[]")
                        f.program.held[key] = f.program.held.get(key, EMPTY) | added
        super().assign(target, value_node, value, stmt)

    def _hold(self, target: ast.Attribute, types) -> None:
        f = self.frame
        holders = flatten(f.types_of(target.value)) if not (
            isinstance(target.value, ast.Name) and target.value.id == f.self_name and f.self_atom is not None
        ) else frozenset({f.self_atom})
        for atom in holders:
            if atom[0] in ("obj", "alloc"):
                key = (atom, target.attr)
                if (atom[0] == "obj" and len(f.program.made_at.get(atom[1], ())) > 1 and key in f.program.held
                        and not (isinstance(target.value, ast.Name) and target.value.id == f.self_name)):
                    # objects of a class made at several places share the atom: set through a name
                    # (not by a method on its own object), another of them may still hold what it
                    # held (model.acts = acts; clean_model.acts = clean_acts)
                    f.program.held[key] = f.program.held[key] | flatten(types)
                else:
                    f.program.held[key] = flatten(types)

    def call_statement(self, call: ast.Call, stmt) -> None:
        func = call.func
        f = self.frame
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id != f.self_name:
            holders = [a for a in self._holders(func.value.id) if a[0] == "alloc"]
            if holders and func.attr in CONTAINER_MUTATORS:
                args = [f.eval(a) for a in call.args] + [f.eval(k.value) for k in call.keywords]
                if func.attr in ("insert", "setdefault", "__setitem__") and len(args) > 1:
                    args = args[1:]
                for atom in holders:
                    key = (atom, "[]")
                    added = frozenset().union(*(flatten(f.types_of(a)) for a in call.args)) if call.args else EMPTY
                    f.program.held[key] = f.program.held.get(key, EMPTY) | added
                f.program.store(frozenset(holders), "[]", join(*args), f, call, stmt, ast.unparse(func.value), "GLF002", False)
        elif isinstance(func, ast.Attribute) and func.attr in CONTAINER_MUTATORS and call.args:
            # self.items.append(Item(...)): the objects put in a list an object holds (the store
            # itself, of a graph tensor, is the walker's container store)
            added = frozenset().union(*(flatten(f.types_of(a)) for a in call.args))
            if added:
                for atom in flatten(f.types_of(func.value)):
                    if atom[0] == "alloc":
                        key = (atom, "[]")
                        f.program.held[key] = f.program.held.get(key, EMPTY) | added
        if isinstance(func, ast.Attribute) and func.attr == "clear" and isinstance(func.value, ast.Attribute):
            root = target_root(func.value)
            if root is not None:
                # the container's own items first: clearing the attribute forgets what it holds
                f.program.clear(frozenset(a for a in flatten(f.types_of(func.value)) if a[0] == "alloc"), "[]", f, stmt)
                f.program.clear(flatten(f.types_of(func.value.value)), func.value.attr, f, stmt)
        super().call_statement(call, stmt)


def _mode_set(call: ast.Call) -> bool | None:
    """The mode ``m.train(...)`` / ``m.eval()`` puts a module in: ``train()`` and ``train(True)``
    training, ``eval()`` and ``train(False)`` eval; None for a mode the text does not fix."""
    if isinstance(call.func, ast.Attribute) and call.func.attr == "eval":
        return None if call.args or call.keywords else False
    given = call.args[0] if call.args else call.keywords[0].value if call.keywords else None
    if given is None:
        return True
    if isinstance(given, ast.Constant) and isinstance(given.value, bool):
        return given.value
    return None


def _tuple_elements(types, n: int) -> list[frozenset]:
    for atom in types:
        if atom[0] == "tuple" and len(atom[1]) == n:
            return [t for t in atom[1]]
    flat = flatten(types)
    return [flat] * n


def _items_held(f, display: ast.AST, depth: int = 0) -> frozenset:
    """What a list (set, dict) display or comprehension holds: its items' objects, and for an
    item that is a display itself (``[[(nt, rule, state)] for i in range(n)]``: a beam's stacks)
    a container of its own, made where it is written, holding its items in turn."""
    if isinstance(display, ast.DictComp):
        return EMPTY
    items = [display.elt] if isinstance(display, (ast.ListComp, ast.SetComp)) else [
        e for e in getattr(display, "elts", getattr(display, "values", [])) if e is not None]
    out: set = set()
    for item in items:
        if depth < 2 and isinstance(item, (ast.List, ast.Set, ast.ListComp, ast.SetComp, ast.Dict)):
            inner = ("alloc", f.ctx.path, item.lineno, item.col_offset)
            f.program.held[(inner, "[]")] = _items_held(f, item, depth + 1)
            out.add(inner)
        else:
            out |= flatten(f.types_of(item))
    return frozenset(out)
