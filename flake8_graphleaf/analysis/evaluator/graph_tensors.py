"""The one place that decides what a "graph tensor" is.

A value *may carry a grad_fn* when it is computed, with grad mode on, from a
submodule call, from a parameter, from a ``forward`` argument, or from torch
operations on any of those.  Every rule asks :class:`Evaluator` about an
expression and gets back a :class:`~..values.Value` of the lattice in :mod:`..values`
(NONE < MODULE < LEAF < ARG < GRAPH).

The pieces: :mod:`..values` (the lattice), :mod:`..facts.torch_names` (what torch, tensor and module
names mean), :mod:`.calls` (the semantics of calls, a mixin of :class:`Evaluator`), and this
module (the evaluator of expressions and the class facts it reads).  Rules import from here only.
"""

from __future__ import annotations

import ast
from typing import Callable

from .calls import CallSemantics, is_property
from ..program.imports import ImportMap
from ..program.modules import ClassFacts
from ..facts import torch_facts
from ..program.flags import test_value
from ..facts.torch_names import is_size_name, argument_value, looks_like_module_name, looks_like_parameter
from ..values import _guess, ARG, GRAPH, LEAF, MODULE, NONE, NOTHING, Value, constant_names, join, join_tuples, name_constant, short

__all__ = [
    "ARG", "GRAPH", "LEAF", "MODULE", "NONE", "NOTHING", "ClassFacts", "Evaluator", "Value", "argument_value",
    "join", "join_tuples", "looks_like_module_name", "looks_like_parameter", "short",
]


_SCALAR_TYPES = frozenset("str int float bool bytes complex".split())
_PARAMETER_QUALS = ("torch.nn.Parameter", "torch.nn.parameter.Parameter")
_TENSOR_QUALS = ("torch.Tensor", *_PARAMETER_QUALS)


# A call back for ``self.method(...)``: given the method name, the argument values and
# grad mode, return the value the method returns (or None if unknown).
MethodCallback = Callable[[str, list, dict, bool], "Value | None"]



# (evaluator class, node class) -> the class's eval_<node class> function, or None (Evaluator.eval)
_EVAL_METHODS: dict = {}
_UNSEEN = object()

class Evaluator(CallSemantics):
    """Evaluates expressions of one function body against an environment of names."""

    def __init__(
        self,
        imports: ImportMap,
        facts: ClassFacts | None,
        self_name: str | None,
        module_classes: set[str],
        on_method: MethodCallback | None = None,
    ):
        self.imports = imports
        self.facts = facts
        self.self_name = self_name
        self.module_classes = module_classes
        self.on_method = on_method
        # Observer of calls with a known qualified name (deepcopy, AveragedModel ...).
        self.on_call: Callable | None = None
        self.env: dict[str, Value] = {}
        self.self_attrs: dict[str, Value] = {}  # self.X assigned earlier in this body
        self.containers: set[str] = set()  # local names bound to list / dict / tuple displays
        self.grad = True
        self.building = False  # construction: calling a module-like name builds a module
        self.depth = 0  # how deep in other functions' bodies (project_view.function_effect) we are
        # Origins of argument values that reach a learnable computation (a submodule call, an op
        # with a parameter): such an argument is an activation, on the graph whenever the caller's
        # is.  Shared by the runs of one class (ClassRunner); None: not recorded.
        self.fed: set[str] | None = None
        # Observer of module calls: (callee origin, positional values, keyword values, grad).
        self.on_module_call: Callable | None = None
        # ``self.<helper>.method(...)`` on a helper object (ClassFacts.helpers): (attr, method,
        # positional values, keyword values, call node, grad) -> the value it returns, or None.
        self.on_helper: Callable | None = None
        # (helper attr, its attr) -> the graph tensor a helper call of this run left there
        # (``self.var.update(out)`` writing into ``self.var.tensor``): a later read sees it
        self.helper_state: dict[tuple[str, str], Value] = {}
        # ``super().method(...)`` (not forward): (method, positional, keyword, grad) -> value or None.
        self.on_super: Callable | None = None
        self.nesting = 0  # how many other classes' methods deep this run is (helper objects, forward results)

    # -- helpers ------------------------------------------------------------------
    def feed(self, *values: Value) -> None:
        """``values`` go into a learnable computation: remember the arguments among them."""
        if self.fed is not None:
            for v in values:
                if v.kind == ARG:
                    self.fed.add(v.origin)

    def module_call(self, origin: str, pos: list[Value], kw: dict[str, Value]) -> Value:
        """The result of calling a module (``origin``: ``self.norm``, ``self.blocks[...]``) or
        something computed from parameters with these arguments."""
        if self.on_module_call is not None:
            self.on_module_call(origin, pos, kw, self.grad)
        if not self.grad:
            return NOTHING
        if not self._injected(origin):
            self.feed(*pos, *kw.values())
        elif self.building:
            return NOTHING  # a given object called while the module is built: a tokenizer, a factory
        return Value(GRAPH, origin)

    def _injected(self, origin: str) -> bool:
        """Is the called module one the class was given (``self.model = model`` in ``__init__``)
        rather than one it built?  Feeding an argument to a given model (a guide's model, a beam
        search's scorers, a kernel wrapper's kernel) says nothing about where the argument comes
        from: the class may sit at the top, called with data."""
        if self.facts is None or not self.facts.injected or not origin.startswith("self."):
            return False
        attr = origin[5:].split(".", 1)[0].split("(", 1)[0].split("[", 1)[0]
        return attr in self.facts.injected

    def computed(self, origin: Value, *operands: Value) -> Value:
        """Result of a differentiable computation on ``operands``."""
        if not self.grad:
            return NOTHING
        # An operation on a parameter or on a graph tensor carries a grad_fn; one on
        # arguments only does when the caller passes a graph tensor.
        certain = [v for v in (origin, *operands) if v.kind in (GRAPH, LEAF)]
        if self.fed is not None and certain:
            # combined with a parameter, or with what was computed from one (``gamma.repeat(n) * x``)
            self.feed(origin, *operands)
        if certain:
            first = next((v for v in certain if v.kind == GRAPH), certain[0])
            return Value(GRAPH, first.origin, trail=first.trail, guess=first.guess)
        maybe = next((v for v in (origin, *operands) if v.kind == ARG), None)
        return Value(ARG, maybe.origin, trail=maybe.trail, guess=maybe.guess) if maybe is not None else NOTHING

    def is_self(self, node: ast.AST) -> bool:
        return isinstance(node, ast.Name) and self.self_name is not None and node.id == self.self_name

    def self_attr(self, attr: str) -> Value:
        f = self.facts
        if f is not None and attr in f.frozen:
            # a parameter registered with requires_grad=False (or set so) that no method turns on
            # again: no grad source (only a Parameter can be assigned to its name)
            return NOTHING
        if attr in self.self_attrs:
            return self.self_attrs[attr]
        if f is None:
            return NOTHING
        if attr in f.params:
            return Value(LEAF, f"parameter self.{attr}")
        if attr in f.submodules:
            return Value(MODULE, f"self.{attr}")
        if attr in f.methods and self.on_method is not None and is_property(f.methods[attr]):
            result = self.on_method(attr, [], {}, self.grad)  # a @property: what its body returns
            return result if result is not None else NOTHING
        if attr in f.buffers or attr in f.functional or attr in f.plain or attr in f.methods:
            return NOTHING
        if looks_like_parameter(attr) and f.is_module and attr not in f.assigned:
            return Value(LEAF, f"parameter self.{attr}")  # inherited, e.g. from nn.Linear
        return NOTHING

    # -- expressions --------------------------------------------------------------
    def eval(self, node: ast.AST | None) -> Value:
        if node is None:
            return NOTHING
        # the class's eval_<node type>, looked up once per (evaluator class, node type): the
        # evaluators are walked node by node, and building the name and getattr on every node
        # cost about a tenth of a second on torch
        kinds = node.__class__
        method = _EVAL_METHODS.get((self.__class__, kinds), _UNSEEN)
        if method is _UNSEEN:
            method = _EVAL_METHODS[(self.__class__, kinds)] = getattr(self.__class__, "eval_" + kinds.__name__, None)
        if method is None:
            return NOTHING
        return method(self, node)

    def eval_Constant(self, node: ast.Constant) -> Value:
        if isinstance(node.value, str) and node.value.isidentifier():
            # no history, but the name travels: getattr(self.network, attr_name) in a helper
            # called with "spatial_dims" reads that attribute (see constant_name)
            return name_constant(node.value)
        return NOTHING

    def eval_JoinedStr(self, node: ast.AST) -> Value:
        return NOTHING

    def eval_Lambda(self, node: ast.AST) -> Value:
        return NOTHING

    def eval_Compare(self, node: ast.Compare) -> Value:
        self.eval(node.left)
        for c in node.comparators:
            self.eval(c)
        return NOTHING

    def name_value(self, name: str) -> Value | None:
        """What the name holds where it is read (a function's run also sees its closure's and the
        module's names: heap.Frame), or None where nothing binds it."""
        return self.env.get(name)

    def eval_Name(self, node: ast.Name) -> Value:
        v = self.name_value(node.id)
        if v is not None:
            return v
        if node.id == self.self_name:
            return Value(MODULE, "self") if self.facts is not None and self.facts.is_module else NOTHING
        return NOTHING

    def eval_Starred(self, node: ast.Starred) -> Value:
        return self.eval(node.value)

    def eval_NamedExpr(self, node: ast.NamedExpr) -> Value:
        v = self.eval(node.value)
        if isinstance(node.target, ast.Name):
            self.env[node.target.id] = v
        return v

    def eval_Await(self, node: ast.Await) -> Value:
        return self.eval(node.value)

    code_path: str | None = None  # the file of the code evaluated, where a run crosses files (heap.Frame)

    def training_of(self, node: ast.AST) -> bool | None:
        """The mode (True: training) of the module ``node`` names, where the program shows it;
        None here (a class's own run cannot tell who put it in which mode)."""
        return None

    def decided(self, test: ast.AST) -> bool | None:
        """True / False where the test reads only attributes the class fixes (flags.settled), or
        compares a name that holds one string constant here (``mode == "norm"`` in a method its
        caller passed ``"denorm"``)."""
        flags = self.facts.flags if self.facts is not None else None
        found = test_value(test, self.self_name, flags) if flags else None
        return found if found is not None else self._constant_test(test)

    def _constant_test(self, test: ast.AST) -> bool | None:
        if isinstance(test, ast.BoolOp):
            parts = [self._constant_test(v) for v in test.values]
            if isinstance(test.op, ast.And):
                return False if False in parts else True if all(p is True for p in parts) else None
            return True if True in parts else False if all(p is False for p in parts) else None
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            inner = self._constant_test(test.operand)
            return None if inner is None else not inner
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
            return None
        left, op, right = test.left, test.ops[0], test.comparators[0]
        if isinstance(left, ast.Constant) and isinstance(right, ast.Name):
            left, right = right, left
        if not isinstance(left, ast.Name):
            return None
        held = constant_names(self.name_value(left.id) or NOTHING)
        if held is None or len(held) != 1:
            return None
        if isinstance(op, (ast.Eq, ast.NotEq)) and isinstance(right, ast.Constant) and isinstance(right.value, str):
            return (held[0] == right.value) == isinstance(op, ast.Eq)
        if isinstance(op, (ast.In, ast.NotIn)) and isinstance(right, (ast.Tuple, ast.List, ast.Set)) and all(
                isinstance(e, ast.Constant) and isinstance(e.value, str) for e in right.elts):
            return (held[0] in [e.value for e in right.elts]) == isinstance(op, ast.In)
        return None

    def eval_IfExp(self, node: ast.IfExp) -> Value:
        self.eval(node.test)
        decided = self.decided(node.test)
        training = training_test(node.test)
        if decided is None and training is not None:  # x if self.training else y, the mode known
            mode = self.training_of(training_subject(node.test))
            decided = None if mode is None else training == mode
        if decided is not None:
            return self.eval(node.body if decided else node.orelse)
        if self.infeasible_parameter_test(node.test):
            return self.eval(node.orelse)
        name, is_tensor = self.tensor_test(node.test)
        if name is None:
            return join(self.eval(node.body), self.eval(node.orelse))
        # x.detach() if isinstance(x, torch.Tensor) else x: where the test fails, x is no tensor
        body, orelse = (node.body, node.orelse) if is_tensor else (node.orelse, node.body)
        kept = self.env.get(name)
        self.env[name] = NOTHING
        try:
            not_tensor = self.eval(orelse)
        finally:
            if kept is None:
                self.env.pop(name, None)
            else:
                self.env[name] = kept
        return join(self.eval(body), not_tensor)

    def _isinstance_test(self, test: ast.AST) -> tuple[str, list[ast.AST], bool] | None:
        """(name, the classes named, negated) for ``[not] isinstance(name, C)`` / ``(C1, C2)``."""
        negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
        if negated:
            test = test.operand
        if (isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and test.func.id == "isinstance"
                and len(test.args) == 2 and isinstance(test.args[0], ast.Name)):
            kinds = test.args[1].elts if isinstance(test.args[1], ast.Tuple) else [test.args[1]]
            return test.args[0].id, kinds, negated
        return None

    def infeasible_parameter_test(self, test: ast.AST) -> bool:
        """``isinstance(x, nn.Parameter)`` where x holds no parameter here (a value with no
        history or a graph tensor, never a leaf): the test cannot hold."""
        found = self._isinstance_test(test)
        if found is None or found[2] or len(found[1]) != 1 or found[0] not in self.env:
            return False
        name, (kind,), _ = found
        return (self.imports.qualname(kind) or "") in _PARAMETER_QUALS and self.env[name].kind != LEAF

    def tensor_test(self, test: ast.AST) -> tuple[str | None, bool]:
        """For a test that tells whether a name holds a tensor: (name, True) when the name is no
        tensor where the test fails (``isinstance(x, torch.Tensor)``), (name, False) when it is
        no tensor where the test holds (``isinstance(x, str)``, ``not isinstance(x, Tensor)``)."""
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
            # the body runs only where every part holds: `if self.normalize and w is None:`
            for part in test.values:
                name, is_tensor = self.tensor_test(part)
                if name is not None and not is_tensor:
                    return name, False
            return None, False
        if (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.left, ast.Name)
                and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None
                and isinstance(test.ops[0], (ast.Is, ast.IsNot))):
            return test.left.id, isinstance(test.ops[0], ast.IsNot)  # `if w is None:` w is no tensor there
        found = self._isinstance_test(test)
        if found is None:
            return None, False
        name, kinds, negated = found
        if all((self.imports.qualname(k) or "") in _TENSOR_QUALS for k in kinds):
            return name, not negated
        if all(isinstance(k, ast.Name) and k.id in _SCALAR_TYPES and k.id not in self.env for k in kinds):
            return name, negated
        return None, False

    def eval_BoolOp(self, node: ast.BoolOp) -> Value:
        return join(*[self.eval(v) for v in node.values])

    def eval_UnaryOp(self, node: ast.UnaryOp) -> Value:
        v = self.eval(node.operand)
        if isinstance(node.op, ast.Not):
            return NOTHING
        return self.computed(NOTHING, v)

    def eval_BinOp(self, node: ast.BinOp) -> Value:
        left, right = self.eval(node.left), self.eval(node.right)
        if isinstance(node.op, ast.Add) and (
            isinstance(node.left, (ast.List, ast.Tuple)) or isinstance(node.right, (ast.List, ast.Tuple))
        ):
            return join(left, right)  # list concatenation keeps what the lists hold
        if isinstance(node.op, ast.Mod) and isinstance(node.left, (ast.Constant, ast.JoinedStr)):
            return NOTHING  # string formatting
        return self.computed(NOTHING, left, right)

    def _elements(self, elts) -> Value:
        return join(*[self.eval(e) for e in elts]) if elts else NOTHING

    def eval_List(self, node: ast.List) -> Value:
        return self._elements(node.elts)

    def eval_Tuple(self, node: ast.Tuple) -> Value:
        if any(isinstance(e, ast.Starred) for e in node.elts):
            return self._elements(node.elts)
        items = tuple(self.eval(e) for e in node.elts)
        whole = join(*items)
        return Value(whole.kind, whole.origin, items, trail=whole.trail, guess=_guess(items))

    eval_Set = eval_List

    def eval_Dict(self, node: ast.Dict) -> Value:
        for k in node.keys:
            self.eval(k)
        values = [self.eval(v) for v in node.values]
        names = [k.value if isinstance(k, ast.Constant) and isinstance(k.value, str) else None for k in node.keys]
        if node.keys and None not in names:
            return NOTHING.with_keys(dict(zip(names, values)))
        return join(*values) if values else NOTHING

    def _comprehension(self, node, elts) -> Value:
        saved = dict(self.env)
        for gen in node.generators:
            it = self.eval(gen.iter)
            self.bind_iteration(gen.target, gen.iter, it)
            for cond in gen.ifs:
                self.eval(cond)
        result = join(*[self.eval(e) for e in elts])
        self.env = saved
        return result

    def eval_ListComp(self, node: ast.ListComp) -> Value:
        return self._comprehension(node, [node.elt])

    eval_SetComp = eval_ListComp
    eval_GeneratorExp = eval_ListComp

    def eval_DictComp(self, node: ast.DictComp) -> Value:
        return self._comprehension(node, [node.key, node.value])

    def eval_Subscript(self, node: ast.Subscript) -> Value:
        base = self.eval(node.value)
        self.eval(node.slice)
        if base.items is not None and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, int):
            if -len(base.items) <= node.slice.value < len(base.items):
                return base.items[node.slice.value]
        if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str) and is_size_name(node.slice.value):
            return NOTHING  # res["total_prompt_len"], out["num_tokens"]: a size kept under its name
        if base.keys is not None and isinstance(node.slice, ast.Constant) and node.slice.value in base.keys:
            return base.keys[node.slice.value]  # data["cell"]: what was put under that key
        if base.kind == MODULE:
            return base  # ModuleList / ModuleDict / Sequential indexing
        if base.kind == LEAF:
            return self.computed(base)  # a view of a parameter is not a leaf
        if not self.grad and base.kind == GRAPH:
            # A view taken under no_grad has no grad_fn; an element of a container would.
            return base if isinstance(node.value, ast.Name) and self._is_container_name(node.value.id) else NOTHING
        return base

    def eval_Attribute(self, node: ast.Attribute) -> Value:
        attr = node.attr
        if self.is_self(node.value):
            return self.self_attr(attr)
        base = self.eval(node.value)
        if (self.helper_state and isinstance(node.value, ast.Attribute) and self.is_self(node.value.value)
                and (node.value.attr, attr) in self.helper_state):
            return self.helper_state[(node.value.attr, attr)]  # self.var.tensor after self.var.update(out)
        if base.cls is not None:
            return self.object_member(base, attr, NOTHING)  # dist.mean, dist.stddev
        if is_size_name(attr):
            return NOTHING
        kind = torch_facts.tensor_attribute(attr) or torch_facts.module_attribute(attr)
        if kind in ("fresh", "scalar", "object", "int") or torch_facts.return_field(attr) in ("int", "fresh"):
            return NOTHING  # x.data, x.shape, x.grad, m.training, torch.max(x, 1).indices
        if base.kind == MODULE:
            if looks_like_parameter(attr):
                return Value(LEAF, f"parameter {short(node)}")
            return Value(MODULE, short(node))
        if base.kind == LEAF:
            if kind in ("carries", "same"):
                return self.computed(base)  # .T, .mT, .real ... of a parameter
            # No other attribute of a tensor is one: the leaf was a submodule (``getattr(self, name)``
            # gives a submodule or a parameter), and this is one of its attributes.
            if looks_like_parameter(attr):
                return Value(LEAF, f"parameter {short(node)}")
            return Value(MODULE, short(node))
        return base

    def _is_container_name(self, name: str) -> bool:
        return name in self.containers

    # -- calls --------------------------------------------------------------------

    def bind_iteration(self, target: ast.AST, iterated: ast.AST, value: Value) -> None:
        """Bind a ``for`` target: the keys of ``m.items()`` and the counter of ``enumerate(...)``
        are names and numbers, not what the mapping or sequence holds; the target of a loop
        over string constants holds those names (``for attr in ["a", "b"]: getattr(self, attr)``)."""
        if (isinstance(target, ast.Name) and isinstance(iterated, (ast.List, ast.Tuple)) and iterated.elts
                and all(isinstance(e, ast.Constant) and isinstance(e.value, str) and e.value.isidentifier()
                        for e in iterated.elts)):
            self.env[target.id] = name_constant("|".join(e.value for e in iterated.elts))
            return
        if isinstance(target, ast.Tuple) and len(target.elts) == 2 and isinstance(iterated, ast.Call):
            func = iterated.func
            if (isinstance(func, ast.Attribute) and func.attr == "items" and not iterated.args) or (
                isinstance(func, ast.Name) and func.id == "enumerate"
            ):
                self.bind_target(target.elts[0], NOTHING)
                if not self._bind_zip(target.elts[1], iterated.args[0] if isinstance(func, ast.Name) and iterated.args
                                      else None):
                    self.bind_target(target.elts[1], value)
                return
        if self._bind_zip(target, iterated):
            return
        self.bind_target(target, value)

    def _bind_zip(self, target: ast.AST, iterated: ast.AST | None) -> bool:
        """``for box, score, emb in zip(boxes, scores, embeddings)``: each name holds an item of
        its own sequence, not the join of all three (names and attributes only: evaluating them
        again runs nothing)."""
        if not (isinstance(target, ast.Tuple) and isinstance(iterated, ast.Call) and isinstance(iterated.func, ast.Name)
                and iterated.func.id == "zip" and not iterated.keywords and len(iterated.args) == len(target.elts)
                and all(isinstance(a, (ast.Name, ast.Attribute)) for a in iterated.args)
                and not any(isinstance(t, ast.Starred) for t in target.elts)):
            return False
        for elt, seq in zip(target.elts, iterated.args):
            self.bind_iteration(elt, seq, self.eval(seq))
        return True

    def bind_target(self, target: ast.AST, value: Value) -> None:
        """Bind local names in an assignment target (stores on objects are the walker's)."""
        if isinstance(target, ast.Name):
            self.env[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self.bind_target(elt, value)
        elif isinstance(target, ast.Starred):
            self.bind_target(target.value, value)


def training_subject(test: ast.AST) -> ast.AST:
    """The object whose ``.training`` a test of :func:`training_test` reads."""
    while isinstance(test, ast.UnaryOp):
        test = test.operand
    if isinstance(test, ast.Compare):
        test = test.left
    return test.value


def training_test(test: ast.AST) -> bool | None:
    """True for ``if x.training:`` (the body runs in training mode, the else in eval mode), False
    for ``if not x.training:`` / ``x.training is False`` / ``== False`` (the body in eval mode);
    None for any other test."""
    if isinstance(test, ast.Attribute) and test.attr == "training":
        return True
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = training_test(test.operand)
        return None if inner is None else not inner
    if (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.left, ast.Attribute)
            and test.left.attr == "training" and isinstance(test.comparators[0], ast.Constant)
            and isinstance(test.comparators[0].value, bool)):
        value = test.comparators[0].value
        if isinstance(test.ops[0], (ast.Is, ast.Eq)):
            return value
        if isinstance(test.ops[0], (ast.IsNot, ast.NotEq)):
            return not value
    return None
