"""Process boundaries on the heap (:mod:`.heap`'s :class:`Frame` inherits :class:`Sends`): what the
program hands to other processes, judged on the heap as it is at that call.

- ``multiprocessing`` / ``torch.multiprocessing`` contexts, queues and pools the program makes;
  ``queue.put(x)``, a pool's ``map`` / ``starmap`` / ``apply_async`` / ``submit`` (every task's
  arguments are pickled, whatever the start method), ``torch.multiprocessing.spawn`` /
  ``start_processes`` (start method ``spawn`` by default) and a ``Process`` of a spawn / forkserver
  context (or after ``set_start_method("spawn")``): a graph tensor sent is a sink with its value;
  objects sent are sinks with what a deep copy of them would reach (a pickle reaches the same);
- a process's target runs with grad on, on the new process's copies (what it stores does not stay
  on this process's objects);
- ``DataLoader(ds, num_workers=N)``: what the dataset object reaches, and its ``__getitem__`` run
  with grad on (a worker starts with grad enabled); ``TensorDataset(...)`` of tensors that require
  grad or are on the graph."""

from __future__ import annotations

import ast

from ..facts.sinks import LOADERS as _LOADERS, QUEUES as _QUEUES, SPAWNERS as _SPAWNERS
from ..facts.sinks import POOL_EXECUTORS as _POOL_EXECUTORS, POOL_SENDS as _POOL_SENDS, POOLS as _POOLS
from ..facts.sinks import TENSOR_DATASETS as _TENSOR_DATASETS, is_mp as _mp, with_workers
from ..values import ARG, GRAPH, LEAF, NOTHING, Value, join, short
from .heap_model import EMPTY, MP_CONTEXT, MP_PICKLING, POOL, QUEUE, Kept, Sink, classes_of, flatten

_PROCESSES = ("Process",)


class Sends:
    """The process-boundary calls of a heap frame (a mixin of :class:`.heap.Frame`)."""

    def send_call(self, node: ast.Call, func: ast.AST, qual: str | None, attr: str | None) -> Value | None:
        """What ``node`` gives when it makes or uses a process boundary, else None."""
        if _mp(qual, ("get_context",)):
            for a in node.args:
                self.eval(a)
            method = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "method"), None)
            pickles = isinstance(method, ast.Constant) and method.value in ("spawn", "forkserver")
            self.call_types[id(node)] = frozenset({MP_CONTEXT, MP_PICKLING} if pickles else {MP_CONTEXT})
            return NOTHING
        if _mp(qual, ("set_start_method",)) and node.args and isinstance(node.args[0], ast.Constant):
            self.program.start_pickles = node.args[0].value in ("spawn", "forkserver")
            return NOTHING
        if _mp(qual, _QUEUES) or (attr in _QUEUES and isinstance(func, ast.Attribute)
                                   and MP_CONTEXT in flatten(self.types_of(func.value))):
            self.call_types[id(node)] = frozenset({QUEUE})
            return NOTHING
        if _mp(qual, _POOLS) or qual in _POOL_EXECUTORS or (attr in _POOLS and isinstance(func, ast.Attribute)
                                                            and MP_CONTEXT in flatten(self.types_of(func.value))):
            for a in node.args:
                self.eval(a)
            self.call_types[id(node)] = frozenset({POOL})
            return NOTHING
        if attr in _POOL_SENDS and node.args and POOL in flatten(self.types_of(func.value)):
            # pool.starmap(f, [(q, bank) for q in queries]): the tasks' arguments are pickled to the
            # workers, whatever the start method (the task queue is a pipe)
            self.eval(node.args[0])
            sent = join(*(self.eval(a) for a in node.args[1:]), *(self.eval(k.value) for k in node.keywords))
            if sent.kind == GRAPH:
                self.program.sinks.append(Sink("pool", node, f"{ast.unparse(func)}(...)", [], sent, self.ctx.path))
            else:
                self._send_objects("pool", node, node.args[1:] + [k.value for k in node.keywords])
            return NOTHING
        if attr in ("put", "put_nowait") and node.args and QUEUE in flatten(self.types_of(func.value)):
            value = self.eval(node.args[0])
            if value.kind == GRAPH:
                self.program.sinks.append(Sink("queue", node, f"{ast.unparse(func)}(...)", [], value,
                                                  self.ctx.path))
            else:
                self._send_objects("queue", node, node.args[:1])
            return NOTHING
        if _mp(qual, _PROCESSES) or (attr == "Process" and qual is None):
            return self._process(node)
        if qual in _SPAWNERS and node.args:
            return self._spawn(node)
        if qual in _TENSOR_DATASETS:
            values = [self.eval(a) for a in node.args]
            atom = ("alloc", self.ctx.path, node.lineno, node.col_offset)
            held = join(*values)
            if held.kind in (GRAPH, LEAF):
                self.program.kept[(atom, "tensors")] = Kept(
                    atom, "tensors", "GLF301", node, None, held, self.ctx.path, self.reached(), "TensorDataset")
            self.call_types[id(node)] = frozenset({atom})
            return NOTHING
        if qual in _LOADERS:
            return self._loader(node)
        return None

    def _process(self, node: ast.Call) -> Value:
        target = next((k.value for k in node.keywords if k.arg == "target"), None)
        args = next((k.value for k in node.keywords if k.arg == "args"), None)
        func = node.func
        pickles = self.program.start_pickles or (
            isinstance(func, ast.Attribute) and MP_PICKLING in flatten(self.types_of(func.value)))
        if pickles and isinstance(args, (ast.Tuple, ast.List)):
            # ctx.Process(target=f, args=(model,)) of a spawn / forkserver context (or after
            # set_start_method("spawn")): start() pickles the args for the new process
            self._send_objects("process", node, args.elts)
        self._run_target(target, args, node, 0)
        return NOTHING

    def _spawn(self, node: ast.Call) -> Value:
        args = next((k.value for k in node.keywords if k.arg == "args"), node.args[1] if len(node.args) > 1 else None)
        method = next((k.value for k in node.keywords if k.arg == "start_method"), None)
        if isinstance(args, (ast.Tuple, ast.List)) and not (isinstance(method, ast.Constant) and method.value == "fork"):
            # torch.multiprocessing.spawn / start_processes (start_method "spawn" by default): the
            # arguments are pickled for each new process
            self._send_objects("process", node, args.elts)
        self._run_target(node.args[0], args, node, 1)
        return NOTHING

    def _send_objects(self, kind: str, node: ast.Call, sent: list) -> None:
        """Objects of the run sent to another process (pickled): what a deep copy of them would
        reach, the pickle reaches too (``mp.spawn(fit, args=(generator, cfg))`` with a legacy
        weight-normed convolution in the generator; a pool task holding objects that keep graph tensors)."""
        types = frozenset().union(*(self.types_of(a) for a in sent)) if sent else EMPTY
        reached = self.program.reach_paths(types) if types else []
        if reached:
            shown = sent[0] if len(sent) == 1 else next(
                (a for a in sent if self.program.reach_paths(self.types_of(a))), sent[0])
            self.program.sinks.append(Sink(kind, node, f"{short(node.func)}(...)", [k for k, _ in reached],
                                           path=self.ctx.path, paths=[p for _, p in reached],
                                           copied=ast.unparse(shown), classes=classes_of(types)))

    def _run_target(self, target, args, node, rank: int) -> None:
        if isinstance(args, (ast.Tuple, ast.List)):
            pos = [Value(ARG, "the process rank")] * rank + [self.eval(a) for a in args.elts]
            pos_types = [EMPTY] * rank + [self.types_of(a) for a in args.elts]
        else:
            pos, pos_types = [NOTHING] * rank, [EMPTY] * rank
            if args is not None:
                self.eval(args)
        if target is None:
            return
        saved, self.grad = self.grad, True  # a new process starts with grad enabled
        # the new process works on its own copies: what it stores is not on this process's objects
        program = self.program
        kept, values = dict(program.kept), dict(program.values)
        try:
            for callee in self._callees(target):
                self.call_atom(callee, pos, {}, pos_types, {})
        finally:
            self.grad = saved
            program.kept.clear()
            program.kept.update(kept)
            program.values.clear()
            program.values.update(values)

    def _loader(self, node: ast.Call) -> Value:
        ds = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "dataset"), None)
        result = super().eval_Call(node)
        if ds is not None and with_workers(node):
            types = self.types_of(ds)
            reached = self.program.reach_paths(types)
            if reached:
                self.program.sinks.append(Sink("loader", node, f"DataLoader({ast.unparse(ds)}, ...)",
                                               [k for k, _ in reached], path=self.ctx.path,
                                               paths=[p for _, p in reached], copied=ast.unparse(ds),
                                               classes=classes_of(types)))
            self._worker_items(node, ds, types)
        return result

    def _worker_items(self, node: ast.Call, ds: ast.AST, types) -> None:
        """What the workers of ``DataLoader(ds, num_workers=N)`` run: ``type(ds).__getitem__``,
        with grad on (a worker starts with grad enabled). An item with a grad_fn cannot go back to
        the main process (the collate's ``stack(..., out=...)`` refuses it first)."""
        for atom in sorted(flatten(types), key=repr):
            info = self.program.class_info(atom[1]) if atom[0] == "obj" else None
            if info is None or "__getitem__" not in info.facts.methods:
                continue
            saved, self.grad = self.grad, True
            try:
                item, _ = self.call_atom(("bound", atom[1], "__getitem__", atom), [NOTHING], {}, [EMPTY], {})
            finally:
                self.grad = saved
            graph = [v for v in (item.items or (item,)) if v.kind == GRAPH]
            if graph:
                name = atom[1].rpartition("::")[2]
                self.program.sinks.append(Sink("loader", node, f"DataLoader({ast.unparse(ds)}, ...)", [], graph[0],
                                               path=self.ctx.path, copied=f"{name}.__getitem__", classes=(name,)))
                return
