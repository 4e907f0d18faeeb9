"""``trace_stores(model)``: record, while code runs, which line stored a graph tensor on a module.

Wraps ``nn.Module.__setattr__`` and watches in-place updates of buffers (a TorchFunctionMode),
so the file:line of each store is known even where the static analysis has no finding.
Imports torch.
"""

from __future__ import annotations

import contextlib
import linecache
import os
import sys
from dataclasses import dataclass
from typing import Any, Iterator

import torch
from torch import nn

from .findings import GraphTensor, display_path
from .walk import TORCH_DIR, library_dirs as _library_dirs, module_name

_THIS_FILE = os.path.abspath(__file__)


@dataclass
class StoreRecord:
    module: str  # qualified name of the module, e.g. "model.encoder"
    attribute: str
    how: str  # "assignment" or "in-place .add_()" ...
    file: str
    line: int
    text: str
    grad_fn: str | None
    library_frame: str | None = None  # "torch/nn/utils/weight_norm.py:78" when torch code did the store
    owner_id: int = 0
    value: Any = None  # a weak reference to the tensor stored (module stores of explain --run / pytest --graphleaf)
    note: str = ""  # for a FORWARD record: why that forward trains nothing ("Net in eval mode")

    def location(self) -> str:
        return f"{display_path(self.file)}:{self.line}"


class StoreLog(list):
    """Records of :func:`trace_stores`, in the order they happened; with a :class:`StoreTracer`
    (``tracer``), also the statements seen storing each tensor itself, on any object."""

    tracer: "StoreTracer | None" = None

    def records_for(self, item: GraphTensor) -> list[StoreRecord]:
        last: dict[tuple[str, int], StoreRecord] = {}
        if item.owners and item.owners[0][1]:
            owner, chain = item.owners[0]
            for rec in self:
                if rec.owner_id == id(owner) and rec.attribute == chain[0]:
                    if rec.value is not None and item.tensor is not None and rec.value() is not item.tensor:
                        continue  # that line stored another tensor, since replaced: not what the walk met
                    last.setdefault((rec.file, rec.line), rec)
        if self.tracer is not None and item.tensor is not None:
            for rec in self.tracer.records(item.tensor, item.holder):
                last.setdefault((rec.file, rec.line), rec)
        return list(last.values())

    def __str__(self) -> str:
        return "\n".join(
            f"{r.module}.{r.attribute} <- {r.location()} {r.how}: {r.text}"
            + (f"  (via {r.library_frame})" if r.library_frame else "")
            for r in self
        )


def _caller(skip_files=(_THIS_FILE,)) -> tuple[str, int, str | None]:
    """(file, line) of the first frame in the user's code (outside this package, torch, the standard library
    and installed packages: ``typing_extensions``' ``@deprecated`` wrapper of legacy ``weight_norm`` is no
    storing line), and the first library frame on the way when one came first (``torch/nn/utils/...:78``)."""
    frame = sys._getframe(1)
    library = None
    library_dirs = _library_dirs()
    while frame is not None:
        fname = os.path.abspath(frame.f_code.co_filename)
        if fname in skip_files or frame.f_code.co_name == "__setattr__" and fname.startswith(TORCH_DIR):
            frame = frame.f_back
            continue
        if fname.startswith(library_dirs):
            if library is None and fname.startswith(TORCH_DIR):
                library = f"{_display_torch(fname)}:{frame.f_lineno}"
            frame = frame.f_back
            continue
        return fname, frame.f_lineno, library
    return "<unknown>", 0, library


def _display_torch(fname: str) -> str:
    return "torch/" + fname[len(TORCH_DIR):].replace(os.sep, "/")


class _InplaceMode(torch.overrides.TorchFunctionMode):
    def __init__(self, watch, log, names):
        super().__init__()
        self.watch = watch  # id(tensor) -> (module, buffer name)
        self.log = log
        self.names = names

    def __torch_function__(self, func, types_, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if args and isinstance(args[0], torch.Tensor):
            hit = self.watch.get(id(args[0]))
            if hit is not None:
                fname = getattr(func, "__name__", "")
                if (fname.endswith("_") and not fname.startswith("_")) or fname.startswith("__i"):
                    t = args[0]
                    if t.grad_fn is not None:
                        module, attr = hit
                        if module._buffers.get(attr) is t or module.__dict__.get(attr) is t:
                            file, line, lib = _caller()
                            self.log.append(StoreRecord(
                                module=self.names.get(id(module), type(module).__name__), attribute=attr,
                                how=f"in-place .{fname}()", file=file, line=line,
                                text=linecache.getline(file, line).strip(), grad_fn=type(t.grad_fn).__name__,
                                library_frame=lib, owner_id=id(module),
                            ))
        return out


@contextlib.contextmanager
def trace_stores(model: nn.Module, name: str = "model") -> Iterator[StoreLog]:
    """Record where graph tensors are put on ``model``'s module tree while the block runs.

    Records every ``nn.Module.__setattr__`` (plain attribute or buffer) that stores a
    tensor with a ``grad_fn`` on a module of the tree, and every in-place op that leaves
    a registered buffer with a ``grad_fn``, each with the file:line that did it (the
    first frame outside torch, plus the torch frame when library code made the store,
    e.g. legacy weight_norm's pre-hook).  It only observes: results are unchanged.
    Nothing is patched outside the ``with`` block, so there is no cost when unused.
    While the block runs, :class:`StoreTracer` also records the user's statements that put a
    graph tensor on any other object (a plain object's attribute, a dict or list item, a closure's
    cell), by tensor identity: ``log.records_for(item)`` returns both kinds.
    """
    log = StoreLog()
    names = {id(m): module_name(name, n) for n, m in model.named_modules(remove_duplicate=False)}
    watch: dict[int, tuple[nn.Module, str]] = {}
    modules = {id(m): m for m in model.modules()}
    for m in modules.values():
        for bname, b in m._buffers.items():
            if b is not None:
                watch[id(b)] = (m, bname)
    original = nn.Module.__dict__["__setattr__"]

    def traced_setattr(self, key, value):
        original(self, key, value)
        try:
            if id(self) in names and isinstance(value, torch.Tensor):
                if key in self._buffers:
                    watch[id(value)] = (self, key)
                if value.grad_fn is not None:
                    file, line, lib = _caller()
                    log.append(StoreRecord(
                        module=names[id(self)], attribute=key,
                        how="buffer assignment" if key in self._buffers else "assignment",
                        file=file, line=line, text=linecache.getline(file, line).strip(),
                        grad_fn=type(value.grad_fn).__name__, library_frame=lib, owner_id=id(self),
                    ))
        except Exception:  # never let the observer change the program's behaviour
            pass

    nn.Module.__setattr__ = traced_setattr
    mode = _InplaceMode(watch, log, names)
    tracer = StoreTracer()  # stores on any object: a helper's dict, a cache object, a closure's cell
    log.tracer = tracer
    tracer.install()
    try:
        with mode:
            yield log
    finally:
        tracer.uninstall()
        nn.Module.__setattr__ = original


# --------------------------------------------------------------------------- stores on any object

# The recorder above sees ``nn.Module.__setattr__`` only.  A graph tensor kept on a plain object (a
# training wrapper, a cache object), in a dict or list held by one, or in a closure's cell goes
# through no hookable method: ``obj.attr = x``, ``d[k] = x``, ``lst.append(x)`` and ``nonlocal``
# stores are bytecodes of the user's own code.  :class:`StoreTracer` watches those statements with
# ``sys.monitoring`` on Python 3.12+ (:class:`_Monitor`) or ``sys.settrace`` on 3.11: frames of files
# outside the user's code (torch, the standard library, site packages, this package) get no line
# events at all (with ``sys.monitoring``, no events of any kind after their first call); in the user's frames only the statements that
# can store somewhere lasting are looked at, and after such a statement has run its target is read
# back *without running any of the program's code* (instance ``__dict__``, slots, a module's
# parameter/buffer/submodule dicts, ``dict.get``, ``list`` indexing; never a property, never a
# ``__getitem__`` of the program's own classes).  Each graph tensor found there is recorded by
# identity (a weak reference), with the file:line of the statement, so a tensor found later by the
# deepcopy walk is named by the very line that stored it.

import ast as _ast
import collections as _collections
import itertools as _itertools
import threading as _threading
import types as _types
import weakref as _weakref

_MISSING = object()
_THROUGH_NAME = " through a local name"  # an in-place write whose target only a local name shows
_HOOK = object()
_GENERATED_INIT = object()
_CONTAINER_METHODS = {"append", "appendleft", "insert", "add"}  # the new item is the argument
_MERGE_METHODS = {"extend", "extendleft", "update", "setdefault", "__setitem__"}
_RETURNED = "returned"  # a container a user function built in its return statement, and returned
PASSED = "passed"  # the line that gave a graph tensor to a constructor (``__init__``) that stores its argument
FORWARD = "forward"  # the line that ran, with grad on, a forward (in eval mode, or while a model was built) that
# stored the tensor on its module: the root of a probe / inference forward that should run under no_grad
_FORWARD_UP = 64  # frames looked at above a store, for the forward it runs in
_RETURNED_CONTAINERS = (_ast.List, _ast.ListComp, _ast.Dict, _ast.DictComp)
_PLAIN_CONTAINERS = (list, dict, _collections.OrderedDict, _collections.defaultdict, _collections.deque, tuple)
_SCAN = (256, 16)  # items looked at in a container stored (its last ones), and in the containers in it


class _Statement:
    """One simple statement of the user's code that may store a value somewhere lasting."""

    __slots__ = ("first", "last", "targets", "text")

    def __init__(self, first: int, last: int, targets: list, text: str):
        self.first, self.last, self.targets, self.text = first, last, targets, text


def _store_targets(stmt, cells: frozenset[str]) -> list:
    """[(how, expression to read back, a list whose last item to read instead, what holds the value)]
    for ``stmt``: the values it stored, read after it ran, and the object it stored them into."""
    out: list = []

    def target(t, how="assignment"):
        if isinstance(t, (_ast.Tuple, _ast.List)):
            for elt in t.elts:
                target(elt.value if isinstance(elt, _ast.Starred) else elt, how)
        elif isinstance(t, (_ast.Attribute, _ast.Subscript)):
            out.append(("item" if isinstance(t, _ast.Subscript) else how, t, None, t.value))
        elif isinstance(t, _ast.Name) and t.id in cells:
            out.append(("closure cell", t, None, None))

    if isinstance(stmt, _ast.Return):
        if isinstance(stmt.value, _RETURNED_CONTAINERS):  # return [encoder(x) for x in items]: a new container
            out.append((_RETURNED, stmt.value, None, None))  # of the function's making, read at its return
        return out
    if isinstance(stmt, _ast.Assign):
        for t in stmt.targets:
            target(t)
    elif isinstance(stmt, (_ast.AugAssign, _ast.AnnAssign)) and getattr(stmt, "value", None) is not None:
        target(stmt.target, "augmented assignment" if isinstance(stmt, _ast.AugAssign) else "assignment")
    elif isinstance(stmt, _ast.Expr) and isinstance(stmt.value, _ast.Call):
        call = stmt.value
        func = call.func
        if (isinstance(func, _ast.Name) and func.id == "setattr"
                or isinstance(func, _ast.Attribute) and func.attr == "__setattr__"
                and isinstance(func.value, _ast.Name) and func.value.id == "object") and len(call.args) == 3:
            # setattr(obj, name, value), object.__setattr__(self, name, value): read obj.<name> back
            out.append(("setattr()", _ast.Call(func=_ast.Name(id="getattr", ctx=_ast.Load()),
                                               args=call.args[:2], keywords=[]), None, call.args[0]))
        elif isinstance(func, _ast.Attribute):
            name = func.attr
            if name in _CONTAINER_METHODS and call.args:
                out.append((f".{name}()", call.args[-1], func.value, func.value))
            elif name in _MERGE_METHODS:
                if name in ("setdefault", "__setitem__") and call.args:
                    out.append((f".{name}()", _ast.Subscript(value=func.value, slice=call.args[0]), None, func.value))
                else:
                    out += [(f".{name}()", a, None, func.value) for a in call.args]
                    out += [(f".{name}()", k.value, None, func.value) for k in call.keywords]
            elif name.endswith("_") and not name.startswith("_"):
                receiver = func.value  # x.mul_(a).add_(b): the tensor at the bottom of the chain
                while isinstance(receiver, _ast.Call) and isinstance(receiver.func, _ast.Attribute):
                    receiver = receiver.func.value
                if isinstance(receiver, (_ast.Attribute, _ast.Subscript)):
                    out.append((f"in-place .{name}()", receiver, None, receiver.value))
                elif isinstance(receiver, _ast.Name):  # buf = self.bank; buf.copy_(h): the tensor itself
                    out.append((f"in-place .{name}(){_THROUGH_NAME}", receiver, None, None))
    return out


def _own_statements(body) -> Iterator:
    """The simple statements of a function body (compound statements opened, nested scopes not)."""
    stack = list(reversed(body))
    while stack:
        node = stack.pop()
        if isinstance(node, (_ast.FunctionDef, _ast.AsyncFunctionDef, _ast.ClassDef)):
            continue
        if isinstance(node, (_ast.Assign, _ast.AugAssign, _ast.AnnAssign, _ast.Expr, _ast.Return)):
            yield node
            continue
        children = []
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            part = getattr(node, field, None)
            if isinstance(part, list):
                children += [c for c in part if isinstance(c, _ast.AST)]
        stack += reversed(children)


class _FileIndex:
    """Per source file: its AST, and the scopes (functions, the module) by (name, first line)."""

    def __init__(self):
        self.scopes: dict[str, tuple[list[str], dict[tuple[str, int], Any] | None]] = {}

    def scope(self, filename: str, name: str, firstlineno: int):
        lines = linecache.getlines(filename)
        entry = self.scopes.get(filename)
        if entry is None or entry[0] is not lines:  # new, or linecache read the file again
            entry = self.scopes[filename] = (lines, self._index(filename, lines))
        table = entry[1]
        if table is None:
            return None
        return table.get((name, firstlineno))

    @staticmethod
    def _index(filename: str, lines: list[str]):
        if not lines:
            return None
        try:
            tree = _ast.parse("".join(lines), filename)
        except (SyntaxError, ValueError, RecursionError):
            return None
        table: dict[tuple[str, int], Any] = {("<module>", 1): tree}
        for node in _ast.walk(tree):
            if isinstance(node, (_ast.FunctionDef, _ast.AsyncFunctionDef)):
                first = min([d.lineno for d in node.decorator_list] + [node.lineno])
                table[(node.name, first)] = node
        return table


class StoreTracer:
    """Record, by tensor identity, the user's statements that stored a graph tensor somewhere lasting.

    ``install()`` / ``uninstall()`` (the calling thread; nothing is patched).  ``records(t)`` gives the
    :class:`StoreRecord` of every statement seen storing ``t``.  ``calls`` maps code objects of library
    functions to a callback ``f(frame)`` run when that function starts (how the pytest plugin sees
    ``copy.deepcopy`` and the other process boundaries without replacing them); the callback may return
    a local trace function for that frame.  Another tracer (a debugger, coverage) already installed
    is left alone: ``install()`` then returns False and nothing is recorded.
    """

    # What each code object needs (None: nothing, not the user's code), shared by every tracer of the
    # process with the default idea of "the user's code": a test suite plans each function once.
    _shared_plans: dict[Any, Any] = {}
    _shared_files = _FileIndex()

    def __init__(self, is_user_file=None):
        self._library = _library_dirs()
        self._is_user = is_user_file or self._default_user_file
        if is_user_file is None:
            self._plans, self._files = StoreTracer._shared_plans, StoreTracer._shared_files
        else:
            self._plans, self._files = {}, _FileIndex()
        self._by_tensor: dict[int, tuple[Any, dict[tuple[str, int], StoreRecord]]] = {}
        self._lock = _threading.Lock()
        self.calls: dict[Any, Any] = {}
        self.active = False
        self._trace = None
        self._monitor: _Monitor | None = None
        self.backend: str | None = None  # SETTRACE or MONITORING once installed

    # -- which code is the user's --------------------------------------------------------
    def _default_user_file(self, filename: str) -> bool:
        if not filename or filename[0] == "<":
            return False
        filename = os.path.abspath(filename)
        return not filename.startswith(self._library)

    def _plan(self, code):
        plan = None
        try:
            if code.co_name == "__init__" and code.co_filename[:1] == "<":
                plan = _GENERATED_INIT  # a dataclass's / attrs class's __init__, made by exec
            elif (code.co_name[:1] != "<" or code.co_name == "<module>") and self._is_user(code.co_filename):
                plan = self._make_plan(code)
        except Exception:
            plan = None
        self._plans[code] = plan
        return plan

    def _generated_init(self, frame):
        """``State(h=h)`` of a dataclass: its generated ``__init__`` stores the fields; at its return,
        record the graph tensors now in the instance with the line of the user's code that called it."""
        caller = frame.f_back
        if caller is None or not self._is_user(caller.f_code.co_filename):
            return None
        filename, line = os.path.abspath(caller.f_code.co_filename), caller.f_lineno

        def local(frame_, event, arg):
            if event == "return":
                try:
                    obj = frame_.f_locals.get("self")
                    fields = vars(obj) if obj is not None and hasattr(obj, "__dict__") else None
                    if type(fields) is dict:
                        stmt = _Statement(line, line, [], linecache.getline(filename, line).strip())
                        for value in list(fields.values())[:_SCAN[0]]:
                            self._note(value, "construction", _ast.Name(id=type(obj).__name__), stmt, filename, 1,
                                       obj)
                except Exception:
                    pass
            return local

        return local

    def _make_plan(self, code):
        scope = self._files.scope(code.co_filename, code.co_name, code.co_firstlineno)
        if scope is None:
            return None
        cells = frozenset(code.co_cellvars) | frozenset(code.co_freevars)
        if isinstance(scope, _ast.Module):
            cells = frozenset()
        plan: dict[int, _Statement] = {}
        for stmt in _own_statements(scope.body):
            targets = _store_targets(stmt, cells)
            if not targets:
                continue
            last = getattr(stmt, "end_lineno", None) or stmt.lineno
            text = linecache.getline(code.co_filename, stmt.lineno).strip()
            entry = _Statement(stmt.lineno, last, targets, text)
            for line in range(stmt.lineno, last + 1):
                plan.setdefault(line, entry)
        return plan or None

    # -- the trace functions ----------------------------------------------------------------
    def install(self) -> bool:
        """Start recording on the calling thread: ``sys.monitoring`` on Python 3.12+ (unless
        ``GRAPHLEAF_TRACER=settrace``), else ``sys.settrace``.  False when it cannot (another trace
        function is installed, for ``sys.settrace``; no free tool id, for ``sys.monitoring``)."""
        try:
            self.backend = choose_backend()
        except ValueError:  # a wrong GRAPHLEAF_TRACER: the faces (pytest --graphleaf, explain --run) said so
            self.backend = choose_backend(env={})
        if self.backend == MONITORING:
            shared = _shared_monitor() if self._plans is StoreTracer._shared_plans else None
            if shared is not None and shared.tracer is None:
                monitor = shared  # stays registered between recorders: what it switched off stays off
            else:  # a recorder inside another one, or one with its own idea of the user's code
                monitor = _Monitor(self._plans, persistent=False)
                if not monitor.install():
                    return False
            monitor.attach(self)
            self._monitor = monitor
            self.active = True
            return True
        if sys.gettrace() is not None:
            return False
        self.active = True
        self._trace = self._make_global()
        sys.settrace(self._trace)
        return True

    def uninstall(self) -> None:
        if self.active:
            if self._monitor is not None:
                self._monitor.detach()
                if not self._monitor.persistent:
                    self._monitor.uninstall()
                self._monitor = None
            elif sys.gettrace() is self._trace:
                sys.settrace(None)
            self.active = False

    def watch(self, function, callback) -> None:
        """Call ``callback(frame)`` each time ``function`` (a Python function) starts; what it returns is
        that frame's local trace function (or None)."""
        code = getattr(function, "__code__", None)
        if code is not None:
            global _RESTART_EVENTS
            if code in self._plans and self._plans[code] is None:
                _RESTART_EVENTS = True  # sys.monitoring switched it off as code that stores nothing
            self.calls[code] = callback
            self._plans[code] = _HOOK

    def _make_global(self):
        plans_get = self._plans.get
        calls_get = self.calls.get
        make_plan = self._plan
        local = self._local
        generated_init = self._generated_init
        missing, hook_mark, generated = _MISSING, _HOOK, _GENERATED_INIT

        def trace(frame, event, arg):  # called for every Python call while installed: keep it short
            code = frame.f_code
            plan = plans_get(code, missing)
            if plan is None:
                return None
            if plan is hook_mark:
                hook = calls_get(code)
                if hook is None:
                    return None
                try:
                    return hook(frame)
                except Exception:  # never let the observer change the program's behaviour
                    return None
            if plan is missing:
                plan = make_plan(code)
                if plan is None:
                    return None
            if plan is generated:
                return generated_init(frame)
            return local(plan, os.path.abspath(code.co_filename))

        return trace

    def _local(self, plan, filename):
        pending = None
        check = self._check

        def local(frame, event, arg):
            nonlocal pending
            if pending is not None:
                if event == "line" and plan.get(frame.f_lineno) is pending:
                    return local  # still inside the same (multi-line) statement
                if event != "exception":
                    check(frame, pending, filename, arg if event == "return" else _MISSING)
                pending = None
            if event == "line":
                pending = plan.get(frame.f_lineno)
            return local

        return local

    # -- reading the stored values back ------------------------------------------------------
    def _check(self, frame, stmt: _Statement, filename: str, returned=_MISSING) -> None:
        try:
            if stmt.targets[0][0] == _RETURNED:  # the value the frame returned (its "return" event's)
                if returned is not _MISSING:
                    self._note(returned, _RETURNED, stmt.targets[0][1], stmt, filename, 0, None)
                return
            names = frame.f_locals
            scope = (names, frame.f_globals, frame.f_builtins)
            for how, expr, container, holder_expr in stmt.targets:
                value = _read(expr, scope)
                if value is _MISSING and container is not None:  # lst.append(f(x)): the list's last item
                    seq = _read(container, scope)
                    if isinstance(seq, (list, _collections.deque)) and len(seq):
                        value = seq[-1]
                if value is not _MISSING:
                    holder = _read(holder_expr, scope) if holder_expr is not None else None
                    if isinstance(holder, torch.Tensor):  # self.window[:2] = h: written into the tensor itself,
                        holder = None  # whatever holds it
                    holder = None if holder is _MISSING else holder
                    self._note(value, how, expr, stmt, filename, 0, holder)
                    if isinstance(value, torch.Tensor) and value.grad_fn is not None and holder is not None:
                        self._callers(frame, value, holder)
        except Exception:  # never let the observer change the program's behaviour
            pass

    def _note(self, value, how, expr, stmt, filename, depth, holder) -> None:
        if isinstance(value, torch.Tensor):
            if value.grad_fn is None and not (value.requires_grad and not isinstance(value, nn.Parameter)):
                return
            holder_id = id(holder) if holder is not None else 0
            key = (filename, stmt.first, holder_id)
            ident = id(value)
            with self._lock:
                slot = self._by_tensor.get(ident)
                if slot is None or slot[0]() is not value:
                    try:
                        ref = _weakref.ref(value, functools_partial_drop(self._by_tensor, ident))
                    except TypeError:
                        return
                    slot = (ref, {})
                    self._by_tensor[ident] = slot
                if key not in slot[1]:
                    slot[1][key] = StoreRecord(
                        module=_unparse(expr), attribute=how, how=how, file=filename, line=stmt.first,
                        text=stmt.text, grad_fn=type(value.grad_fn).__name__ if value.grad_fn is not None else None,
                        owner_id=holder_id,
                    )
            return
        if depth >= 2:
            return
        tv = type(value)
        if tv is list or tv is tuple or tv is _collections.deque:
            items = value[-_SCAN[depth]:] if tv is not _collections.deque else list(value)[-_SCAN[depth]:]
        elif tv is dict or tv is _collections.OrderedDict or tv is _collections.defaultdict:
            items = list(_itertools.islice(reversed(value.values()), _SCAN[depth]))
        elif tv is _types.SimpleNamespace or (depth == 0 and _is_record_object(tv)):
            # self.state = SimpleNamespace(h=h) / a dataclass instance built on this line
            items = list(_itertools.islice(reversed(vars(value).values()), _SCAN[depth]))
        else:
            return
        for item in items:
            self._note(item, how, expr, stmt, filename, depth + 1, value)

    def _callers(self, frame, value, holder) -> None:
        """The lines above a store that decided it, seen on the stack as the store ran: the caller that gave
        the tensor to a constructor storing its argument (``Detection(box, score, embedding)``: ``self.embedding
        = embedding``), and the line that ran the forward storing it on its module with grad on, when that
        forward was an inference or a probe (the module in eval mode, or a model being built)."""
        site = _passed_by(frame, value, self._is_user)
        if site is not None:
            self._extra(value, PASSED, site[0], site[1], holder)
        site = _forward_by(frame, self._is_user)
        if site is not None:
            self._extra(value, FORWARD, site[0], site[1], holder, site[2])

    def _extra(self, value, how, filename, line, holder, note="") -> None:
        ident = id(value)
        with self._lock:
            slot = self._by_tensor.get(ident)
            if slot is None or slot[0]() is not value:
                return
            key = (filename, line, id(holder))
            if key not in slot[1]:
                slot[1][key] = StoreRecord(
                    module="", attribute=how, how=how, file=filename, line=line,
                    text=linecache.getline(filename, line).strip(), grad_fn=type(value.grad_fn).__name__,
                    owner_id=id(holder), note=note)

    def records(self, tensor, holder=None) -> list[StoreRecord]:
        """The statements that stored ``tensor``; with ``holder`` (the object, list or dict the deepcopy
        walk found it in), only those that stored it there (a store of the same tensor into a local
        list of a test is no store into the model)."""
        slot = self._by_tensor.get(id(tensor))
        if slot is None or slot[0]() is not tensor:
            return []
        out, elsewhere = {}, {}
        for rec in slot[1].values():
            if holder is not None and rec.owner_id and rec.owner_id != id(holder):
                elsewhere.setdefault((rec.file, rec.line), rec)
                continue
            out.setdefault((rec.file, rec.line), rec)
        if type(holder) in _PLAIN_CONTAINERS and not any(r.how != _RETURNED for r in out.values()) and \
                any(r.how != _RETURNED for r in elsewhere.values()):
            # a plain container no statement stored it into: filled by code that records nothing (a
            # comprehension, state_dict(), dict(...)), or only returned by the function that built it; the
            # statements that stored the tensor itself are its roots
            out = {k: r for k, r in elsewhere.items() if r.how != _RETURNED}
        stores = [r for r in out.values() if not r.how.endswith(_THROUGH_NAME)]
        # h.mul_(2); self.cache = h: the store is the root; an in-place write through a local name is
        # named only where no statement stored the tensor (a registered buffer written in place)
        return stores or list(out.values())

    def clear(self) -> None:
        with self._lock:
            self._by_tensor.clear()


# --------------------------------------------------------------------------- the two recording backends

SETTRACE = "settrace"
MONITORING = "sys.monitoring"
TRACER_ENV = "GRAPHLEAF_TRACER"  # "settrace" forces the fallback on Python 3.12+ (to compare the two)


def choose_backend(version=None, env=None, has_monitoring=None) -> str:
    """Which backend :meth:`StoreTracer.install` uses: ``sys.monitoring`` (PEP 669) on Python 3.12+, where
    its events are per code object and switched off for good in code that stores nothing (the library's
    code, the user's functions without a storing statement), so that nearly all of the program runs
    untraced; ``sys.settrace`` on 3.11, which calls the trace function on every Python call.
    ``GRAPHLEAF_TRACER=settrace`` forces the fallback; any other value of it is an error."""
    version = sys.version_info if version is None else version
    env = os.environ if env is None else env
    if has_monitoring is None:
        has_monitoring = hasattr(sys, "monitoring")
    wanted = (env.get(TRACER_ENV) or "").strip().lower()
    if wanted not in ("", "settrace", "monitoring", "sys.monitoring", "auto"):
        raise ValueError(f"{TRACER_ENV}={env.get(TRACER_ENV)!r}: expected 'settrace', 'monitoring' or 'auto'")
    if wanted == "settrace" or tuple(version[:2]) < (3, 12) or not has_monitoring:
        return SETTRACE  # 'monitoring' asked for on 3.11: there is none, the fallback records the same
    return MONITORING


class _Monitor:
    """:class:`StoreTracer`'s trace functions driven by ``sys.monitoring`` instead of ``sys.settrace``.

    ``PY_START`` is the only global event: each code object is looked at once (its plan is the same as the
    settrace backend's), and where it stores nothing (no plan: the library, this package, a user function
    without a storing statement) the callback returns ``sys.monitoring.DISABLE``, so that code runs without
    events from then on.  A user function with storing statements gets ``LINE``, ``PY_RETURN``, ``PY_YIELD``
    and ``PY_RESUME`` events on its own code object; a watched library function (``copy.deepcopy`` ...)
    gets ``PY_RETURN``.  Each event calls the very local trace function the settrace backend would have
    (kept per frame here, as ``frame.f_trace`` is there), with the same event names, so both record the
    same.  ``RAISE`` and ``PY_UNWIND`` cannot be set per code object: they are global, and look up the
    frame only.  Only the installing thread is recorded (as ``sys.settrace`` does).  The recorders of
    the shared plans (every default :class:`StoreTracer`) use one monitor, registered once for the
    process and attached to each recorder in turn (a test each): between them its events are ignored,
    and what it switched off stays off (no code is instrumented again for each test)."""

    _TOOL_IDS = (3, 4)  # free by convention (0 debugger, 1 coverage, 2 profiler, 5 optimizer)

    def __init__(self, plans: dict, persistent: bool):
        self.plans = plans
        self.persistent = persistent  # the process's one monitor of the shared plans: never uninstalled
        self.tracer: StoreTracer | None = None  # the recorder events go to; None: events are ignored
        self.tool: int | None = None
        self.frames: dict[Any, Any] = {}  # frame -> its local trace function
        self.local_codes: dict[int, tuple[Any, int]] = {}  # id(code) -> (code, the local events set on it)
        self.thread = _threading.get_ident()

    def attach(self, tracer: "StoreTracer") -> None:
        global _RESTART_EVENTS
        if _RESTART_EVENTS:
            _RESTART_EVENTS = False
            sys.monitoring.restart_events()
        self.frames.clear()
        self.thread = _threading.get_ident()
        self.tracer = tracer

    def detach(self) -> None:
        self.tracer = None
        self.frames.clear()

    def install(self) -> bool:
        mon = sys.monitoring
        for tool in self._TOOL_IDS:
            if mon.get_tool(tool) is None:
                mon.use_tool_id(tool, "graphleaf")
                self.tool = tool
                break
        else:
            return False
        E = mon.events
        callbacks = {E.PY_START: self._make_start(), E.PY_RESUME: self._make_start(), E.LINE: self._make_line(),
                     E.PY_RETURN: self._make_return(), E.PY_YIELD: self._make_return(),
                     E.RAISE: self._make_raise(), E.PY_UNWIND: self._make_unwind()}
        for event, callback in callbacks.items():
            mon.register_callback(self.tool, event, callback)
        mon.restart_events()  # what another user of the tool id switched off (DISABLE) may be watched here
        mon.set_events(self.tool, E.PY_START | E.RAISE | E.PY_UNWIND)
        return True

    def uninstall(self) -> None:
        mon = sys.monitoring
        if self.tool is None:
            return
        mon.set_events(self.tool, 0)
        for code, _events in self.local_codes.values():
            try:
                mon.set_local_events(self.tool, code, 0)
            except Exception:
                pass
        E = mon.events
        for event in (E.PY_START, E.PY_RESUME, E.LINE, E.PY_RETURN, E.PY_YIELD, E.RAISE, E.PY_UNWIND):
            mon.register_callback(self.tool, event, None)
        mon.free_tool_id(self.tool)
        self.tool = None
        self.frames.clear()
        self.local_codes.clear()

    def _events_on(self, code, events: int) -> None:
        # by identity: equal code objects (the same function of a file imported again from another folder,
        # as pytester does) are distinct objects, each with its own events
        have = self.local_codes.get(id(code), (None, 0))[1]
        if have & events != events:
            self.local_codes[id(code)] = (code, have | events)  # the code is kept: its id is not reused
            sys.monitoring.set_local_events(self.tool, code, have | events)

    def _make_start(self):
        monitor = self
        plans_get = self.plans.get
        frames = self.frames
        events_on = self._events_on
        getframe, get_ident = sys._getframe, _threading.get_ident
        E = sys.monitoring.events
        DISABLE = sys.monitoring.DISABLE
        user_events = E.LINE | E.PY_RETURN | E.PY_YIELD | E.PY_RESUME
        missing, hook_mark, generated = _MISSING, _HOOK, _GENERATED_INIT

        def start(code, offset):  # PY_START (global) and PY_RESUME (on the user's code objects)
            plan = plans_get(code, missing)
            if plan is None:
                return DISABLE  # nothing to record in this code, ever (for every recorder of these plans)
            tracer = monitor.tracer
            if tracer is None or get_ident() != monitor.thread:
                return None  # between recorders, or another thread (sys.settrace is per thread too)
            frame = getframe(1)
            if plan is hook_mark:
                hook = tracer.calls.get(code)
                if hook is None:
                    return None
                try:
                    local = hook(frame)
                except Exception:  # never let the observer change the program's behaviour
                    return None
                if local is not None:
                    events_on(code, E.PY_RETURN)
                    frames[frame] = local
                return None
            if plan is missing:
                plan = tracer._plan(code)
                if plan is None:
                    return DISABLE
            if plan is generated:
                local = tracer._generated_init(frame)
                if local is not None:
                    events_on(code, E.PY_RETURN)
                    frames[frame] = local
                return None
            events_on(code, user_events)
            if frame not in frames:
                frames[frame] = tracer._local(plan, os.path.abspath(code.co_filename))
            return None

        return start

    def _make_line(self):
        frames_get, getframe = self.frames.get, sys._getframe

        def line(code, line_number):
            frame = getframe(1)
            local = frames_get(frame)
            if local is not None:
                local(frame, "line", None)

        return line

    def _make_return(self):
        frames_pop, getframe = self.frames.pop, sys._getframe

        def returned(code, offset, value):  # PY_RETURN, PY_YIELD: settrace's "return" event
            frame = getframe(1)
            local = frames_pop(frame, None)
            if local is not None:
                try:
                    local(frame, "return", value)
                except Exception:
                    pass

        return returned

    def _make_raise(self):
        frames_get, getframe = self.frames.get, sys._getframe

        def raised(code, offset, exc):  # in each frame the exception passes through, as settrace's "exception"
            frame = getframe(1)
            local = frames_get(frame)
            if local is not None:
                try:
                    local(frame, "exception", (type(exc), exc, exc.__traceback__))
                except Exception:
                    pass

        return raised

    def _make_unwind(self):
        frames_pop, getframe = self.frames.pop, sys._getframe

        def unwound(code, offset, exc):  # the frame ends by the exception: settrace's "return" of None
            frame = getframe(1)
            local = frames_pop(frame, None)
            if local is not None:
                try:
                    local(frame, "exception", (type(exc), exc, exc.__traceback__))
                    local(frame, "return", None)
                except Exception:
                    pass

        return unwound


_SHARED: list = []  # the process's one persistent _Monitor (of StoreTracer._shared_plans), once made
_RESTART_EVENTS = False  # a watched function had been switched off: sys.monitoring.restart_events() first


def _shared_monitor() -> "_Monitor | None":
    """The monitor every recorder of the shared plans uses, one after the other (a test each, in a test
    run): registered once, so that the code it switched off stays off for the next recorder, instead of
    being instrumented again for each test.  None when no tool id is free."""
    if _SHARED:
        return _SHARED[0] if _SHARED[0].tool is not None else None
    monitor = _Monitor(StoreTracer._shared_plans, persistent=True)
    if not monitor.install():
        return None
    _SHARED.append(monitor)
    return monitor


def _is_record_object(cls) -> bool:
    """A plain record class (a dataclass, an attrs class): its instance's fields are what it stores."""
    return hasattr(cls, "__dataclass_fields__") or hasattr(cls, "__attrs_attrs__")


def functools_partial_drop(table: dict, ident: int):
    def drop(ref, table=table, ident=ident):
        slot = table.get(ident)
        if slot is not None and slot[0] is ref:
            table.pop(ident, None)

    return drop


def _unparse(expr) -> str:
    try:
        return _ast.unparse(expr)
    except Exception:
        return "?"


def _read(node, scope):
    """The value of a simple expression in a frame, read without running the program's code."""
    if isinstance(node, _ast.Name):
        for names in scope:
            if node.id in names:
                return names[node.id]
        return _MISSING
    if isinstance(node, _ast.Constant):
        return node.value
    if isinstance(node, _ast.Attribute):
        base = _read(node.value, scope)
        return _MISSING if base is _MISSING else _attribute(base, node.attr)
    if isinstance(node, _ast.Subscript):
        base = _read(node.value, scope)
        if base is _MISSING:
            return _MISSING
        if isinstance(base, torch.Tensor):
            return base  # buf[i] = x: the tensor itself now holds x's history
        key = _read(node.slice, scope)
        return _MISSING if key is _MISSING else _item(base, key)
    if isinstance(node, _ast.UnaryOp) and isinstance(node.op, _ast.USub) and isinstance(node.operand, _ast.Constant):
        v = node.operand.value
        return -v if isinstance(v, (int, float)) else _MISSING
    if isinstance(node, _ast.Call) and isinstance(node.func, _ast.Name) and node.func.id == "getattr" \
            and len(node.args) == 2:  # only built by _store_targets for setattr(obj, name, value)
        base, name = _read(node.args[0], scope), _read(node.args[1], scope)
        return _MISSING if base is _MISSING or not isinstance(name, str) else _attribute(base, name)
    if isinstance(node, _ast.Tuple):
        parts = [_read(e, scope) for e in node.elts]
        return _MISSING if any(p is _MISSING for p in parts) else tuple(parts)
    return _MISSING


def _attribute(obj, name: str):
    try:
        d = object.__getattribute__(obj, "__dict__")
    except Exception:
        d = None
    if name == "__dict__":  # self.__dict__[key] = value
        return d if type(d) is dict else _MISSING
    if type(d) is dict:
        if name in d:
            return d[name]
        if isinstance(obj, nn.Module):
            for part in ("_parameters", "_buffers", "_modules"):
                sub = d.get(part)
                if type(sub) is dict and name in sub:
                    return sub[name]
    for klass in type(obj).__mro__:
        value = klass.__dict__.get(name, _MISSING)
        if value is _MISSING:
            continue
        if type(value) is _types.MemberDescriptorType:  # a __slots__ entry
            try:
                return value.__get__(obj, type(obj))
            except AttributeError:
                return _MISSING
        return _MISSING  # a property or another descriptor: not run
    return _MISSING


def _item(container, key):
    try:
        if isinstance(container, dict):
            return dict.get(container, key, _MISSING)
        if isinstance(container, list) and type(key) is int:
            return list.__getitem__(container, key)
        if isinstance(container, tuple) and type(key) is int:
            return tuple.__getitem__(container, key)
        if isinstance(container, _collections.deque) and type(key) is int:
            return _collections.deque.__getitem__(container, key)
    except (IndexError, TypeError):
        return _MISSING
    return _MISSING


def _user_frame(frame, is_user):
    """``frame`` or the first frame above it in the user's code (through torch's and the library's frames)."""
    while frame is not None and not is_user(frame.f_code.co_filename):
        frame = frame.f_back
    return frame


def _passed_by(frame, value, is_user) -> tuple[str, int] | None:
    """The user's line that gave ``value`` to the constructor running in ``frame``, when ``frame`` is an
    ``__init__`` that got it as an argument (through ``super().__init__(x)`` and library constructors)."""
    found = None
    while frame is not None:
        code = frame.f_code
        if code.co_name != "__init__":
            break
        names = frame.f_locals
        params = code.co_varnames[1:code.co_argcount + code.co_kwonlyargcount]
        if not any(names.get(p) is value for p in params):
            break
        caller = frame.f_back
        while caller is not None and caller.f_code.co_name == "__init__" and not is_user(caller.f_code.co_filename):
            caller = caller.f_back  # a library base class's __init__ between the two
        user = _user_frame(caller, is_user)
        if user is None:
            break
        found = (os.path.abspath(user.f_code.co_filename), user.f_lineno)
        frame = user
    return found


def _forward_by(frame, is_user) -> tuple[str, int, str] | None:
    """(file, line, why) of the user's line that called the outermost ``forward`` of an ``nn.Module`` that
    ``frame`` runs in, when that forward was run in eval mode or while a module was being built (its
    ``__init__`` above it on the stack), with grad on and no input that requires grad: a forward whose graph
    nothing may train (whether a backward went through it is checked when it is reported: :func:`graph_trained`)."""
    outer = None
    f, n = frame, 0
    while f is not None and n < _FORWARD_UP:
        if f.f_code.co_name == "forward" and is_user(f.f_code.co_filename):
            owner = f.f_locals.get("self")
            if isinstance(owner, nn.Module):
                outer = (f, owner)
        f, n = f.f_back, n + 1
    if outer is None:
        return None
    forward, module = outer
    caller = _user_frame(forward.f_back, is_user)
    if caller is None:
        return None
    names, code = forward.f_locals, forward.f_code
    inputs = [names.get(p) for p in code.co_varnames[1:code.co_argcount + code.co_kwonlyargcount]]
    if code.co_flags & 0x04:  # *args
        inputs += list(names.get(code.co_varnames[code.co_argcount + code.co_kwonlyargcount], ()) or ())
    if any(isinstance(v, torch.Tensor) and v.requires_grad for v in inputs):
        return None  # an input requires grad: its gradient is wanted (an attack, a saliency map)
    if not module.training:
        why = f"{type(module).__name__} in eval mode"
    else:
        f, n, why = caller, 0, ""
        while f is not None and n < _FORWARD_UP:
            if f.f_code.co_name == "__init__" and isinstance(f.f_locals.get("self"), nn.Module):
                why = f"while building {type(f.f_locals['self']).__name__}"
                break
            f, n = f.f_back, n + 1
        if not why:
            return None
    return os.path.abspath(caller.f_code.co_filename), caller.f_lineno, why


def graph_trained(tensor, limit: int = 64) -> bool | None:
    """Whether a backward went through ``tensor``'s graph: the saved tensors of the first node that has any are
    freed (True), still there (False); None when no node of the first ``limit`` saves one."""
    node = getattr(tensor, "grad_fn", None)
    todo, seen = [node] if node is not None else [], set()
    while todo and len(seen) < limit:
        node = todo.pop(0)
        if id(node) in seen:
            continue
        seen.add(id(node))
        for name in dir(node):
            if name.startswith("_raw_saved_"):
                try:
                    getattr(node, "_saved_" + name[len("_raw_saved_"):])
                except RuntimeError:
                    return True
                except Exception:
                    continue
                return False
        todo += [n for n, _i in getattr(node, "next_functions", ()) if n is not None]
    return None
