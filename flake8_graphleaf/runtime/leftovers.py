"""What ``pytest --graphleaf`` checks in one test: graph tensors the test left where a copy or a send meets them.

While a test runs, :class:`TestWatch` keeps

- a strong reference to every ``nn.Module`` built (``nn.Module.__init__``), until the check;
- every object given to ``copy.deepcopy`` (the outermost call: also the copies libraries make, e.g.
  ``AveragedModel``), pickled by ``multiprocessing`` (``ForkingPickler.dumps``), put on a
  ``multiprocessing`` queue, given to a spawned ``Process``, or indexed by ``DataLoader`` workers;
- the recorder of ``explain --run`` (:class:`flake8_graphleaf.runtime.script.Recorder`): module stores
  and, through :class:`~flake8_graphleaf.runtime.trace.StoreTracer`, the user's statements that stored a
  graph tensor on any object, by tensor identity.

A copy or a send that raises is walked at that moment (its state then is what broke it), a send when it
is made; each graph tensor found becomes a :class:`Finding` with the line that stored it.  At the end of
the test every module and every object copied or sent earlier goes through the one deepcopy walk
(:func:`~flake8_graphleaf.runtime.walk.find_graph_tensors`, one ``seen`` set for all of them, so a
tensor is reported once): what it finds no copy or send of the run met, so it is a note
(``TestWatch.notes``), a finding only with ``leftovers`` (``--graphleaf-leftovers``).  Nothing of the
test's objects is changed, detached or copied (the walk only reads them; an object with its own
``__deepcopy__`` is copied once on the side, as ``explain`` does).

Imports torch.
"""

from __future__ import annotations

import copy
import linecache
import multiprocessing.pool
import multiprocessing.process
import os
import re
import shutil
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from multiprocessing.reduction import ForkingPickler
from typing import Any

from torch import nn
from torch._utils import ExceptionWrapper
from torch.utils import data as tud

from .findings import GraphTensor, display_path
from .script import (COWARDLY, HOOK_APPLIED, SEND_FAILURE_LISTENERS, WORKER_GRAD, Recorder, SendFailure,
                     argument_line, describe_failure, locate)
from .static_map import StaticIndex, map_static
from .trace import FORWARD, PASSED, _RETURNED as RETURNED, graph_trained
from .walk import (_graph_leaf_error, _return_line, _user_code, cached_property_line, find_graph_tensors,
                   module_call_lines)

_HERE = os.path.abspath(__file__)
_SKIP_FILES = (_HERE, os.path.abspath(copy.__file__))


AT_THE_END = "at the end of the test"


@dataclass
class Finding:
    """One graph tensor a test left where a copy or a send meets it."""

    test: str  # the test's node id
    path: str  # the storing line's file (relative to the current directory when inside it)
    line: int
    code: str  # GLF001 attribute, GLF002 container, GLF003 hook, GLF004 buffer, GLF201 copied tensor, GLF301 sent
    message: str
    object: str  # what holds it: "model (a Net built in the test)", "trainer (deep-copied at test_x.py:12)"
    attribute: str  # the path from that object to the tensor: "model.encoder.cache['h']"
    grad_fn: str | None
    shape: list[int]
    how: str  # "stored" (a recorded store), "static" (a static finding's line), "sent" / "copied" (the
    # tensor itself was sent or copied: the line that did it), "built" (the line that built the object
    # holding it), "method" (the line of the object's own __deepcopy__ / __getstate__ that copies it),
    # "applied" (the line that applied legacy weight_norm / spectral_norm / pruning, whose hook stores it),
    # "unrecorded" (the test's own line)
    text: str = ""  # the storing line's source
    more: int = 0  # further tensors with the same storing line under the same attribute (model.items[1..])
    when: str = "at the end of the test"  # or "when the copy raised", "when it was sent" (AT_THE_END: a note,
    # unless --graphleaf-leftovers)

    def summary_line(self) -> str:
        return f"{self.path}:{self.line}: {self.code} {self.message} ({self.test})"

    def as_json(self) -> dict:
        return asdict(self)


@dataclass
class _Root:
    obj: Any
    name: str
    what: str  # "built in the test", "deep-copied at x.py:3", ...
    kind: str  # "module", "deepcopy", "pickle", "queue", "process", "worker"
    requiring_grad: bool = False
    findings: list[GraphTensor] | None = None  # walked when it raised / was sent
    site: tuple[str, int] | None = None
    cause: str = ""  # for DataLoader workers: "batched" (collate refused them) or "sent" (an item could not be sent)


@dataclass
class TestWatch:
    """The recording of one test, and its check."""

    __test__ = False  # not a test class, whatever pytest sees it as

    nodeid: str
    test_file: str
    test_line: int
    recorder: Recorder = field(default_factory=Recorder)
    modules: list = field(default_factory=list)
    roots: list[_Root] = field(default_factory=list)
    tracing: bool = False
    _saved_init: Any = None
    _sent_ids: set = field(default_factory=set)
    _quiet: bool = False
    child_findings: list = field(default_factory=list)  # results children could not send (Finding)
    # id(dataset) -> (dataset, where, batched, workers): the DataLoaders with workers the test iterated
    loaders: dict = field(default_factory=dict)
    _evidence: str | None = None  # a folder where forked DataLoader workers leave word of an item they could not send
    # What the end-of-test walk finds (modules alive at the end, objects copied or sent earlier that reach a
    # graph tensor now): no copy or send of this run met those tensors.  False: they are notes (``notes``),
    # not findings; True (``--graphleaf-leftovers``): findings, as a copy the test would make.
    leftovers: bool = False
    notes: list = field(default_factory=list)

    # -- recording ---------------------------------------------------------------------------
    def start(self) -> None:
        rec = self.recorder
        rec.on_put = self._on_put
        rec.on_child_feeder_error = self._child_report
        rec.on_feeder_error = self._feeder_failed
        SEND_FAILURE_LISTENERS.append(self._send_failed)
        modules = self.modules
        original_init = nn.Module.__dict__["__init__"]
        self._saved_init = original_init

        def init_keeping(module, *args, **kwargs):
            original_init(module, *args, **kwargs)
            modules.append(module)

        init_keeping.__wrapped__ = original_init
        nn.Module.__init__ = init_keeping
        tracer = rec.tracer
        tracer.watch(copy.deepcopy, self._on_deepcopy)
        tracer.watch(ForkingPickler.dumps.__func__, self._on_pickle)
        tracer.watch(multiprocessing.process.BaseProcess.start, self._on_start)
        tracer.watch(tud.dataloader._MultiProcessingDataLoaderIter.__init__, self._on_workers)
        tracer.watch(ExceptionWrapper.reraise, self._on_worker_error)
        tracer.watch(multiprocessing.pool.Pool._map_async, self._on_pool_map)  # map, starmap and their _async
        tracer.watch(multiprocessing.pool.Pool.imap, self._on_pool_map)
        tracer.watch(multiprocessing.pool.Pool.imap_unordered, self._on_pool_map)
        tracer.watch(multiprocessing.pool.Pool.apply_async, self._on_pool_apply)  # apply too
        rec.install()
        self.tracing = rec.tracing

    def stop(self) -> None:
        if self._send_failed in SEND_FAILURE_LISTENERS:
            SEND_FAILURE_LISTENERS.remove(self._send_failed)
        self.recorder.uninstall()
        if self._saved_init is not None:
            nn.Module.__init__ = self._saved_init
            self._saved_init = None

    def release(self) -> None:
        self.stop()
        self.modules.clear()
        self.roots.clear()
        self.child_findings.clear()
        self.notes.clear()
        self.loaders.clear()
        if self._evidence is not None:
            shutil.rmtree(self._evidence, ignore_errors=True)
            self._evidence = None
        self.recorder = Recorder()

    def _site(self, frame) -> tuple[str, int] | None:
        f = frame.f_back
        while f is not None:
            name = os.path.abspath(f.f_code.co_filename)
            if self.recorder.tracer._default_user_file(name) and name not in _SKIP_FILES:
                return name, f.f_lineno
            f = f.f_back
        return None

    def _describe_site(self, verb: str, site) -> str:
        return f"{verb} at {display_path(site[0])}:{site[1]}" if site else verb

    def _watch_raise(self, root: _Root, fails):
        """A local trace function for the copy's / the pickle's frame: walk the object if it raises."""
        raised: list = [None]

        def local(frame, event, arg):
            if event == "exception":
                raised[0] = arg[1]
            elif event == "return":
                exc = raised[0]
                if isinstance(arg, nn.Module):
                    self.modules.append(arg)  # a copy is a module of the test too (an EMA teacher)
                if arg is None and exc is not None and fails(exc) and root.findings is None:
                    try:
                        root.findings = find_graph_tensors(root.obj, root.name, requiring_grad=root.requiring_grad)
                    except Exception:
                        root.findings = None
            return local

        return local

    def _on_deepcopy(self, frame):
        names = frame.f_locals
        if self._quiet or names.get("memo") is not None:
            return None  # an inner call of a copy already watched
        obj = names.get("x")
        if type(obj) in (int, float, str, bool, type(None), bytes):
            return None
        site = self._site(frame)
        name = _root_name(site, "deepcopy", obj)
        root = _Root(obj, name, self._describe_site("deep-copied", site), "deepcopy", site=site)
        self.roots.append(root)
        return self._watch_raise(root, _graph_leaf_error)

    def _on_pickle(self, frame):
        obj = frame.f_locals.get("obj")
        site = self._site(frame)
        root = _Root(obj, _root_name(site, "dumps", obj), self._describe_site("pickled for another process", site),
                     "pickle", site=site)
        self.roots.append(root)
        return self._watch_raise(root, lambda e: COWARDLY in str(e))

    def _on_put(self, obj, site) -> None:
        where = (site.file, site.line) if site.line else None
        root = _Root(obj, _root_name(where, "put", obj), self._describe_site("put on a multiprocessing queue", where),
                     "queue", site=where)
        self._quiet = True  # the walk's own trial copies are no copies of the test's
        try:
            root.findings = find_graph_tensors(obj, root.name)  # pickled later, in the queue's feeder thread
        finally:
            self._quiet = False
        self.roots.append(root)

    def _on_pool_map(self, frame):
        """``Pool.map`` / ``starmap`` / ``imap``: every task is pickled for the pool's processes, whatever the
        start method (a forked pool gets its tasks through a pipe), in the pool's task thread, where an
        error reaches the test only through the result.  The tasks are walked now, as a queue's put is."""
        names = frame.f_locals
        if os.getpid() != self.recorder.main_pid:
            return None
        tasks = names.get("iterable")
        if isinstance(tasks, (list, tuple)):
            self._pool_root(tasks, frame)
            return None

        def local(frame_, event, arg):  # a generator: Pool._map_async makes it a list first
            if event == "return":
                made = frame_.f_locals.get("iterable")
                if isinstance(made, (list, tuple)):
                    self._pool_root(made, frame_)
            return local

        return local if frame.f_code.co_name == "_map_async" else None

    def _on_pool_apply(self, frame):
        names = frame.f_locals
        if os.getpid() != self.recorder.main_pid:
            return None
        self._pool_root((names.get("args"), names.get("kwds")), frame)
        return None

    def _pool_root(self, tasks, frame) -> None:
        site = self._site(frame)
        root = _Root(tasks, "tasks", self._describe_site("sent to a multiprocessing Pool", site), "pool", site=site)
        self._quiet = True  # the walk's own trial copies are no copies of the test's
        try:
            root.findings = find_graph_tensors(tasks, "tasks")
        except Exception:
            root.findings = None
        finally:
            self._quiet = False
        if root.findings:
            self.roots.append(root)

    def _on_start(self, frame):
        process = frame.f_locals.get("self")
        method = getattr(type(process), "_start_method", None) or multiprocessing.get_start_method(allow_none=True)
        if (method or "fork") == "fork":
            return None  # a forked child gets its arguments without pickling
        site = self.recorder.sites.get(process)
        where = (site.file, site.line) if site is not None else self._site(frame)
        root = _Root(process, "process", self._describe_site(f"given to a {method} Process", where), "process",
                     site=where)
        root.findings = find_graph_tensors(process, "process")
        self.roots.append(root)
        return None

    def _on_workers(self, frame):
        """DataLoader workers start: nothing is reported yet.  A forked worker gets the dataset without
        pickling it; what it sends back is each batch (or item).  A spawned worker's dataset is pickled
        with its ``Process`` (:meth:`_on_start`).  What a worker could not batch or send is reported when the
        test's process learns of it (:meth:`_on_worker_error`, :meth:`_worker_evidence`)."""
        loader = frame.f_locals.get("loader")
        dataset = getattr(loader, "dataset", None)
        if dataset is None or id(dataset) in self._sent_ids:
            return None
        self._sent_ids.add(id(dataset))
        site = self.recorder.sites.get(loader)
        where = (site.file, site.line) if site is not None else self._site(frame)
        batched = bool(getattr(loader, "_auto_collation", True))
        self.loaders[id(dataset)] = (dataset, where, batched, loader.num_workers)
        if self._evidence is None:
            try:
                self._evidence = tempfile.mkdtemp(prefix="graphleaf-workers-")
            except OSError:
                self._evidence = None
        return None

    def _worker_root(self, dataset, cause: str) -> _Root | None:
        entry = self.loaders.get(id(dataset))
        if entry is None:
            return None
        dataset, where, batched, workers = entry
        what = f"indexed by {workers} DataLoader worker{'s' if workers != 1 else ''}"
        root = _Root(dataset, "dataset", self._describe_site(what, where), "worker", requiring_grad=batched,
                     site=where)
        root.cause = cause
        self._quiet = True
        try:
            found = find_graph_tensors(dataset, "dataset", requiring_grad=batched)
        finally:
            self._quiet = False
        # a module's parameters inside the dataset are no items: pickled or forked, they reach the workers fine
        root.findings = [g for g in found if not isinstance(g.tensor, nn.Parameter)]
        return root

    def _on_worker_error(self, frame):
        """``ExceptionWrapper.reraise`` in the test's process: a worker's error reaches the DataLoader's user.
        When it is the batching error of tensors that require grad, the loader's dataset is a root."""
        wrapper = frame.f_locals.get("self")
        message = getattr(wrapper, "exc_msg", "") or ""
        if os.getpid() != self.recorder.main_pid or not any(w in message for w in WORKER_GRAD):
            return None
        caller = frame.f_back
        it = caller.f_locals.get("self") if caller is not None else None
        dataset = getattr(it, "_dataset", None)
        if dataset is None or any(r.kind == "worker" and r.obj is dataset for r in self.roots):
            return None
        root = self._worker_root(dataset, "batched")
        if root is not None:
            self.roots.append(root)
        return None

    def _worker_evidence(self) -> None:
        """The datasets whose forked workers left word that they could not send an item (batch_size=None)."""
        if self._evidence is None:
            return
        try:
            names = os.listdir(self._evidence)
        except OSError:
            return
        for name in names:
            try:
                ident = int(name.split("-")[0])
            except ValueError:
                continue
            entry = self.loaders.get(ident)
            if entry is None or any(r.kind == "worker" and r.obj is entry[0] for r in self.roots):
                continue
            root = self._worker_root(entry[0], "sent")
            if root is not None:
                self.roots.append(root)

    def _feeder_failed(self, e, obj) -> None:
        """A ``Queue.put`` of the test could not be pickled (in the queue's feeder thread): whoever reads
        that queue waits forever.  The object was walked when it was put (a finding); end the test's child
        processes, so that a test joining its consumer process ends instead of hanging."""
        print(f"graphleaf: a Queue.put of this test failed in the queue's feeder thread ({e}); its reader would "
              "wait forever: graphleaf terminates the test's child processes", file=sys.stderr)
        for child in multiprocessing.active_children():
            try:
                child.terminate()
            except Exception:
                pass

    def _child_report(self, e, obj):
        """In a forked child that cannot send its result (it is on the autograd graph), instead of leaving
        the test waiting forever: a DataLoader worker ends (the loader notices, and raises in the test);
        another child sends a :class:`SendFailure`, so the test's ``queue.get()`` raises the child's
        RuntimeError."""
        info = tud.get_worker_info()
        if info is not None:
            if self._evidence is not None:  # word for the test's process: this dataset's item could not be sent
                try:
                    with open(os.path.join(self._evidence, f"{id(info.dataset)}-{os.getpid()}"), "w") as fh:
                        fh.write(str(e))
                except OSError:
                    pass
            print("graphleaf: this DataLoader worker's item is on the autograd graph and cannot reach the test's "
                  "process; the worker ends here so that the DataLoader raises instead of waiting forever",
                  file=sys.stderr)
            return None
        print("graphleaf: the test's queue.get() gets this error instead of waiting forever", file=sys.stderr)
        site = self.recorder.put_sites.get(obj)
        info: dict = {}
        try:
            found = find_graph_tensors(obj, _root_name((site.file, site.line) if site else None, "put", obj))
            if found and site is not None:
                g = found[0]
                info = {"file": site.file, "line": site.line, "attribute": g.path, "grad_fn": g.grad_fn,
                        "shape": list(g.shape)}
        except Exception:
            pass
        return SendFailure(f"graphleaf: a child process could not send its result: {e}", info)

    def _send_failed(self, info: dict) -> None:
        """In the test's process: a child's result could not be sent (its SendFailure arrived)."""
        if not info.get("file"):
            return
        shape = "(" + ", ".join(str(s) for s in info["shape"]) + ("," if len(info["shape"]) == 1 else "") + ")"
        self.child_findings.append(Finding(
            test=self.nodeid, path=display_path(info["file"]), line=info["line"], code="GLF301",
            message=f"{info['attribute']} {shape} grad_fn={info['grad_fn']}: a child process "
                    "could not send it to the test's process ('Cowardly refusing to serialize non-leaf tensor'); "
                    "sent here",
            object=f"{info['attribute']} (put on a multiprocessing queue by a child process)",
            attribute=info["attribute"], grad_fn=info["grad_fn"], shape=info["shape"], how="sent",
            text=linecache.getline(info["file"], info["line"]).strip(), when="when it was sent"))

    # -- the check -----------------------------------------------------------------------------
    def check(self) -> list[Finding]:
        self.stop()
        self._worker_evidence()
        seen: set[int] = set()
        reported: set[int] = set()
        log = self.recorder.store_log()
        index = StaticIndex()
        out: list[Finding] = []
        groups: dict[tuple, Finding] = {}
        roots = [r for r in self.roots if r.findings is not None]  # what raised or was sent, as it was then
        walked = [r for r in self.roots if r.findings is None]
        module_ids: set[int] = set()
        for m in self.modules:
            if id(m) in module_ids:
                continue
            module_ids.add(id(m))
            walked.append(_Root(m, "model", f"a {type(m).__name__} built in the test", "module"))
        out += self.child_findings
        for root in roots:
            self._report(root, root.findings, log, index, reported, groups, out)
        for root in walked:
            try:
                items = find_graph_tensors(root.obj, _module_name(root), requiring_grad=root.requiring_grad,
                                           seen=seen)
            except Exception:
                continue
            self._report(root, items, log, index, reported, groups, out)
        if not self.leftovers:  # evidence of this run only: a copy or send that met the tensor
            self.notes = [f for f in out if f.when == AT_THE_END]
            out = [f for f in out if f.when != AT_THE_END]
        return out

    def _report(self, root, items, log, index, reported, groups, out) -> None:
        if root.kind == "worker" and not items:
            self._report_getitem(root, groups, out)
            return
        for g in items:
            if g.tensor is not None:
                if id(g.tensor) in reported:
                    continue
                reported.add(id(g.tensor))
            records = [r for r in log.records_for(g) if r.how != FORWARD or not graph_trained(g.tensor)]
            if records:
                how = "stored"
                places = [(r.file, r.line, r.text) for r in records]
            elif g.owners and g.owners[0][1] and cached_property_line(g.owners[0][0], g.owners[0][1][0]):
                file, line = cached_property_line(g.owners[0][0], g.owners[0][1][0])
                how = "made"
                places = [(file, line, "")]
            else:
                sources = map_static(g, index, [self.test_file])
                if sources:
                    how = "static"
                    places = [(s.file, s.line, s.text) for s in sources[:1]]
                elif g.owners and self.recorder.sites.get(g.owners[0][0]) is not None:
                    site = self.recorder.sites.get(g.owners[0][0])  # TensorDataset(features, labels)
                    how = "built"
                    places = [(site.file, site.line, "")]
                    made = argument_line(site, g.path)  # soft = teacher(x); TensorDataset(x, soft)
                    if made is not None:
                        places.insert(0, (made[0], made[1], ""))
                elif root.site is not None and root.kind != "module":
                    # no store of it was seen (the tensor itself was sent or copied, or it was made where
                    # nothing records): the line that sent or copied it
                    how = "sent" if root.kind != "deepcopy" else "copied"
                    places = [(root.site[0], root.site[1], "")]
                else:
                    how = "unrecorded"
                    places = [(self.test_file, self.test_line, "")]
            code = _code_for(g, root, index, places)
            hows = [how] * len(places)
            if how == "built" and len(places) == 2:
                hows[0] = "argument"  # the line that made the constructor's argument, then the constructor's
            if records:
                hows = [_RECORD_HOW.get(r.how, "stored") + (f" {r.note}" if r.note else "") for r in records]
            # the send of a queue's put or a spawned Process (its arguments), or the copy or send of the tensor
            # itself: that line decided what crossed, beside the store that made it
            if root.site is not None and how not in ("sent", "copied") and (
                    root.kind in ("queue", "process") or (g.tensor is not None and g.tensor is root.obj)) and \
                    (root.site[0], root.site[1]) not in {(f, l) for f, l, _t in places}:
                places.append((root.site[0], root.site[1], ""))
                hows.append("sent also" if root.kind != "deepcopy" else "copied also")
            if g.copy_method is not None:  # its own __deepcopy__ / __getstate__ copies it: that line too
                method_file, method_line, method = g.copy_method
                if how in ("sent", "copied", "unrecorded"):  # made by the method itself: no store to name
                    places, hows = [], []
                if (method_file, method_line) not in {(f, l) for f, l, _t in places}:
                    places.append((method_file, method_line, ""))
                    hows.append(f"method {method}")
            for (file, line, text), place_how in zip(places, hows):
                key = (root.name, file, line, re.sub(r"\[[^\]]*\]", "[]", g.path)
                       if not place_how.endswith(" also") else place_how)  # one send line for all it sent
                same = groups.get(key)
                if same is not None:
                    same.more += 1
                    continue
                finding = Finding(
                    test=self.nodeid, path=display_path(file), line=line, code=code,
                    message=_message(g, root, place_how), how=place_how.split(" ")[0],
                    object=f"{_module_name(root)} ({root.what})", attribute=g.path, grad_fn=g.grad_fn,
                    shape=list(g.shape), text=text or linecache.getline(file, line).strip(),
                    when=AT_THE_END if root.findings is None else
                    ("when the copy raised" if root.kind in ("deepcopy", "pickle") else "when it was sent"),
                )
                groups[key] = finding
                out.append(finding)

    def _report_getitem(self, root, groups, out) -> None:
        """The workers could not batch or send what the dataset's ``__getitem__`` returned, and the dataset
        itself holds no such tensor: the items are made with grad on, by ``__getitem__``."""
        code = getattr(getattr(type(root.obj), "__getitem__", None), "__code__", None)
        if code is None or not _user_code(code):
            return
        file = os.path.abspath(code.co_filename)
        what = ("cannot be batched by the workers (they require grad)" if root.cause == "batched" else
                "cannot be sent from the workers (on the autograd graph)")
        head = f"the items {type(root.obj).__name__}.__getitem__ returns {what}: the dataset {root.what}; "
        # the calls of a module the dataset holds whose parameters require grad (self.embedding(idx)): where the
        # items get their grad; then the return line
        places = [(n, f"made here by the dataset's module {attr!r} (its parameters require grad): call it under "
                      "torch.no_grad(), or move it into the model") for n, attr in module_call_lines(code, root.obj)]
        line = _return_line(code)
        if line not in {n for n, _m in places}:
            places.append((line, "made here (compute them under torch.no_grad() or detach them)"))
        for line, tail in places:
            key = (root.name, file, line, "__getitem__")
            if key in groups:
                continue
            finding = Finding(
                test=self.nodeid, path=display_path(file), line=line, code="GLF301", message=head + tail,
                object=f"dataset ({root.what})", attribute=f"{type(root.obj).__name__}.__getitem__", grad_fn=None,
                shape=[], how="made", text=linecache.getline(file, line).strip(), when="when the workers failed")
            groups[key] = finding
            out.append(finding)

    # -- a failure raised by the test ---------------------------------------------------------------
    def explain_exception(self, exc: BaseException) -> str | None:
        """The ``explain --run`` report of a deepcopy / pickling / DataLoader-worker / multiprocessing
        failure that the test raised, or None for any other exception."""
        try:
            failure = locate(exc)
        except Exception:
            return None
        if failure is None:
            return None
        try:
            text, _items = describe_failure(failure, self.recorder, self.test_file)
        except Exception:
            return None
        return text.replace("graphleaf explain: ", "", 1)


# StoreRecord.how -> Finding.how of the line it names
_RECORD_HOW = {HOOK_APPLIED: "applied", RETURNED: "made", PASSED: "passed", FORWARD: "forward"}


def _module_name(root: _Root) -> str:
    return root.name


_CALL_NAME = {
    "deepcopy": re.compile(r"\b(?:deepcopy|AveragedModel|ModelEma\w*)\s*\(\s*([A-Za-z_][\w.]*)(?![\w.]|\s*\()"),
    "dumps": re.compile(r"\b(?:dumps?|put|send)\s*\(\s*([A-Za-z_][\w.]*)(?![\w.]|\s*\()"),
    "put": re.compile(r"\bput(?:_nowait)?\s*\(\s*([A-Za-z_][\w.]*)(?![\w.]|\s*\()"),
}


def _root_name(site, kind: str, obj) -> str:
    if site is not None:
        m = _CALL_NAME[kind].search(linecache.getline(site[0], site[1]))
        if m:
            return m.group(1)
    return "model" if isinstance(obj, nn.Module) else "obj"


def _code_for(g: GraphTensor, root: _Root, index: StaticIndex, places) -> str:
    for file, line, _text in places:
        for f in index.findings(file):
            if f.line == line and f.code.startswith("GLF"):
                return f.code
    if root.kind in ("pickle", "queue", "process", "worker", "pool"):
        return "GLF301"
    if g.owners:
        owner, chain = g.owners[0]
        if "_forward_hooks" in g.path or "_forward_pre_hooks" in g.path or "_backward_hooks" in g.path:
            return "GLF003"
        if isinstance(owner, nn.Module) and chain and chain[0] in owner._buffers:
            return "GLF004"
        return "GLF002" if g.path.endswith("]") else "GLF001"
    return "GLF201"


def _message(g: GraphTensor, root: _Root, how: str) -> str:
    shape = "(" + ", ".join(str(s) for s in g.shape) + ("," if len(g.shape) == 1 else "") + ")"
    what = f"grad_fn={g.grad_fn}" if g.grad_fn else "a leaf that requires grad"
    if root.kind == "module":
        where = f"{g.path} holds a tensor on the autograd graph {shape} {what} at the end of the test: " \
                f"copy.deepcopy of this {type(root.obj).__name__} raises"
    elif root.kind == "deepcopy":
        verb = "raised the graph-leaf error" if root.findings is not None else \
            "would raise the graph-leaf error now (at the end of the test)"
        where = f"{g.path} holds a tensor on the autograd graph {shape} {what}: copy.deepcopy({root.name}) " \
                f"({root.what}) {verb}"
    elif root.kind == "worker":
        where = f"{g.path} {shape} {what}: the dataset {root.what} cannot be " + (
            "batched by the workers (tensors that require grad)" if root.requiring_grad else
            "sent from the workers (a tensor on the autograd graph)")
    else:
        where = f"{g.path} {shape} {what}: {root.name} ({root.what}) cannot cross the process boundary " \
                f"('Cowardly refusing to serialize non-leaf tensor')"
    if how == "stored":
        return f"{where}; stored here"
    if how == "applied":
        return f"{where}; applied here (the hook torch registered for it stores the tensor at every forward)"
    if how in ("sent also", "copied also"):
        return f"{where}; {how.split(' ')[0]} here"
    if how == "passed":
        return f"{where}; given here to the constructor that stores it"
    if how.startswith("forward "):
        return f"{where}; the forward that stored it ran here with grad on ({how.split(' ', 1)[1]}), and no " \
               "backward went through what it stored (run it under torch.no_grad() unless its gradient is wanted)"
    if how.startswith("method "):
        return f"{where}; {how.split(' ', 1)[1]}() copies it here"
    if how == "made":
        return f"{where}; made here (returned by this line, and kept)"
    if how == "argument":
        return f"{where}; made here, then given to the object holding it (no store of it was recorded)"
    if how == "built":
        return f"{where}; the object holding it was built here (no store of it was recorded)"
    if how in ("sent", "copied"):
        return f"{where}; {how} here (no store of it was recorded)"
    if how == "static":
        return f"{where}; stored here (static finding, the store was not recorded)"
    return f"{where}; no store of it was recorded (made by code outside the test's files?)"
