"""Runs the methods of one class, following ``self.method(...)`` calls with the values
actually passed, so that helpers reached from ``forward`` (or from ``__init__``) are
judged in the grad mode and with the arguments they really get."""

from __future__ import annotations

import ast
import re
from typing import Callable

from .. import messages
from ..findings import Finding
from .flow import Store, Walker
from ..program.grad_mode import function_grad_mode
from .graph_tensors import ARG, GRAPH, MODULE, NOTHING, Evaluator, Value, argument_value, join, looks_like_module_name
from ..facts.torch_names import METRIC_DATA_ARG_RE, non_tensor_annotation, tensor_annotation
from ..values import constant_name
from ..program.imports import ImportMap
from ..program.modules import ClassInfo
from ..program.stmtwalk import walk

StoreSink = Callable[[Store, ast.FunctionDef], None]

def is_forward_root(name: str, info: ClassInfo) -> bool:
    """Methods through which training runs a module with grad on.  (Trainers run
    validation_step / test_step under no_grad or inference_mode.)"""
    if name in ("forward", "__call__") or name.startswith("forward_"):
        return True
    if info.is_metric and name == "update":
        return True  # Metric.forward calls update with the batch (torchmetrics' contract)
    return name == "training_step" or (info.is_lightning and name in ("training_step", "shared_step"))


# Lightning's loops run these under torch.no_grad() / inference_mode: a store there has no history.
_LIGHTNING_NO_GRAD = re.compile(r"^(validation|val|test|predict)_step$|^(validation|val|test|predict)_epoch_end$|^on_(validation|test|predict)_")
# Methods nn.Module's own machinery (or Python's) calls, not users: deepcopy, pickling, repr.
_NOT_PUBLIC = frozenset({"extra_repr", "train", "eval", "state_dict", "load_state_dict", "parameters",
                         "named_parameters", "buffers", "named_buffers", "children", "modules", "named_modules",
                         "to", "cuda", "cpu", "type", "float", "double", "half", "bfloat16", "zero_grad",
                         "register_buffer", "register_parameter", "add_module", "apply"})


def public_roots(info: ClassInfo, reached: set[str]) -> list[str]:
    """Public methods that users call on the module besides ``forward``: a ``process_support_set``,
    ``sample``, ``inverse`` or ``compute_loss`` that nothing in the class calls. Torch runs them
    with grad enabled unless their caller (or a decorator) turns it off, as it does ``forward``;
    a method the class's own code calls or refers to (``__init__`` calling ``self.reset()``,
    ``self.fn = self._step``) is judged from there instead, in that caller's grad mode."""
    if info.is_metric:
        return []  # torchmetrics: compute() runs on states update() kept under no_grad
    methods = info.facts.methods
    candidates = []
    for name, func in methods.items():
        if name.startswith("_") or name in reached or name in _NOT_PUBLIC:
            continue
        if is_forward_root(name, info) or _LIGHTNING_NO_GRAD.search(name):
            continue
        if _decorators(func) & {"property", "staticmethod", "classmethod", "abstractmethod", "setter", "cached_property"}:
            continue
        if self_name(func) is None or _abstract(func) or isinstance(func, ast.AsyncFunctionDef):
            continue
        candidates.append(name)
    if not candidates:
        return []  # nothing public to run: the class's references to its methods are not needed
    referred: set[str] = set()
    for caller, func in methods.items():
        me = self_name(func)
        for n in walk(func):
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == me and n.attr != caller:
                referred.add(n.attr)
    return [name for name in candidates if name not in referred]


SUBMODULE_CALL = re.compile(r"^\w+\.(\w+)(\[\.\.\.\])?(\(\.\.\.\))?$")


def forward_roots(info: ClassInfo) -> list[str]:
    """The forward-like methods that training calls from outside: a ``forward_step`` that the
    class's own ``forward`` calls is run from there, in its caller's grad mode."""
    roots = [n for n in info.facts.methods if is_forward_root(n, info)]
    called: set[str] = set()
    for name in roots:
        func = info.facts.methods[name]
        me = self_name(func)
        for n in walk(func):
            if (
                isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name)
                and n.func.value.id == me and n.func.attr != name
            ):
                called.add(n.func.attr)
    kept = [n for n in roots if n not in called or n in ("forward", "__call__", "training_step")]
    return kept or roots


def _decorators(func: ast.FunctionDef) -> set[str]:
    out = set()
    for d in func.decorator_list:
        if isinstance(d, ast.Call):
            d = d.func
        if isinstance(d, ast.Attribute):
            out.add(d.attr)
        elif isinstance(d, ast.Name):
            out.add(d.id)
    return out


def self_name(func: ast.FunctionDef) -> str | None:
    decs = _decorators(func)
    if "staticmethod" in decs:
        return None
    params = func.args.posonlyargs + func.args.args
    return params[0].arg if params else None


def settle_flags(info: ClassInfo, imports: ImportMap) -> None:
    """Work out, once, the attributes ``info``'s class fixes for good (``facts.flags``: see
    :mod:`..program.flags`), from its methods and those of its bases in other files."""
    if info.facts.flags is not None:
        return
    from ..program.flags import settled
    from ..program.helper_objects import program_class

    info.facts.flags = {}  # while settling (a base's run asks again)
    methods = list(info.facts.methods.values())
    for qual in info.facts.bases:  # and those of its bases in other files
        found = program_class(imports, qual)
        if found is not None:
            methods += [m for m in found[1].facts.methods.values() if m not in methods]
    info.facts.flags = settled(info, imports, set(forward_roots(info)), methods)


class ClassRunner:
    def __init__(self, info: ClassInfo, imports: ImportMap, module_classes: set[str], calls: dict | None = None,
                 depth: int = 0):
        from ..program.helper_objects import settle_given

        settle_given(imports, info)
        settle_flags(info, imports)
        self.info = info
        self.depth = depth  # how many helper objects deep (helper_objects)
        # Graph tensors kept on helper objects by calls this class's forward makes.
        self.helper_findings: list = []
        self.helper_state: dict = {}  # what helper calls left on the helper objects (Evaluator.helper_state)
        self._helper_memo: dict = {}
        # Calls of this file's module classes through submodule attributes, with the values
        # passed: class name -> [(positional values, keyword values)], shared by the file's runners.
        self.calls: dict = calls if calls is not None else {}
        self.imports = imports
        self.module_classes = module_classes
        self._sink: StoreSink | None = None
        self._memo: dict = {}
        self._active: set = set()
        self.reached: set[str] = set()
        self.on_call: Callable | None = None
        self._building = False
        self._skip: set[str] = set()
        # Argument origins that reach a learnable computation in this class (Evaluator.fed).
        self.fed: set[str] = set()
        # A torchmetrics Metric's batch: what its forward was given (see _call_method).
        self._batch = NOTHING
        self.stack: list[str] = []  # the methods being run, from the root (a witness's "reached")
        # the walkers of the methods being run: a method called from a branch that runs only in
        # eval mode runs only in eval mode too (its stores say so)
        self._walkers: list = []
        self._public: set[str] = set()  # the public methods being run as roots (run_public)
        self._foreign: dict[int, ImportMap] = {}  # id of an inherited method of another file -> its imports

    # -- public -------------------------------------------------------------------
    def run_forward(self, sink: StoreSink) -> set[str]:
        """Run every forward-like root; returns the names of the methods reached.  A class
        with none runs the ``forward`` it inherits from a base in another file, on its own
        methods (the base's file reports what that forward itself stores)."""
        self.helper_findings, self._helper_memo, self.helper_state = [], {}, {}
        roots = forward_roots(self.info)
        if not roots and self.info.facts.methods and self.info.facts.bases:
            from ..program.helper_objects import inherited_forward

            func = inherited_forward(self.imports, self.info)
            if func is not None:
                def own(store, where):  # that forward's own stores are its file's to report
                    if where is not func:
                        sink(store, where)

                return self._run_roots(["forward"], own, forward=True, methods={"forward": func}) - {"forward"}
        return self._run_roots(roots, sink, forward=True)

    def run_public(self, sink: StoreSink, skip: set[str]) -> list[str]:
        """Run the public methods nothing in the class calls (:func:`public_roots`) as roots of
        their own, after :meth:`run_forward` (``skip``: the methods it reached). Returns them."""
        roots = public_roots(self.info, skip)
        if roots:
            self._public = set(roots)
            try:
                self._run_roots(roots, sink, forward=True)
            finally:
                self._public = set()
        return roots

    def run_with(self, func: ast.FunctionDef, pos: list[Value], kw: dict[str, Value], sink: StoreSink,
                 grad: bool) -> Value:
        """Run one method with the values a caller passes (a helper object's method)."""
        self._sink, self._memo, self._active, self.reached = sink, {}, set(), set()
        self._building = False
        try:
            return self._run(func, bind(func, pos, kw, self_name(func) is not None), grad)
        finally:
            self._sink = None  # the sink may close over this runner: no cycle left behind

    def run_construction(self, sink: StoreSink, skip: set[str]) -> set[str]:
        roots = [n for n in ("__init__",) if n in self.info.facts.methods and n not in skip]
        return self._run_roots(roots, sink, forward=False, skip=skip)

    # -- machinery ----------------------------------------------------------------
    def _run_roots(self, roots: list[str], sink: StoreSink, forward: bool, skip: set[str] = frozenset(),
                   methods: dict | None = None) -> set[str]:
        """Run the methods named ``roots`` (of ``methods``, default the class's own)."""
        self._sink, self._memo, self._active, self.reached = sink, {}, set(), set()
        self._skip = skip
        self._building = not forward
        try:
            self._run_each(roots, forward, methods)
        finally:
            self._sink = None  # the sink may close over this runner: no cycle left behind
        return set(self.reached)

    def _run_each(self, roots: list[str], forward: bool, methods: dict | None) -> None:
        for name in roots:
            func = (methods or self.info.facts.methods)[name]
            params = self._root_params(func, forward)
            grad = True
            if forward and self.info.is_metric and name in ("forward", "update"):
                # torchmetrics: users pass the model's outputs, graph tensors; Metric wraps
                # update() in set_grad_enabled(False), so only what it keeps as it is stays on
                # the graph (CatMetric's list of inputs), not what it computes from them.
                kinds = _annotations(func)
                params = {k: (Value(GRAPH, f"argument '{k}', a model output given to the metric")
                              if v.kind == ARG and tensor_annotation(kinds.get(k)) and not METRIC_DATA_ARG_RE.search(k)
                              else v)
                          for k, v in params.items()}
                grad = name == "forward"
                if grad:
                    self._batch = join(*params.values())
            self._run(func, params, grad, options=_off_by_default(func) if forward else None)

    def _root_params(self, func: ast.FunctionDef, forward: bool) -> dict[str, Value]:
        args = func.args
        positional = args.posonlyargs + args.args
        if self_name(func) is not None:
            positional = positional[1:]
        defaults: list = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
        params: dict[str, Value] = {}
        grad = function_grad_mode(func, self.imports)
        for a, d in zip(positional, defaults):
            params[a.arg] = self._root_arg(a, d, forward and grad, func.name)
        for a, d in zip(args.kwonlyargs, args.kw_defaults):
            params[a.arg] = self._root_arg(a, d, forward and grad, func.name)
        if args.vararg is not None:
            params[args.vararg.arg] = Value(ARG, f"argument '*{args.vararg.arg}'") if forward and grad else NOTHING
        if args.kwarg is not None:
            params[args.kwarg.arg] = NOTHING
        return params

    def _root_arg(self, a: ast.arg, default, forward: bool, method: str = "forward") -> Value:
        if forward:
            value = argument_value(a, default)
            if value.kind == ARG and method in self._public:  # not forward's argument of that name
                value = Value(ARG, f"{value.origin} of {method}()")
            return value
        if looks_like_module_name(a.arg):
            return Value(MODULE, a.arg)
        return NOTHING

    def _run(self, func: ast.FunctionDef, params: dict[str, Value], grad: bool,
             options: dict[str, str] | None = None, unpassed: dict[str, str] | None = None) -> Value:
        """Run ``func``; ``options``: for a root, its parameters whose literal default is off
        (``save_feats=False``): a store under ``if save_feats:`` runs only where a caller turns it on.
        ``unpassed``: for a call, the parameters off by default that the call does not pass (and
        the method never rebinds): ``if save_feats:`` does not run."""
        self.reached.add(func.name)
        imports = self._foreign.get(id(func), self.imports)
        ev = Evaluator(imports, self.info.facts, self_name(func), self.module_classes, on_method=self._call_method)
        ev.on_call = self.on_call
        ev.fed = self.fed
        ev.on_module_call = self._record_call
        ev.nesting = self.depth
        if not self._building and (self.info.facts.helpers or self.info.facts.submodule_quals):
            ev.on_helper = self._call_helper
            ev.helper_state = self.helper_state
        if self.info.base_infos:
            ev.on_super = self._call_super
        ev.building = self._building
        ev.env.update(params)
        ev.grad = function_grad_mode(func, imports) if grad else _explicit_enable(func, imports)
        sink = self._sink
        walker = Walker(ev, (lambda store: None) if imports is not self.imports else (lambda store: sink(store, func)))
        walker.eval_only = self._in_eval()
        walker.options = options or {}
        walker.unpassed = unpassed or {}
        self.stack.append(func.name)
        self._walkers.append(walker)
        try:
            return walker.run(func.body)
        finally:
            self.stack.pop()
            self._walkers.pop()

    def _in_eval(self) -> bool:
        """Is the method being run now inside a branch that runs only in eval mode?"""
        return bool(self._walkers) and self._walkers[-1].eval_only

    def path(self) -> str:
        """How the method being run is reached from its root: ``forward -> self._step()``."""
        if not self.stack:
            return ""
        return " -> ".join([self.root_text()] + [f"self.{n}()" for n in self.stack[1:]])

    def root(self) -> str:
        """The root method being run (``forward``, or a public method :meth:`run_public` runs)."""
        return self.stack[0] if self.stack else ""

    def public_root(self) -> bool:
        return self.root() in self._public

    def root_text(self) -> str:
        name = self.root()
        if name in self._public:
            return (f"{name}() (a public method of the module that nothing in the class calls: users call it, "
                    "with grad on unless they turn it off, as forward)")
        return name

    def _call_super(self, name: str, pos: list[Value], kw: dict[str, Value], grad: bool) -> Value | None:
        """``super().name(...)``: the method of a base class of this file, run on this object."""
        todo, seen = list(self.info.base_infos), set()
        while todo:
            base = todo.pop(0)
            if id(base) in seen:
                continue
            seen.add(id(base))
            func = next((s for s in base.node.body if isinstance(s, ast.FunctionDef) and s.name == name), None)
            if func is None:
                todo += base.base_infos
                continue
            return self._run_once(("super", base.node.name), func, pos, kw, grad)
        return None

    def _run_once(self, name, func: ast.FunctionDef, pos: list[Value], kw: dict[str, Value], grad: bool) -> Value | None:
        """Run ``func`` with these values, memoised on their kinds; None inside a recursion."""
        key = (name, tuple(_memo_kind(v) for v in pos), tuple(sorted((k, _memo_kind(v)) for k, v in kw.items())), grad,
               self._in_eval())
        if key in self._memo:
            return self._memo[key]
        if key in self._active or len(self._active) > 20:
            return None
        self._active.add(key)
        try:
            result = self._run(func, bind(func, pos, kw, self_name(func) is not None), grad,
                               unpassed=_unpassed_off(func, pos, kw))
        finally:
            self._active.discard(key)
        self._memo[key] = result
        return result

    def _call_helper(self, attr: str, meth: str, pos: list[Value], kw: dict[str, Value], node: ast.Call,
                     grad: bool) -> Value | None:
        """``self.<attr>.<meth>(...)`` on a helper object (``meth`` is ``__call__`` for
        ``self.<attr>(...)``), or a method other than forward of a submodule of a class of the
        program (``self.weight_sampler.sample()``): run the method, and report the graph tensors
        it keeps on the object. Returns what the call gives when the method's result depends only
        on its arguments and the object's settings (every attribute it reads is set only in
        ``__init__``), or is on the graph whatever the rest of its state (computed from the
        submodule's own parameters with grad on), else None: the call is judged as before."""
        from ..program.helper_objects import helper_class, reads_runtime_state, returns_self

        if self.depth > 1:
            return None
        key = (attr, meth, node.lineno, node.col_offset, grad)
        if key in self._helper_memo:
            return self._helper_memo[key]
        self._helper_memo[key] = None
        kept: dict[tuple[str, str], list] = {}  # (code, target) -> [(class, method, line, value, qual)]
        results: list[Value] | None = []
        facts = self.info.facts
        module = attr not in facts.helpers  # else a submodule whose other method is called
        quals = facts.submodule_quals.get(attr, ()) if module else facts.helpers[attr]
        for qual in quals:
            found = helper_class(self.imports, qual, module)
            func = found[0].facts.methods.get(meth) if found is not None else None
            if func is None:
                results = None  # a class whose method is not seen: its result is unknown
                continue
            info, imports, module_classes = found
            stores: list = []
            runner = ClassRunner(info, imports, module_classes, depth=self.depth + 1)
            value = runner.run_with(func, pos, kw, lambda store, f: stores.append((store, f)), grad)
            if results is not None:
                if returns_self(func) or (reads_runtime_state(info, func) and value.kind != GRAPH):
                    results = None
                else:
                    results.append(value)
            if not grad:
                continue
            for store, f in stores:
                if store.root != self_name(f) or store.value.kind != GRAPH or not store.grad:
                    continue
                if store.kind not in ("attr", "container", "setattr"):
                    continue
                code = "GLF002" if store.kind == "container" else "GLF001"
                target = f"self.{attr}" + store.text[len(store.root):]
                if store.attr:  # the object now holds it: what the forward reads from there later carries it
                    held = self.helper_state.get((attr, store.attr))
                    self.helper_state[(attr, store.attr)] = store.value if held is None else join(held, store.value)
                kept.setdefault((code, target), []).append((info.node.name, f.name, store.node.lineno, store.value, qual))
        for (code, target), where in kept.items():
            classes = sorted({w[0] for w in where})
            lines = ", ".join(f"{c}.{m}() line {n}" for c, m, n in sorted({w[:3] for w in where}))
            held = classes[0] if len(classes) == 1 else "; ".join(classes[:-1]) + " or " + classes[-1]
            from .. import witness

            proof = witness.make(
                where[0][3], node, None, reached=f"{self.path() or 'forward'} -> self.{attr}.{meth}() ({lines})", grad=grad,
                kept=witness.KEPT_AFTER_RETURN, copied=witness.copied_text(target, helper=attr))
            self.helper_findings.append(Finding(
                code, node.lineno, node.col_offset,
                messages.store(
                    messages.holder(target, held), "keeps", where[0][3].origin or "a computation on the autograd graph",
                    messages.copy_clause("copy.deepcopy(model)", copies=f"the {held} object in 'self.{attr}' with "
                                                                       f"{self.info.node.name}"),
                    "keep the tensor off the helper object, or give its class a __getstate__ that detaches it",
                    by=f"by {lines}"),
                end_line=node.end_lineno, end_col=node.end_col_offset,
                class_name=self.info.node.name, attribute=target,
                data={"kind": "helper", "helper_class": where[0][4], "helper_line": where[0][2]}, witness=proof,
            ))
        result = join(*results) if results else None
        self._helper_memo[key] = result
        return result

    def _record_call(self, origin: str, pos, kw, grad: bool) -> None:
        m = SUBMODULE_CALL.match(origin)
        if m is None or not grad:
            return
        held = self.info.facts.submodule_classes.get(m.group(1))
        if held is not None:
            self.calls.setdefault(held[0], []).append((pos, kw))

    def _call_method(self, name: str, pos: list[Value], kw: dict[str, Value], grad: bool) -> Value | None:
        func = self.info.facts.methods.get(name)
        if name in self._skip:
            return None
        if name == "update" and self.info.is_metric:
            # Metric wraps update() in set_grad_enabled(_enable_grad); forward turns it on for the
            # batch alone and then merges the tensor states back under no_grad, so what update()
            # leaves on the states is what it leaves with grad off (list states keep their inputs).
            grad = False
        if func is None:
            return self._call_inherited(name, pos, kw, grad)
        if name == "compute" and self.info.is_metric and _abstract(func):
            # Metric.forward computes the metric over the batch alone, with grad enabled for it
            # (``_enable_grad = True``): whatever compute() a subclass defines gets the batch's
            # history whenever it is differentiable in its inputs (MSE, a mean, a correlation).
            return Value(GRAPH, "compute() over the batch given to forward") if grad and self._batch.kind == GRAPH else NOTHING
        if _abstract(func):
            found = self._call_override(name, pos, kw, grad)
            if found is not None:
                return found
        result = self._run_once(name, func, pos, kw, grad)
        if result is not None and func.returns is not None and non_tensor_annotation(func.returns, scalars=True):
            return NOTHING  # def _model_name(self, model) -> str | None: its stores count, its result is no tensor
        return result


    def _call_override(self, name: str, pos: list[Value], kw: dict[str, Value], grad: bool) -> Value | None:
        """``self.name(...)`` of a method this class leaves abstract (``raise NotImplementedError``),
        which subclasses in other files define (``LULinear.weight()``): ``self`` is one of them,
        so the call gives what their methods give, run on an object of each, joined; None when
        the program shows none. Their own stores are their files' to report."""
        if self.depth > 1 or self._building:
            return None
        from ..program.helper_objects import overrides

        subs = overrides(self.imports, self.info, name)
        if not subs:
            return None
        key = ("override", name, tuple(_memo_kind(v) for v in pos), tuple(sorted((k, _memo_kind(v)) for k, v in kw.items())), grad)
        if key in self._memo:
            return self._memo[key]
        self._memo[key] = None
        results = []
        for info, imports, module_classes in subs[:8]:
            runner = ClassRunner(info, imports, module_classes, depth=self.depth + 1)
            value = runner.run_with(info.facts.methods[name], pos, kw, lambda store, f: None, grad)
            if value is not None and value.kind == GRAPH:  # its steps are in the other file: named, not listed
                value = Value(GRAPH, f"{value.origin}, in {info.node.name}.{name}()", value.items, value.cls, (),
                              value.guess, value.keys)
            results.append(value if value is not None else NOTHING)
        out = join(*results)
        self._memo[key] = out
        return out

    def _call_inherited(self, name: str, pos: list[Value], kw: dict[str, Value], grad: bool) -> Value | None:
        """``self.name(...)`` of a method a base class in another file defines: run on this
        object, with that file's imports, for what it gives and leaves on the object; what it
        stores there is that file's to report (its class is run there), not this one's."""
        if not self.info.facts.bases or self.depth > 1:
            return None
        from ..program.helper_objects import inherited_method

        found = inherited_method(self.imports, self.info, name)
        if found is None:
            return None
        func, imports = found
        self._foreign[id(func)] = imports
        return self._run_once(name, func, pos, kw, grad)


def _memo_kind(value: Value):
    """What a method run depends on, of one argument: its kind (and the name a string constant holds)."""
    name = constant_name(value)
    return value.kind if name is None else (value.kind, name)


def _annotations(func: ast.FunctionDef) -> dict[str, ast.AST | None]:
    args = func.args
    every = args.posonlyargs + args.args + args.kwonlyargs + [a for a in (args.vararg, args.kwarg) if a is not None]
    return {a.arg: a.annotation for a in every}


def _abstract(func: ast.FunctionDef) -> bool:
    """A method with no body of its own: a docstring, ``pass``, ``...``, ``raise NotImplementedError``."""
    for stmt in func.body:
        if isinstance(stmt, ast.Pass) or (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)):
            continue
        if isinstance(stmt, ast.Raise):
            continue
        return False
    return True


def _explicit_enable(func: ast.FunctionDef, imports: ImportMap) -> bool:
    """Called under no_grad: only an ``@torch.enable_grad()`` turns grad back on."""
    for d in func.decorator_list:
        call = d.func if isinstance(d, ast.Call) else d
        q = imports.qualname(call) or ""
        if q.endswith("enable_grad"):
            return True
    return False


def bind(func: ast.FunctionDef, pos: list, kw: dict, method: bool, missing=NOTHING) -> dict:
    """Parameter name -> what the call passes (values, or for the heap the objects they hold);
    ``method``: the first parameter is the object itself and is not bound here; ``missing``: what
    an unpassed parameter gets (NOTHING binds ``*args`` / ``**kwargs`` too)."""
    args = func.args
    positional = args.posonlyargs + args.args
    if method and positional:
        positional = positional[1:]
    out: dict = {}
    for i, a in enumerate(positional):
        out[a.arg] = pos[i] if i < len(pos) else kw.get(a.arg, missing)
    for a in args.kwonlyargs:
        out[a.arg] = kw.get(a.arg, missing)
    if missing is NOTHING:
        if args.vararg is not None:
            out[args.vararg.arg] = join(*pos[len(positional):]) if len(pos) > len(positional) else NOTHING
        if args.kwarg is not None:
            named = {a.arg for a in positional + args.kwonlyargs}
            out[args.kwarg.arg] = join(*[v for k, v in kw.items() if k not in named])
    return out


def _off_by_default(func: ast.FunctionDef) -> dict[str, str]:
    """The parameters of a root method whose default is a literal that is off (``False``,
    ``None``, ``0``): name -> the default as written."""
    args = func.args
    positional = args.posonlyargs + args.args
    pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults))
    pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
    return {a.arg: repr(d.value) for a, d in pairs
            if isinstance(d, ast.Constant) and d.value in (False, None, 0) and not isinstance(d.value, str)}


def _unpassed_off(func: ast.FunctionDef, pos: list, kw: dict) -> dict[str, str]:
    """The parameters off by default (:func:`_off_by_default`) that a call with ``pos`` / ``kw``
    leaves at their default, and that the method never rebinds: they hold that default."""
    off = _off_by_default(func)
    if not off or "**" in kw or any(isinstance(v, ast.Starred) for v in pos):
        return {}
    args = func.args
    positional = [a.arg for a in args.posonlyargs + args.args]
    if self_name(func) is not None:
        positional = positional[1:]
    passed = set(positional[:len(pos)]) | set(kw)
    rebound = getattr(func, "_graphleaf_rebound", None)
    if rebound is None:  # remembered on the function: one walk, however many calls
        rebound = func._graphleaf_rebound = frozenset(
            n.id for n in ast.walk(func) if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)))
    return {k: v for k, v in off.items() if k not in passed and k not in rebound}
