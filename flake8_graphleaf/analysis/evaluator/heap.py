"""The program's objects, and one run of its code in order from its roots.

The class runner (:mod:`.scopes`) judges what a module class keeps on itself from its
``forward``.  Many real incidents are not that: a plain training wrapper keeps the loss of its
``step()``, a hand-written EMA helper updates its shadows with grad on, a hook made by a closure
fills a dict the model also holds, a beam search deep-copies hypotheses that keep a decoder state,
a worker process puts a model output on a queue.  What they need is what this module gives:

* **roots**: the file's module-level code (the script, ``if __name__ == "__main__":``), then every
  module-level function it did not reach, with what its annotations show;
* **calls followed** with the values and objects really passed: the file's functions, its classes
  (``Trainer(model)`` runs ``__init__`` on a new object), their methods on objects known to be of
  them (``trainer.step(x, y)``, ``ema.update(model)``), a ``Process`` target with its ``args``,
  a hook registered on a module (run, as ``forward`` would run it, at the next module call), a
  ``functools.partial`` or a closure, also classes and functions of other files of the program;
* **an abstract heap**: objects by class (``Trainer``) or by the place they are made (a dict
  ``outputs = {}`` that a closure fills), what each attribute holds (values and objects), and
  the graph tensors kept on them (:class:`Kept`), in program order: a later store of a plain value,
  ``del`` or ``.clear()`` takes the tensor away again;
* **sinks**: ``copy.deepcopy`` (and the copying wrappers), ``DataLoader`` workers and
  multiprocessing queues, judged on the heap as it is when the call runs (a copy made before
  any forward copies nothing on the graph).

Pure analysis: it reads the program and never imports it.  Cost: every followed call walks the
callee's body once per call site reached (no memo: the heap is in program order), within a
budget per root (:data:`BUDGET` function runs) and :data:`MAX_DEPTH` calls deep.
"""

from __future__ import annotations

import ast
import os

from .. import messages
from . import copy_protocol
from .calls import is_cached_property, is_property
from ..program.grad_mode import function_grad_mode
from .graph_tensors import ARG, GRAPH, LEAF, MODULE, NOTHING, Evaluator, Value, join
from ..values import CLASS_PREFIX, short
from ..program.helper_objects import file_classes
from .scopes import _explicit_enable, bind, self_name, settle_flags
from ..facts.sinks import COPIER_NAMES as _COPIER_NAMES, COPIERS as _COPIERS
from ..facts.sinks import LEGACY_NOW as _LEGACY_NOW, PRUNE_PREFIX as _PRUNE_PREFIX, PRUNERS as _PRUNERS
from .heap_model import (EMPTY, MP_CONTEXT, MP_PICKLING, POOL, QUEUE, FileContext, Kept, Sink,  # noqa: F401 - the model's names, as heap's
                         Types, classes_of, flatten)
from .heap_statements import _DISPLAYS, HeapWalker, _items_held, _mode_set, _tuple_elements  # noqa: F401
from .sends import Sends
from ..program.stmtwalk import walk
from .liveness import TOP, _live_defs, may_reach_sink  # noqa: F401 - may_reach_sink: the copy graph's gate
from .origins import _caller_made, _given_to, _inspection_entry, _passed_parameter

BUDGET = 20  # function runs from one root (the module's code, or one function)
MAX_DEPTH = 6

_HOOKS = ("register_forward_hook", "register_full_backward_hook", "register_backward_hook",
          "register_forward_pre_hook")


class Program:
    """The heap and the sinks of one run of a file's code (see the module docstring)."""

    def __init__(self, current, path: str):
        self.current = current  # the ParsedModule of the checked file
        self.path = path
        self.values: dict[tuple, Value] = {}  # (atom, attr) -> the Value last stored
        self.held: dict[tuple, frozenset] = {}  # (atom, attr) -> the atoms it holds
        self.kept: dict[tuple, Kept] = {}  # (atom, attr) -> the graph tensor kept there
        # where the objects of each class are made ((path, line, col) of the calls): a class made
        # at several places is several objects under one atom (a recorder and its clean twin)
        self.made_at: dict[str, set] = {}
        self.functions: dict = {}  # key -> (FunctionDef, enclosing frame or None, FileContext)
        self.partials: dict = {}  # key -> (callee types, positional values, positional types)
        self.hooks: list = []  # pending hook registrations: (types, frame)
        self.sinks: list[Sink] = []
        # copies of objects of plain classes of the program the run judged: (path, line, col) ->
        # whether what they reach keeps a graph tensor there
        self.judged: dict[tuple, bool] = {}
        self.start_pickles = False  # the run called set_start_method("spawn" / "forkserver")
        # objects of the run handed to code it does not follow (a library's trainer.fit(model)):
        # what that code did to them is not known, so a copy of one is not judged by the run
        self.escaped: set = set()
        self.runs = 0
        self.done: dict = {}  # a call's inputs -> its result, for this run
        self.active: set = set()
        self.reached: set = set()  # ids of the functions run
        self.contexts: dict[str, FileContext] = {}
        # Calls are followed into the files of the run's own folder and below (a script's
        # package, a project's modules), not into the rest of a large tree: what a library far
        # off does is its own files' to report, and parsing it is most of what a run would cost.
        self.scope = os.path.join(os.path.dirname(os.path.abspath(path)), "")
        self.classes: dict[str, tuple] = {}  # class key -> (ClassInfo, FileContext)
        # what became of each store of a graph tensor, by (path, line) of the store: where the
        # program took it away again (a plain store, del, .clear()), and the stores still kept
        # when a root's run ended or when a copy or send reached them
        self.cleared: dict[tuple, tuple] = {}
        self.survived: set[tuple] = set()
        # the mode of each module object of the program, as its calls set it: True (training)
        # when made (nn.Module.__init__), then what .train() / .eval() last made it, which torch
        # sets on the object and every module under it; absent where the run cannot tell
        self.modes: dict[tuple, bool] = {}
        self.mode_changes = 0  # a call run again after a mode changed is not the same call
        # stores of graph tensors a copy met and did not take, because the holder's __getstate__
        # detaches or drops them: (path, line)
        self.covered: set[tuple] = set()
        # each store a copy reached -> (class key, attribute) of the object nearest to it on the way
        self.owners: dict[tuple, tuple] = {}
        # the functions re-entrant checkpoints ran under no_grad in forward, which the next
        # backward() runs again with grad on: (frame, callee, arguments...)
        self.recompute: list = []

    def set_mode(self, atoms, mode: bool | None) -> None:
        """``.train(mode)`` / ``.eval()`` on the objects ``atoms``: on them and on the modules
        they hold (attributes, containers), as ``nn.Module.train`` does; None: not known."""
        todo, seen = [a for a in atoms if a[0] in ("obj", "alloc")], set()
        holds: dict = {}  # holder -> what it holds, over all its attributes (one pass over the heap)
        for (holder, _attr), held in self.held.items():
            holds.setdefault(holder, []).append(held)
        while todo:
            atom = todo.pop()
            if atom in seen:
                continue
            seen.add(atom)
            if atom[0] == "obj" and self.is_module(atom[1]):
                if self.modes.get(atom) != mode:
                    self.mode_changes += 1
                if mode is None:
                    self.modes.pop(atom, None)
                else:
                    self.modes[atom] = mode
            elif atom[0] == "obj":
                continue  # a plain object's attributes are not its modules
            for held in holds.get(atom, ()):
                todo.extend(a for a in flatten(held) if a[0] in ("obj", "alloc") and a not in seen)

    # -- files --------------------------------------------------------------------
    def context_of(self, parsed) -> FileContext:
        ctx = self.contexts.get(parsed.path)
        if ctx is None:
            classes, module_classes = file_classes(parsed)
            ctx = self.contexts[parsed.path] = FileContext(parsed.name, parsed.path, parsed.imports, parsed.defs,
                                                           classes, module_classes)
        return ctx

    def definition(self, ctx: FileContext, func: ast.AST):
        """(FileContext, class or function node) of what ``func`` names in the program, or None."""
        from ..program.project_view import resolve_from

        if isinstance(func, ast.Name) and func.id in ctx.defs:
            return ctx, ctx.defs[func.id]
        qual = ctx.imports.qualname(func)
        if not self.in_scope(ctx.imports, qual):
            return None
        found = resolve_from(ctx.imports, qual)
        if found is not None and not found.module.path.startswith(self.scope):
            return None  # a file outside the run's folder (a library the script uses): not followed
        if found is None:
            return None
        return self.context_of(found.module), found.node

    # -- the heap -----------------------------------------------------------------
    def reach(self, types) -> list[Kept]:
        """The graph tensors kept where a deep copy of objects of ``types`` goes (what each class's
        copy protocol lets a copy reach: :mod:`.copy_protocol`)."""
        return [k for k, _ in self.reach_paths(types)]

    def reach_paths(self, types) -> list[tuple[Kept, tuple[str, ...]]]:
        """The graph tensors kept where a deep copy of objects of ``types`` goes, each with the
        attributes from the copied object to it (``("block", "attn", "last_attn")``; ``"[]"``: the
        items of a container), the shortest way there."""
        return copy_protocol.reach_paths(self, types, flatten)

    def in_scope(self, imports, qual: str | None) -> bool:
        """Is ``qual`` defined in a file of the run's folder or below (found without parsing)?
        A top-level module beside the importing file counts (``from training import Trainer``)."""
        if not qual:
            return False
        project = getattr(imports, "project", None)
        module = qual.rpartition(".")[0]
        current = getattr(getattr(imports, "current", None), "path", None)
        if module and "." not in module and current and os.path.isfile(
                os.path.join(os.path.dirname(current), module + ".py")):
            return True  # beside the importing file: what resolve_from finds first
        while module:
            path = project.located(module) if project is not None else None
            if path is not None:
                return path.startswith(self.scope)
            module = module.rpartition(".")[0]  # a module, or a name re-exported by a package
        return False

    def outcome(self) -> "Program":
        """This run with only what other files ask of it (its sinks and judged copies): kept for
        the whole process, it must not hold the frames, closures and heap it was built with."""
        light = Program(self.current, self.path)
        light.sinks, light.judged = self.sinks, self.judged
        light.cleared, light.survived = self.cleared, self.survived
        light.covered, light.owners = self.covered, self.owners
        return light

    def settle_root(self) -> None:
        """A root's run ended: what is kept now outlives it."""
        self.survived.update(_where_stored(k) for k in self.kept.values())

    def _took(self, kept: "Kept | None", path: str, node: ast.AST | None) -> None:
        if kept is not None and node is not None:
            self.cleared.setdefault(_where_stored(kept), (path, node.lineno))

    def is_module(self, qual: str) -> bool:
        info = self.class_info(qual)
        return info is not None and info.facts.is_module

    def class_info(self, key: str):
        found = self.classes.get(key)
        return found[0] if found is not None else None

    def class_key(self, ctx: "FileContext", name: str) -> str:
        """A class by the file it is defined in (two scripts' ``training.Trainer`` are two classes)."""
        key = f"{ctx.path}::{name}"
        if key not in self.classes and name in ctx.classes:
            self.classes[key] = (ctx.classes[name], ctx)
        return key

    def store(self, holders, attr: str, value: Value, frame: "Frame", node: ast.AST, stmt, target: str,
              code: str, direct: bool) -> None:
        """``value`` put at ``attr`` of each object of ``holders``: kept when it is a graph
        tensor stored with grad on; a plain value assigned to the attribute itself replaces it."""
        for atom in holders:
            if atom[0] not in ("obj", "alloc"):
                continue
            key = (atom, attr)
            if direct:
                self.values[key] = value
            if value.kind == GRAPH and frame.grad:
                if not direct and key in self.kept:
                    continue  # put into a container that holds one already: the first store is still in it
                if frame.hook:
                    code = "GLF003"
                root = target.split(".", 1)[0].split("[", 1)[0]
                self.kept[key] = Kept(atom, attr, code, node, stmt, value, frame.ctx.path, frame.reached(), target,
                                      frame.func.name if frame.func is not None else "", root,
                                      atom == frame.self_atom and root == frame.self_name, _given_to(frame, stmt, value),
                                      _inspection_entry(frame))
            elif direct:
                taken = self.kept.get(key)
                root = target.split(".", 1)[0].split("[", 1)[0]
                if taken is not None and atom[0] == "obj" and len(self.made_at.get(atom[1], ())) > 1 and (
                        taken.root != root and root != frame.self_name):
                    continue  # another object of the class, through another name, may be the one reset
                taken = self.kept.pop(key, None)
                if taken is not None and taken.node is not node:
                    # a reset is another statement: the storing line run again with grad off
                    # (an eval pass whose `if self.training:` the run does not decide) is not one
                    self._took(taken, frame.ctx.path, node)

    def backward(self) -> None:
        """A backward pass: re-entrant checkpoints recompute their functions with grad on."""
        pending, self.recompute = self.recompute, []
        for frame, callee, pos, kw, pos_types, kw_types in pending:
            saved, frame.grad = frame.grad, True
            try:
                frame.call_atom(callee, pos, kw, pos_types, kw_types)
            finally:
                frame.grad = saved

    def copy_object(self, atom: tuple, site: tuple, memo: dict) -> tuple:
        """The object a deep copy at ``site`` makes of ``atom``: one more object of its class (or
        container) holding copies of what the original holds, so that what the program stores on
        the copy is not on the original (the graph tensors the original keeps are not copied: the
        copy would have raised)."""
        if atom[0] not in ("obj", "alloc") or site in atom:
            return atom
        if atom in memo:
            return memo[atom]
        twin = memo[atom] = (*atom[:2], site) if atom[0] == "obj" else (
            *atom[:4], site, *(("module",) if "module" in atom[4:] else ()))
        for (holder, attr), held in list(self.held.items()):
            if holder == atom:
                self.held[(twin, attr)] = frozenset(self.copy_object(a, site, memo) for a in held)
        for (holder, attr), value in list(self.values.items()):
            if holder == atom:
                self.values[(twin, attr)] = value
        if atom in self.modes:
            self.modes[twin] = self.modes[atom]
        return twin

    def clear(self, holders, attr: str, frame: "Frame | None" = None, node: ast.AST | None = None) -> None:
        for atom in holders:
            taken = self.kept.pop((atom, attr), None)
            if frame is not None:
                self._took(taken, frame.ctx.path, node)
            self.held.pop((atom, attr), None)

    # -- running ------------------------------------------------------------------
    def run(self, func: ast.FunctionDef, ctx: FileContext, pos: list[Value], kw: dict[str, Value], pos_types: list,
            kw_types: dict, grad: bool, self_atom=None, closure: "Frame | None" = None, caller: "Frame | None" = None,
            hook: bool = False, info=None) -> tuple[Value, frozenset]:
        """Run ``func`` with these values; (what it returns, the objects it returns)."""
        key = id(func)
        depth = caller.depth + 1 if caller is not None else 0
        if key in self.active or depth > MAX_DEPTH:
            return NOTHING, EMPTY
        # the same call again (a loop's body walked twice, a method called per element): what it
        # did to the heap is done; its result is the same, unless the heap has kept more graph
        # tensors since (a beam's advance() copying the stacks its previous call pushed onto)
        # (by the values' kinds and origins: a witness names the source of this call's values)
        same = (key, self_atom, id(closure), grad, hook, len(self.kept), self.mode_changes,
                tuple((v.kind, v.origin) for v in pos), tuple(sorted((k, v.kind, v.origin) for k, v in kw.items())),
                tuple(pos_types),
                tuple(sorted(kw_types.items())))
        if same in self.done and func.name != "__init__":  # a constructor again resets its object
            return self.done[same]
        if self.runs >= BUDGET:
            return NOTHING, EMPTY
        self.runs += 1
        self.active.add(key)
        self.reached.add(key)
        if info is not None:
            settle_flags(info, ctx.imports)  # branches on a switch the class fixes run only the side it takes
        try:
            frame = Frame(self, ctx, func, self_atom, closure, caller, info)
            frame.hook = hook or (caller.hook if caller is not None else False)
            frame.depth = depth
            method = self_atom is not None
            frame.env.update(bind(func, pos, kw, method))
            frame.types.update(bind(func, pos_types, kw_types, method, EMPTY))
            frame.grad = function_grad_mode(func, ctx.imports) if grad else _explicit_enable(func, ctx.imports)
            if self_atom is not None:
                frame.self_attrs.update({a: v for (h, a), v in self.values.items() if h == self_atom})
            walker = HeapWalker(frame)
            value = walker.run(func.body)
            self.done[same] = (value, frozenset(frame.returned))
            return self.done[same]
        finally:
            self.active.discard(key)

    def run_module(self, ctx: FileContext, body: list[ast.stmt]) -> None:
        frame = Frame(self, ctx, None, None, None, None, None)
        self.module_frame = frame
        HeapWalker(frame).run(body)

    def fire_hooks(self, frame: "Frame") -> None:
        """A module was called: the hooks registered so far run, with the module's output."""
        if not self.hooks or not frame.grad:
            return
        pending, self.hooks = self.hooks, []
        for types, where, kind in pending:
            output = Value(GRAPH, "the output a forward hook is given")
            given = [Value(MODULE, "the hooked module"), Value(ARG, "the module's inputs"), output]
            if kind == "register_forward_pre_hook":
                given = given[:2]
            for callee in flatten(types):
                where.call_atom(callee, given, {}, [EMPTY] * len(given), {}, hook=True)


class Frame(Sends, Evaluator):
    """One function run (or the module's code): an Evaluator that also knows which objects its
    names hold, and follows the program's calls."""

    def __init__(self, program: Program, ctx: FileContext, func, self_atom, closure, caller, info):
        facts = info.facts if info is not None else None
        super().__init__(ctx.imports, facts, self_name(func) if func is not None and self_atom is not None else None,
                         ctx.module_classes)
        self.program = program
        self.ctx = ctx
        self.code_path = ctx.path
        self.func = func
        self.self_atom = self_atom
        self.closure = closure
        self.caller = caller
        self.info = info
        self.types: dict[str, frozenset] = {}
        self.returned: set = set()
        self.call_types: dict[int, frozenset] = {}
        self.pending: dict[int, Value] = {}  # calls evaluated ahead (a receiver: X().method()), by node
        self.read_types: dict[int, frozenset] = {}  # what a @property read returned (objects), by node
        self.hook = False
        self.depth = 0

    def reached(self) -> str:
        """How the run got here, as a message names it (analysis/messages.call_chain): each function
        called (``train()``), a method with its class (``TinyClassifier.forward``), a hook run by a
        module call (``hook (forward hook)``); the module-level code only when nothing is called."""
        names = []
        f = self
        while f is not None:
            if f.func is None:
                names.append(messages.MODULE_CODE)
            else:
                cls = f.info.node.name if f.info is not None and f.self_atom is not None else None
                names.append(messages.frame_name(f.func.name, cls, hook=f.hook and (f.caller is None or not f.caller.hook)))
            f = f.caller
        return messages.call_chain(reversed(names))

    # -- what names hold ----------------------------------------------------------
    def name_value(self, name: str) -> Value | None:
        """A name the function does not bind is its closure's, else the module's global as it is
        when the call runs (``out = net(x)`` in a function the script calls after ``net = ...``)."""
        v = self.env.get(name)
        if v is not None or name == self.self_name:
            return v
        f = self.closure
        while f is not None:
            if name in f.env:
                return f.env[name]
            f = f.closure
        module = getattr(self.program, "module_frame", None)
        if module is not None and module is not self and self.ctx.path == self.program.path:
            return module.env.get(name)
        return None

    def name_types(self, name: str) -> frozenset:
        f = self
        while f is not None:
            if name in f.types:
                return f.types[name]
            if name == f.self_name and f.self_atom is not None:
                return frozenset({f.self_atom})  # a closure's self: the object of the method that made it
            f = f.closure
        module = getattr(self.program, "module_frame", None)
        if module is not None and module is not self and self.ctx.path == self.program.path and name in module.types:
            return module.types[name]
        found = self.program.definition(self.ctx, ast.Name(id=name))
        return self._def_atom(found)

    def _def_atom(self, found) -> frozenset:
        if found is None:
            return EMPTY
        ctx, node = found
        if isinstance(node, ast.ClassDef):
            return frozenset({("class", self.program.class_key(ctx, node.name))})
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            key = id(node)
            self.program.functions.setdefault(key, (node, None, ctx))
            return frozenset({("fn", key)})
        return EMPTY

    def types_of(self, node: ast.AST | None) -> frozenset:
        if node is None:
            return EMPTY
        if isinstance(node, ast.Name):
            return self.name_types(node.id)
        if isinstance(node, ast.Attribute):
            if id(node) in self.read_types:
                return self.read_types[id(node)]
            out = set()
            for atom in flatten(self.types_of(node.value)):
                if atom[0] in ("obj", "alloc"):
                    out |= self.program.held.get((atom, node.attr), EMPTY)
                    if atom[0] == "obj":
                        out |= self._method_atom(atom, node.attr)
            if not out and isinstance(node.value, (ast.Name, ast.Attribute)):
                found = self.program.definition(self.ctx, node)  # module.function of the program
                out |= self._def_atom(found)
            return frozenset(out)
        if isinstance(node, ast.Call):
            return self.call_types.get(id(node), EMPTY)
        if isinstance(node, ast.Subscript):
            if isinstance(node.slice, ast.Slice):
                return flatten(self.types_of(node.value))  # a slice: a container of the same items
            out = set()
            for atom in flatten(self.types_of(node.value)):
                if atom[0] == "alloc":
                    out |= self.program.held.get((atom, "[]"), EMPTY)
                else:
                    out.add(atom)
            return frozenset(out)
        if isinstance(node, ast.Tuple):
            return frozenset({("tuple", tuple(self.types_of(e) for e in node.elts))})
        if isinstance(node, (ast.List, ast.Set)):
            return frozenset().union(*(flatten(self.types_of(e)) for e in node.elts)) if node.elts else EMPTY
        if isinstance(node, ast.Starred):
            return flatten(self.types_of(node.value))
        if isinstance(node, ast.IfExp):
            return self.types_of(node.body) | self.types_of(node.orelse)
        if isinstance(node, ast.BoolOp):
            return frozenset().union(*(self.types_of(v) for v in node.values))
        if isinstance(node, ast.NamedExpr):
            return self.types_of(node.value)
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            return self._comprehension_types(node)
        return EMPTY

    def _comprehension_types(self, node) -> frozenset:
        """A comprehension over a container the run made (``{k: v for k, v in ctx.items() if ...}``)
        holds that container's items: on the heap, the container itself stands for it."""
        elt = node.value if isinstance(node, ast.DictComp) else node.elt
        out = set(flatten(self.types_of(elt)))
        names = {n.id for g in node.generators for n in ast.walk(g.target) if isinstance(n, ast.Name)}
        items = elt.elts if isinstance(elt, ast.Tuple) else [elt]
        if any(isinstance(n, ast.Name) and n.id in names for n in items):  # the items themselves, not v.detach()
            for g in node.generators:
                it = g.iter
                if (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and not it.args
                        and it.func.attr in ("items", "values")):
                    it = it.func.value
                # a container the run made stands for its items; a list of the program's objects
                # (the types of a display are its items') gives those objects
                out |= {a for a in flatten(self.types_of(it)) if a[0] in ("alloc", "obj")}
        return frozenset(out)

    def _method_atom(self, atom, name: str) -> frozenset:
        info = self.program.class_info(atom[1])
        if info is not None and name in info.facts.methods and not is_property(info.facts.methods[name]):
            return frozenset({("bound", atom[1], name, atom)})
        return EMPTY

    def training_of(self, node: ast.AST) -> bool | None:
        """The mode of the module object(s) ``node`` names (``self`` in ``self.training``), as
        the program's calls set it (Program.modes); None where any of them is not known."""
        atoms = flatten(self.types_of(node))
        modes = {self.program.modes.get(a) for a in atoms if a[0] == "obj"}
        return modes.pop() if len(modes) == 1 else None

    def eval_Attribute(self, node: ast.Attribute) -> Value:
        """``obj.name`` where ``obj``'s class of the program makes ``name`` a ``@property``:
        reading it runs the getter on that object (its stores are the object's, in this
        call's grad mode), and the read gives what the getter returns."""
        value = super().eval_Attribute(node)
        if not isinstance(node.ctx, ast.Load):
            return value
        if value.kind < GRAPH:
            stored = self._stored(node)
            if stored:
                value = join(value, *stored)
        getters = []
        for atom in flatten(self.types_of(node.value)):
            if atom[0] == "obj":
                info = self.program.class_info(atom[1])
                method = info.facts.methods.get(node.attr) if info is not None else None
                if method is not None and is_property(method):
                    getters.append(("bound", atom[1], node.attr, atom))
        if not getters:
            return value
        results, types = [value], set()
        for getter in getters:
            got, returned = self.call_atom(getter, [], {}, [], {})
            results.append(got)
            types |= returned
            self._cache_property(getter, got, returned)
        self.read_types[id(node)] = frozenset(types)
        return join(*results)

    def _stored(self, node: ast.Attribute) -> list[Value]:
        """What the run stored at ``obj.name`` for the objects ``obj`` may be (``state.model``
        after ``RunState(model)``: the module given to its constructor); ``self.name`` is the frame's."""
        if self.is_self(node.value):
            return []
        values = self.program.values
        return [values[key] for key in ((a, node.attr) for a in flatten(self.types_of(node.value))) if key in values]

    def _cache_property(self, getter, got: Value, returned) -> None:
        """A ``functools.cached_property``: the first read puts what the getter returns in the
        object's ``__dict__`` under its name, where every copy of the object takes it (the store
        is the getter's return)."""
        _, key, name, atom = getter[:4]
        program = self.program
        info = program.class_info(key)
        method = info.facts.methods.get(name) if info is not None else None
        if method is None or not is_cached_property(method):
            return
        program.values.setdefault((atom, name), got)
        program.held[(atom, name)] = program.held.get((atom, name), EMPTY) | returned
        ret = next((n for n in reversed(list(walk(method))) if isinstance(n, ast.Return) and n.value is not None), None)
        if got.kind == GRAPH and self.grad and ret is not None and (atom, name) not in program.kept:
            program.kept[(atom, name)] = Kept(atom, name, "GLF001", ret.value, ret, got, program.classes[key][1].path,
                                              f"{self.reached()} -> {key.rpartition('::')[2]}.{name} (cached_property)",
                                              f"self.{name}", name, "self", True)

    # -- calls --------------------------------------------------------------------
    def _project_call(self, node, func, qual, pos, kw):
        """What a function of the program returns, as the Evaluator judges it, for files of the
        run's folder only: the effects of a large tree's other corners are not worked out here."""
        if not (isinstance(func, ast.Name) and func.id in self.ctx.defs) and not self.program.in_scope(self.imports, qual):
            return None
        return super()._project_call(node, func, qual, pos, kw)

    def module_call(self, origin, pos, kw):
        result = super().module_call(origin, pos, kw)
        self.program.fire_hooks(self)
        return result

    def eval_Call(self, node: ast.Call) -> Value:
        if id(node) in self.pending:
            return self.pending.pop(id(node))
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call):
            # Dataset().embed(encoder): the receiver's objects first, so that the method is the
            # program's; evaluated once (what is asked of it again gets this value)
            self.pending[id(func.value)] = self.eval(func.value)
        qual = self.imports.qualname(func)
        attr = func.attr if isinstance(func, ast.Attribute) else None
        if qual == "functools.partial" and node.args:
            pos = [self.eval(a) for a in node.args[1:]]
            key = id(node)
            self.program.partials[key] = (self.types_of(node.args[0]), pos,
                                          [self.types_of(a) for a in node.args[1:]])
            for k in node.keywords:
                self.eval(k.value)
            self.call_types[id(node)] = frozenset({("partial", key)})
            return NOTHING
        if attr in _HOOKS and node.args:
            recv = self.eval(func.value)
            for a in node.args:  # the hook too: functools.partial(save, "l") makes its object here
                self.eval(a)
            if recv.kind in (MODULE, LEAF) or flatten(self.types_of(func.value)):
                self.program.hooks.append((self.types_of(node.args[0]), self, attr))
            return NOTHING
        if attr in ("train", "eval") and isinstance(func, ast.Attribute) and len(node.args) + len(node.keywords) <= 1:
            atoms = flatten(self.types_of(func.value))
            if atoms:
                self.program.set_mode(atoms, _mode_set(node))
        sent = self.send_call(node, func, qual, attr)
        if sent is not None:
            return sent
        if qual in _LEGACY_NOW and node.args:
            return self._legacy_norm(node, qual)
        if qual and qual.startswith(_PRUNE_PREFIX) and node.args:
            return self._pruned(node, qual[len(_PRUNE_PREFIX):])
        if qual in _CHECKPOINTS and node.args and self._callees(node.args[0]):
            return self._checkpointed(node)
        if (attr == "backward" or qual in ("torch.autograd.backward", "torch.autograd.grad")) and self.program.recompute:
            result = super().eval_Call(node)
            self.program.backward()
            return result
        copier = _COPIERS.get(qual or "") or (
            (func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")) in _COPIER_NAMES and "copier")
        if copier and node.args:
            result = super().eval_Call(node)
            types = self.types_of(node.args[0])
            reached = self.program.reach_paths(types)
            kept = [k for k, _ in reached]
            where = (self.ctx.path, node.lineno, node.col_offset)
            atoms = flatten(types)
            if any(a[0] == "obj" and not self.program.is_module(a[1]) for a in atoms) or (
                    any(a[0] == "obj" for a in atoms) and not self._escaped(atoms)):
                # a copy of the program's objects, with everything done to them before it run:
                # judged (a module's too, where no code the run does not follow got it first)
                self.program.judged[where] = self.program.judged.get(where, False) or bool(kept)
            if kept:
                self.program.sinks.append(Sink(
                    "copy", node, f"{ast.unparse(func)}({ast.unparse(node.args[0])})", kept, path=self.ctx.path,
                    paths=[p for _, p in reached], copied=ast.unparse(node.args[0]), classes=classes_of(types)))
            elif qual == "copy.deepcopy":
                self._copied_argument(node, func)
            if qual == "copy.deepcopy":
                # the copy is a new container (one per call site) holding what the original holds:
                # what is put into it later (a beam's stack pushed after the copy) is on the copy
                copy_atom = ("alloc", self.ctx.path, node.lineno, node.col_offset)
                held = frozenset().union(*(self.program.held.get((a, "[]"), EMPTY) for a in flatten(types)
                                           if a[0] == "alloc"))
                if any(a[0] == "alloc" for a in flatten(types)):
                    self.program.held[(copy_atom, "[]")] = self.program.held.get((copy_atom, "[]"), EMPTY) | held
                    self.call_types[id(node)] = frozenset({copy_atom})
                # a copy of an object of the program's classes is one more object of its class
                # (a hypothesis extended from a copy of its parent), whose methods are the class's
                # (one object per copy site: what is stored on the copy is not on the original),
                # holding what the original holds
                site = ("copy", self.ctx.path, node.lineno, node.col_offset)
                copies = {self.program.copy_object(a, site, {}) for a in flatten(types) if a[0] == "obj"}
                if copies:
                    self.call_types[id(node)] = self.call_types.get(id(node), EMPTY) | frozenset(copies)
            return result
        callees = self._callees(func)
        if not callees and isinstance(func, ast.Attribute) and any(
                v.kind == MODULE and not v.origin.startswith(CLASS_PREFIX) for v in self._stored(func)):
            # state.model(x): the module the run stored on that object, called
            pos = [self.eval(a) for a in node.args]
            kw = {k.arg or "**": self.eval(k.value) for k in node.keywords}
            return self.module_call(f"{short(func)}(...)", pos, kw)
        if not callees:
            result = super().eval_Call(node)
            self._escape(node, qual)
            if qual in _MODULE_CONTAINERS:
                # nn.ModuleList([Block(...) for ...]), nn.Sequential(*layers): the container holds
                # the program's objects it is given (made as its arguments were evaluated), and
                # iterating or indexing it gives them
                self.call_types[id(node)] = frozenset().union(*(flatten(self.types_of(a)) for a in node.args))
            if result.kind == MODULE and qual and qual.startswith("torch.nn.") and qual.rpartition(".")[2][:1].isupper():
                # a torch module made here (nn.Sequential(...), nn.Linear(...)) is an object of the
                # heap: what the program stores on it (a training step's model.last_out = model(x))
                # is what a copy of it reaches; a container's items are the program's objects it is given
                atom = ("alloc", self.ctx.path, node.lineno, node.col_offset, "module")
                given = self.call_types.get(id(node), EMPTY)
                if given:
                    self.program.held[(atom, "[]")] = given
                self.call_types[id(node)] = given | {atom}
            elif isinstance(func, ast.Name) and qual is None and func.id in _SAME_ITEMS and node.args:
                # list(xs), sorted(xs), tuple(xs), copy.copy(xs): a new container with the same items
                # (the heap keeps them on the container it was made from)
                self.call_types[id(node)] = flatten(self.types_of(node.args[0]))
            elif qual == "copy.copy" and node.args:
                self.call_types[id(node)] = flatten(self.types_of(node.args[0]))
            elif qual and qual.startswith("torch.optim.") and qual.count(".") == 2 and qual.rpartition(".")[2][:1].isupper():
                # a torch optimizer made here (torch.optim.SGD(...)): an object of the heap whose
                # param_groups is a list of dicts the program reads and writes (a scheduler's
                # group["lr"] = ...), and which its state_dict() hands on as they are
                where = (self.ctx.path, node.lineno, node.col_offset)
                atom, groups, group = (("alloc", *where, "optimizer"), ("alloc", *where, "param_groups"),
                                       ("alloc", *where, "param_group"))
                self.program.held[(atom, "param_groups")] = frozenset({groups})
                self.program.held[(groups, "[]")] = frozenset({group})
                self.call_types[id(node)] = frozenset({atom})
            elif attr == "state_dict" and isinstance(func, ast.Attribute):
                # optimizer.state_dict(): its param_groups' entries as they are (a module's
                # state_dict detaches every tensor unless keep_vars=True)
                optimizers = {a for a in flatten(self.types_of(func.value)) if a[0] == "alloc" and a[4:] == ("optimizer",)}
                if optimizers:
                    self.call_types[id(node)] = frozenset(optimizers)
            return result
        pos = [self.eval(a) for a in node.args]
        kw = {k.arg or "**": self.eval(k.value) for k in node.keywords}
        pos_types = [self.types_of(a) for a in node.args]
        kw_types = {k.arg or "**": self.types_of(k.value) for k in node.keywords}
        self.calling = node  # the call its callees' frames are made by (_copied_argument)
        results, types = [], set()
        for callee in callees:
            value, returned = self.call_atom(callee, pos, kw, pos_types, kw_types)
            if len(callee) == 5 and callee[2] == "forward":
                # a module of the program called: its forward ran on its own object; its hooks fire
                # now, and where the run was cut short (the budget) the call is a module call
                if value is NOTHING and not returned:
                    value = self.module_call(short(func), pos, kw)
                else:
                    self.program.fire_hooks(self)
            results.append(value)
            types |= returned
        self.call_types[id(node)] = frozenset(types)
        return join(*results)

    def _escape(self, node: ast.Call, qual: str | None) -> None:
        """The program's objects given to a call the run does not follow (not torch's, not a
        builtin): Program.escaped."""
        if qual is not None and qual.split(".", 1)[0] in _KNOWN_ROOTS:
            return
        if isinstance(node.func, ast.Name) and qual is None and node.func.id in _BUILTINS:
            return
        for arg in [*node.args, *(k.value for k in node.keywords)]:
            for atom in flatten(self.types_of(arg)):
                if atom[0] in ("obj", "alloc"):
                    self.program.escaped.add(atom)

    def _escaped(self, atoms) -> bool:
        """Did code the run does not follow get any of ``atoms``, or an object they hold?"""
        escaped = self.program.escaped
        if not escaped:
            return False
        held_by: dict = {}
        for (holder, _attr), held in self.program.held.items():
            held_by.setdefault(holder, set()).update(flatten(held))
        todo, seen = list(atoms), set()
        while todo:
            atom = todo.pop()
            if atom in seen:
                continue
            seen.add(atom)
            if atom in escaped:
                return True
            todo += [a for a in held_by.get(atom, ()) if a[0] in ("obj", "alloc")]
        return False

    def _callees(self, func: ast.AST) -> list:
        """The program's callables ``func`` names: functions, classes, bound methods, partials,
        and objects of the program's classes called as functions (a module's ``forward``, through
        ``nn.Module.__call__``; another class's own ``__call__``)."""
        out = []
        for atom in flatten(self.types_of(func)):
            if atom[0] in ("fn", "class", "bound", "partial"):
                out.append(atom)
            elif atom[0] == "obj":
                info = self.program.class_info(atom[1])
                if info is not None:
                    # obj(x) runs type(obj).__call__: the class's own, else nn.Module's, which runs forward
                    methods = info.facts.methods
                    name = "__call__" if "__call__" in methods else ("forward" if info.facts.is_module else None)
                    if name in methods:
                        out.append(("bound", atom[1], name, atom, "called"))
        return out

    def call_atom(self, callee, pos, kw, pos_types, kw_types, hook: bool = False) -> tuple[Value, frozenset]:
        program = self.program
        if callee[0] == "fn":
            node, closure, ctx = program.functions[callee[1]]
            return program.run(node, ctx, pos, kw, pos_types, kw_types, self.grad, closure=closure, caller=self, hook=hook)
        if callee[0] == "partial":
            inner, given, given_types = program.partials[callee[1]]
            out, types = [], set()
            for c in flatten(inner):
                v, t = self.call_atom(c, given + pos, kw, given_types + pos_types, kw_types, hook=hook)
                out.append(v)
                types |= t
            return join(*out), frozenset(types)
        if callee[0] == "bound":
            info = program.class_info(callee[1])
            ctx = program.classes[callee[1]][1] if info is not None else None
            method = info.facts.methods.get(callee[2]) if info is not None else None
            if method is None or ctx is None:
                return NOTHING, EMPTY
            return program.run(method, ctx, pos, kw, pos_types, kw_types, self.grad, self_atom=callee[3], caller=self,
                               hook=hook, info=info)
        if callee[0] == "class":
            key = callee[1]
            atom = ("obj", key)
            made = getattr(self, "calling", None)
            if made is not None:
                program.made_at.setdefault(key, set()).add((self.ctx.path, made.lineno, made.col_offset))
            info = program.class_info(key)
            ctx = program.classes[key][1] if info is not None else None
            if info is not None and info.facts.is_module and program.modes.get(atom) is not True:
                program.modes[atom] = True  # nn.Module.__init__: self.training = True
                program.mode_changes += 1
            if info is not None and ctx is not None and "__init__" in info.facts.methods:
                program.run(info.facts.methods["__init__"], ctx, pos, kw, pos_types, kw_types, self.grad,
                            self_atom=atom, caller=self, info=info)
            value = Value(MODULE, f"{key.rpartition('::')[2]}(...)") if info is not None and info.facts.is_module else NOTHING
            return value, frozenset({atom})
        return NOTHING, EMPTY

    def _copied_argument(self, node: ast.Call, func: ast.AST) -> None:
        """``copy.deepcopy(inputs)`` of a parameter a caller gave a tensor on the graph (a test
        harness copying its inputs): the copy raises, and the tensor was made where the caller
        (or its caller, up the chain of calls that passed it on) bound it."""
        arg = node.args[0]
        if self.caller is None or self.func is None:
            return
        name = _passed_parameter(self.func, arg, node.lineno)
        if name is None:
            return
        value = self.eval(arg)
        if value.kind != GRAPH:
            return
        found = _caller_made(self, name, value)
        if found is None:
            return
        frame, where, given, call = found
        who = f"{frame.func.name}()" if frame.func is not None else "module-level code"
        self.program.sinks.append(Sink(
            "copy-arg", node, f"{ast.unparse(func)}({ast.unparse(arg)})", [], value, self.ctx.path,
            (frame.ctx.path, where, ast.unparse(given), call, who)))

    def _checkpointed(self, node: ast.Call) -> Value:
        """``checkpoint(self._block, x)``: the function runs on the arguments, with grad on (the
        re-entrant variant runs it under no_grad in forward, then again with grad on when
        backward recomputes it: what it stores then is on the graph)."""
        pos = [self.eval(a) for a in node.args[1:]]
        pos_types = [self.types_of(a) for a in node.args[1:]]
        kw, kw_types = {}, {}
        for k in node.keywords:
            value = self.eval(k.value)
            if k.arg is not None and k.arg not in _CHECKPOINT_OPTIONS:
                kw[k.arg], kw_types[k.arg] = value, self.types_of(k.value)
        flag = next((k.value for k in node.keywords if k.arg == "use_reentrant"), None)
        reentrant = not (isinstance(flag, ast.Constant) and flag.value is False)  # torch's default: True
        results, types = [], set()
        saved = self.grad
        if reentrant:
            self.grad = False  # forward runs it under no_grad; backward runs it again with grad on
        try:
            for callee in self._callees(node.args[0]):
                value, returned = self.call_atom(callee, pos, kw, pos_types, kw_types)
                results.append(value)
                types |= returned
                if reentrant and saved:
                    self.program.recompute.append((self, callee, pos, kw, pos_types, kw_types))
        finally:
            self.grad = saved
        self.call_types[id(node)] = frozenset(types)
        result = join(*results)
        if reentrant and saved and result.kind >= LEAF:
            result = Value(GRAPH, short(node))  # the checkpoint's output is on the graph all the same
        return result

    def _pruned(self, node: ast.Call, name: str) -> Value:
        """``prune.l1_unstructured(module, "weight", ...)``: module.weight is weight_orig * mask
        from then on (a tensor with a grad_fn), until ``prune.remove(module, "weight")``;
        ``global_unstructured([(m, "weight"), ...])`` prunes each pair's module."""
        result = super().eval_Call(node)
        param = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "name"), None)
        attr = param.value if isinstance(param, ast.Constant) and isinstance(param.value, str) else "weight"
        if name == "remove":
            for atom in flatten(self.types_of(node.args[0])):
                self.program.kept.pop((atom, attr), None)
            return result
        if name not in _PRUNERS:
            return result
        value = Value(GRAPH, f"prune.{name}(...)")
        for atom in flatten(self.types_of(node.args[0])):
            if atom[0] in ("obj", "alloc") and (atom, attr) not in self.program.kept:
                self.program.kept[(atom, attr)] = Kept(atom, attr, "GLF103", node, None, value, self.ctx.path,
                                                       self.reached(), f"{ast.unparse(node.args[0])}.{attr}")
        return result

    def _legacy_norm(self, node: ast.Call, qual: str) -> Value:
        """Legacy ``torch.nn.utils.weight_norm(module)``: the module's weight is computed from
        weight_g and weight_v at once (a tensor with a grad_fn on the module), and again at every
        forward; a copy or a pickle of the module fails from then on."""
        result = super().eval_Call(node)
        types = self.types_of(node.args[0])
        name = next((k.value for k in node.keywords if k.arg == "name"), node.args[1] if len(node.args) > 1 else None)
        attr = name.value if isinstance(name, ast.Constant) and isinstance(name.value, str) else "weight"
        value = Value(GRAPH, f"{short(node.func)}(...)")
        for atom in flatten(types):
            if atom[0] in ("obj", "alloc") and (atom, attr) not in self.program.kept:
                self.program.kept[(atom, attr)] = Kept(atom, attr, _LEGACY_NOW[qual], node, None, value, self.ctx.path,
                                                       self.reached(), f"{ast.unparse(node.args[0])}.{attr}")
        self.call_types[id(node)] = types
        return result


_KNOWN_ROOTS = frozenset({"torch", "copy", "builtins", "math", "operator", "functools", "itertools", "typing"})
_BUILTINS = frozenset(dir(__import__("builtins")))
_CHECKPOINTS = frozenset({"torch.utils.checkpoint.checkpoint"})
_CHECKPOINT_OPTIONS = frozenset({"use_reentrant", "preserve_rng_state", "context_fn", "determinism_check", "debug"})
# builtins that make a new container with the items of the one they are given
_SAME_ITEMS = frozenset({"list", "tuple", "sorted", "reversed", "set", "frozenset", "dict", "iter"})


def run_file(tree: ast.Module, imports, classes, module_classes, path: str, text: str | None = None,
             reuse: bool = True) -> Program:
    """Run the checked file's code from its roots: the module-level code, then every
    module-level function it did not reach (those that may reach a copy or a send). Once per
    file and process: a run made for another file (:func:`run_parsed`) is the same run, and
    is reused unless ``reuse`` is off (the checked file's classes were collected with options
    the other files' runs do not have)."""
    current = imports.current
    project = getattr(imports, "project", None)
    memo = project.memo if project is not None else {}
    # by content too: a fix checks its edited text under the same path in the same process
    key = ("heap", os.path.abspath(path), hash(text), project.generation) if text is not None and project else None
    reuse = reuse and key is not None
    if reuse and key in memo:
        return memo[key]  # run already, as another checked file's user
    program = _run(current, tree, imports, classes, module_classes, text)
    if reuse:
        memo[key] = program.outcome()
    return program


def run_parsed(parsed) -> Program:
    """The run of another file of the program (one that imports the checked file), once per
    file and process: the same run as that file's own check (:func:`run_file`), whichever
    comes first, so the order files are checked in changes nothing."""
    project = getattr(parsed.imports, "project", None)
    memo = project.memo if project is not None else parsed.memo
    text = project.text_of(parsed.path) if project is not None else None
    key = ("heap", os.path.abspath(parsed.path), hash(text), getattr(project, "generation", 0))
    if key not in memo:
        memo[key] = Program(parsed, parsed.path)  # while it runs
        classes, module_classes = file_classes(parsed)
        memo[key] = _run(parsed, parsed.tree, parsed.imports, classes, module_classes).outcome()
    return memo[key]


def _run(current, tree, imports, classes, module_classes, text: str | None = None) -> Program:
    program = Program(current, current.path)
    ctx = FileContext(current.name, current.path, imports, current.defs, classes, module_classes)
    program.contexts[current.path] = ctx
    live = _live_defs(current, text)
    top = [s for s in tree.body if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    if TOP in live:
        program.run_module(ctx, top)
        program.settle_root()
    for s in tree.body:
        if (isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and id(s) not in program.reached
                and s.name in live):
            program.runs = 0  # each root its own budget: cost grows with the roots, not their order
            program.done = {}  # and its own memo: a constructor run again in another root resets the object
            program.run(s, ctx, [], {}, [], {}, True)
            program.settle_root()
    for sink in program.sinks:
        program.survived.update(_where_stored(k) for k in sink.kept)
    # frames point back at the program: none is kept, so no cycle holds the run's heap
    program.module_frame, program.hooks, program.functions, program.recompute = None, [], {}, []
    return program




def _where_stored(kept: Kept) -> tuple:
    return kept.path, kept.node.lineno


# the sinks' names as a call spells them (``Tensor.__deepcopy__`` in a table is no copy), and
# ``deepcopy as`` for an import that renames it
# containers of modules whose elements are what they are given (positionally)
_MODULE_CONTAINERS = frozenset({"torch.nn.ModuleList", "torch.nn.Sequential", "torch.nn.modules.container.ModuleList",
                                "torch.nn.modules.container.Sequential"})


def runs_for(imports, words: tuple[str, ...]) -> list[Program]:
    """The runs of the project's files that import the checked one and may copy or send
    something (their text has one of ``words``): their copies of this file's objects and
    their calls of its functions are judged there, and reported here."""
    project = getattr(imports, "project", None)
    current = getattr(imports, "current", None)
    if project is None or current is None or not current.name:
        return []
    here = os.path.abspath(current.path)
    out = []
    for path in project.users_of(current.name, words, current.path):
        path = os.path.abspath(path)
        if path == here:
            continue
        done = project.memo.get(("heap", path, hash(project.text_of(path)), project.generation))  # no parse again
        if done is None:
            parsed = project.parsed_path(path)
            done = run_parsed(parsed) if parsed is not None else None
        if done is not None:
            out.append(done)
    return out
