"""Fix for a graph tensor sent to another process (GLF301): the value sent gets ``.detach()``.

``queue.put(out)``, ``queue.put_nowait(out)``, ``ctx.Process(target=f, args=(out,))`` and
``mp.spawn(f, args=(out, 1))`` send a tensor that is on the autograd graph: pickling it for the
other process raises ("Cowardly refusing to serialize non-leaf tensor which requires_grad"), since
autograd does not cross process boundaries, so the other process never gets it.  Sending
``out.detach()`` gives it the same values; the sender's ``out`` is untouched (``.detach()`` is a
new tensor), so nothing this process computes changes: **safe**.  The item of a tuple, list or
dict display that the program's run says made the graph tensor (``queue.put((t, obs, policy(obs)))``:
``policy(obs)``, or a name assigned once from it) is detached; where the run names none, each item
that is certainly one tensor is; a value that is neither is left alone (if it was the graph tensor,
the finding stays and the fixer undoes the fix).  A process pool's tasks (``pool.starmap(f, [(q, bank)
for q in queries])``) get detached copies of their tensors whatever their shape (:mod:`.detached`):
**safe** for the same reason.

A ``DataLoader`` with workers whose dataset holds tensors that require grad (each worker's collate
raises) gets the tensors the dataset is built from detached, where it is built
(``TensorDataset(features, labels)``, inline or assigned once to the name given to the loader, or
the dataset's own line when it is built elsewhere, in a function the loader's file calls):
**unsafe**, since a run with ``num_workers=0`` would have given batches that require grad."""

from __future__ import annotations

import ast

from ..analysis.findings import SAFE, UNSAFE, Finding, Fix
from .context import Context, at, wrap
from ..analysis.values import short
from ..analysis.facts.sinks import POOL_SENDS
from .detached import detached_tree
from .tensors import _last_assignment, certainly_tensor

_SENDS = ("put", "put_nowait")


def _scope(ctx: Context, node: ast.AST):
    cur = ctx.parents.get(node)
    while cur is not None and not isinstance(cur, (ast.FunctionDef, ast.AsyncFunctionDef)):
        cur = ctx.parents.get(cur)
    return cur if cur is not None else ctx.tree


def _items(value: ast.AST):
    """The items of a tuple, list or dict display, nested displays opened; else the value itself."""
    if isinstance(value, (ast.Tuple, ast.List)):
        for item in value.elts:
            yield from _items(item)
    elif isinstance(value, ast.Dict):
        for item in value.values:
            yield from _items(item)
    elif not isinstance(value, ast.Starred):
        yield value


def _made_by(item: ast.AST, origin: str | None, scope) -> bool:
    """Is ``item`` the call the program's run says made the sent graph tensor (``policy(obs)``, the
    analysis's ``policy(...)``), or a name assigned once from it?  The run took that call's result
    for one tensor (a module's output), so ``.detach()`` on it is what the finding asks for."""
    if not origin or not origin.endswith("(...)"):
        return False
    if isinstance(item, ast.Name) and scope is not None:
        item = _last_assignment(scope, item)
    return isinstance(item, ast.Call) and short(item) == origin


def _detach_items(value: ast.AST, ctx: Context, scope, edits: list, origin: str | None = None) -> None:
    """``.detach()`` on the sent items on the graph: the item made where the finding says the graph
    tensor was made, when there is one; else each item that is certainly one tensor."""
    items = list(_items(value))
    made = [i for i in items if _made_by(i, origin, scope)]
    for item in made or [i for i in items if certainly_tensor(i, ctx, scope)]:
        edits.append(ctx.edit(item, wrap(ctx, item) + ".detach()"))


def _loader_fix(call: ast.Call, ctx: Context, scope) -> Fix | None:
    dataset = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "dataset"), None)
    if dataset is None:
        return None
    edits: list = []
    if certainly_tensor(dataset, ctx, scope):
        edits.append(ctx.edit(dataset, wrap(ctx, dataset) + ".detach()"))
    else:
        built = _last_assignment(scope, dataset) if isinstance(dataset, ast.Name) else dataset
        if not isinstance(built, ast.Call):
            return None
        edits = _detached_arguments(built, ctx, scope)
    if not edits:
        return None
    return Fix(UNSAFE, "build the loader's dataset from .detach()ed tensors (the workers' collate cannot stack "
                       "tensors that require grad; batches no longer require grad, as they would with num_workers=0)",
               tuple(edits))


def _detached_arguments(built: ast.Call, ctx: Context, scope) -> list:
    """The edits that detach each tensor a dataset is built from (``TensorDataset(x, y)``); none
    for a call with keywords, whose meaning the fix does not know."""
    edits: list = []
    if not built.keywords:
        for arg in built.args:
            _detach_items(arg, ctx, scope, edits)
    return edits


def _dataset_fix(call: ast.Call, ctx: Context, scope) -> Fix | None:
    """``TensorDataset(features, labels)`` that a loader with workers indexes (reported where it is
    built, the loader being elsewhere): its tensors detached there."""
    edits = _detached_arguments(call, ctx, scope)
    if not edits:
        return None
    return Fix(UNSAFE, "build the dataset from .detach()ed tensors (a loader's workers cannot send back items "
                       "with a grad_fn; its items no longer require grad, as they would with num_workers=0)",
               tuple(edits))


def _pool_fix(call: ast.Call, ctx: Context) -> Fix | None:
    """``pool.starmap(f, tasks)``: the tasks' arguments (each positional argument after the
    function, ``args=`` / ``kwds=``) sent as detached copies (:mod:`.detached`), whatever their
    shape; a generator's items are made later, where no copy reaches them: no fix."""
    sent = list(call.args[1:]) + [k.value for k in call.keywords if k.arg in ("args", "kwds", "iterable")]
    sent = [a for a in sent if not isinstance(a, ast.Constant)]
    if not sent or any(isinstance(a, (ast.GeneratorExp, ast.Starred)) for a in sent):
        return None
    edits = []
    for a in sent:
        text = detached_tree(ctx, a)
        if text is None:
            return None
        edits.append(ctx.edit(a, text))
    return Fix(SAFE, "send the pool's tasks detached copies of their tensors (torch.utils._pytree.tree_map_only "
                     "rebuilds the tuples, lists and dicts with each graph tensor .detach()ed): the workers get the "
                     "same values, and this process keeps its tensors", tuple(edits))


def fix_process_send(f: Finding, ctx: Context) -> Fix | None:
    call = at(ctx.tree, f.line, f.col, ast.Call)
    if call is None:
        return None
    func = call.func
    last = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    scope = _scope(ctx, call)
    if last == "DataLoader" or (ctx.imports.qualname(func) or "").endswith(".DataLoader"):
        return _loader_fix(call, ctx, scope)
    if last == "TensorDataset" or (ctx.imports.qualname(func) or "").endswith(".TensorDataset"):
        return _dataset_fix(call, ctx, scope)
    if "autograd graph" not in f.message:
        return None  # a leaf that requires grad, sent to a process: torch shares it as it is
    edits: list = []
    origin = f.data.get("origin")
    if f.data.get("sink") == "pool" and last in POOL_SENDS:
        return _pool_fix(call, ctx)
    if last in _SENDS and len(call.args) == 1 and not call.keywords:
        _detach_items(call.args[0], ctx, scope, edits, origin)
        what = "the item put on the queue"
    else:
        sent = next((k.value for k in call.keywords if k.arg == "args"), None)
        if sent is None or not isinstance(sent, (ast.Tuple, ast.List)):
            return None
        _detach_items(sent, ctx, scope, edits, origin)
        what = "the tensors in args"
    if not edits:
        return None
    return Fix(SAFE, f"send .detach() of {what}: a graph tensor cannot cross the process boundary (pickling it "
                     "raises), the other process gets the same values, and this process keeps its tensor",
               tuple(edits))
