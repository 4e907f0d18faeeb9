"""The copy graph: every copy site and process boundary of the program, judged on the objects
it reaches (see :mod:`..heap`: the file's code run in order from its roots, calls followed).

* GLF202 at ``copy.deepcopy(x)`` (or a copying wrapper) when an object ``x`` reaches keeps a
  graph tensor at that point of the program: a plain training wrapper's last loss, an EMA
  helper's shadows updated with grad on, a dict a hook closure fills and the model holds, a
  hypothesis keeping a decoder state;
* GLF001 / GLF002 / GLF003 at the store of this file that put it there, naming the copy site;
* GLF301 at ``DataLoader(ds, num_workers=...)`` whose dataset object keeps graph tensors, and at
  ``queue.put(t)`` of a graph tensor on a multiprocessing queue the run saw being made (also one
  handed to a ``Process`` target through its ``args``).

Only what the run shows is reported: the objects are those the code makes (``Trainer(model)``,
``outputs = {}``), the values those the calls really pass (``train(model, ema)`` with
``model = nn.Linear(...)``), in grad mode; a copy made before the storing code runs, or after the
tensor is cleared, reports nothing.  Classes with their own ``__getstate__`` / ``__deepcopy__``
decide what their copies hold and are not looked into.
"""

from __future__ import annotations

import ast
import re

from .. import messages, witness
from ..findings import Finding
from ..evaluator.heap import Kept, Sink, may_reach_sink, run_file, runs_for
from ..program.textscan import has_any
from ..values import GRAPH, short
from . import cleared_by_program, finding, origin_text

RULES: dict[str, str] = {}  # it reports GLF001 / GLF002 / GLF003 / GLF202 / GLF301 (their rules' RULES)

CLEARABLE = ("GLF001", "GLF002", "GLF003")
STORES = ("GLF001", "GLF002", "GLF003", "GLF004", "GLF005")
LEGACY_CODES = ("GLF101", "GLF102", "GLF103")  # reported by their own rules at every call
SENDS = ("queue", "pool", "process")
WORDS = ("deepcopy", "AveragedModel", "ModelEma", "DataLoader", "multiprocessing", ".put(", "Pool(", "ProcessPoolExecutor(")

EXAMPLES = [
    (
        """
from copy import deepcopy as dc
import torch, torch.nn as nn
class Trainer:
    def __init__(self):
        self.net = nn.Linear(2, 2)
    def step(self, x):
        self.last = self.net(x).sum()  # kept on the trainer, on the graph
        self.last.backward()
def main():
    t = Trainer()
    t.step(torch.randn(3, 2))
    return dc(t)  # deepcopy under another name
main()
""",
        ["GLF001", "GLF202"],
    ),
    (
        """
import copy, torch
def run_test(model, inputs):
    return model(copy.deepcopy(inputs))
def test_rsqrt():
    x = torch.rand(4, requires_grad=True).to(dtype=torch.float64)
    run_test(torch.nn.Identity(), x)
""",
        ["GLF201", "GLF201"],
    ),
    (
        """
import copy, torch
def run_test(model, inputs):
    return model(copy.deepcopy(inputs))
def test_rsqrt():
    x = torch.rand(4, dtype=torch.float64, requires_grad=True)
    run_test(torch.nn.Identity(), x)
""",
        [],
    ),
    (
        """
import torch
from torch.utils.data import DataLoader, TensorDataset
def make_dataset(grad):
    return TensorDataset(torch.randn(8, 3, requires_grad=True), torch.randn(8, 1))
def main():
    for batch in DataLoader(make_dataset(True), batch_size=4, num_workers=2):
        pass
""",
        ["GLF301", "GLF301"],
    ),
    (
        """
import torch
from torch.utils.data import DataLoader, TensorDataset
def make_dataset():
    return TensorDataset(torch.randn(8, 3), torch.randn(8, 1))
def main():
    for batch in DataLoader(make_dataset(), batch_size=4, num_workers=2):
        pass
""",
        [],
    ),
    (
        """
import copy
import torch.nn as nn
import torch.nn.functional as F
class Trainer:
    def __init__(self, model):
        self.model = model
    def step(self, x, y):
        loss = F.mse_loss(self.model(x), y)
        loss.backward()
        self.last_loss = loss
trainer = Trainer(nn.Linear(4, 1))
trainer.step(x, y)
snapshot = copy.deepcopy(trainer)
""",
        ["GLF001", "GLF202"],
    ),
    (
        # the copy is made before the step runs, and a later copy after the loss is cleared
        """
import copy
import torch.nn as nn
import torch.nn.functional as F
class Trainer:
    def __init__(self, model):
        self.model = model
    def step(self, x, y):
        loss = F.mse_loss(self.model(x), y)
        self.last_loss = loss
trainer = Trainer(nn.Linear(4, 1))
before = copy.deepcopy(trainer)
trainer.step(x, y)
trainer.last_loss = None
after = copy.deepcopy(trainer)
""",
        [],
    ),
    (
        """
import torch.multiprocessing as mp
import torch.nn as nn
def work(queue):
    model = nn.Linear(3, 2)
    queue.put(model(x))
queue = mp.Queue()
mp.Process(target=work, args=(queue,)).start()
""",
        ["GLF301"],
    ),
    (
        # an eval pass under no_grad after training runs the same store again (the run does not
        # decide `if self.training:`): that is no reset, the training step's tensor is still there
        """
import copy
import torch
import torch.nn as nn
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 2)
        self.att = None
    def forward(self, x):
        h = self.lin(x)
        if self.training:
            self.att = h.sum(-1)
        return h
model = Net()
model(torch.randn(3, 2)).sum().backward()
model.eval()
with torch.no_grad():
    model(torch.randn(3, 2))
best = copy.deepcopy(model)
""",
        ["GLF001", "GLF202"],
    ),
    (
        # a __getstate__ that drops one attribute: the copy still takes the others, with the nested
        # module's cache (the class's own copy protocol is evaluated, not taken as covering all)
        """
import copy
import torch
import torch.nn as nn
class Inner(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 2)
    def forward(self, x):
        self.cache = self.lin(x)
        return self.cache
class Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Inner()
        self.note = None
    def __getstate__(self):
        state = self.__dict__.copy()
        state["note"] = None
        return state
    def forward(self, x):
        self.note = self.inner(x)
        return self.note
model = Outer()
model(torch.randn(3, 2)).sum().backward()
best = copy.deepcopy(model)
""",
        ["GLF001", "GLF202"],
    ),
    (
        # a training step's store on the model it is given, whose class's __getstate__ detaches it
        """
import copy
import torch
import torch.nn as nn
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)
    def forward(self, x):
        return self.fc(x)
    def __getstate__(self):
        state = dict(super().__getstate__())
        if state.get("last_out") is not None:
            state["last_out"] = state["last_out"].detach()
        return state
def train_step(model, x):
    model.last_out = model(x)
    return model.last_out.sum()
model = Net()
train_step(model, torch.randn(3, 4)).backward()
best = copy.deepcopy(model)
""",
        [],
    ),
]


def settle(tree: ast.Module, imports, classes: dict, module_classes: set[str], findings: list[Finding],
           source: str | None = None, reuse: bool = True) -> list[Finding]:
    """``findings`` with the copy graph's: its own, and without the GLF202 of a copy of a plain
    object that the run judged in program order and found nothing on the graph at (the copy
    of a session after its ``reset()``: the class keeps a tensor at times, not at that copy).
    A class-level store that every run of the program clears again before it ends or copies
    (``self.defunc.dxds = None`` after the solver's calls) takes a step on trust (that a user
    skips the reset): a lower level."""
    new, judged, cleared, covered, copies = _check(tree, imports, classes, module_classes, findings, source, reuse)
    # a public method's store that a copy of the program reaches: the copy graph's finding names the copy
    named = {(f.line, f.col, f.code) for f in new if f.data.get("kind") == "copy-graph"}
    kept = []
    clean_lines = {f.line for f in findings if f.code in ("GLF202", "GLF201") and judged.get((f.line, f.col)) is False}
    for f in findings:
        if f.data.get("public_root") and (f.line, f.col, f.code) in named:
            continue
        if f.code in ("GLF202", "GLF201") and judged.get((f.line, f.col)) is False:
            continue  # a copy of the program's objects that the run judged: nothing on the graph there
        if f.data.get("copy_named") in clean_lines and f.data.get("unnamed_message"):
            # the store's message named that copy, which the run found clean: it says "after forward" again
            f.message = f.data.pop("unnamed_message")
            f.data.pop("copy_named")
        if f.code in STORES and f.line in covered and f.data.get("kind") != "copy-graph":
            continue  # every copy that met it found its object's __getstate__ detaching or dropping it
        line = f.line if f.code in CLEARABLE else f.data.get("cause_line") if (
            f.code == "GLF202" and not f.data.get("cause_path")) else None
        if line in cleared and f.data.get("kind") != "copy-graph":
            f = cleared_by_program(f, cleared[line])
        if f.code in STORES and (f.line, f.col) in copies:  # the program's copy that meets the store
            sink, store = copies[(f.line, f.col)]
            messages.name_copy(f, sink.what, sink.node.lineno, reach=_reach(sink, store))
        kept.append(f)
    out = kept + new
    # one finding at a copy: where it is known what the copied object keeps (GLF202, naming the
    # store), not also that it copies "a tensor on the graph" (GLF201)
    objects = {(f.line, f.col) for f in out if f.code == "GLF202" and not f.trust}
    return [f for f in out if not (f.code == "GLF201" and (f.line, f.col) in objects and not f.data.get("kind"))]


def _check(tree: ast.Module, imports, classes: dict, module_classes: set[str], findings: list[Finding],
           source: str | None = None, reuse: bool = True) -> tuple[list[Finding], dict, dict, set, dict]:
    here = getattr(imports.current, "path", "<current>")
    # its own run when its text copies or sends, or it calls a function of the program that may
    # (a test handing its inputs to a harness that deep-copies them)
    programs = [run_file(tree, imports, classes, module_classes, here, source, reuse)] if source is None or has_any(
        source, WORDS) or may_reach_sink(imports.current, source) else []
    project = getattr(imports, "project", None)
    on_disk = project.text_of(here) if project is not None else None
    if source is None or on_disk is None or on_disk == source:
        # other files' runs saw this file as it is on disk: not for an edited text (a fix checking
        # its own edits), whose positions and classes they do not know
        programs += runs_for(imports, WORDS)
    sinks = [s for p in programs for s in p.sinks
             if s.path == here or any(k.path == here for k in s.kept) or s.origin is not None and s.origin[0] == here
             or _made_here(s, here)]
    # a legacy weight_norm of this file whose module is sent to another process: its own fix (the
    # parametrizations' weight_norm) would not make the send work (such a module cannot be pickled)
    for f in findings:
        if f.code in LEGACY_CODES:
            sent = next((_at(s, here) for s in sinks if s.kind in SENDS for k in s.kept
                         if k.path == here and k.code == f.code and (k.node.lineno, k.node.col_offset) == (f.line, f.col)),
                        None)
            if sent:
                f.data["sent_at"] = sent
    judged: dict[tuple, bool] = {}
    for p in programs:
        for (path, line, col), bad in p.judged.items():
            if path == here:
                judged[(line, col)] = judged.get((line, col), False) or bad
    cleared = _cleared(programs, here)
    covered = _covered(programs, here)
    # the first copy of this file that meets each store of this file: (the sink, its Kept). Not a
    # copy of another file: whether its run is looked at depends on the files checked with this one
    # and on the module name the front end gives this file, and flake8 and the CLI say the same.
    copies: dict[tuple, tuple] = {}
    for sink in sinks:
        if sink.kind == "copy" and sink.path == here:
            for kept in sink.kept:
                if kept.path == here:
                    copies.setdefault((kept.node.lineno, kept.node.col_offset), (sink, kept))
    if not sinks:
        return [], judged, cleared, covered, copies
    module = getattr(imports.current, "name", "")
    # a store another rule reports already (GLF005 at construction, GLF002 of a helper) is not reported twice
    # (one that took a step on trust is not: the run may prove it)
    taken = {(f.line, f.col): f for f in findings if f.code in STORES and not f.data.get("public_root")
             and not f.trust}
    copied_sites = {(f.line, f.col) for f in findings if f.code in ("GLF202", "GLF301", "GLF201") and not f.trust}
    # a helper object's store that the module's finding names already ("by LastK.push() line 15")
    for f in findings:
        if f.data.get("kind") == "helper" and not f.trust and f.data.get("helper_line"):
            taken.setdefault((f.data["helper_line"], None), f)
    out: list[Finding] = []
    stores: dict[tuple, Finding] = {}
    own_sites: set[tuple] = set()  # the copy sites reported here
    made_sites: set[tuple] = set()  # where kept or sent tensors were made (_made)
    for sink in sinks:
        node = sink.node
        out += _made(sink, here, made_sites)
        out += _entries(sink, here, made_sites)
        if sink.kind == "copy-arg":
            out += _copied_argument(sink, here, copied_sites)
            continue
        if sink.path == here:
            if (node.lineno, node.col_offset) in copied_sites:
                # the site is reported once (a copy helper called with several objects, or another
                # rule's GLF201 / GLF202 at it); the stores each of its calls meets are reported each
                _stores(sink, here, taken, stores, module, classes)
                continue
            copied_sites.add((node.lineno, node.col_offset))
            own_sites.add((node.lineno, node.col_offset))
        else:
            _stores(sink, here, taken, stores, module, classes)
            continue
        if sink.kind in ("queue", "pool", "process") and not sink.kept:
            out.append(_sent(sink))
            continue
        if sink.kind == "loader" and not sink.kept:
            out.append(_worker_item(sink, here))
            continue
        first = sink.kept[0]
        code = "GLF202" if sink.kind == "copy" else "GLF301"
        if sink.kind in ("queue", "pool", "process"):
            several = 'those lines' if len(_listed(sink, here)) > 1 else 'that line'
            # a module with torch.nn.utils.parametrizations.weight_norm cannot be pickled either
            advice = ("send its state_dict() and rebuild the module in the new process (a module with the "
                      "parametrizations' weight_norm cannot be pickled either)"
                      if any(k.code in LEGACY_CODES for k in sink.kept) else f"fix {several}, or send .detach()ed "
                      "copies of what it keeps (a module: its state_dict(), rebuilt there)")
            message = messages.copy_site(
                sink.what, sink.copied or "what it sends", _copied_class(sink), _listed(sink, here),
                "pickling it for the other process fails like a deep copy (the graph-leaf error, or 'Cowardly "
                f"refusing to serialize non-leaf tensor which requires_grad'): {advice}", verb="will fail")
        elif code == "GLF202":
            listed = _listed(sink, here)
            advice = None
            if sink.copied.endswith(".state_dict()"):  # a copy of what an optimizer's state_dict() hands on
                advice = (f"fix {'those lines' if len(listed) > 1 else 'that line'} (the state_dict holds the "
                          "values as they are: keep numbers or leaf tensors there)")
            message = messages.copy_site(sink.what, sink.copied or short(node.args[0]), _copied_class(sink), listed,
                                         advice)
        else:
            message = messages.copy_site(
                sink.what, sink.copied or "the dataset", _copied_class(sink), _listed(sink, here),
                "the worker processes cannot send it back ('Cowardly refusing to serialize non-leaf tensor which "
                "requires_grad', or the collate's 'stack(): functions with out=... arguments don't support automatic "
                "differentiation'); build the dataset from .detach()ed tensors", verb="will fail")
        site = finding(code, node, message, data={"kind": "copy-graph", "cause_line": first.node.lineno,
                                                  "cause_code": first.code,
                                                  "cause_path": None if first.path == here else witness.display_path(first.path, here)})
        site.witness = _witness(first, sink, here)
        out.append(site)
        _stores(sink, here, taken, stores, module, classes)
    # a dataset of tensors made just before it: one finding, where they were made (the loader's
    # finding carries the fix)
    made_datasets = {(path, line) for s in sinks for path, node, _h, (path2, line) in _made_at(s)
                     if path == here and s.kind == "loader"}
    kept_stores = [f for key, f in stores.items() if not (f.code == "GLF301" and (here, key[0]) in made_datasets)]
    _owners(programs, here, classes, kept_stores + list(taken.values()))
    return out + kept_stores, judged, cleared, covered, copies


def _owners(programs: list, here: str, classes: dict, findings: list[Finding]) -> None:
    """A store into something a copy reaches through an object of a class of this file (a hook's
    closure dict that the model holds as ``model.activations``) names that class and attribute:
    the copy-safe fix gives the class a ``__getstate__`` for it (``holder_class``, ``holder_attr``)."""
    owners: dict[tuple, tuple] = {}
    for p in programs:
        for (path, line, col), by in getattr(p, "owners", {}).items():
            if path == here:
                owners.setdefault((line, col), by)
    for f in findings:
        by = owners.get((f.line, f.col))
        if by is None or f.data.get("holder_class"):
            continue
        where, _, name = by[0].rpartition("::")
        if where == here and name in classes:
            f.data["holder_class"], f.data["holder_attr"] = name, by[1]


def _covered(programs: list, here: str) -> set[int]:
    """Lines of this file's stores that a copy met and did not take (the holder's ``__getstate__``
    covers them), and that no copy took anywhere."""
    reached = {(k.path, k.node.lineno) for p in programs for s in p.sinks for k in s.kept}
    return {line for p in programs for (path, line) in p.covered if path == here and (path, line) not in reached}


def _cleared(programs: list, here: str) -> dict[int, str]:
    """Lines of this file's stores that some run made and took away again, and that no run
    kept to its end or to a copy: line -> where it was cleared."""
    survived = set().union(*(p.survived for p in programs)) if programs else set()
    out: dict[int, str] = {}
    for p in programs:
        for (path, line), (at_path, at_line) in p.cleared.items():
            if path == here and (path, line) not in survived:
                out.setdefault(line, f"line {at_line}" if at_path == here else f"{witness.display_path(at_path, here)}:{at_line}")
    return out


def _stores(sink: Sink, here: str, taken: dict, stores: dict, module: str, classes: dict) -> None:
    """Put the stores of this file that ``sink`` copies into ``stores`` (once each)."""
    for kept in sink.kept:
        if kept.path != here or kept.code in LEGACY_CODES:
            continue  # a legacy norm's weight: its own rule reports every call of it
        key = (kept.node.lineno, kept.node.col_offset)
        helper = taken.get((kept.node.lineno, None))
        if helper is not None and helper.class_name in sink.classes:
            continue  # a copy of the module whose helper finding names this store of its helper object
        if key in taken:
            # reported by its own rule (a training step's store on the model it is given): the run
            # knows the object's class, which the copy-safe fix needs
            holder = _local_class(kept.holder, here, classes)
            if holder is not None:
                taken[key].data.setdefault("holder_class", holder)
            continue
        if key in stores:
            continue
        stores[key] = _dataset(kept, sink, here) if kept.code == "GLF301" else _store(kept, sink, here, module, classes)


def _dataset(kept: Kept, sink: Sink, here: str) -> Finding:
    """A TensorDataset of tensors that require grad, which a DataLoader's workers index: each
    item is a view with a grad_fn, which the worker cannot send back."""
    f = finding("GLF301", kept.node,
                messages.store(short(kept.node), "holds", kept.value.origin,
                               f"{sink.what} at {_at(sink, here)} will fail: its worker processes index it, and its "
                               "items (views with a grad_fn) cannot be sent back ('Cowardly refusing to serialize "
                               "non-leaf tensor which requires_grad')", "build the dataset from .detach()ed tensors",
                               tensor="a tensor that requires grad"),
                data={"kind": "copy-graph", "copied_at": sink.node.lineno})
    f.witness = _witness(kept, sink, here, at_copy=False)
    return f


def _local_class(atom: tuple, here: str, classes: dict) -> str | None:
    """The name of the holder's class when it is a class of this file."""
    if atom[0] != "obj":
        return None
    where, _, name = atom[1].rpartition("::")
    return name if where == here and name in classes else None


def _at(sink: Sink, here: str) -> str:
    return f"line {sink.node.lineno}" if sink.path == here else f"{witness.display_path(sink.path, here)}:{sink.node.lineno}"


def _copied(sink: Sink, kept: Kept) -> str:
    """What the copy copies to reach ``kept``: ``model (TinyClassifier) and with it model.block.attn.last_attn``."""
    reach = _reach(sink, kept)
    if reach and sink.copied:
        return f"{messages.copied_object(sink.copied, _copied_class(sink))} and with it {reach}"
    return f"{_holder(kept)} and with it '{kept.target}'"


def _holder(kept: Kept) -> str:
    atom = kept.holder
    if atom[0] == "obj":
        return f"the {atom[1].rpartition('::')[2]} object"
    return f"the container made at line {atom[2]}"


def _copied_class(sink: Sink) -> str | None:
    """The class of the copied object, where the run knows it (``A or B``: the object is one of them)."""
    if not sink.classes or len(sink.classes) > 3:
        return None
    return " or ".join(sink.classes)


def _reach(sink: Sink, kept: Kept, written: str | None = None) -> str | None:
    """The attribute path from the copied object to ``kept`` (``model.block.attn.last_attn``), the
    most specific where the copy reaches it two ways; None where it is ``written`` already."""
    if not sink.copied or not re.fullmatch(r"[\w.]+", sink.copied):
        return None  # the copy of an expression ({k: v for ...}): no path to name from it
    found = [messages.attribute_path(sink.copied, steps) for other, steps in zip(sink.kept, sink.paths)
             if _same_store(other, kept)]
    best = max(found, key=len, default=None)
    return None if best is None or best == written else best


def _same_store(a: Kept, b: Kept) -> bool:
    return a.path == b.path and (a.node.lineno, a.node.col_offset) == (b.node.lineno, b.node.col_offset)


def _listed(sink: Sink, here: str) -> list[messages.Store]:
    """The stores a copy meets, once each, as its message lists them."""
    out, seen = [], set()
    for kept in sink.kept:
        key = (kept.path, kept.node.lineno, kept.node.col_offset)
        if key in seen:
            continue
        seen.add(key)
        out.append(messages.Store(_reach(sink, kept) or f"'{kept.target}'", kept.code, kept.node.lineno,
                                  None if kept.path == here else witness.display_path(kept.path, here), kept.reached))
    return out


def _holder_class(kept: Kept) -> str | None:
    return kept.holder[1].rpartition("::")[2] if kept.holder[0] == "obj" else None


def _where(kept: Kept, here: str) -> str:
    return f"line {kept.node.lineno}" if kept.path == here else f"{witness.display_path(kept.path, here)}:{kept.node.lineno}"


def _local_container(kept: Kept, sink: Sink) -> bool:
    """A dict or list the program made and holds in a name (``ctx["logits"] = model(x)``, then
    ``copy.deepcopy(ctx)``): no object's state, the copied value itself (GLF201)."""
    holder = kept.holder
    root = kept.root or re.match(r"\w*", kept.target).group(0)
    return (sink.kind == "copy" and holder[0] == "alloc" and not holder[4:] and not kept.on_self
            and root not in ("", "self") and kept.code in ("GLF001", "GLF002"))


def _store(kept: Kept, sink: Sink, here: str, module: str, classes: dict) -> Finding:
    how = "is given" if kept.code in ("GLF002", "GLF003") else "keeps"
    elsewhere = None if sink.path == here else witness.display_path(sink.path, here)
    if _local_container(kept, sink):
        f = finding("GLF201", kept.node,
                    messages.store(kept.target if "'" in kept.target else f"'{kept.target}'", "is given", kept.value.origin or "a computation on the autograd graph",
                                   messages.copy_clause(sink.what, sink.node.lineno, elsewhere),
                                   "put a .detach()ed value in it where nothing needs its gradient, or leave it out "
                                   "of the copy", chain=kept.reached),
                    data={"kind": "copy-graph", "copied_at": sink.node.lineno, "local": True})
        f.witness = _witness(kept, sink, here, at_copy=False)
        return f
    f = finding(
        kept.code, kept.node,
        messages.store(messages.holder(kept.target, _holder_class(kept)), how,
                       kept.value.origin or "a computation on the autograd graph",
                       messages.copy_clause(sink.what, sink.node.lineno, elsewhere, _reach(sink, kept, kept.target)),
                       "store .detach(), or clear it before the copy", chain=kept.reached),
        attribute=kept.target,
        data={"kind": "copy-graph", "copied_at": sink.node.lineno, "method": kept.method, "root": kept.root,
              "on_self": kept.on_self,
              # the holder's class when it is defined in this file, whoever stores into it (a hook
              # or a training step filling model.activations): the copy-safe fix's class
              "holder_class": _local_class(kept.holder, here, classes)},
        # the holder's class, when it is defined in this file and the store is its own method's on
        # its own object: the copy-safe fix gives it a __getstate__
        class_name=_local_class(kept.holder, here, classes) if kept.on_self else None)
    f.witness = _witness(kept, sink, here, at_copy=False)
    return f


def _witness(kept: Kept, sink: Sink, here: str, at_copy: bool = True) -> dict:
    """The store's chain; for the finding at the copy, then the copy (a store's finding ends at
    its store, and its ``copied`` names the copy)."""
    proof = witness.make(kept.value, kept.node, kept.stmt, reached=kept.reached, grad=True,
                         kept="nothing the program runs between the store and the copy clears or replaces it",
                         copied=f"{sink.what} at {_at(sink, here)} copies {_copied(sink, kept)}",
                         here=here, store_path=kept.path)
    site = short(sink.node)
    if at_copy:
        elsewhere = sink.path != here
        proof["steps"].append([sink.node.lineno, f"{witness.display_path(sink.path, here)}: {site}" if elsewhere else site])
        if proof.get("step_paths") or elsewhere:
            proof["step_paths"] = [*(proof.get("step_paths") or [None] * (len(proof["steps"]) - 1)),
                                   sink.path if elsewhere else None]
    return proof


def _copied_argument(sink: Sink, here: str, reported: set) -> list[Finding]:
    """A tensor on the graph that one function makes and passes on, and another deep-copies:
    GLF201 where it is made (naming the copy) and at the copy (naming where it was made)."""
    path, made, given, call, who = sink.origin
    out = []
    copy_at = _at(sink, here)
    made_at = f"line {made.lineno}" if path == here else f"{witness.display_path(path, here)}:{made.lineno}"
    source = origin_text(sink.value)
    def prefix(p: str) -> str:
        return "" if p == here else f"{witness.display_path(p, here)}: "

    proof = witness.chain(f"a tensor on the autograd graph ({source})", witness.source_kind(sink.value.origin or ""),
                          [(made.lineno, prefix(path), made), (call.lineno, prefix(path), call),
                           (sink.node.lineno, prefix(sink.path), sink.node)],
                          reached=f"{who}, which passes '{given}' on in {short(call)}",
                          kept="it is the value passed", copied=f"{sink.what} at {copy_at} copies the tensor itself")
    step_paths = [None if p == here else p for p in (path, path, sink.path)]
    if any(step_paths):
        proof["step_paths"] = step_paths
    if path == here and (made.lineno, made.col_offset) not in reported:
        reported.add((made.lineno, made.col_offset))
        f = finding("GLF201", made,
                    messages.store(f"'{given}'", "is or holds", sink.value.origin,
                                   f"{short(call)} deep-copies it: {sink.what} at {copy_at} will raise (only graph "
                                   "leaves support deepcopy)",
                                   "make it a leaf where it is made (.detach(), or convert before requires_grad=True)"),
                    data={"kind": "copy-graph", "copied_at": sink.node.lineno})
        f.witness = proof
        out.append(f)
    if sink.path == here and (sink.node.lineno, sink.node.col_offset) not in reported:
        reported.add((sink.node.lineno, sink.node.col_offset))
        f = finding("GLF201", sink.node,
                    messages.copied_tensor(sink.what, f"{sink.value.origin or 'a computation on the autograd graph'}, "
                                                      f"made by {who} at {made_at} and passed on",
                                           "copy .detach().clone() of it, or pass a leaf"),
                    data={"kind": "copy-graph", "cause_line": made.lineno,
                          "cause_path": None if path == here else witness.display_path(path, here)})
        f.witness = proof
        out.append(f)
    return out


def _first_step(value, default_path: str):
    """(path, line, node) of the first step of a value's trail: where the run saw it made."""
    if not value.trail:
        return None
    line, _target, node, path = value.trail[0][:4]
    return path or default_path, line, node


def _made_at(sink: Sink) -> list[tuple]:
    """Where the tensors ``sink`` meets were made, where that is not the line that keeps or sends
    them: (path, node, what keeps or sends it, where that is). A constructor keeping what it is
    given (``Prediction(x, net(x))``), a dataset of tensors made before (``soft = teacher(x)...``),
    a process send of what a helper returned (``pool.starmap(f, [(q, bank) ...])``)."""
    out = []
    if sink.kind == "loader" and not sink.kept:
        # the item a worker's __getitem__ returns: the line that made it
        first = _first_step(sink.value, sink.path)
        if first is not None:
            out.append((first[0], first[2], sink.copied, (first[0], first[1])))
        return out
    if sink.kind in ("queue", "pool", "process"):
        # sent as a helper returned it (bank = embed_all(...), made in its return): the helper's
        # line is where it was made; what the sending function bound itself its witness shows
        first = _first_step(sink.value, sink.path)
        if first is not None and sink.value.trail[0][1] == "return " and sink.value.kind == GRAPH:
            out.append((first[0], first[2], sink.what, (sink.path, sink.node.lineno)))
    for kept in sink.kept:
        if kept.made is not None:
            out.append((kept.made[0], kept.made[1], f"'{kept.target}'", (kept.path, kept.node.lineno)))
        elif kept.code == "GLF301" and kept.value.kind == GRAPH:  # a TensorDataset of tensors made before it
            first = _first_step(kept.value, kept.path)
            if first is not None and first[0] == kept.path and first[1] != kept.node.lineno:
                out.append((first[0], first[2], short(kept.node), (kept.path, kept.node.lineno)))
    return out


def _made_here(sink: Sink, here: str) -> bool:
    return any(path == here for path, *_ in _made_at(sink)) or any(k.entry[0] == here for k in _entered(sink))


def _entered(sink: Sink) -> list:
    """The stores ``sink`` meets that a forward made when it was run, with grad on, by a call whose
    result is only inspected (Kept.entry)."""
    return [k for k in sink.kept if k.entry is not None] if sink.kind in ("copy", "queue", "pool", "process") else []


def _entries(sink: Sink, here: str, reported: set) -> list[Finding]:
    """GLF201 at a call of this file that ran a module's forward with grad on only to look at its
    result's shape (or for nothing), where that forward stored a graph tensor that ``sink`` then
    meets: under torch.no_grad() it would store none (a stride probe, a tracing pass)."""
    out = []
    for kept in _entered(sink):
        path, call = kept.entry
        key = (call.lineno, call.col_offset)
        if path != here or key in reported:
            continue
        reported.add(key)
        fails = "will fail (pickling it fails like a deep copy)" if sink.kind != "copy" else \
            "will raise (only graph leaves support deepcopy)"
        f = finding("GLF201", call,
                    f"{short(call)} runs a forward with grad on and only looks at its result; it leaves "
                    f"{messages.GRAPH_TENSOR} in '{kept.target}' ({_where(kept, here)}), and {sink.what} at "
                    f"{_at(sink, here)} {fails}: run the call under torch.no_grad()",
                    data={"kind": "made", "entry": True, "copied_at": sink.node.lineno})
        f.witness = witness.make(kept.value, call, None, reached=kept.reached, grad=True,
                                 kept=f"'{kept.target}' at {_where(kept, here)} keeps what the forward computed",
                                 copied=f"{sink.what} at {_at(sink, here)}", here=here, store_path=kept.path)
        out.append(f)
    return out


def _made(sink: Sink, here: str, reported: set) -> list[Finding]:
    """The line of this file that made a tensor ``sink`` keeps or sends, where the storing or
    sending code only passes on what it was given: GLF201 (a copy) or GLF301 (a process boundary),
    naming what keeps it and where it fails."""
    out = []
    code = "GLF201" if sink.kind == "copy" else "GLF301"
    for path, node, holder, (at_path, at_line) in _made_at(sink):
        key = (node.lineno, node.col_offset)
        if path != here or key in reported:
            continue
        reported.add(key)
        subject = short(node)
        if isinstance(node, ast.Assign) and len(node.targets) == 1:  # soft = torch.softmax(teacher(x)): 'soft'
            subject, node = ast.unparse(node.targets[0]), node.value
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and node.value is not None:
            subject, node = ast.unparse(node.target), node.value
        kept_at = f"line {at_line}" if at_path == here else f"{witness.display_path(at_path, here)}:{at_line}"
        if sink.kind == "loader" and not sink.kept:
            fails = f"{holder} returns it, and {sink.what} at {_at(sink, here)} runs that in worker processes, " \
                    "which cannot send it back (the collate's 'stack(): functions with out=... arguments don't " \
                    "support automatic differentiation')"
        elif sink.kind in ("queue", "pool", "process") and (at_path, at_line) != (sink.path, sink.node.lineno):
            fails = f"{holder} at {kept_at} keeps it, and {sink.what} at {_at(sink, here)} sends that to another " \
                    "process and will fail (pickling it fails like a deep copy)"
        elif sink.kind in ("queue", "pool", "process"):
            fails = f"{sink.what} at {_at(sink, here)} sends it to another process and will fail ('Cowardly " \
                    "refusing to serialize non-leaf tensor which requires_grad')"
        elif sink.kind == "loader":
            fails = f"{holder} at {kept_at} holds it, and {sink.what} at {_at(sink, here)} will fail: its worker " \
                    "processes cannot send it back"
        else:
            fails = f"{holder} at {kept_at} keeps it, and {sink.what} at {_at(sink, here)} will raise (only graph " \
                    "leaves support deepcopy)"
        value = next((k.value for k in sink.kept if (k.path, k.node.lineno) == (at_path, at_line)), sink.value)
        source = value.origin or "a computation on the autograd graph"
        advice = "detach what is sent" if sink.kind in ("queue", "pool", "process") else (
            "compute it under torch.no_grad()" if sink.kind == "loader" and not sink.kept else "fix the line that keeps it")
        f = finding(code, node,
                    messages.store(f"'{subject}'", "is or holds", None if source == subject else source, fails,
                                   f"make it a leaf here (.detach()) where nothing needs its gradient, or {advice}",
                                   tensor=messages.GRAPH_TENSOR),
                    data={"kind": "made", "copied_at": sink.node.lineno})
        f.witness = witness.make(value, node, None, reached="the program's run", grad=True,
                                 kept=f"{holder} at {kept_at} keeps or sends it",
                                 copied=f"{sink.what} at {_at(sink, here)}", here=here)
        out.append(f)
    return out


def _worker_item(sink: Sink, here: str) -> Finding:
    """GLF301 at a DataLoader with workers whose dataset's ``__getitem__`` returns a graph tensor."""
    first = _first_step(sink.value, sink.path)
    where = "" if first is None else f" at {'line ' + str(first[1]) if first[0] == here else witness.display_path(first[0], here) + ':' + str(first[1])}"
    message = messages.sent(sink.what, f"runs {sink.copied} in worker processes, which returns {messages.GRAPH_TENSOR}",
                            sink.value.origin + where if sink.value.origin else None,
                            "a worker cannot send it back (the collate's 'stack(): functions with out=... arguments "
                            "don't support automatic differentiation', or 'Cowardly refusing to serialize non-leaf "
                            "tensor which requires_grad')",
                            "make the item under torch.no_grad() or .detach() it in __getitem__, or move the module "
                            "that computes it into the model")
    f = finding("GLF301", sink.node, message, data={"kind": "copy-graph"})
    f.witness = witness.make(sink.value, sink.node, None, reached=f"a worker process runs {sink.copied}", grad=True,
                             kept="it is the item the worker returns",
                             copied="the worker sends each batch back to the main process (pickled)")
    return f


def _sent(sink: Sink) -> Finding:
    then = "the pool pickles each task's arguments for its workers" if sink.kind == "pool" else \
        "a Queue's reader then waits forever"
    message = messages.sent(sink.what, f"sends {messages.GRAPH_TENSOR}", sink.value.origin,
                            f"'Cowardly refusing to serialize non-leaf tensor which requires_grad' ({then})",
                            "put .detach() on it", to="to another process")
    # "origin": where the sent graph tensor was made (the fix detaches the item of a sent tuple made
    # there); "sink": queue, pool or process (a pool's task arguments get detached copies)
    f = finding("GLF301", sink.node, message, data={"kind": "copy-graph", "origin": sink.value.origin,
                                                     "sink": sink.kind})
    f.witness = witness.make(sink.value, sink.node, None, reached="the process's target", grad=True,
                             kept="it is what the call sends",
                             copied="the other process gets a pickled copy, made by the same protocol as deepcopy")
    return f
