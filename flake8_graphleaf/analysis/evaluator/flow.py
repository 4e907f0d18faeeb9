"""Walks a function body in order, tracking grad mode and what each name holds, and
reports every place where a value is put on an object (the rules decide which of
those are findings)."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Callable

from .graph_tensors import ARG, GRAPH, LEAF, MODULE, NOTHING, Evaluator, Value, join, join_tuples, short
from .graph_tensors import training_subject, training_test
from ..values import merge_paths
from ..facts import torch_facts
from ..program.grad_mode import grad_guard, grad_mode_of
from ..program.stmtwalk import statements, walk

# Methods that put a value into the container they are called on (Python's, and a set's add).
CONTAINER_MUTATORS = frozenset(
    "append extend insert update setdefault add appendleft extendleft __setitem__".split()
)
is_inplace_method = torch_facts.is_inplace  # a tensor method that changes its receiver (the table's)


@dataclass
class Store:
    """A value put somewhere an object can reach it.

    kind: "attr" (``obj.a = v``, also augmented), "container" (``obj.a.append(v)``,
    ``obj.a[k] = v``), "inplace" (``obj.a.add_(v)``), "setattr", "register_buffer".
    """

    kind: str
    root: str  # the name the target starts from ("self", a hook argument, a local)
    root_value: Value
    attr: str | None  # first attribute after the root, if any
    text: str  # the target as written, e.g. "self.features"
    value: Value
    node: ast.AST  # where to report
    grad: bool  # grad mode where the store happens
    method: str = ""  # for container stores: append, extend, __setitem__ ...
    name_node: ast.AST | None = None  # setattr / register_buffer: the name argument
    stmt: ast.AST | None = None  # the statement that stores (its code is the witness's last step)
    # the store runs only in eval mode (``if not self.training:``, the else of ``if self.training:``)
    eval_only: bool = False
    # the store runs only where a caller turns on a parameter of the root method whose default is
    # off (``if save_feats:`` with ``save_feats=False``): (name, the default as written)
    option: tuple[str, str] | None = None
    target: ast.AST | None = None  # attr: the target (``a.b.c``); container: the container (``a.b``)


def _option_test(test: ast.AST, options: dict[str, str]) -> tuple[str, str] | None:
    """``if save_feats:`` / ``if a and save_feats:`` with ``save_feats`` a root's parameter off by
    default: (name, its default), else None. (``if mask is not None:`` is not one: an optional
    tensor, which callers pass as data, not a switch.)"""
    if not options:
        return None
    if isinstance(test, ast.Name) and test.id in options:
        return test.id, options[test.id]
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return next((o for o in (_option_test(v, options) for v in test.values) if o is not None), None)
    return None


def through_untracked(node: ast.AST) -> bool:
    """Is this target reached through an alias autograd does not track (``.data``: a tensor
    without history sharing the storage)?  What is written there keeps no history."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        if isinstance(node, ast.Attribute) and torch_facts.tensor_attribute(node.attr) == "fresh":
            return True
        node = node.value
    return False


def target_root(node: ast.AST) -> tuple[str, str | None] | None:
    """For ``a.b.c`` / ``a.b[k]`` return (root name, first attribute)."""
    first = None
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        if isinstance(node, ast.Attribute):
            first = node.attr
        node = node.value
    if isinstance(node, ast.Name):
        return node.id, first
    return None



# (walker class, statement class) -> the class's do_<statement class> function, or None (Walker.block)
_DO_METHODS: dict = {}
_UNSEEN = object()

class Walker:
    def __init__(self, ev: Evaluator, on_store: Callable[[Store], None] | None = None):
        self.ev = ev
        self._given = on_store  # what a store is handed to (:meth:`on_store` marks eval-only ones)
        self.returns: Value = NOTHING
        self._returned = False
        self.stmt: ast.stmt | None = None  # the statement being walked
        self.eval_only = False  # inside a branch that runs only in eval mode (the stores say so)
        self._eval_after = False  # the statements after this one run only in eval mode
        self._stop = False  # the path walked returned (a side taken for a known mode): nothing after it runs
        self.options: dict[str, str] = {}  # a root's parameters off by default (name -> the default)
        self.option: tuple[str, str] | None = None  # inside ``if <one of them>:``
        self.unpassed: dict[str, str] = {}  # parameters a call leaves at a default that is off

    def on_store(self, store: Store) -> None:
        # a method, not a closure kept on the walker: no reference cycle, so a run's objects
        # (and the trees they point to) are freed as soon as it ends, without the collector
        if self.eval_only:
            store.eval_only = True
        if self.option is not None and store.option is None:
            store.option = self.option
        self.take(store)

    def take(self, store: Store) -> None:
        """What is done with a store: handed on (a subclass keeps it itself)."""
        self._given(store)

    # -- entry --------------------------------------------------------------------
    def run(self, body: list[ast.stmt]) -> Value:
        self.block(body)
        self._stop = False
        return self.returns

    def block(self, body: list[ast.stmt]) -> None:
        saved = self.eval_only
        try:
            for stmt in body:
                # the class's do_<statement type>, looked up once per (walker class, statement type)
                kind = (self.__class__, stmt.__class__)
                method = _DO_METHODS.get(kind, _UNSEEN)
                if method is _UNSEEN:
                    method = _DO_METHODS[kind] = getattr(self.__class__, "do_" + stmt.__class__.__name__, None)
                if method is not None:
                    self.stmt = stmt
                    method(self, stmt)
                if self._stop:
                    break
                if self._eval_after:  # if self.training: return ... -- the rest runs in eval mode only
                    self._eval_after = False
                    self.eval_only = True
        finally:
            self.eval_only = saved

    def _branches(self, *bodies: list[ast.stmt], not_tensor: tuple[int, str] | None = None,
                  grads: tuple | None = None, eval_branch: int | None = None,
                  option: tuple[str, str] | None = None) -> None:
        """Run bodies as alternatives; afterwards a name holds what any path left in it.
        ``not_tensor``: (branch, name) where the name is known not to hold a tensor. ``grads``:
        each body's grad mode where its test fixes it (``if torch.is_grad_enabled():``), None
        where it does not; a body that needs grad on where it is off never runs. ``eval_branch``:
        the body that runs only in eval mode (its stores say so). ``option``: the first body runs
        only where a caller turns on this parameter of the root, off by default (its stores say so)."""
        ev = self.ev
        start_env, start_self, start_grad = dict(ev.env), dict(ev.self_attrs), ev.grad
        envs, selfs, stopped = [], [], []
        for i, body in enumerate(bodies):
            mode = grads[i] if grads is not None else None
            if mode is True and not start_grad:
                continue
            ev.env, ev.self_attrs = dict(start_env), dict(start_self)
            if mode is False:
                ev.grad = False
            if not_tensor is not None and not_tensor[0] == i and not_tensor[1] in ev.env:
                ev.env[not_tensor[1]] = NOTHING
            saved_eval, saved_option = self.eval_only, self.option
            self.eval_only = saved_eval or i == eval_branch
            if i == 0 and option is not None and saved_option is None:
                self.option = option
            self._stop = False
            try:
                self.block(body)
            finally:
                ev.grad = start_grad
                self.eval_only, self.option = saved_eval, saved_option
            stopped.append(self._stop)
            envs.append(ev.env)
            selfs.append(ev.self_attrs)
        self._stop = bool(stopped) and all(stopped)  # what follows runs unless every path returned
        if not envs:
            envs, selfs = [start_env], [start_self]
        ev.env = _merge(envs)
        ev.self_attrs = _merge(selfs)

    # -- statements ---------------------------------------------------------------
    def do_Expr(self, stmt: ast.Expr) -> None:
        value = stmt.value
        self.ev.eval(value)
        if isinstance(value, ast.Call):
            self.call_statement(value, stmt)

    def do_Assign(self, stmt: ast.Assign) -> None:
        value = self.ev.eval(stmt.value)
        for target in stmt.targets:
            self.assign(target, stmt.value, value, stmt)

    def do_AnnAssign(self, stmt: ast.AnnAssign) -> None:
        if stmt.value is not None:
            self.assign(stmt.target, stmt.value, self.ev.eval(stmt.value), stmt)

    def do_AugAssign(self, stmt: ast.AugAssign) -> None:
        ev = self.ev
        added = ev.eval(stmt.value)
        target = stmt.target
        old = ev.eval(target)
        listish = isinstance(stmt.value, (ast.List, ast.Tuple, ast.ListComp))
        new = join(old, added) if listish else ev.computed(old, added)
        if not listish and old.kind == GRAPH:
            new = old if new.kind < GRAPH else new
        if isinstance(target, ast.Name):
            ev.env[target.id] = new.then(stmt.lineno, "", stmt, ev.code_path) if new.kind >= ARG else new
            return
        root = target_root(target)
        if root is None or through_untracked(target):
            return  # p.data += v: in place on the storage, no history
        if isinstance(target, ast.Subscript) or listish:
            self._emit("container", target if listish else target.value, added, target, method="+=" if listish else "__setitem__")
            return
        self._emit("attr", target, new, target)
        if isinstance(target, ast.Attribute) and ev.is_self(target.value):
            ev.self_attrs[target.attr] = new

    def do_Return(self, stmt: ast.Return) -> None:
        value = self.ev.eval(stmt.value)
        self.returns = value if not self._returned else join_tuples(self.returns, value)
        self._returned = True

    def do_If(self, stmt: ast.If) -> None:
        self.ev.eval(stmt.test)
        decided = self.ev.decided(stmt.test)
        if decided is not None:  # if self.store_attn: ... with the flag fixed to False
            self.block(stmt.body if decided else stmt.orelse)
            return
        if self.ev.infeasible_parameter_test(stmt.test):
            self.block(stmt.orelse)  # isinstance(w, nn.Parameter) with w no parameter: the body never runs
            return
        training = training_test(stmt.test)  # if self.training: ... else: (eval mode only)
        if training is not None:
            mode = self.ev.training_of(training_subject(stmt.test))
            if mode is not None:  # the program put the object in that mode: the other side never runs
                taken = stmt.body if training == mode else stmt.orelse
                self.block(taken)
                if taken and isinstance(taken[-1], (ast.Return, ast.Raise)):
                    self._stop = True  # if self.training: return ... in training mode: the rest never runs
                return
            self._branches(stmt.body, stmt.orelse, eval_branch=1 if training else 0)
            trains, evals = (stmt.body, stmt.orelse) if training else (stmt.orelse, stmt.body)
            if trains and isinstance(trains[-1], (ast.Return, ast.Raise)) and not evals:
                self._eval_after = True  # training returns here: what follows is eval mode's
            return
        if _option_test(stmt.test, self.unpassed) is not None:
            self.block(stmt.orelse)  # if save_feats: ... in a call that leaves save_feats=False
            return
        guard = grad_guard(stmt.test, self.ev.imports)  # if torch.is_grad_enabled(): ... else: (no grad)
        if guard is not None:
            self._branches(stmt.body, stmt.orelse, grads=guard)
            return
        name, is_tensor = self.ev.tensor_test(stmt.test)  # if isinstance(x, torch.Tensor): ... else: x is none
        self._branches(stmt.body, stmt.orelse, not_tensor=None if name is None else (int(is_tensor), name),
                       eval_branch=_eval_side(stmt.test), option=_option_test(stmt.test, self.options))

    def do_For(self, stmt: ast.For) -> None:
        ev = self.ev
        it = ev.eval(stmt.iter)
        ev.bind_iteration(stmt.target, stmt.iter, it)
        self._loop_target_stores(stmt.target, it, stmt)
        # Twice, so that a value carried to the next iteration is seen.
        self._branches([], stmt.body + stmt.body)
        self.block(stmt.orelse)

    do_AsyncFor = do_For

    def do_While(self, stmt: ast.While) -> None:
        self.ev.eval(stmt.test)
        self._branches([], stmt.body + stmt.body)
        self.block(stmt.orelse)

    def do_With(self, stmt: ast.With) -> None:
        ev = self.ev
        saved = ev.grad
        grad = saved
        for item in stmt.items:
            grad = grad_mode_of(item.context_expr, ev.imports, grad)
            if not isinstance(item.context_expr, ast.Call) or ev.imports.qualname(item.context_expr.func) is None:
                ev.eval(item.context_expr)
            if item.optional_vars is not None:
                ev.bind_target(item.optional_vars, NOTHING)
        ev.grad = grad
        try:
            self.block(stmt.body)
        finally:
            ev.grad = saved

    do_AsyncWith = do_With

    def do_Try(self, stmt: ast.Try) -> None:
        self.block(stmt.body)
        self._branches([], *[h.body for h in stmt.handlers])
        self.block(stmt.orelse)
        self.block(stmt.finalbody)

    do_TryStar = do_Try

    def do_Match(self, stmt) -> None:
        self.ev.eval(stmt.subject)
        self._branches([], *[c.body for c in stmt.cases])

    def do_Delete(self, stmt: ast.Delete) -> None:
        for t in stmt.targets:
            if isinstance(t, ast.Attribute) and self.ev.is_self(t.value):
                self.ev.self_attrs[t.attr] = NOTHING

    def do_Raise(self, stmt: ast.Raise) -> None:
        self.ev.eval(stmt.exc)

    def do_Assert(self, stmt: ast.Assert) -> None:
        self.ev.eval(stmt.test)

    # -- stores -------------------------------------------------------------------
    def assign(self, target: ast.AST, value_node: ast.AST, value: Value, stmt: ast.stmt) -> None:
        ev = self.ev
        if isinstance(target, ast.Name):
            if value.kind >= LEAF:
                value = value.then(stmt.lineno, "", stmt, ev.code_path) if isinstance(
                    stmt, (ast.Assign, ast.AnnAssign)) else value.then(stmt.lineno, f"{target.id} = ", value_node, ev.code_path)
            ev.env[target.id] = value
            if isinstance(value_node, (ast.List, ast.Tuple, ast.Dict, ast.ListComp, ast.DictComp)):
                ev.containers.add(target.id)
            else:
                ev.containers.discard(target.id)
        elif isinstance(target, (ast.Tuple, ast.List)):
            pairs = None
            starred = any(isinstance(e, ast.Starred) for e in target.elts)
            if (
                isinstance(value_node, (ast.Tuple, ast.List))
                and len(value_node.elts) == len(target.elts)
                and not starred and not any(isinstance(e, ast.Starred) for e in value_node.elts)
            ):
                pairs = [(t, v, ev.eval(v)) for t, v in zip(target.elts, value_node.elts)]
            elif value.items is not None and len(value.items) == len(target.elts) and not starred:
                pairs = [(t, value_node, item) for t, item in zip(target.elts, value.items)]
            for i, elt in enumerate(target.elts):
                if pairs is not None:
                    self.assign(elt, pairs[i][1], pairs[i][2], stmt)
                else:
                    self.assign(elt, value_node, value, stmt)
        elif isinstance(target, ast.Starred):
            self.assign(target.value, value_node, value, stmt)
        elif isinstance(target, ast.Attribute):
            if target.attr == "data":
                return  # t.data = v swaps t's storage: t keeps no history (a Parameter stays a leaf)
            if ev.is_self(target.value) and value.kind == GRAPH and self._only_from_own_parameter(target.attr, value_node):
                # self.alpha = self.alpha.clamp(0, 1) where self.alpha is an nn.Parameter on the
                # paths that give the value its history: Module.__setattr__ raises TypeError
                # there (a Parameter's name takes only a Parameter); on the others it has none
                value = NOTHING
            self._emit("attr", target, value, target)
            if ev.is_self(target.value):
                ev.self_attrs[target.attr] = value.then(stmt.lineno, "", stmt, ev.code_path) if value.kind >= LEAF else value
        elif isinstance(target, ast.Subscript):
            base = target.value
            if through_untracked(base):
                return  # self.embed.data[ind] = v: written where autograd does not look
            if isinstance(base, ast.Name) and base.id != ev.self_name:
                old = ev.env.get(base.id, NOTHING)
                key = target.slice.value if isinstance(target.slice, ast.Constant) else None
                if old.keys is not None and isinstance(key, str):
                    ev.env[base.id] = old.with_keys({**old.keys, key: value})  # data["pred"] = out
                else:
                    ev.env[base.id] = join(old, value)
                if old.kind == MODULE:
                    self._emit("container", base, value, target, method="__setitem__")
                return
            if self._keeps_no_graph(base, "__setitem__"):
                return
            self._emit("container", base, value, target, method="__setitem__")
            if isinstance(base, ast.Attribute) and ev.is_self(base.value) and value.kind == GRAPH and ev.grad:
                # self.buf[0] = out: the tensor written into now has a grad_fn (CopySlices), a
                # container now holds the graph tensor; what is computed from it later carries it
                ev.self_attrs[base.attr] = join(ev.self_attr(base.attr), value.then(stmt.lineno, "", stmt, ev.code_path))

    def _only_from_own_parameter(self, attr: str, value_node: ast.AST | None) -> bool:
        """Does the value stored in ``self.<attr>`` get its history only from the nn.Parameter
        that ``self.<attr>`` holds on some paths (the value computed again with the attribute
        holding none is no graph tensor)?"""
        ev = self.ev
        facts = ev.facts
        if (value_node is None or facts is None or not facts.is_module or attr not in facts.params
                or ev.self_attr(attr).kind != LEAF):
            return False
        saved = ev.self_attrs.get(attr)
        hooks = ev.on_call, ev.on_module_call, ev.fed
        ev.on_call = ev.on_module_call = None
        ev.fed = set(ev.fed) if ev.fed is not None else None
        ev.self_attrs[attr] = NOTHING
        try:
            without = ev.eval(value_node)
        finally:
            ev.on_call, ev.on_module_call, ev.fed = hooks
            if saved is None:
                ev.self_attrs.pop(attr, None)
            else:
                ev.self_attrs[attr] = saved
        return without.kind < ARG

    def _is_set(self, container: ast.AST) -> bool:
        """``self.<attr>`` that the class assigns a set (the only standard container with ``add``)."""
        ev = self.ev
        return (isinstance(container, ast.Attribute) and ev.is_self(container.value) and ev.facts is not None
                and container.attr in ev.facts.sets)

    def _keeps_no_graph(self, container: ast.AST, method: str) -> bool:
        """``self.<attr>`` built as one of torch's container modules that does not keep a graph
        tensor given to ``method`` (the semantics table): an nn.ParameterList makes it an
        nn.Parameter, a leaf; an nn.ModuleList refuses anything but a module (TypeError)."""
        ev = self.ev
        if not (isinstance(container, ast.Attribute) and ev.is_self(container.value) and ev.facts is not None):
            return False
        ctor = ev.facts.submodule_ctors.get(container.attr, "").rsplit(".", 1)[-1]
        return torch_facts.container_store(ctor, method) in ("raises", "leaf")

    def _loop_target_stores(self, target: ast.AST, value: Value, stmt: ast.stmt) -> None:
        if isinstance(target, (ast.Attribute, ast.Subscript, ast.Tuple, ast.List)):
            if not isinstance(target, ast.Name):
                self.assign(target, stmt.iter, value, stmt)

    def call_statement(self, call: ast.Call, stmt: ast.stmt) -> None:
        ev = self.ev
        func = call.func
        if isinstance(func, ast.Name) and func.id == "setattr" and len(call.args) >= 3:
            obj = call.args[0]
            root = target_root(obj) if not isinstance(obj, ast.Name) else (obj.id, None)
            if root is not None:
                self.on_store(
                    Store(
                        "setattr", root[0], ev.eval(_root_node(obj)), root[1], short(obj), ev.eval(call.args[2]),
                        call, ev.grad, name_node=call.args[1], stmt=self.stmt,
                    )
                )
            return
        if not isinstance(func, ast.Attribute):
            return
        meth = func.attr
        recv = func.value
        if meth == "register_buffer" and len(call.args) >= 2:
            root = target_root(recv) if not isinstance(recv, ast.Name) else (recv.id, None)
            if root is not None:
                self.on_store(
                    Store(
                        "register_buffer", root[0], ev.eval(_root_node(recv)), root[1], short(recv),
                        ev.eval(call.args[1]), call, ev.grad, name_node=call.args[0], stmt=self.stmt,
                    )
                )
            return
        if meth in CONTAINER_MUTATORS:
            args = [ev.eval(a) for a in call.args] + [ev.eval(k.value) for k in call.keywords]
            if meth in ("insert", "setdefault", "__setitem__") and len(args) > 1:
                args = args[1:]
            added = join(*args)
            if isinstance(recv, ast.Name):
                old = ev.env.get(recv.id)
                if old is not None:
                    ev.env[recv.id] = _mutated(old, meth, call, args, added)
                    return
                return  # a method of the object itself (self.update(...)), or of a plain name
            if meth in ("update", "add") and ev.eval(recv).kind == MODULE:
                return  # self.metric.update(preds, target): a submodule's method, not dict.update
            if meth == "add" and not self._is_set(recv):
                return  # set.add keeps its element; a faiss index's add copies it, Tensor.add is out of place
            if meth == "update" and not _mapping_arguments(call, ev):
                return  # dict.update takes a mapping or keywords; self.metric.update(*args) is a method
            if self._keeps_no_graph(recv, meth):
                return
            self._emit("container", recv, added, call, method=meth)
            return
        if is_inplace_method(meth):
            values: list[Value] = []
            node: ast.AST = call
            while (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and is_inplace_method(node.func.attr)
            ):
                values += [ev.eval(a) for a in node.args] + [ev.eval(k.value) for k in node.keywords]
                node = node.func.value
            if through_untracked(node):
                return  # p.data.copy_(v), self.embed.data[i].zero_(): autograd does not see it
            if isinstance(node, ast.Name):
                old = ev.env.get(node.id)
                if old is not None:
                    ev.env[node.id] = join(old, ev.computed(NOTHING, *values))
                return
            self._emit("inplace", node, ev.computed(NOTHING, *values), call, method=meth)

    def _emit(self, kind: str, target: ast.AST, value: Value, where: ast.AST, method: str = "") -> None:
        root = target_root(target) if not isinstance(target, ast.Name) else (target.id, None)
        if root is None:
            return
        self.on_store(
            Store(kind, root[0], self.ev.eval(_root_node(target)), root[1], short(target), value, where, self.ev.grad, method,
                  stmt=self.stmt, target=target)
        )


def _mapping_arguments(call: ast.Call, ev) -> bool:
    """Could ``x.update(...)`` be ``dict.update``: keywords, or a mapping / pairs argument?"""
    if len(call.args) > 1 or any(isinstance(a, ast.Starred) for a in call.args):
        return False  # dict.update takes at most one positional argument
    if call.keywords:
        return True
    for a in call.args:
        if isinstance(a, (ast.Dict, ast.DictComp)):
            return True
        if isinstance(a, ast.Call) and isinstance(a.func, ast.Name) and a.func.id in ("dict", "zip"):
            return True
        if isinstance(a, ast.Name) and a.id in ev.containers:
            return True
        if isinstance(a, ast.Name) and getattr(ev.env.get(a.id), "keys", None) is not None:
            return True  # a dict with string keys (a step's returned {"loss": loss, "pred": out})
    return False


def _root_node(node: ast.AST) -> ast.AST:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node


def _mutated(old: Value, meth: str, call: ast.Call, args: list[Value], added: Value) -> Value:
    """A dict with string keys after ``d.update(...)`` / ``d.setdefault(...)``: the entries named
    by keyword or constant key get their values, every other entry may have been replaced by
    what the call passes (``d.update(other)``); a container that is not, or another mutator:
    the join of the old value and what is added."""
    if old.keys is None or meth not in ("update", "setdefault"):
        return join(old, added)
    keys = dict(old.keys)
    if meth == "setdefault":
        key = call.args[0] if call.args else None
        if isinstance(key, ast.Constant) and isinstance(key.value, str) and len(args) > 0:
            keys.setdefault(key.value, args[0])
            return old.with_keys(keys)
        return join(old, added)
    by_keyword = list(zip(call.keywords, args[len(call.args):]))
    named = {k.arg: a for k, a in by_keyword if k.arg is not None}  # d.update(cell=c)
    rest = join(*args[:len(call.args)], *(a for k, a in by_keyword if k.arg is None))  # d.update(other), **other
    keys.update(named)
    if rest.keys is not None:  # d.update({"cell": c}) / d.update(other_dict_with_known_keys)
        keys.update(rest.keys)
    elif rest.kind > NOTHING.kind:  # d.update(other): any entry may now be one of other's
        keys = {k: (v if k in named else join(v, rest)) for k, v in keys.items()}
    return old.with_keys(keys)


def _merge(dicts: list[dict]) -> dict:
    """The names after alternative paths (``merge_paths`` of what each path left in a name)."""
    first, rest = dicts[0], dicts[1:]
    out = {}
    for k, v in first.items():
        # a name no path changed holds what it held (most of them: each path starts from a copy)
        for d in rest:
            if d.get(k, _MISSING) is not v:
                out[k] = merge_paths([p[k] for p in dicts if k in p])
                break
        else:
            out[k] = v
    for i, d in enumerate(rest, 1):
        for k in d:
            if k not in out:  # a name the first path did not leave: what the paths that have it hold
                out[k] = merge_paths([p[k] for p in dicts[i:] if k in p])
    return out


_MISSING = object()


def overwritten_later(
    func: ast.AST, target: ast.AST, text: str, reported: set[tuple[int, int]], resetters: dict | None = None
) -> bool:
    """Is the store at ``target`` replaced or cleared, on every path, before it can outlive the
    method?  In the same block, a later plain assignment to the same attribute that is not itself
    reported (``self.w = w * s; self.w = self.w.detach()``), ``del self.w``, ``self.w.clear()``, or
    a call of a method that does one of these (``self._clear_cache()``; ``resetters``: method name
    -> the attributes it resets); or the same in the ``finally`` of a ``try`` around the store."""
    resetters = resetters or {}
    blocks = [func.body] + [
        getattr(s, name) for s in statements(func) for name in ("body", "orelse", "finalbody")
        if isinstance(getattr(s, name, None), list)
    ]
    attr = text.split(".", 1)[1] if "." in text else text
    # every block around the store, outermost first: a reset after the statement that holds the
    # store, in any of them, is on every path, unless a return or raise gets out before it
    for block in blocks:
        for i, stmt in enumerate(block):
            if not (stmt.lineno <= target.lineno <= stmt.end_lineno):
                continue
            if not any(n is target for n in walk(stmt)):
                continue
            if isinstance(stmt, ast.Try) and any(_resets(s, text, attr, reported, resetters) for s in stmt.finalbody):
                return True
            if not _leaves(stmt, target.lineno) and _reset_after(block[i + 1:], text, attr, reported, resetters):
                return True
            break
    return False


def _reset_after(later: list, text: str, attr: str, reported, resetters: dict) -> bool:
    for stmt in later:
        if _resets(stmt, text, attr, reported, resetters):
            return True
        if isinstance(stmt, ast.Try) and any(_resets(s, text, attr, reported, resetters) for s in stmt.finalbody):
            return True  # try: return self.base(x) / finally: self.base.weight = w_orig
        if _leaves(stmt, stmt.lineno):
            return False
    return False


def _leaves(stmt: ast.stmt, after_line: int) -> bool:
    """Does ``stmt`` return or raise (outside a nested function) at or after ``after_line``?"""
    todo = [stmt]
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Return, ast.Raise)) and node.lineno >= after_line:
            return True
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.expr)):
                todo.append(child)
    return False


def _resets(stmt: ast.stmt, text: str, attr: str, reported, resetters: dict) -> bool:
    if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        return any(short(t) == text and (t.lineno, t.col_offset) not in reported for t in targets)
    if isinstance(stmt, ast.Delete):
        return any(short(t) == text for t in stmt.targets)
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Attribute):
        f = stmt.value.func
        if f.attr == "clear" and short(f.value) == text:
            return True
        if isinstance(f.value, ast.Name) and text.startswith(f.value.id + ".") and attr in resetters.get(f.attr, ()):
            return True  # self._clear_cache(): a method that resets the attribute
    return False


def resets_of(method: ast.AST) -> set[str]:
    """The attributes of ``self`` that a method resets unconditionally (``self.x = None``,
    ``del self.x``, ``self.x.clear()`` in its top-level statements)."""
    params = method.args.posonlyargs + method.args.args
    if not params:
        return set()
    me = params[0].arg
    out: set[str] = set()
    for stmt in method.body:
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant) and stmt.value.value is None:
            out |= {t.attr for t in stmt.targets if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == me}
        elif isinstance(stmt, ast.Delete):
            out |= {t.attr for t in stmt.targets if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == me}
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Attribute):
            f = stmt.value.func
            if f.attr == "clear" and isinstance(f.value, ast.Attribute) and isinstance(f.value.value, ast.Name) and f.value.value.id == me:
                out.add(f.value.attr)
    return out


def _eval_side(test: ast.AST) -> int | None:
    """The branch of ``if test:`` that runs only in eval mode where the test joins a training
    test with others: the body of ``if not self.training and self.cache is None:`` (0), the
    else of ``if self.training or x is None:`` (1); None where neither side is fixed."""
    if isinstance(test, ast.BoolOp):
        wanted = False if isinstance(test.op, ast.And) else True
        if any(training_test(v) is wanted for v in test.values):
            return 0 if isinstance(test.op, ast.And) else 1
    return None
