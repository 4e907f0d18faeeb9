"""The semantics of calls, for :class:`.graph_tensors.Evaluator` (a mixin it inherits): torch
functions, builtins, methods of tensors and modules, ``self.method(...)``, and classes and
functions the program defines (through :mod:`..program.project_view` and ``ImportMap.effect_of``).
"""

from __future__ import annotations

import ast

from ..facts import torch_facts
from ..program.modules import registered_kind
from ..facts.torch_names import (
    _METHOD_NAME_RE,
    torch_base_method,
    BUFFER_CTORS,
    CONTAINER_UPDATES,
    CONTAINER_NAMES,
    CONTAINER_READS,
    NON_COMPUTING_NAMESPACES,
    NON_DIFF_BUILTINS,
    PARAMETER_NAMES,
    PASSING_BUILTINS,
    int_dtype,
    looks_like_parameter,
)
from ..values import _guess, CLASS_PREFIX, ARG, GRAPH, LEAF, MODULE, NONE, NOTHING, Value, _containers_only, _is_true, constant_names, join, short, trusted
from ..facts.torch_names import STDLIB_NO_HISTORY, is_torch_name


class CallSemantics:
    """What a call gives.  Needs the Evaluator's state (env, facts, grad, imports ...)."""

    def _args(self, node: ast.Call) -> tuple[list[Value], dict[str, Value]]:
        pos = [self._arg(a) for a in node.args]
        kw = {k.arg or "**": self._arg(k.value) for k in node.keywords}
        return pos, kw

    def _arg(self, node: ast.AST) -> Value:
        v = self.eval(node)
        # ``Adam(model.parameters())``, ``EMA(self.parameters())``: handing over the parameters
        # themselves is no computation; what is built from them holds leaves.
        if v.kind == LEAF and isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if torch_facts.module_api(node.func.attr) == "leaves":
                return NOTHING
        return v

    def eval_Call(self, node: ast.Call) -> Value:
        func = node.func
        pos, kw = self._args(node)
        if any(k.arg == "dtype" and int_dtype(k.value) for k in node.keywords):
            return NOTHING  # an integer or boolean result has no grad_fn
        if isinstance(func, ast.Attribute) and func.attr.startswith("register_"):
            return NOTHING  # hook handles, registrations
        everything = join(*pos, *kw.values())
        qual = self.imports.qualname(func)
        if qual is not None and self.on_call is not None:
            self.on_call(node, qual, pos, kw, self.grad)
        if qual is not None and qual.startswith(STDLIB_NO_HISTORY):
            return NOTHING
        if qual is not None and (is_torch_name(qual) or qual.startswith("copy.")):
            return self._torch_call(node, qual, pos, kw, everything)
        if isinstance(func, ast.Name) and self.name_value(func.id) is None:
            known = self._project_call(node, func, qual, pos, kw)
            if known is not None:
                return known
            return self._name_call(node, func.id, pos, kw, everything)
        if isinstance(func, ast.Name):
            return self._name_call(node, func.id, pos, kw, everything)
        if isinstance(func, ast.Attribute):
            if qual is not None:
                known = self._project_call(node, func, qual, pos, kw)
                if known is not None:
                    return known
            return self._method_call(node, func, pos, kw, everything)
        callee = self.eval(func)
        if callee.kind == MODULE and self.building:
            return callee
        if callee.kind in (MODULE, LEAF):
            return self.module_call(f"{short(func)}(...)", pos, kw)
        return (everything if self.grad else _containers_only(everything)).assumed(f"{short(func)}(...)")

    def _project_call(self, node: ast.Call, func: ast.AST, qual: str | None, pos, kw) -> Value | None:
        """A call of a class or function the program defines (this file or another): a module
        class builds a module, another class an object holding its arguments, a function gives
        what its body gives (:func:`project_view.function_effect`).  None: not known."""
        from ..program import project_view as pv

        definition = None
        current = getattr(self.imports, "current", None)
        if isinstance(func, ast.Name) and current is not None and func.id in current.defs:
            definition = pv.Definition(current, current.defs[func.id])
        elif qual is not None:
            definition = pv.resolve(self.imports.project, qual)
        if definition is None:
            return None
        name = short(func)
        if isinstance(definition.node, ast.ClassDef):
            kind = pv.class_kind(self.imports.project, definition.qualname) if current is None or definition.module is not current else None
            if kind is None and definition.module is current and func.id in self.module_classes:
                kind = pv.MODULE_CLASS
            if kind == pv.MODULE_CLASS:
                return Value(MODULE, f"{name}(...)")
            if kind in (pv.OTHER_CLASS, pv.FOREIGN_FRAMEWORK):
                # an object: it holds what it was given (parameters it holds stay leaves), it computes nothing
                held = join(*pos, *kw.values())
                return held if held.kind in (GRAPH, ARG) else NOTHING
            return None
        if self.depth > 2:
            return None
        effect_of = getattr(self.imports, "effect_of", None)
        effect = effect_of(definition, self.depth) if effect_of is not None else None
        if effect is None:
            return None
        if effect.graph:
            return self.module_call(f"{name}(...)", pos, kw)
        if effect.leaf:
            return Value(LEAF, f"{name}(...)")
        def passed_by(names: tuple[str, ...]) -> Value:
            pairs = [(p, v) for p, v in zip(effect.params, pos) if p in names] + [
                (k, v) for k, v in kw.items() if k in names]
            if len(pos) > len(effect.params) and any(p not in effect.params + effect.keyword_only for p in names):
                starred = [p for p in names if p not in effect.params + effect.keyword_only]
                pairs += [(starred[0], v) for v in pos[len(effect.params):]]  # *args
            passed = [v for _, v in pairs]
            if any(v.kind == LEAF for v in passed):
                self.feed(*passed)  # complex_bn(x, self.weight, ...): the argument meets a parameter
            # a parameter handed on unchanged (a list of parameter groups for an optimizer) is
            # still a leaf; one the function computes with gives a graph tensor
            computed = [v for p, v in pairs if not (v.kind == LEAF and p in effect.kept)]
            result = join(*computed) if computed else NOTHING
            if result.kind == GRAPH or result.kind == LEAF:
                result = Value(GRAPH, result.origin) if self.grad else _containers_only(result)
            if result.kind < LEAF and len(computed) < len(passed):
                result = Value(LEAF, f"{name}(...)")
            if result.kind >= ARG and any(p in effect.guessed and v.kind >= ARG for p, v in pairs):
                # the history reaches the result through a callable the function was given
                # (apply(fn, x)): what fn does is not shown there
                given = [p for p, v in pairs if p in effect.guessed and v.kind >= ARG]
                result = result.assumed(trusted("unknown-callable", f"{name}(...) passes '{given[0]}' through a callable "
                                                "it is given, taken to carry its history"))
            return result

        # under no_grad only what the function passes on unchanged keeps its history
        parts = effect.items if self.grad else effect.kept_items
        if parts is not None:
            items = tuple(passed_by(names) for names in parts)
            whole = join(*items)
            return Value(whole.kind, whole.origin, items, trail=whole.trail, guess=_guess(items))
        return passed_by(effect.passes if self.grad else effect.kept)

    def _torch_call(self, node, qual, pos, kw, everything) -> Value:
        name = qual.rsplit(".", 1)[-1]
        if qual in BUFFER_CTORS:
            return NOTHING
        if qual.startswith("copy."):
            return NOTHING
        dist = torch_facts.distribution(qual)
        if dist is not None:
            # a Distribution object: it keeps what it is built from (deepcopy of it raises when
            # that is a graph tensor); its methods are the table's (sample() is fresh, rsample() not)
            held = self.computed(NOTHING, everything) if dist.get("holds", True) else NOTHING
            return Value(held.kind, held.origin, cls=qual)
        op = torch_facts.function(qual, torch_facts.signature(node))
        if op is not None:
            return self.apply_op(op, short(node.func), node, None, pos, kw)
        if qual.startswith(NON_COMPUTING_NAMESPACES):
            return NOTHING
        if qual.startswith("torch.nn.") and name[:1].isupper():
            return Value(MODULE, f"{name}(...)")
        if name in ("checkpoint", "checkpoint_sequential"):
            # runs the function it is given on the arguments (get_device_states and the other
            # helpers of torch.utils.checkpoint are not: RNG states and device ids)
            return self.module_call(f"{qual}(...)", pos, kw) if everything.kind >= MODULE else NOTHING
        if qual.startswith(("torch.optim.", "torch.distributions.constraints")):
            return NOTHING  # optimizers and schedulers hold parameters, they compute nothing
        if qual in ("torch.Tensor", "torch.FloatTensor", "torch.LongTensor"):
            return NOTHING
        return self.computed(NOTHING, everything).assumed(f"{qual}(...), which the torch table does not know")

    def apply_op(self, op, what: str, node: ast.Call, recv: Value | None, pos: list[Value], kw: dict[str, Value]) -> Value:
        """What a call of a torch callable gives, from the table (:mod:`..facts.torch_facts`): only the
        arguments whose history torch carries into the result count (``x.expand_as(y)``: x's)."""
        if op.makes_leaf == "keyword" and _is_true(node, "requires_grad"):
            given = self._requires_grad_of(node)  # requires_grad=x.requires_grad: computed from x
            if given is None:
                return Value(LEAF, f"{what}(..., requires_grad=True)")
            if given.kind != NONE:
                return given
            # x does not require grad (x.detach(), data): an ordinary factory
        if op.create_graph is not None and _is_true(node, "create_graph"):
            # gradients built with create_graph=True are on the graph (a gradient penalty)
            return self.module_call(f"{what}(..., create_graph=True)", pos, kw)
        if op.result in ("fresh", "int", "scalar"):
            return NOTHING
        if op.result == "leaf" and op.off is not None and _flag_false(node, *op.off):
            return NOTHING  # nn.Parameter(k, requires_grad=False): a tensor that does not require grad
        if op.result == "leaf" or op.makes_leaf == "always" and (recv is None or recv.kind < GRAPH):
            return Value(LEAF, f"{what}(...)")
        if op.result == "same" and op.makes_leaf:
            return pos[0] if pos else NOTHING  # nn.init.*_: fills a Parameter under no_grad and returns it
        sources = self._sources(op, node, recv, pos, kw)
        if op.result == "tensors":
            if op.items is not None:
                items = tuple(self.computed(NOTHING, *sources) if k in ("carries", "same") else NOTHING for k in op.items)
                whole = join(*items)
                return Value(whole.kind, whole.origin, items, trail=whole.trail, guess=_guess(items))
            if op.each in ("fresh", "int", "scalar"):
                return NOTHING
        if op.result == "object":
            return join(*sources)
        if op.alias and recv is not None:
            # the tensor itself (x.to(x.dtype), x.float() of a float tensor): a parameter stays a
            # leaf; another dtype or a move between devices makes a copy that carries history
            if recv.kind == LEAF and _moves_new_parameter(node, self.imports):
                # nn.Parameter(...).to(device): the move is all the expression is for, and to any
                # device but the parameter's own it gives a copy with a grad_fn, not the parameter
                return Value(GRAPH, f"{short(node.func.value)}.to(...), a copy of the new parameter on any device "
                                    "but the CPU (the parameter itself is not kept)", trail=recv.trail)
            return self.computed(recv) if self._converts(node) and recv.kind != GRAPH else recv
        return self.computed(NOTHING, *sources)

    def _held_callable(self, node: ast.AST) -> bool:
        """Is this callable one held in a local name or an attribute (a parameter ``fn``,
        ``self.detach_fn``), not a function or class the code names?"""
        if isinstance(node, ast.Name):
            return self.name_value(node.id) is not None
        return isinstance(node, ast.Attribute) and self.is_self(node.value)

    def _requires_grad_of(self, node: ast.Call) -> Value | None:
        """``requires_grad=x.requires_grad`` (a factory that requires grad exactly when ``x``
        does): what the program computes for ``x`` (a parameter or a graph tensor: it requires
        grad; an argument: it may; ``x.detach()``, data: it does not), as the result's value.
        None: the keyword is not read from a tensor's attribute (a literal, a flag)."""
        given = next((k.value for k in node.keywords if k.arg == "requires_grad"), None)
        if not (isinstance(given, ast.Attribute) and given.attr == "requires_grad"):
            return None
        source = self.eval(given.value)
        if source.kind == MODULE:
            return None  # not a tensor the program shows
        if source.kind == ARG:
            # an argument: the result requires grad where the caller passes one that does (what
            # a function's summary records as passed on; a detached argument gives none)
            return Value(ARG, source.origin, trail=source.trail, guess=source.guess)
        if source.kind >= LEAF:
            return Value(LEAF, f"a tensor made with requires_grad={short(given)} ({short(given.value)} requires grad)")
        return NOTHING

    def _converts(self, node: ast.Call) -> bool:
        """Does this call of an alias method change the dtype (a literal other than the default,
        the way the table says the method takes one) or the device (``.cpu()``, ``.cuda()``,
        ``.to("cuda")``)?"""
        name = node.func.attr if isinstance(node.func, ast.Attribute) else ""
        if name in torch_facts.DEVICE_MOVES:
            return True
        ways = torch_facts.dtype_copies(name)
        given = (list(node.args) if "positional" in ways else []) + (
            [k.value for k in node.keywords if k.arg == "dtype"] if "keyword" in ways else [])
        for a in given:
            dtype = torch_facts.dtype_name(self.imports.qualname(a)) if isinstance(a, (ast.Attribute, ast.Name)) else None
            if dtype is not None and dtype != torch_facts.default_dtype():
                return True
        devices = list(node.args) + [k.value for k in node.keywords if k.arg == "device"]
        return name == "to" and any(_names_cuda(a) for a in devices)

    @staticmethod
    def _sources(op, node: ast.Call, recv: Value | None, pos: list[Value], kw: dict[str, Value]) -> list[Value]:
        if "*" in op.sources or any(isinstance(a, ast.Starred) for a in node.args):
            chosen = list(pos) + ([recv] if recv is not None else [])  # f(*xs): positions unknown
        else:
            chosen = [pos[i] for i in op.sources if isinstance(i, int) and i < len(pos)]
        if recv is not None and "self" in op.sources:
            chosen.append(recv)
        chosen += [v for k, v in kw.items() if k not in torch_facts.PLACEMENT_KEYWORDS]
        return chosen

    def _name_call(self, node, name, pos, kw, everything) -> Value:
        if name == self.self_name and self.facts is not None and self.facts.is_module:
            return self._self_call(node, "forward", pos, kw, everything)
        local = self.name_value(name)
        if local is not None:
            if local.kind == MODULE and self.building:
                return local  # a module class or factory called while building
            if local.kind == MODULE and local.origin.startswith(CLASS_PREFIX):
                return Value(MODULE, f"{name}(...)")  # a class held in a name: calling it builds a module
            if local.kind in (MODULE, LEAF, GRAPH):
                return self.module_call(f"{name}(...)", pos, kw)
            return (everything if self.grad else _containers_only(everything)).assumed(f"{name}(...)")
        if name in NON_DIFF_BUILTINS:
            return NOTHING
        if name in PARAMETER_NAMES:
            off = torch_facts.function("torch.nn.Parameter", torch_facts.signature(node))
            if off is not None and off.off is not None and _flag_false(node, *off.off):
                return NOTHING  # Parameter(k, requires_grad=False)
            return Value(LEAF, "nn.Parameter(...)")
        if name == "getattr" and node.args:
            target = pos[0]
            if self.is_self(node.args[0]) and len(node.args) > 1:
                lit = node.args[1]
                if isinstance(lit, ast.Constant) and isinstance(lit.value, str):
                    return self.self_attr(lit.value)
                names = constant_names(pos[1])
                if names:  # for attr in ["n_range", "cos_powers"]: getattr(self, attr)
                    return join(*(self.self_attr(n) for n in names))
                registered = registered_kind(self.facts, lit) if self.facts is not None else None
                if registered == "buffer":
                    return NOTHING  # getattr(self, f"channel_combinations_{i}"): buffers it registered so
                if not (self.facts and self.facts.is_module):
                    return NOTHING
                if registered == "parameter":  # getattr(self, name + "_raw") after register_parameter(name + "_raw", ...)
                    return Value(LEAF, f"parameter getattr({self.self_name}, {_clip(ast.unparse(lit))})")
                # an attribute read by a name the program does not give here: taken to be a
                # parameter (a step on trust; the name may be a buffer's, a property's, data's)
                return Value(LEAF, short(node), guess=trusted(
                    "unknown-attribute", f"getattr({self.self_name}, {_clip(ast.unparse(lit))}) (a name the analysis cannot compute) is taken to be a parameter"))
            if target.kind == MODULE:
                lit = node.args[1] if len(node.args) > 1 else None
                if isinstance(lit, ast.Constant) and isinstance(lit.value, str) and not looks_like_parameter(lit.value):
                    return Value(MODULE, short(node))
                carried = constant_names(pos[1]) if len(pos) > 1 else None
                if carried and not any(looks_like_parameter(n) for n in carried):
                    return Value(MODULE, short(node))  # a helper's attr_name, given "spatial_dims" by its caller
                # a submodule or a parameter: calling it or computing with it both give a graph tensor
                return Value(LEAF, short(node))
            return target
        if name in PASSING_BUILTINS:
            if name == "map" and node.args and self._held_callable(node.args[0]):
                # map(fn, xs) with fn a callable held in a name or an attribute: what it does
                # to each item is not shown here
                return everything.assumed(f"{short(node.args[0])}(...)")
            if name in ("list", "tuple", "dict", "set", "frozenset", "sorted", "reversed", "enumerate", "zip", "iter", "next", "map", "filter"):
                return everything
            return self.computed(NOTHING, everything) if everything.kind > MODULE else NOTHING
        if name in self.module_classes:
            return Value(MODULE, f"{name}(...)")
        if name in _record_classes(self.imports):
            return everything  # Pair = namedtuple("Pair", "a b"): a Pair(...) holds what it is given
        return (everything if self.grad else _containers_only(everything)).assumed(f"{name}(...)")

    def _method_call(self, node, func: ast.Attribute, pos, kw, everything) -> Value:
        meth = func.attr
        recv_node = func.value
        # super().forward(...)
        if isinstance(recv_node, ast.Call) and isinstance(recv_node.func, ast.Name) and recv_node.func.id == "super":
            if meth == "__init__":
                return NOTHING
            if self.on_super is not None:
                # the base's method run on this object: what it feeds, it feeds (a base forward
                # of this file); one that cannot be found is judged as a layer call
                result = self.on_super("forward" if meth == "__call__" else meth, pos, kw, self.grad)
                if result is not None:
                    return result
            if meth in ("forward", "__call__") and (self.facts is None or self.facts.is_module):
                return self.module_call("super().forward(...)", pos, kw)
            # a base's method the analysis cannot see (of a class that is no module, its
            # __call__ too: a transform's, a wrapper's): taken to carry its arguments' history
            result = everything if self.grad else _containers_only(everything)
            return result.assumed(f"super().{meth}(...)") if meth in ("forward", "__call__") else result
        if self.is_self(recv_node):
            return self._self_call(node, meth, pos, kw, everything)
        if (self.on_helper is not None and self.facts is not None and isinstance(recv_node, ast.Attribute)
                and self.is_self(recv_node.value) and (recv_node.attr in self.facts.helpers or (
                    recv_node.attr in self.facts.submodule_quals and meth not in ("forward", "__call__")))):
            result = self.on_helper(recv_node.attr, meth, pos, kw, node, self.grad)
            if result is not None:
                return result
        recv = self.eval(recv_node)
        if recv.cls is not None:
            return self.object_member(recv, meth, everything)
        sig = torch_facts.signature(node)
        if (recv.kind != MODULE and torch_facts.module_api(meth) in ("leaf", "leaves")
                and torch_facts.tensor_method(meth, sig) is None):
            # ``given.parameters()``: only a module answers it (no tensor method has the name),
            # whatever the receiver is known to be, and what it yields are its parameters
            return Value(LEAF, f"{short(func)}()")
        if recv.kind == MODULE:
            api = torch_facts.module_api(meth)
            if api in ("leaf", "leaves"):
                return Value(LEAF, f"{short(func)}()")
            if api in ("module", "modules"):
                return recv
            if api in ("fresh", "scalar"):
                return NOTHING
            op = torch_facts.tensor_method(meth, sig)
            if op is not None and op.no_history:
                return NOTHING  # what may also be a parameter: .size(), .dim(), .eq(...)
            if looks_like_parameter(meth):
                return NOTHING
            if meth in ("forward", "__call__") or not _METHOD_NAME_RE.match(meth):
                # `self.encoder.layer1(x)`: a submodule (modules are named as nouns)
                if everything.kind >= LEAF or (recv.origin.startswith("self.") and not self.building and node.args):
                    return self.module_call(f"{short(func)}(...)", pos, kw)
                return recv  # model.module, model.backbone: another module
            # `model.init_hidden(n)`, `self.sub.prepare(x)`: a method of a class we cannot see;
            # what it returns is unknown, and unknown is not reported.
            if not node.args and not node.keywords and meth.startswith(("get_", "_get_")):
                return recv
            return NOTHING
        if isinstance(recv_node, (ast.Constant, ast.JoinedStr)):
            return NOTHING
        if meth in CONTAINER_READS and recv.kind != LEAF:
            return recv
        if meth in CONTAINER_NAMES:
            return NOTHING  # a mapping's keys, a length
        if meth in ("to", "type") and any(int_dtype(a) for a in node.args):
            return NOTHING  # x.to(torch.long): an integer result has no grad_fn
        if meth == "requires_grad_" and node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value is False:
            return NOTHING if recv.kind < GRAPH else recv
        if meth in CONTAINER_UPDATES:
            return NOTHING  # returns None; the statement walker records the mutation
        op = torch_facts.tensor_method(meth, sig)
        if op is not None:
            if recv.kind < MODULE and everything.kind < MODULE:
                return NOTHING
            if recv.kind == ARG and recv.items:
                return self.computed(recv, everything)  # a tuple argument: not a tensor's method
            return self.apply_op(op, short(func), node, recv, pos, kw)
        if recv.kind == ARG and meth not in torch_facts.tensor_names() and not recv.items:
            # an argument sent a method no tensor has (trace.iter_stochastic_nodes(),
            # posterior.rsample()) is not a tensor: its kind says nothing of the result
            recv = NOTHING
        if recv.kind >= MODULE or everything.kind >= MODULE:
            result = self.computed(recv, everything)
            return result if meth in torch_facts.tensor_names() else result.assumed(f"{short(func)}(...)")
        return NOTHING

    def object_member(self, obj: Value, name: str, everything: Value) -> Value:
        """A method or attribute of a torch object the table knows (``dist.sample()``,
        ``dist.mean``): fresh values have no history, the others keep what the object holds."""
        facts = torch_facts.distribution(obj.cls) or {}
        kind = facts.get("methods", {}).get(name)
        if kind in ("fresh", "int", "scalar"):
            return NOTHING
        if kind is not None:
            return Value(obj.kind, obj.origin)
        return self.computed(Value(obj.kind, obj.origin), everything)

    def _self_call(self, node, meth, pos, kw, everything) -> Value:
        facts = self.facts
        if facts is not None and meth in facts.methods and is_property(facts.methods[meth]):
            # self.backbone(x) with a @property backbone: a call of what the property returns
            held = self.self_attr(meth)
            if held.kind == MODULE:
                return self.module_call(f"self.{meth}(...)", pos, kw)
            return self.computed(NOTHING, everything).assumed(f"self.{meth}(...)") if everything.kind >= MODULE else NOTHING
        if facts is not None and meth in facts.methods:
            if meth in ("forward", "__call__"):
                result = self.on_method(meth, pos, kw, self.grad) if self.on_method else None
                return result if result is not None else (Value(GRAPH, "self(...)") if self.grad else NOTHING)
            if self.on_method is not None:
                result = self.on_method(meth, pos, kw, self.grad)
                if result is not None:
                    return result
            return (everything if self.grad else _containers_only(everything)).assumed(f"self.{meth}(...)")
        api = torch_facts.module_api(meth)
        if api in ("leaf", "leaves"):
            return Value(LEAF, f"self.{meth}()")
        if api is not None:
            return NOTHING
        if facts is not None and meth in facts.helpers and self.on_helper is not None:
            result = self.on_helper(meth, "__call__", pos, kw, node, self.grad)  # self.scorer(hyp, ref)
            if result is not None:
                return result
        if facts is not None and meth in facts.bound_methods and self.on_method is not None:
            # self.state_function(x) with self.state_function = self._base_sub: the bound
            # methods run on this object (each one the class binds there; their results joined)
            results = [self.on_method(m, pos, kw, self.grad) for m in sorted(facts.bound_methods[meth])]
            if results and all(r is not None for r in results):
                return join(*results)
        if facts is not None and (meth in facts.functional or meth in facts.plain):
            return self.computed(NOTHING, everything)
        if facts is not None and meth in getattr(facts, "frozen_modules", ()):
            return self.computed(NOTHING, everything)  # a frozen submodule: its inputs' history only
        if facts is not None and (meth in facts.submodules or self.self_attrs.get(meth, NOTHING).kind == MODULE):
            result = self.module_call(f"self.{meth}(...)", pos, kw)
            quals = facts.submodule_quals.get(meth)
            forward_items = getattr(self.imports, "forward_items_of", None)  # forward_results, installed by the analysis
            if quals and result.kind == GRAPH and forward_items is not None:
                found = [forward_items(self.imports, q, self.nesting) for q in quals]
                if found and all(f is not None and len(f.items) == len(found[0].items) for f in found):
                    flags = [f.carried(pos, kw) for f in found]  # loss, queue, used = self.criterion(out, queue=q)
                    items = tuple(result if any(f[i] for f in flags) else NOTHING for i in range(len(flags[0])))
                    return Value(result.kind, result.origin, items)
            return result
        if meth in ("forward", "__call__") and facts is not None and facts.is_module:
            return Value(GRAPH, "self(...)") if self.grad else NOTHING
        if facts is not None and facts.bases and self.on_method is not None:
            result = self.on_method(meth, pos, kw, self.grad)  # a method a base in another file defines
            if result is not None:
                return result
        # Unknown (inherited) attribute: a submodule or a helper method; judge by the args.
        if facts is not None and facts.is_module and not _METHOD_NAME_RE.match(meth):
            from ..program.project_view import defines_method

            if (not defines_method(self.imports.project, facts.bases, meth) and meth not in facts.injected
                    and not torch_base_method(facts.bases, meth)):
                self.feed(*pos, *kw.values())  # named as a noun, and no base defines it: a submodule
        return self.computed(NOTHING, everything).assumed(f"self.{meth}(...)") if everything.kind >= MODULE else NOTHING

    # -- binding ------------------------------------------------------------------


def is_property(func: ast.FunctionDef) -> bool:
    """``@property`` (or ``@functools.cached_property``) on a method: reading the name runs it."""
    for d in func.decorator_list:
        name = d.attr if isinstance(d, ast.Attribute) else d.id if isinstance(d, ast.Name) else ""
        if name in ("property", "cached_property"):
            return True
    return False


def is_cached_property(func: ast.FunctionDef) -> bool:
    """``@functools.cached_property``: the first read stores the result on the object."""
    return any((d.attr if isinstance(d, ast.Attribute) else getattr(d, "id", "")) == "cached_property"
               for d in func.decorator_list)


def _clip(text: str, most: int = 40) -> str:
    return text if len(text) <= most else text[: most - 3] + "..."


def _moves_new_parameter(node: ast.Call, imports) -> bool:
    """``nn.Parameter(...).to(device)`` / ``.to(device=...)`` with a device that is not a literal
    CPU: a parameter made and moved in one expression."""
    func = node.func
    if not (isinstance(func, ast.Attribute) and func.attr == "to" and isinstance(func.value, ast.Call)):
        return False
    made = func.value.func
    qual = imports.qualname(made) or ""
    if qual not in ("torch.nn.Parameter", "torch.nn.parameter.Parameter") and not (
            isinstance(made, ast.Name) and made.id == "Parameter"):
        return False
    given = [k.value for k in node.keywords if k.arg == "device"] or node.args[:1]
    for a in given:
        if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("cpu"):
            return False
        if isinstance(a, (ast.Attribute, ast.Name)) and torch_facts.dtype_name(imports.qualname(a)) is not None:
            return False  # .to(torch.float16): a dtype, judged by the table
    return bool(given)


def _names_cuda(node: ast.AST) -> bool:
    """``"cuda"``, ``"cuda:0"``, ``torch.device("cuda")``: a literal GPU device."""
    if isinstance(node, ast.Call) and node.args:
        node = node.args[0]
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("cuda")


def _flag_false(node: ast.Call, position: int, keyword: str) -> bool:
    """Is the flag at ``position`` (or passed as ``keyword``) a literal False in the call?"""
    given = next((k.value for k in node.keywords if k.arg == keyword), None)
    if given is None and len(node.args) > position and not any(isinstance(a, ast.Starred) for a in node.args[:position + 1]):
        given = node.args[position]
    return isinstance(given, ast.Constant) and given.value is False


_RECORD_FACTORIES = frozenset({"collections.namedtuple", "typing.NamedTuple"})


def _record_classes(imports) -> frozenset[str]:
    """The module-level names of this file bound to a record class made by a call
    (``Pair = namedtuple("Pair", "a b")``, ``typing.NamedTuple("P", [...])``): an instance holds
    its arguments, as a tuple does. Once per file."""
    module = getattr(imports, "current", None)
    if module is None:
        return frozenset()
    memo = module.memo
    if "record_classes" not in memo:
        names = set()
        for stmt in getattr(module.tree, "body", ()):
            if (isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call)
                    and imports.qualname(stmt.value.func) in _RECORD_FACTORIES):
                names.update(t.id for t in stmt.targets if isinstance(t, ast.Name))
        memo["record_classes"] = frozenset(names)
    return memo["record_classes"]
