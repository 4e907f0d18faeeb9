"""GLF301: tensors on the autograd graph (or requiring grad) that cross a process boundary.

- ``DataLoader(ds, num_workers=N)`` with ``N`` a literal > 0 or not a literal, where ``ds`` is a
  ``TensorDataset(...)`` (or a Dataset class of this file that never detaches) built from tensors
  that are on the graph or require grad (``requires_grad=True`` factories, ``nn.Parameter``,
  outputs of a model call with grad on), or such a tensor itself.  The workers index the tensors
  (indexing a tensor that requires grad gives a graph tensor) and the default collate fails with
  ``stack(): functions with out=... arguments don't support automatic differentiation``.
- ``q.put(t)`` on a ``multiprocessing`` / ``torch.multiprocessing`` queue, where ``t`` is on the graph:
  ``Cowardly refusing to serialize non-leaf tensor which requires_grad`` (in the queue's feeder
  thread for ``Queue``: the reader then waits forever).
- ``Process(args=(t, ...))`` of a ``spawn`` / ``forkserver`` context, or ``torch.multiprocessing.spawn``
  / ``start_processes(fn, args=(t, ...))``, where ``t`` is on the graph: the same error in ``start()``.

Precision over recall: only values the analysis knows are on the graph or require grad are
reported (a function's arguments are not), and only queues and contexts it saw being created.
"""

from __future__ import annotations

import ast

from .. import messages, witness
from ..findings import Finding
from ..evaluator.flow import Walker
from ..program.grad_mode import function_grad_mode
from ..evaluator.graph_tensors import GRAPH, LEAF, MODULE, NONE, NOTHING, Evaluator, Value, join, looks_like_module_name, short
from ..program.imports import ImportMap
from ..facts.sinks import LOADERS as _LOADERS, QUEUES as _QUEUES, SPAWNERS as _SPAWNERS, TENSOR_DATASETS as _TENSOR_DATASETS
from ..facts.sinks import is_mp as _mp, keyword as _kw, with_workers as _workers
from ..program.stmtwalk import tree_statements, walk
from ..program.textscan import has_any
from . import finding

RULES = {"GLF301": "a tensor on the autograd graph (or requiring grad) sent to another process (DataLoader workers, "
                   "multiprocessing queue or spawn args)"}

WORDS = ("DataLoader", "multiprocessing")

EXAMPLES = [
    (
        """
import torch
from torch.utils.data import DataLoader, TensorDataset
x = torch.randn(8, 3, requires_grad=True)
loader = DataLoader(TensorDataset(x), batch_size=4, num_workers=2)
""",
        ["GLF301", "GLF301"],  # the loader, and the dataset its workers index (the copy graph's)
    ),
    (
        """
import torch
from torch.utils.data import DataLoader, TensorDataset
x = torch.randn(8, 3, requires_grad=True)
loader = DataLoader(TensorDataset(x.detach()), batch_size=4, num_workers=2)
single = DataLoader(TensorDataset(x), batch_size=4, num_workers=0)
""",
        [],
    ),
    (
        """
import torch
import torch.multiprocessing as mp
def produce(model, batch):
    q = mp.get_context("spawn").Queue()
    out = model(batch)
    q.put(out)
""",
        ["GLF301"],
    ),
    (
        """
import torch
import torch.multiprocessing as mp
def produce(model, batch, q):
    queue = mp.Queue()
    with torch.no_grad():
        out = model(batch)
    queue.put(out)
    q.put(model(batch))
""",
        [],
    ),
]

_QUEUE, _CTX = "<mp queue>", "<mp context:"


def _never_detaches(cls: ast.ClassDef) -> bool:
    for n in walk(cls):
        if isinstance(n, ast.Attribute) and n.attr in ("detach", "detach_", "requires_grad_"):
            return False
        if isinstance(n, ast.Name) and n.id in ("no_grad", "inference_mode"):
            return False
    return True


class _Boundary(Evaluator):
    def __init__(self, imports, module_classes, datasets: dict[str, bool], spawn_file: bool, report):
        super().__init__(imports, None, None, module_classes)
        self.datasets = datasets  # Dataset classes of this file -> True when they never detach
        self.spawn_file = spawn_file  # the file calls set_start_method("spawn"/"forkserver")
        self.report = report

    def _tag_of(self, node: ast.AST) -> str:
        return self.eval(node).origin if isinstance(node, (ast.Name, ast.Call)) else ""

    def eval_Call(self, node: ast.Call) -> Value:
        func = node.func
        qual = self.imports.qualname(func)
        attr = func.attr if isinstance(func, ast.Attribute) else None
        recv = self._tag_of(func.value) if isinstance(func, ast.Attribute) else ""
        # Queues and contexts, tagged on a value of kind NONE (nothing else sees them).
        if _mp(qual, _QUEUES) or (attr in _QUEUES and recv.startswith(_CTX)):
            return Value(NONE, _QUEUE)
        if _mp(qual, ("get_context",)):
            method = node.args[0] if node.args else _kw(node, "method")
            how = method.value if isinstance(method, ast.Constant) and isinstance(method.value, str) else "?"
            return Value(NONE, f"{_CTX}{how}>")
        if qual in _TENSOR_DATASETS or (isinstance(func, ast.Name) and self.datasets.get(func.id)):
            held = join(*(self.eval(a) for a in node.args), *(self.eval(k.value) for k in node.keywords))
            return held if held.kind in (GRAPH, LEAF) else NOTHING
        name = attr or (func.id if isinstance(func, ast.Name) else "")
        if name in self.datasets or name.endswith("Dataset"):
            return NOTHING  # a Dataset that detaches, or one defined elsewhere: what it keeps is unknown
        if qual in _LOADERS or (isinstance(func, ast.Name) and func.id == "DataLoader"):
            ds = node.args[0] if node.args else _kw(node, "dataset")
            if ds is not None and _workers(node):
                v = self.eval(ds)
                if v.kind in (GRAPH, LEAF):
                    what = "requires grad" if v.kind == LEAF else "is on the autograd graph"
                    self.report(node, messages.sent(
                        f"DataLoader({short(ds)}, num_workers=...)",
                        f"gives worker processes a dataset whose tensor {what}", v.origin,
                        "the workers' collate raises 'stack(): functions with out=... arguments don't support "
                        "automatic differentiation'", "build the dataset from .detach()ed tensors"))
            return NOTHING
        if attr in ("put", "put_nowait") and recv == _QUEUE and node.args:
            v = self.eval(node.args[0])
            if v.kind == GRAPH:
                self.report(node, messages.sent(
                    f"{short(func)}({short(node.args[0])})", f"sends {messages.GRAPH_TENSOR}", v.origin, "'Cowardly refusing to serialize non-leaf tensor which requires_grad' (a Queue's reader "
                    "then waits forever)", "put .detach() on it", to="to another process"), v.origin)
            return NOTHING
        spawned = qual in _SPAWNERS or (
            attr == "Process" and (recv in (f"{_CTX}spawn>", f"{_CTX}forkserver>"))
        ) or (_mp(qual, ("Process",)) and self.spawn_file)
        if spawned:
            args = _kw(node, "args")
            if args is None and qual in _SPAWNERS and len(node.args) > 1:
                args = node.args[1]
            if args is not None:
                v = self.eval(args)
                if v.kind == GRAPH:
                    self.report(node, messages.sent(
                        f"{short(func)}(..., args={short(args)})", f"sends {messages.GRAPH_TENSOR}", v.origin, "start() raises 'Cowardly refusing to serialize non-leaf tensor which requires_grad'",
                        "pass .detach()ed tensors", to="to a spawned process"), v.origin)
            return NOTHING
        return super().eval_Call(node)


def check(tree: ast.Module, imports: ImportMap, module_classes: set[str], source: str | None = None) -> list[Finding]:
    if source is not None and not has_any(source, WORDS):
        return []
    datasets: dict[str, bool] = {}
    spawn_file = False
    functions = []
    for s in tree_statements(tree):
        if isinstance(s, ast.ClassDef):
            bases = {b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "") for b in s.bases}
            if bases & {"Dataset", "IterableDataset"}:
                datasets[s.name] = _never_detaches(s)
        elif isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions.append(s)
    for n in walk(tree) if source is None or "set_start_method" in source else ():
        if isinstance(n, ast.Call) and isinstance(n.func, (ast.Attribute, ast.Name)) and n.args:
            name = n.func.attr if isinstance(n.func, ast.Attribute) else n.func.id
            a = n.args[0]
            if name == "set_start_method" and isinstance(a, ast.Constant) and a.value in ("spawn", "forkserver"):
                spawn_file = True
    out: list[Finding] = []
    seen: set[int] = set()

    def report(node, message, origin=None):
        if id(node) not in seen:
            seen.add(id(node))
            # "origin": where the sent graph tensor was made (the fix detaches the item made there)
            f = finding("GLF301", node, message, **({"data": {"origin": origin}} if origin else {}))
            # the source: what the call sends, from where (the message's first clause, without "will fail: it")
            f.witness = witness.simple(message.split("; ", 1)[0].replace(" will fail: it ", " ", 1), "computation", node,
                                       reached="this call", kept="it is what the call sends",
                                       copied="the other process gets a pickled copy, made by the same protocol as deepcopy")
            out.append(f)

    top = [s for s in tree.body if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    scopes: list[tuple[list[ast.stmt], ast.AST | None]] = [(top, None)] + [(f.body, f) for f in functions]
    lines = source.splitlines() if source is not None else []
    for body, func in scopes:
        if source is not None and func is not None:
            text = "\n".join(lines[func.lineno - 1: func.end_lineno or func.lineno])
            if not any(w in text for w in ("DataLoader", ".put(", ".put_nowait(", "Process", "spawn", "start_processes")):
                continue
        ev = _Boundary(imports, module_classes, datasets, spawn_file, report)
        if func is not None:
            for a in func.args.posonlyargs + func.args.args + func.args.kwonlyargs:
                ev.env[a.arg] = Value(MODULE, a.arg) if looks_like_module_name(a.arg) else NOTHING
            ev.grad = function_grad_mode(func, imports)
        Walker(ev, lambda store: None).run(body)
    return sorted(out, key=lambda f: f.sort_key)
