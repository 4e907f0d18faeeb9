"""``graphleaf explain --run SCRIPT [ARG ...]``: run the user's script and explain a graph-leaf crash in it.

The script runs as ``__main__`` (``runpy.run_path``) with ``sys.argv = [SCRIPT, ARG ...]``.  While it runs,
a few cheap wrappers record *where* things happen (no per-line tracing, no TorchFunctionMode):

- ``nn.Module.__setattr__``: each store of a tensor with a ``grad_fn`` onto any module (file:line of
  the first frame outside torch), kept per (module, attribute, line);
- ``DataLoader.__init__``, ``TensorDataset.__init__``, ``multiprocessing`` ``Process.__init__`` and
  ``Queue.put``: the line that built the loader / dataset / process, or put the object.

When the script raises, the exception's traceback still holds the frames' locals, so the object
being copied is the ``x`` of the outermost ``copy.deepcopy`` frame, and the object being pickled for
another process is the ``obj`` of the outermost ``multiprocessing.reduction`` ``dump``/``dumps``
frame (or the dataset of the ``DataLoader`` iterator whose worker failed).  That object goes
through the deepcopy walk (:mod:`.walk`) and the static mapping (:mod:`.explanation`); each
tensor's storing line comes from the records above, else from the static findings, else the
report says that no store was recorded.

A ``Queue.put`` that fails is pickled in the queue's feeder thread: Python prints the error and the
reader waits forever.  Under ``--run`` that failure is reported and the process exits 1 at once.

Imports torch.
"""

from __future__ import annotations

import ast
import copy
import linecache
import multiprocessing.process
import multiprocessing.queues
from multiprocessing.reduction import ForkingPickler
import os
import re
import runpy
import sys
import threading
import traceback
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, TextIO

import torch
from torch import nn
from torch.utils import data as tud

from .explanation import explain
from .findings import Findings, GraphTensor, Source, display_path, format_explanation
from .static_map import StaticIndex, user_class_files
from .trace import _THIS_FILE as _TRACE_FILE, StoreLog, StoreRecord, StoreTracer, _caller, choose_backend
from .walk import (TORCH_DIR, _graph_leaf_error, _return_line, cached_property_line, find_graph_tensors,
                   module_call_lines)

_HERE = os.path.abspath(__file__)
_COPY_FILE = os.path.abspath(copy.__file__)
_MP_DIR = os.path.dirname(os.path.abspath(multiprocessing.process.__file__)) + os.sep
_SKIP = (_HERE, _TRACE_FILE)

EXIT_FINISHED, EXIT_LOCATED, EXIT_USAGE, EXIT_SCRIPT_FAILED = 0, 1, 2, 3

COWARDLY = "Cowardly refusing to serialize non-leaf tensor"
HOOK_APPLIED = "applied"  # StoreRecord.how of a store by a hook that torch registered, named at the line applying it
WORKER_GRAD = ("don't support automatic differentiation", "requires grad", "requires_grad")


@dataclass
class Site:
    what: str  # "DataLoader(...)", "TensorDataset(...)", "Process(...)", "Queue.put(...)"
    file: str
    line: int

    def source(self, verb: str) -> Source:
        text = linecache.getline(self.file, self.line).strip()
        return Source(file=self.file, line=self.line, code=verb, text=text, message=self.what)


class _Sites:
    """id(obj) -> Site, for the last few hundred objects (ids are checked against a weak/strong ref)."""

    def __init__(self, limit: int = 512):
        self._d: OrderedDict[int, tuple[Any, Site]] = OrderedDict()
        self._limit = limit
        self._lock = threading.Lock()

    def add(self, obj: Any, site: Site) -> None:
        try:
            ref: Any = weakref.ref(obj)
        except TypeError:
            ref = None  # tuples, tensors without weakref support: keep the id only while recent
        with self._lock:
            self._d[id(obj)] = (ref, site)
            self._d.move_to_end(id(obj))
            while len(self._d) > self._limit:
                self._d.popitem(last=False)

    def get(self, obj: Any) -> Site | None:
        hit = self._d.get(id(obj))
        if hit is None:
            return None
        ref, site = hit
        if ref is not None and ref() is not obj:
            return None
        return site


class Recorder:
    """The wrappers installed while the script runs, and what they recorded."""

    def __init__(self) -> None:
        # (id(module), attribute) -> (weakref to module, {(file, line): StoreRecord})
        self.stores: dict[tuple[int, str], tuple[Any, dict[tuple[str, int], StoreRecord]]] = {}
        self.sites = _Sites()  # object -> the line that built it
        self.given = _Sites()  # dataset -> the DataLoader(...) line it was given to
        self.put_sites = _Sites()  # object -> the Queue.put(...) line
        self.hook_sites = _Sites()  # a module hook registered by library code -> the user's line that applied it
        self._saved: list[tuple[Any, str, Any]] = []
        self.main_pid = os.getpid()
        self.on_feeder_error = None  # set by run_script
        self.on_child_feeder_error = None  # (e, obj) in a forked child (a DataLoader worker): report, then exit
        self.stopping = threading.Event()  # a feeder thread is reporting, and will exit the process
        self.tracer = StoreTracer()  # stores on any object (plain objects, dicts, lists, closure cells)
        self.on_put = None  # (obj, site) before a Queue.put
        self.tracing = False

    # -- install / uninstall -----------------------------------------------------------
    def _patch(self, owner, name, value) -> None:
        self._saved.append((owner, name, owner.__dict__[name]))
        setattr(owner, name, value)

    def install(self) -> None:
        rec = self
        original_setattr = nn.Module.__dict__["__setattr__"]

        def setattr_recording(self, key, value):
            original_setattr(self, key, value)
            if type(value) is torch.Tensor or isinstance(value, torch.Tensor):
                try:
                    if value.grad_fn is not None:
                        rec._store(self, key, value)
                except Exception:  # never change the program's behaviour
                    pass

        self._patch(nn.Module, "__setattr__", setattr_recording)

        def hook_recorder(name):
            original = nn.Module.__dict__[name]

            def register(self, hook, *args, **kwargs):
                try:
                    file, line, lib = _caller(_SKIP)
                    if lib is not None and line:  # registered by torch (legacy weight_norm, spectral_norm, pruning)
                        rec.hook_sites.add(hook, Site(f"{type(hook).__name__} hook", file, line))
                except Exception:
                    pass
                return original(self, hook, *args, **kwargs)

            register.__wrapped__ = original
            self._patch(nn.Module, name, register)

        hook_recorder("register_forward_pre_hook")
        hook_recorder("register_forward_hook")

        def site_recorder(cls, what, arg_of=None):
            original = cls.__dict__["__init__"]

            def __init__(self, *args, **kwargs):
                original(self, *args, **kwargs)
                try:
                    file, line, _lib = _caller(_SKIP + (_MP_FILES,))
                    if not line:
                        return  # built by an installed package's own code: no line of the user's to name
                    site = Site(what, file, line)
                    rec.sites.add(self, site)
                    if arg_of is not None:
                        inner = arg_of(self)
                        if inner is not None:
                            rec.given.add(inner, Site(f"given to {what}", file, line))
                except Exception:
                    pass

            __init__.__wrapped__ = original
            self._patch(cls, "__init__", __init__)

        site_recorder(tud.DataLoader, "DataLoader(...)", lambda loader: loader.dataset)
        site_recorder(tud.TensorDataset, "TensorDataset(...)")
        site_recorder(multiprocessing.process.BaseProcess, "Process(...)")

        original_put = multiprocessing.queues.Queue.__dict__["put"]

        def put(self, obj, block=True, timeout=None):
            try:
                file, line, _lib = _caller(_SKIP + (_MP_FILES,))
                site = Site("Queue.put(...)", file, line)
                rec.put_sites.add(obj, site)
                if rec.on_put is not None:
                    rec.on_put(obj, site)
            except Exception:
                pass
            if rec.on_child_feeder_error is not None and os.getpid() != rec.main_pid:
                obj = rec.check_child_put(obj)
            return original_put(self, obj, block, timeout)

        self._patch(multiprocessing.queues.Queue, "put", put)
        original_feeder_error = multiprocessing.queues.Queue.__dict__["_on_queue_feeder_error"]

        def _on_queue_feeder_error(e, obj):
            if COWARDLY in str(e):
                if os.getpid() == rec.main_pid:
                    if rec.on_feeder_error is not None:
                        rec.on_feeder_error(e, obj)  # reports and exits: the reader would wait forever
                else:
                    # A forked child (a DataLoader worker with batch_size=None, a Process putting its
                    # result) cannot send what it made: its reader would wait forever.  Say so, let the
                    # parent know, and end the child, so that the parent fails instead of hanging.
                    original_feeder_error.__func__(e, obj)
                    try:
                        if rec.on_child_feeder_error is not None:
                            rec.on_child_feeder_error(e, obj)
                    finally:
                        sys.stderr.flush()
                        os._exit(EXIT_LOCATED)
            return original_feeder_error.__func__(e, obj)

        self._patch(multiprocessing.queues.Queue, "_on_queue_feeder_error", staticmethod(_on_queue_feeder_error))
        self.tracing = self.tracer.install()

    def check_child_put(self, obj):
        """In a forked child: a result on the autograd graph cannot reach the parent, which would wait
        forever for it (the feeder thread's error is not even printed when the child is already
        exiting).  Report it now; then end the child (a DataLoader worker: the loader notices), or,
        when ``on_child_feeder_error`` returns a :class:`SendFailure`, put that instead: the reader's
        ``get()`` raises the child's error instead of waiting forever."""
        try:
            found = find_graph_tensors(obj)
        except Exception:
            return obj
        if not found:
            return obj
        try:
            ForkingPickler.dumps(found[0].tensor)
        except RuntimeError as exc:
            error: BaseException = exc
        else:
            return obj  # it pickles after all (a reduction of the program's own)
        print(f"graphleaf: process {os.getpid()} cannot send its result to its parent: {error}", file=sys.stderr)
        instead = None
        try:
            instead = self.on_child_feeder_error(error, obj)
        finally:
            if not isinstance(instead, SendFailure):
                sys.stderr.flush()
                os._exit(EXIT_LOCATED)
        return instead

    def uninstall(self) -> None:
        self.tracer.uninstall()
        while self._saved:
            owner, name, value = self._saved.pop()
            setattr(owner, name, value)

    # -- records -------------------------------------------------------------------------
    def _store(self, module, key, value) -> None:
        file, line, lib = _caller(_SKIP)
        how = "buffer assignment" if key in module._buffers else "assignment"
        if lib is not None:
            site = self._hook_site()
            if site is not None:  # a store by a hook torch registered: the line that applied it is the root
                file, line, how = site.file, site.line, HOOK_APPLIED
        if line == 0:
            return  # no line of the user's code made it (an installed package's own code): nothing to name
        slot = self.stores.get((id(module), key))
        if slot is None or slot[0]() is not module:
            slot = (weakref.ref(module), {})
            self.stores[(id(module), key)] = slot
        slot[1][(file, line)] = StoreRecord(
            module=type(module).__name__, attribute=key,
            how=how, file=file, line=line, text=linecache.getline(file, line).strip(),
            grad_fn=type(value.grad_fn).__name__, library_frame=lib, owner_id=id(module), value=_weak(value),
        )

    def _hook_site(self) -> Site | None:
        """The user's line that applied the library hook now running (``weight_norm(layer)``), if one is."""
        frame = sys._getframe(2)
        while frame is not None:
            if os.path.abspath(frame.f_code.co_filename).startswith(TORCH_DIR):
                names = frame.f_locals
                for key in ("self", "hook"):
                    obj = names.get(key)
                    site = self.hook_sites.get(obj) if obj is not None else None
                    if site is not None:
                        return site
            frame = frame.f_back
        return None

    def store_log(self) -> StoreLog:
        log = StoreLog()
        log.tracer = self.tracer
        for (_ident, _key), (ref, by_line) in self.stores.items():
            if ref() is not None:
                log.extend(by_line.values())
        return log


def _weak(value):
    try:
        return weakref.ref(value)
    except TypeError:
        return None


_MP_FILES = os.path.abspath(multiprocessing.queues.__file__)
_STDLIB = os.path.dirname(os.path.abspath(os.__file__)) + os.sep


# ------------------------------------------------------------------ locating the failure


@dataclass
class Failure:
    kind: str  # "deepcopy", "pickle" (a non-leaf sent to another process), "worker" (DataLoader worker)
    error: BaseException
    obj: Any
    name: str
    call: tuple[str, int] | None  # the user's line that made the copy / sent the object
    library: str | None = None  # "torch/optim/swa_utils.py:236" when a library made the copy


def _chain(exc: BaseException):
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def _frames(exc: BaseException):
    tb = exc.__traceback__
    while tb is not None:
        yield tb.tb_frame, tb.tb_lineno
        tb = tb.tb_next


def _is_user_file(fname: str) -> bool:
    if fname.startswith("<"):
        return False  # <frozen runpy>, <string>
    fname = os.path.abspath(fname)
    return not (fname.startswith(TORCH_DIR) or fname.startswith(_MP_DIR) or fname == _COPY_FILE
                or fname in _SKIP or fname.startswith(os.path.dirname(_HERE) + os.sep)
                or os.path.basename(fname) in ("runpy.py", "threading.py")
                or fname.startswith("<"))


def _last_user(frames, upto: int) -> tuple[str, int] | None:
    for frame, lineno in reversed(frames[:upto]):
        if _is_user_file(frame.f_code.co_filename):
            return os.path.abspath(frame.f_code.co_filename), lineno
    return None


def _library(frames, upto: int) -> str | None:
    """The torch frame that made the call, when one came between the user's line and copy.py."""
    for frame, lineno in reversed(frames[:upto]):
        f = os.path.abspath(frame.f_code.co_filename)
        if f.startswith(TORCH_DIR):
            return "torch/" + f[len(TORCH_DIR):].replace(os.sep, "/") + f":{lineno}"
        if _is_user_file(f):
            return None
    return None


_ROOT_NAME = re.compile(r"\b(?:deepcopy|AveragedModel|ModelEma\w*|put|Process|DataLoader)\s*\(\s*(?:[\w]+\s*=\s*)?([A-Za-z_][\w.]*)(?![\w.]|\s*\()")


def _root_name(call: tuple[str, int] | None, obj: Any, default: str) -> str:
    if call is not None:
        m = _ROOT_NAME.search(linecache.getline(call[0], call[1]))
        if m and m.group(1) not in ("target",):
            return m.group(1)
    return default


def locate(exc: BaseException) -> Failure | None:
    """The object whose copy or transfer raised, from the frames of ``exc``'s traceback."""
    for e in _chain(exc):
        msg = str(e)
        frames = list(_frames(e))
        if _graph_leaf_error(e):
            for i, (frame, _lineno) in enumerate(frames):
                code = frame.f_code
                if code.co_name == "deepcopy" and os.path.abspath(code.co_filename) == _COPY_FILE:
                    obj = frame.f_locals.get("x")
                    call = _last_user(frames, i)
                    default = "model" if isinstance(obj, nn.Module) else "obj"
                    return Failure("deepcopy", e, obj, _root_name(call, obj, default), call, _library(frames, i))
            # Tensor.__deepcopy__ called directly (t.__deepcopy__({})), or no frame left
            for i, (frame, _lineno) in enumerate(frames):
                if frame.f_code.co_name == "__deepcopy__" and "self" in frame.f_locals:
                    obj = frame.f_locals["self"]
                    call = _last_user(frames, i)
                    return Failure("deepcopy", e, obj, _root_name(call, obj, "obj"), call, _library(frames, i))
            return Failure("deepcopy", e, None, "obj", _last_user(frames, len(frames)))
        if COWARDLY in msg:
            for i, (frame, _lineno) in enumerate(frames):
                code = frame.f_code
                if code.co_name in ("dump", "dumps") and os.path.abspath(code.co_filename).startswith(_MP_DIR):
                    obj = frame.f_locals.get("obj")
                    call = _last_user(frames, i)
                    name = "process" if isinstance(obj, multiprocessing.process.BaseProcess) else "obj"
                    return Failure("pickle", e, obj, name, call)
            return Failure("pickle", e, None, "obj", _last_user(frames, len(frames)))
        if "DataLoader worker" in msg and (any(w in msg for w in WORKER_GRAD) or "exited unexpectedly" in msg):
            for i, (frame, _lineno) in enumerate(frames):
                it = frame.f_locals.get("self")
                if isinstance(it, tud.dataloader._BaseDataLoaderIter):
                    call = _last_user(frames, i)
                    return Failure("worker", e, it._dataset, "dataset", call)
    return None


# ------------------------------------------------------------------ the report


def _static_at(index: StaticIndex, file: str, line: int) -> list:
    return [f for f in index.findings(file) if f.line == line]


def _assignments(owner: Any, attr: str) -> list[Source]:
    """``self.<attr> = ...`` lines in the owner's class (for objects that are not modules)."""
    out = []
    for cls, path in user_class_files(type(owner)):
        if not _is_user_file(path) or path.startswith(_STDLIB):
            continue
        try:
            tree = _parsed_file(path)
        except (OSError, SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.name == cls.__name__:
                for sub in ast.walk(node):
                    targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target] if isinstance(
                        sub, (ast.AnnAssign, ast.AugAssign)) else []
                    for t in targets:  # self.<attr> = ..., and other.<attr> = ... on a copy or a new instance
                        if isinstance(t, ast.Attribute) and t.attr == attr and isinstance(t.value, ast.Name):
                            out.append(Source(file=path, line=t.lineno, code="assigned",
                                              text=linecache.getline(path, t.lineno).strip(), attribute=attr,
                                              message=f"{t.value.id}.{attr} is assigned here in {cls.__name__}"))
    return out


def argument_line(site: Site, path: str) -> tuple[str, int] | None:
    """(file, line) that made a tensor a recorded constructor was given as a local name: for the tensor at
    ``<dataset>.tensors[i]`` of ``TensorDataset(x, soft)`` built at ``site``, argument ``i`` is ``soft``;
    when the function around ``site`` assigns ``soft`` exactly once, before it, that line made the tensor."""
    m = re.search(r"\.tensors\[(\d+)\]$", path)
    if m is None or not _is_user_file(site.file):
        return None
    index = int(m.group(1))
    try:
        tree = _parsed_file(site.file)
    except (OSError, SyntaxError, ValueError):
        return None
    scope = tree
    for node in ast.walk(tree):  # the innermost function holding the site's line
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                node.lineno <= site.line <= (node.end_lineno or node.lineno):
            if scope is tree or node.lineno > scope.lineno:
                scope = node
    name = None
    for node in ast.walk(scope):
        if isinstance(node, ast.Call) and node.lineno <= site.line <= (node.end_lineno or node.lineno) and \
                len(node.args) > index and not any(isinstance(a, ast.Starred) for a in node.args[:index + 1]):
            arg = node.args[index]
            if isinstance(arg, ast.Name):
                name = arg.id
                break
    if name is None:
        return None
    lines = []
    for node in ast.walk(scope):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AnnAssign, ast.AugAssign, ast.For, ast.NamedExpr)) else []
        if any(isinstance(t, ast.Name) and t.id == name for t in targets) or isinstance(node, ast.arg) and \
                node.arg == name:
            lines.append(node.lineno)
    if len(lines) != 1 or lines[0] >= site.line or lines[0] == getattr(scope, "lineno", 0):
        return None  # a parameter, several assignments, or none before the call: not known which made it
    return site.file, lines[0]


def _parsed_file(path: str):
    with open(path, encoding="utf-8") as fh:
        return ast.parse(fh.read(), path)


def describe_failure(failure: Failure, rec: Recorder, script: str) -> tuple[str, Findings]:
    index = StaticIndex()
    lines: list[str] = []
    first = str(failure.error).split("\n")[0]
    if failure.kind == "deepcopy" and ". " in first:
        first = first.split(". ")[0] + "."
    head = {"deepcopy": "copy.deepcopy raised the graph-leaf error",
            "pickle": "sending an object to another process raised the process-boundary error",
            "worker": "a DataLoader worker failed on tensors that require grad"}[failure.kind]
    if failure.call is not None:
        file, line = failure.call
        lines.append(f"graphleaf explain: {head} at {display_path(file)}:{line}")
        lines.append(f"    {linecache.getline(file, line).strip()}")
        if failure.library:
            lines.append(f"    (the copy is made inside {failure.library})")
        for f in _static_at(index, file, line):
            lines.append(f"    static: {f.code} {f.message}")
    else:
        lines.append(f"graphleaf explain: {head}")
    lines.append(f"{type(failure.error).__name__}: {first}")
    if failure.kind == "worker":
        last = str(failure.error).strip().splitlines()[-1]
        if last != first:
            lines.append(f"    in the worker: {last}")
    lines.append("")
    if failure.obj is None:
        lines.append("the object could not be found in the traceback (it was copied or sent without a frame "
                     "that holds it); the static findings of the script:")
        for f in index.findings(os.path.abspath(script)):
            lines.append(f"    {display_path(script)}:{f.line} {f.code} {f.message}")
        return "\n".join(lines), Findings()

    items = explain(failure.obj, failure.name, trace=rec.store_log(), extra_files=[script], print_result=False,
                    requiring_grad=failure.kind == "worker")
    kind = type(failure.obj).__name__
    if failure.kind == "worker":
        # a module's parameters in the dataset reach the workers fine (forked or pickled): they are no items
        items[:] = [g for g in items if not isinstance(g.tensor, nn.Parameter)]
        code = getattr(getattr(type(failure.obj), "__getitem__", None), "__code__", None)
        if not items and code is not None and _is_user_file(code.co_filename):
            file, line = os.path.abspath(code.co_filename), _return_line(code)
            lines.append(f"the object the workers index ({failure.name}, a {kind}) holds no tensor that requires "
                         f"grad: the items its __getitem__ returns do (compute them under torch.no_grad() or "
                         f"detach them):")
            calls = module_call_lines(code, failure.obj)
            for n, attr in calls:  # a module of the dataset's, with parameters that require grad, called there
                lines.append(f"    <- {display_path(file)}:{n} made by the dataset's module {attr!r} (its parameters "
                             f"require grad): {linecache.getline(file, n).strip()}")
            if line not in {n for n, _a in calls}:
                lines.append(f"    <- {display_path(file)}:{line} made: {linecache.getline(file, line).strip()}")
            return "\n".join(lines), items
    n = len(items)
    what = "tensors that require grad" if failure.kind == "worker" else "tensors on the autograd graph (not graph leaves)"
    if n == 1:
        what = what.replace("tensors", "tensor").replace("(not graph leaves)", "(not a graph leaf)").replace(
            "require ", "requires ")
    verb = {"deepcopy": "being copied", "pickle": "being sent", "worker": "the workers index"}[failure.kind]
    lines.append(f"the object {verb} ({failure.name}, a {kind}) reaches {n} {what}:")
    if failure.kind != "deepcopy":
        items.problems = []  # what deepcopy alone would trip on (e.g. a process's authkey) is no concern here
    for item in items:
        _sources_for(item, failure, rec, index)
    body = format_explanation(items).split("\n", 1)
    lines.append(body[1] if len(body) > 1 and items else format_explanation(items))
    return "\n".join(lines), items


def _sources_for(item: GraphTensor, failure: Failure, rec: Recorder, index: StaticIndex) -> None:
    """Add what the recorders know; static findings for recorded lines are marked."""
    extra: list[Source] = []
    for owner, chain in item.owners[:1]:
        site = rec.sites.get(owner)
        if site is not None:
            made = argument_line(site, item.path)
            if made is not None:
                extra.append(Site("the argument", *made).source("made"))
            extra.append(site.source("built"))
        made = cached_property_line(owner, chain[0]) if chain and not item.sources else None
        if made is not None:  # functools.cached_property kept what the user's function returned
            extra.append(Site("cached_property", *made).source("made"))
        if not item.sources and not isinstance(owner, nn.Module) and chain:
            extra += _assignments(owner, chain[0])
    root_site = rec.given.get(failure.obj) or rec.put_sites.get(failure.obj) or rec.sites.get(failure.obj)
    if root_site is None and failure.kind == "pickle" and failure.call is not None and not item.sources \
            and not extra:
        root_site = Site("the send", *failure.call)  # SimpleQueue.put, a pipe's send: the line that sent it
    if root_site is not None and failure.kind != "deepcopy":
        extra.append(root_site.source("sent" if failure.kind == "pickle" else "loader"))
    if failure.call is not None and item.tensor is not None and item.tensor is failure.obj:
        # the tensor itself was copied or sent: that line decided it, beside the store that made it
        extra.append(Site("the copy", *failure.call).source("copied" if failure.kind == "deepcopy" else "sent"))
    for s in extra:
        if any(o.file == s.file and o.line == s.line for o in item.sources):
            continue
        statics = _static_at(index, s.file, s.line)
        if statics:
            s.text += f"   [{', '.join(f.code for f in statics)}]"
        item.sources.append(s)


def report_feeder_error(rec: Recorder, script: str, out: TextIO):
    def handler(e, obj):
        rec.stopping.set()  # the main thread must not report "ran to the end" meanwhile
        site = rec.put_sites.get(obj)
        call = (site.file, site.line) if site else None
        failure = Failure("pickle", e, obj, _root_name(call, obj, "obj"), call)
        try:
            text, _items = describe_failure(failure, rec, script)
            print(text.replace("sending an object to another process", "Queue.put(...) of an object, pickled in "
                               "the queue's feeder thread,", 1), file=out)
            print("\n(the reader of this queue would wait forever: graphleaf explain stops the script here, exit 1)",
                  file=out)
            out.flush()
        finally:
            sys.stderr.flush()
            for child in multiprocessing.active_children():  # e.g. the consumer waiting on this queue
                try:
                    child.terminate()
                    child.join(2)
                except Exception:
                    pass
            os._exit(EXIT_LOCATED)

    return handler


class SendFailure:
    """Put on a queue in place of a result that cannot be pickled: unpickling it in the reader raises the
    child's error (``RuntimeError: ... Cowardly refusing to serialize non-leaf tensor ...``).  ``info``
    (the child's put line, the tensor's path) goes to the reader's :data:`SEND_FAILURE_LISTENERS`."""

    def __init__(self, message: str, info: dict | None = None):
        self.message = message
        self.info = info or {}

    def __reduce__(self):
        return (raise_send_failure, (self.message, self.info))


SEND_FAILURE_LISTENERS: list = []  # callables(info) run in the reader before it raises


def raise_send_failure(message: str, info: dict | None = None):
    for listener in list(SEND_FAILURE_LISTENERS):
        try:
            listener(info or {})
        except Exception:
            pass
    raise RuntimeError(message)


class ChildReports:
    """A forked child that cannot send its result reports through here, and the parent stops at once.

    The child (it has the recorder's records, copied at fork) writes its report to a file of a private
    folder and its pid to a pipe; a thread of the parent, blocked on that pipe, prints the report,
    terminates the script's child processes and exits 1: the parent would otherwise wait forever for
    the result (a ``DataLoader`` with ``batch_size=None`` whose worker cannot send an item that is on
    the autograd graph; a ``Process`` whose ``Queue.put`` of its result fails in its feeder thread).
    Only forked children report: a spawned child does not run the recorder.
    """

    def __init__(self, out: TextIO, stopping: threading.Event):
        import tempfile

        self.folder = tempfile.mkdtemp(prefix="graphleaf-explain-")
        self.read_fd, self.write_fd = os.pipe()
        self.out = out
        self.stopping = stopping
        threading.Thread(target=self._watch, name="graphleaf-child-reports", daemon=True).start()

    def send(self, text: str) -> None:  # in the child
        path = os.path.join(self.folder, f"{os.getpid()}.txt")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.write(self.write_fd, f"{os.getpid()}\n".encode())

    def _watch(self) -> None:  # in the parent
        buf = b""
        while b"\n" not in buf:
            try:
                chunk = os.read(self.read_fd, 64)
            except OSError:
                return
            if not chunk:
                return
            buf += chunk
        self.stopping.set()
        pid = buf.split(b"\n", 1)[0].decode()
        try:
            with open(os.path.join(self.folder, f"{pid}.txt"), encoding="utf-8") as fh:
                text = fh.read()
            print(text, file=self.out)
            print("\n(the parent process would wait forever for that result: graphleaf explain stops the script "
                  "here, exit 1)", file=self.out)
            self.out.flush()
        finally:
            sys.stderr.flush()
            for child in multiprocessing.active_children():
                try:
                    child.terminate()
                    child.join(2)
                except Exception:
                    pass
            self.close()
            os._exit(EXIT_LOCATED)

    def close(self) -> None:
        import shutil

        shutil.rmtree(self.folder, ignore_errors=True)


def child_send_report(e: BaseException, obj: Any, rec: "Recorder", script: str) -> str:
    """The report of a forked child whose result could not be pickled for its parent."""
    info = tud.get_worker_info()
    if info is not None:  # a DataLoader worker: the item it made is on the graph
        dataset = info.dataset
        site = rec.given.get(dataset) or rec.sites.get(dataset)
        call = (site.file, site.line) if site is not None else None
        index, item = obj if isinstance(obj, tuple) and len(obj) == 2 else (None, obj)
        head = (f"a DataLoader worker (worker {info.id}) could not send "
                + (f"item {index!r}" if isinstance(index, int) else "its result")
                + " to the main process (batch_size=None sends each item as it is, and this one is on the "
                  "autograd graph)")
        failure = Failure("pickle", e, dataset, "dataset", call)
        text, items = describe_failure(failure, rec, script)
        if not items:  # made in __getitem__, not kept on the dataset: show the item itself
            failure = Failure("pickle", e, item, "item", call)
            text, items = describe_failure(failure, rec, script)
    else:
        site = rec.put_sites.get(obj)
        call = (site.file, site.line) if site is not None else None
        head = "a child process could not send its result to its parent: Queue.put(...)"
        failure = Failure("pickle", e, obj, _root_name(call, obj, "obj"), call)
        text, items = describe_failure(failure, rec, script)
    return text.replace("sending an object to another process raised the process-boundary error", head, 1)


# ------------------------------------------------------------------ running the script


def run_script(script: str, argv: list[str] | None = None, out: TextIO | None = None) -> int:
    """:func:`_run_script`, then the script's daemonic child processes are ended, as Python's exit would
    (the command ends with ``os._exit``, which runs no ``atexit`` handler: a daemon consumer still waiting on
    a queue the script failed to fill would otherwise outlive the command, holding its output open)."""
    try:
        return _run_script(script, argv, out)
    finally:
        _end_daemonic_children()


def _end_daemonic_children() -> None:
    for child in multiprocessing.active_children():
        if child.daemon:
            try:
                child.terminate()
                child.join(5)
            except Exception:
                pass


def _run_script(script: str, argv: list[str] | None = None, out: TextIO | None = None) -> int:
    """Run ``script`` as ``__main__`` with ``sys.argv = [script, *argv]``; explain a graph-leaf crash.

    Returns 0 when the script finishes (or exits with status 0), 1 when it raised the graph-leaf
    error or a process-boundary error (reported), 3 when it failed on its own (its traceback is
    printed as Python would, with a note), 2 when the script cannot be found.
    """
    out = out or sys.stdout
    path = os.path.abspath(script)
    if not os.path.isfile(path):
        print(f"graphleaf explain: error: script {script!r} does not exist", file=sys.stderr)
        return EXIT_USAGE
    try:
        choose_backend()
    except ValueError as exc:
        print(f"graphleaf explain: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    rec = Recorder()
    rec.on_feeder_error = report_feeder_error(rec, path, out)
    children = ChildReports(out, rec.stopping)
    rec.on_child_feeder_error = lambda e, obj: children.send(child_send_report(e, obj, rec, path))
    saved_argv, saved_path0 = sys.argv[:], sys.path[0] if sys.path else None
    sys.argv = [script, *(argv or [])]
    folder = os.path.dirname(path)
    if sys.path:
        sys.path[0] = folder
    else:
        sys.path.append(folder)
    rec.install()
    error: BaseException | None = None
    code = 0
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as exc:
        code = exc.code
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - the script's exception, explained or passed on
        error = exc
    finally:
        rec.uninstall()
        sys.argv = saved_argv
        if saved_path0 is not None and sys.path:
            sys.path[0] = saved_path0
    shown = display_path(path)
    if rec.stopping.is_set():
        threading.Event().wait(30)  # the feeder thread reports and calls os._exit(1)
    children.close()
    if error is None:
        if code is None or code == 0:
            print(f"graphleaf explain: {shown} ran to the end; no graph-leaf error was raised", file=out)
            return EXIT_FINISHED
        out.flush()
        print(f"graphleaf explain: {shown} exited with status {code!r} (its own sys.exit), "
              "not a graph-leaf error", file=sys.stderr)
        return EXIT_SCRIPT_FAILED
    failure = locate(error)
    if failure is None:
        out.flush()
        traceback.print_exception(type(error), error, _user_tb(error), file=sys.stderr)
        print(f"graphleaf explain: {shown} raised {type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
              " -- the script's own error, not a graph-leaf error", file=sys.stderr)
        return EXIT_SCRIPT_FAILED
    text, _items = describe_failure(failure, rec, path)
    print(text, file=out)
    return EXIT_LOCATED


def _user_tb(exc: BaseException):
    """The traceback from the script's first frame on (graphleaf's and runpy's frames dropped)."""
    tb = exc.__traceback__
    while tb is not None and not _is_user_file(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    return tb or exc.__traceback__
