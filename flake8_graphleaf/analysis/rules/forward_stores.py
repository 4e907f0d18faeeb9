"""GLF001, GLF002, GLF004: a graph tensor kept on the module by ``forward`` (or a
method reached from it)."""

from __future__ import annotations

import ast
import os
import re

from ..findings import Finding
from ..evaluator.flow import Store
from ..evaluator.graph_tensors import ARG, GRAPH, LEAF, MODULE
from ..program.summaries import current_summary, is_layer, made_only_without_grad
from ..program.helper_objects import file_classes, inherited_forward
from ..program.project_view import base_qualnames, resolve
from ..facts import torch_facts
from ..evaluator.scopes import SUBMODULE_CALL, ClassRunner, self_name
from .. import messages, witness
from ..confidence import trust
from . import argument_only, drop_overwritten, eval_only, finding, origin_text


RULES = {
    "GLF001": "graph tensor stored on the module in forward (or a method reached from it)",
    "GLF002": "graph tensor put into a container held on the module",
    "GLF004": "registered buffer reassigned from, or updated in place with, a graph tensor",
}

EXAMPLES = [
    (
        """
import torch, torch.nn as nn
class Var:
    def __init__(self, t):
        self.tensor = t
    def update(self, data):
        self.tensor[:] = data  # an in-place write: the preallocated tensor gets a grad_fn
class Cost(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(3))
        self.var = Var(torch.zeros(3))
        self.buf = torch.zeros(2, 3)
    def forward(self, x):
        self.var.update(x * self.w)
        self.err = self.var.tensor * 2  # computed from what the helper now holds
        self.buf[0] = x * self.w
        self.total = self.buf.sum(0)  # computed from the written buffer
        return self.total.sum()
""",
        ["GLF002", "GLF001", "GLF002", "GLF001"],
    ),
    (
        """
import torch, torch.nn as nn
class Cost(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(3))
        self.buf = torch.zeros(2, 3)
    def forward(self, x):
        self.buf[0] = (x * self.w).detach()
        with torch.no_grad():
            self.buf[1] = x * self.w  # no history recorded under no_grad
        self.total = self.buf.sum(0)
        return (x * self.w).sum()
""",
        [],
    ),
    (
        """
import torch, torch.nn as nn
class Rocket(nn.Module):
    def __init__(self):
        super().__init__()
        self.kernels = nn.Parameter(torch.randn(8, 1, 9), requires_grad=False)  # random, never trained
        self.scale = nn.Parameter(torch.ones(1))
        self.scale.requires_grad = False
    def forward(self, x):
        c = torch.conv1d(x, self.kernels) * self.scale
        self.biases = c.quantile(0.5, dim=-1)  # no grad_fn, unless the input x requires grad
        return c.relu().mean(-1)
""",
        ["GLF001?"],  # only the opt-in code for the argument: the frozen parameters are no grad source
    ),
    (
        """
import torch, torch.nn as nn
class Cast(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(3, 3))
    def forward(self, x):
        self.w = self.weight.to(x.dtype)  # the parameter itself for a float32 input
        self.w_half = self.weight.to(torch.float16)  # a copy with a grad_fn
        return x @ self.w
""",
        ["GLF001"],
    ),
    (
        """
import torch, torch.nn as nn
from torch.utils.checkpoint import checkpoint, get_device_states
class Deterministic(nn.Module):
    def __init__(self, net):
        super().__init__()
        self.net = net
    def forward(self, *args):
        self.gpu_devices, self.gpu_states = get_device_states(*args)  # device ids, RNG states
        return self.net(*args)
class Checkpointed(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = nn.Linear(4, 4)
    def forward(self, x):
        self.last = checkpoint(self.block, x, use_reentrant=False)
        return self.last
""",
        ["GLF001", "GLF001?", "GLF001?"],
    ),
    (
        """
import torch.nn as nn
class MultiTask(nn.Module):
    def __init__(self, backbone, heads):
        super().__init__()
        self._backbone = [backbone]  # kept out of the state_dict
        self.heads = heads
    @property
    def backbone(self):
        return self._backbone[0]
    def forward(self, x):
        rep = self.backbone(x)
        if self.training:
            self.rep = rep
        return [head(rep) for head in self.heads]
""",
        ["GLF001"],
    ),
    (
        """
import torch.nn as nn
class MultiTask(nn.Module):
    def __init__(self, backbone, heads):
        super().__init__()
        self._backbone = [backbone]
        self.heads = heads
    @property
    def backbone(self):
        return self._backbone[0]
    def forward(self, x):
        rep = self.backbone(x)
        if self.training:
            self.rep = rep.detach()
        return [head(rep) for head in self.heads]
""",
        [],
    ),
    (
        """
import torch.nn as nn
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
    def forward(self, x):
        self.cache = self.lin(x)
        return self.cache
""",
        ["GLF001"],
    ),
    (
        """
import torch.nn as nn
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
    def forward(self, x):
        out = self.lin(x)
        self.cache = out.detach()
        self.shape = out.shape
        return out
""",
        [],
    ),
    (
        """
import torch.nn as nn
class Enc(nn.Module):
    def forward(self, x):
        self.features = []
        self.features.append(self.conv(x))
        return self.features
""",
        ["GLF002?"],
    ),
    (
        """
import torch, torch.nn as nn
class Norm(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(4))
        self.register_buffer("running_mean", torch.zeros(4))
    def forward(self, x):
        self.running_mean = 0.9 * self.running_mean + 0.1 * x.mean(0)
        return (x - self.running_mean) * self.weight
""",
        ["GLF004?"],
    ),
    (
        # a flag the class fixes: False from __init__, True only inside a method that resets it
        """
import torch.nn as nn
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.keep = False
    def forward(self, x):
        out = self.lin(x)
        if self.keep:
            self.last = out
        return out
    def probe(self, x):
        self.keep = True
        self(x)
        self.keep = False
""",
        [],
    ),
    (
        # x reaches no parameter and no submodule: it may well be the model's input data
        # (GLF010 is opt-in: --extend-select GLF010)
        """
import torch, torch.nn as nn
class InputStats(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("running_mean", torch.zeros(4))
    def forward(self, x):
        self.running_mean = 0.9 * self.running_mean + 0.1 * x.mean(0)
        return x - self.running_mean
""",
        ["GLF004?"],
    ),
    (
        """
import torch, torch.nn as nn
class Norm(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("running_mean", torch.zeros(4))
    def forward(self, x):
        with torch.no_grad():
            self.running_mean.mul_(0.9).add_(0.1 * x.mean(0))
        return x - self.running_mean
""",
        [],
    ),
    (
        # the cache is filled only where grad is off (torch.is_grad_enabled() is False)
        """
import torch, torch.nn as nn
class LoRALinear(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.a = nn.Linear(d, 2, bias=False)
        self.b = nn.Linear(2, d, bias=False)
        self._delta = None
    def forward(self, x):
        if torch.is_grad_enabled():
            self._delta = None
            delta = self.b.weight @ self.a.weight
        else:
            if self._delta is None:
                self._delta = self.b.weight @ self.a.weight
            delta = self._delta
        return x @ delta
""",
        [],
    ),
    (
        # a store only in eval mode: ordinary use runs it under no_grad (opt-in GLF010: a guess)
        """
import torch.nn as nn
class Cached(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.proj = nn.Linear(d, d)
    def forward(self, x):
        out = self.proj(x)
        if not self.training:
            self.last = out
        return out
""",
        ["GLF001?"],
    ),
    (
        # ... also where the training test is one part of an `and` (or the else of an `or`)
        """
import torch.nn as nn
class ItemTower(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.proj = nn.Linear(d, d)
        self.cache = None
    def forward(self, x, candidates=None):
        out = self.proj(x)
        if not self.training and self.cache is None and candidates is None:
            self.cache = out
        if self.training or candidates is None:
            return out
        else:
            self.scored = out
        return out
""",
        ["GLF001?", "GLF001?"],
    ),
    (
        # eval mode only, but the file runs the model in eval mode with grad on: the default code
        """
import torch.nn as nn
class Cached(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.proj = nn.Linear(d, d)
    def forward(self, x):
        out = self.proj(x)
        if not self.training:
            self.last = out
        return out
def validate(model, x):
    model.eval()
    return model(x).sum()
""",
        ["GLF001"],
    ),
    (
        # ... and where that eval-mode call is under no_grad, the evidence is not there
        """
import torch, torch.nn as nn
class Cached(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.proj = nn.Linear(d, d)
    def forward(self, x):
        out = self.proj(x)
        if not self.training:
            self.last = out
        return out
def validate(model, x):
    model.eval()
    if x is not None:
        with torch.no_grad():
            return model(x).sum()
""",
        ["GLF001?"],
    ),
    (
        # the same after an early return in training mode
        """
import torch.nn as nn
class LRUCache(nn.Module):
    def __init__(self, module):
        super().__init__()
        self.module = module
        self.memory = None
    def forward(self, x):
        if self.training:
            return self.module(x)
        self.memory = self.module(x)
        return self.memory
""",
        ["GLF001?"],
    ),
    (
        # swapped in for the call and put back in a finally, or set on a submodule and reset after
        """
import torch.nn as nn
class Merged(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.base = nn.Linear(d, d)
        self.delta = nn.Linear(d, d)
        self.conv = nn.Linear(d, d)
    def forward(self, x):
        w = self.base.weight
        self.base.weight = w + self.delta.weight
        try:
            out = self.base(x)
        finally:
            self.base.weight = w
        if out.dim() > 1:
            self.conv._support = self.delta(out)
            out = self.conv(out)
            self.conv._support = None
        return out
""",
        [],
    ),
    (
        # a metric's update is given the model's output and the reference values (data)
        """
import torch
from torch import Tensor
from torchmetrics import Metric
class ForceError(Metric):
    def __init__(self):
        super().__init__()
        self.add_state("refs", default=[], dist_reduce_fx="cat")
        self.add_state("preds", default=[], dist_reduce_fx="cat")
    def update(self, forces: Tensor, reference_forces: Tensor):
        self.refs.append(reference_forces)
        self.preds.append(forces)
    def compute(self):
        return (torch.cat(self.refs) - torch.cat(self.preds)).abs().mean()
""",
        # a library's metric (nothing here makes it): its users give it their model's outputs
        # (the reference values are data: no finding)
        ["GLF002?"],
    ),
    (
        # `.add` fills a set (the only standard container with it); a search index's add copies
        # the vectors out of torch, and Tensor.add is out of place: only the set keeps the tensor
        """
import torch, torch.nn as nn
import faiss
class Retriever(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.key = nn.Linear(d, d)
        self.index = None
        self.seen = set()
    def forward(self, x, candidates):
        k = self.key(candidates)
        with torch.no_grad():
            if self.index is None:
                self.index = faiss.IndexFlatL2(k.shape[1])
            self.index.reset()
            self.index.add(k.float())
        self.seen.add(k)
        return self.key(x)
""",
        ["GLF002"],
    ),
    (
        # ... and a module that calls it with its output in a training step shows it
        """
import torch, torch.nn as nn
from torch import Tensor
from torchmetrics import Metric
class ForceError(Metric):
    def __init__(self):
        super().__init__()
        self.add_state("refs", default=[], dist_reduce_fx="cat")
        self.add_state("preds", default=[], dist_reduce_fx="cat")
    def update(self, forces: Tensor, reference_forces: Tensor):
        self.refs.append(reference_forces)
        self.preds.append(forces)
    def compute(self):
        return (torch.cat(self.refs) - torch.cat(self.preds)).abs().mean()
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(3, 3)
        self.force_error = ForceError()
    def training_step(self, batch):
        x, f = batch
        out = self.net(x)
        self.force_error(out, f)
        return (out - f).pow(2).mean()
""",
        ["GLF002"],
    ),
    (
        # ... but where the program makes it and feeds it only in validation (under no_grad), that
        # a caller gives it a graph tensor is a guess: opt-in GLF010
        """
import torch, torch.nn as nn
from torch import Tensor
from torchmetrics import Metric
class ForceError(Metric):
    def __init__(self):
        super().__init__()
        self.add_state("preds", default=[], dist_reduce_fx="cat")
    def update(self, forces: Tensor, reference_forces: Tensor):
        self.preds.append(forces)
    def compute(self):
        return torch.cat(self.preds).abs().mean()
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(3, 3)
        self.val_error = ForceError()
    def training_step(self, batch):
        x, f = batch
        return (self.net(x) - f).pow(2).mean()
    def validation_step(self, batch):
        x, f = batch
        self.val_error(self.net(x), f)
""",
        ["GLF002?"],
    ),
    (
        # where `w is None` holds (also as a part of an `and`), w is no tensor: the cache holds
        # what a function makes from nothing but sizes
        """
import torch
import torch.nn as nn
def ones_norm(n, w):
    return torch.ones(n) if w is None else w / w.sum()
class Conv(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 2)
        self.cached = None
    def forward(self, x, w=None):
        if self.lin.bias is not None and w is None:
            w = ones_norm(x.size(0), w)
            self.cached = w
        return self.lin(x) * w[:, None]
""",
        [],
    ),
    (
        """
import torch.nn as nn
class Conv(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 2)
        self.cached = None
    def forward(self, x, w=None):
        if w is not None:
            self.cached = w * self.lin.weight.sum()
        return self.lin(x)
""",
        ["GLF001"],
    ),
    (
        # a dict of named entries: each key holds what was put there (the mask is fresh, the
        # energy is on the graph), also after an update and a key set on one path only
        """
import torch
import torch.nn as nn
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 2)
        self.mask = None
    def forward(self, x):
        data = {"mask": torch.ones(2), "energy": self.lin(x).sum()}
        data.update(scale=2.0)
        if x.dim() > 1:
            data["count"] = torch.zeros(1)
        self.mask = data["mask"]
        self.count = data["count"]
        return data["energy"]
""",
        [],
    ),
    (
        """
import torch
import torch.nn as nn
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 2)
    def forward(self, x):
        data = {"mask": torch.ones(2)}
        if x.dim() > 1:
            data["energy"] = self.lin(x).sum()
        data.update(self.extra(x))
        self.last = data["mask"]
        return data
    def extra(self, x):
        return {"mask": self.lin(x)}
""",
        ["GLF001"],
    ),
    (
        """
import torch, torch.nn as nn
class FewShot(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Linear(4, 4)
    def process_support_set(self, images):  # public: users call it, with grad on, as forward
        self.prototypes = self.backbone(images).mean(0)
    def forward(self, query):
        return -torch.cdist(self.backbone(query), self.prototypes[None])
""",
        ["GLF001?"],
    ),
    (
        """
import torch, torch.nn as nn
import lightning.pytorch as pl
class FewShot(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Linear(4, 4)
    def process_support_set(self, images):
        self.prototypes = self.backbone(images).mean(0).detach()
    def _refresh(self, images):  # private, and nothing calls it
        self.cache = self.backbone(images)
    def validation_step(self, batch, batch_idx):  # Lightning runs it under no_grad
        self.val_out = self.backbone(batch)
    def forward(self, query):
        return -torch.cdist(self.backbone(query), self.prototypes[None])
""",
        [],
    ),
    (
        # a method held in an attribute (one per reset mode): calling it runs the method
        """
import torch, torch.nn as nn
class Neuron(nn.Module):
    def __init__(self, reset="subtract"):
        super().__init__()
        self.w = nn.Parameter(torch.ones(4))
        self.register_buffer("mem", torch.zeros(4))
        self.state_function = self._sub if reset == "subtract" else self._zero
    def _sub(self, x):
        return self.w * self.mem + x - 1.0
    def _zero(self, x):
        return self.w * x
    def forward(self, x):
        self.mem = self.state_function(x)
        return self.mem
""",
        ["GLF004"],
    ),
    (
        """
import torch, torch.nn as nn
class Neuron(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(4))
        self.register_buffer("mem", torch.zeros(4))
        self.state_function = self._step
    def _step(self, x):
        return (self.w * self.mem + x).detach()
    def forward(self, x):
        self.mem = self.state_function(x)
        return self.w * self.mem
""",
        [],
    ),
    (
        # a cache the class clears after running the model (a wrapper reads it, then clears it):
        # that it is still there at a copy is taken on trust (reset-elsewhere)
        """
import torch.nn as nn
class Wrapper(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(2, 2)
        self.hidden = None
    def forward(self, x):
        self.hidden = self.net(x)
        return self.hidden * 2
    def embed(self, x):
        out = self(x)
        self.hidden = None
        return out
""",
        ["GLF001?"],
    ),
    (
        # ... but a reset() that runs no model (a new sequence starts with it) proves nothing
        """
import torch.nn as nn
class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(2, 2)
        self.keys = None
    def reset(self):
        self.keys = None
    def forward(self, x):
        self.keys = self.proj(x)
        return self.keys.sum()
""",
        ["GLF001"],
    ),
]


def check(runner: ClassRunner) -> list[Finding]:
    facts = runner.info.facts
    out: list[Finding] = []

    attached: set[str] = set()  # origins of module objects the class stores on itself

    def sink(store: Store, func: ast.FunctionDef) -> None:
        on_self = store.root == self_name(func)
        if on_self and store.value.kind == MODULE:
            attached.add(store.value.origin)
        f = classify(store, func, facts, runner.info.node.name, after=runner.root() if runner.public_root() else "forward")
        if f is not None:
            f.data["root_method"] = runner.root()
            f.data["public_root"] = runner.public_root()
            f.witness = witness.make(
                store.value, store.node, store.stmt, reached=runner.path(), grad=store.grad,
                kept=witness.KEPT_AFTER_RETURN, copied=_copied(f, store, facts, on_self))
            if runner.public_root():
                trust(f, "public-root", f"{runner.root()}(), which nothing in its class calls, is taken to run "
                                        "with grad on as forward does")
            if store.option is not None:
                name, default = store.option
                trust(f, "unset-argument", f"'{name}' is taken to be turned on by a caller of {runner.root()}() "
                                           f"(its default {default} skips the store)")
            if store.eval_only:
                line = getattr(runner.imports, "eval_with_grad", None)
                if line is None:
                    f = eval_only(f)
                else:  # the file itself runs a model in eval mode with grad on
                    f.witness["grad"] = (f"{f.witness.get('grad')}; eval mode (not self.training), which line {line} "
                                         "runs with grad on (a model put in eval mode, then called outside no_grad)")
            if not on_self and _FRESH.match(store.root_value.origin) and store.root_value.origin not in attached:
                f.data["fresh_root"] = store.root_value.origin
            out.append(f)

    runner.forward_reached = runner.run_forward(sink)
    runner.run_public(sink, runner.forward_reached)
    out += runner.helper_findings
    # A store on a module object made during the call (``hyps = Hypotheses(...)``, passed to a
    # helper that fills it) that the class never keeps: deepcopy(model) cannot reach it.
    out = [f for f in out if f.data.get("fresh_root") is None or f.data["fresh_root"] in attached]
    if out and made_only_without_grad(runner.imports, runner.info.node.name):
        return []  # the project only ever makes it under no_grad (a beam search in a decoding loop)
    kept = drop_overwritten(out, runner)
    for f in kept:
        if f.data.get("value_kind") == ARG:
            f.data["fed"] = f.data.get("origin") in runner.fed
    return kept


def _copied(f: Finding, store: Store, facts, on_self: bool) -> str:
    target = f.attribute or store.text
    if f.code == "GLF004":
        return witness.copied_text(target, buffer=True)
    if not on_self:
        return (f"copy.deepcopy(model) copies {store.root} (a module {facts.name or 'the class'} keeps) "
                f"and with it {target}")
    if store.kind == "setattr" and "<" in target:
        return "copy.deepcopy(model) copies every attribute of the module, whatever name this one gets"
    return witness.copied_text(target, container=store.kind == "container")


# The origin of a module object constructed here: ``Hypotheses(...)``, ``nn.Linear(...)``.
_FRESH = re.compile(r"^(?:\w+\.)*[A-Z]\w*\(\.\.\.\)$")


def settle_arguments(findings: list[Finding], runners: dict, calls: dict) -> list[Finding]:
    """A store whose only evidence is a ``forward`` argument is reported under its own code
    (GLF010, off by default) unless that argument is an activation:

    - the class feeds it into a learnable computation (a submodule, a parameter);
    - a module of this file calls an instance of the class with a graph tensor there
      (``self.norm(self.embed(x))``);
    - the project chains the class after other layers (``add_module``, ``nn.Sequential``,
      a ModuleList): its forward gets the previous layer's output.
    """
    out = []
    for f in findings:
        if any(t["kind"] == "eval-mode" for t in f.trust):  # a guess already (an eval-only store)
            out.append(f)
            continue
        if f.data.get("value_kind") == ARG and not f.data.get("fed") and f.class_name in runners:
            runner = runners[f.class_name]
            origin = f.data.get("origin", "")
            if f.data.get("public_root"):  # the instance's calls are forward's: they say nothing of this method
                _evidence(f, f"{origin}, which nothing shows to be an activation (a guess)")
                f = argument_only(f)
            elif _graph_at_call_sites(runner, origin, calls.get(f.class_name, ()), store=f):
                _evidence(f, f"{origin}, given a graph tensor where a module of this file calls {f.class_name}")
                _proven(f)
            elif _chained_source(runner, f):
                _evidence(f, _chained_source(runner, f))
                _proven(f)
            elif is_layer(runner.imports, f.class_name):
                _evidence(f, f"{origin}: {f.class_name} is chained after other layers (nn.Sequential, a ModuleList, "
                             "add_module), so it gets the previous layer's output")
                trust(f, "argument-chained", f"{origin} is taken to be an activation: {f.class_name} is chained "
                                             "after other layers")
            elif _graph_at_call_sites(runner, origin, _project_call_sites(runner), store=f):
                _evidence(f, f"{origin}, given a graph tensor where a module in another file calls {f.class_name}")
                _proven(f)
            else:
                _evidence(f, f"{origin}, which nothing shows to be an activation (a guess)")
                f = argument_only(f)
        elif _metric_input(f) and f.data.get("root_method") == "update" and f.class_name in runners:
            # A metric's update() keeps what it is given (a list state of its inputs): a graph
            # tensor only where a caller in grad mode passes one; metrics fed only from validation
            # and test steps (run under no_grad) are the common case, so it takes a call site.
            runner = runners[f.class_name]
            origin = f.data.get("origin", "")
            if _graph_at_call_sites(runner, origin, calls.get(f.class_name, ()), method="update"):
                _evidence(f, f"{origin}, given a graph tensor where a module of this file calls {f.class_name}",
                          kind="model-output")
            elif _graph_at_call_sites(runner, origin, _project_call_sites(runner), method="update"):
                _evidence(f, f"{origin}, given a graph tensor where a module in another file calls {f.class_name}",
                          kind="model-output")
            elif _made_in_project(runner):
                _evidence(f, f"{origin}; the program makes {f.class_name}, and none of its callers is seen passing it "
                             "a graph tensor with grad on (a guess)", kind="model-output")
                f = argument_only(f, f"{origin} is taken to be a graph tensor: the program makes {f.class_name} and "
                                     "none of its callers is seen passing one with grad on")
            else:
                _evidence(f, f"{origin}: nothing in the project makes {f.class_name}, a metric for the package's users, "
                             "who give it their model's outputs in training steps", kind="model-output")
                trust(f, "metric-input", f"{origin} is taken to be a model output given with grad on by the "
                                         f"package's users (nothing in the project makes {f.class_name})")
        elif f.data.get("value_kind") == ARG and f.data.get("fed") and f.class_name in runners and (
                _graph_at_call_sites(runners[f.class_name], f.data.get("origin", ""), calls.get(f.class_name, ()),
                                     store=f)
                or _graph_at_call_sites(runners[f.class_name], f.data.get("origin", ""),
                                        _project_call_sites(runners[f.class_name]), store=f)):
            # the program shows it: a module of the project passes a graph tensor there
            _evidence(f, f"{f.data.get('origin', '')}, given a graph tensor where a module of the project calls "
                         f"{f.class_name}")
            _proven(f)
        elif f.data.get("value_kind") == ARG and f.data.get("fed") and f.class_name in runners and (
                _chained_source(runners[f.class_name], f)):
            _evidence(f, _chained_source(runners[f.class_name], f))
            _proven(f)
        elif f.data.get("value_kind") == ARG and f.data.get("fed"):
            _evidence(f, f"{f.data.get('origin', '')}, which {f.class_name} feeds into a learnable computation (a layer "
                         "or a parameter): an activation, on the graph whenever its caller's is")
            trust(f, "argument-fed", f"{f.data.get('origin', 'the argument')} is taken to be an activation: "
                                     f"{f.class_name} feeds it into a layer or parameter")
        out.append(f)
    return out


def _chained_source(runner: ClassRunner, f: Finding) -> str | None:
    """The proof that the store's argument is a graph tensor when the project chains the class
    right after a torch layer that holds parameters (``nn.Sequential(nn.Linear(4, 8), Spike())``):
    ``forward``'s first argument is then that layer's output, on the graph whenever grad is on.
    Only the first argument (the one the previous layer's output goes to) and only ``forward``
    (what nn.Sequential calls); None when the project shows no such chain."""
    m = re.match(r"argument '(\*?)(\w+)'", f.data.get("origin", "") or "")
    func = runner.info.facts.methods.get("forward") or inherited_forward(runner.imports, runner.info)
    if m is None or func is None or f.data.get("root_method", "forward") != "forward":
        return None
    params = [a.arg for a in func.args.posonlyargs + func.args.args][1:]
    if m.group(1):  # forward(self, *args): nn.Sequential gives it one argument, the previous output
        if params or func.args.vararg is None or func.args.vararg.arg != m.group(2):
            return None
    elif not params or params[0] != m.group(2):
        return None
    found = _chained_after_learnable(runner)
    if found is None:
        return None
    path, line, layer = found
    where = f"line {line}" if path is None else f"{os.path.relpath(path) if os.path.isabs(path) else path}:{line}"
    return (f"{f.data['origin']}, the output of {layer}, a layer that holds parameters (on the graph with grad on): "
            f"{where} chains {f.class_name} right after it in nn.Sequential")


def _chained_after_learnable(runner: ClassRunner) -> tuple[str | None, int, str] | None:
    """Where the project puts an instance of the class into an ``nn.Sequential`` right after a
    torch layer that holds parameters (the summaries' ``chained``), or after a class of the project
    that subclasses one (``layer.Linear(nn.Linear)``): (the file, None for this one; the line; the
    layer), also where it is made under a name a package re-exports it as (``neuron.LIFNode`` for
    ``neuron/lif.py``'s class); None when nothing does."""
    imports = runner.imports
    name = runner.info.node.name
    qual = f"{imports.module or '__main__'}.{name}"
    project = imports.project
    key = ("chained", qual)
    memo = project.memo if project is not None else {}
    if key in memo:
        return memo[key]
    memo[key] = None
    places = [(None, entry) for entry in current_summary(imports).get("chained", {}).get(qual, ())]
    index = getattr(project, "index", None)
    if index is not None and hasattr(index, "mentioning"):
        for path in index.mentioning(name):
            for made, entries in sorted(((index.summary(path) or {}).get("chained") or {}).items()):
                if made == qual or (made.rpartition(".")[2] == name and (
                        _resolves_to(project, made, qual) or _star_exported(project, made, qual))):
                    places += [(path, entry) for entry in entries]
    for path, (line, layer) in places:
        learnable = layer if layer.startswith("torch.nn.") else _learnable_subclass(project, layer)
        if learnable is not None:
            memo[key] = (path, line, learnable)
            break
    return memo[key]


def _learnable_subclass(project, qual: str, depth: int = 0) -> str | None:
    """``layer.Linear (a subclass of torch.nn.Linear)`` when the project's class ``qual`` derives
    from a torch layer that holds parameters (the generated fact), else None."""
    found = resolve(project, qual) if project is not None else None
    if found is None:  # layer.Linear through layer/__init__.py's star import
        found = next((d for d in (resolve(project, q) for q in _star_sources(project, qual)) if d is not None), None)
    if found is None or not isinstance(found.node, ast.ClassDef) or depth > 3:
        return None
    for base in base_qualnames(found):
        fact = torch_facts.nn_module(base)
        if fact is not None:
            if fact.get("params") and fact.get("graph"):
                return f"{qual.rpartition('.')[2]} (a subclass of torch.nn.{base.rpartition('.')[2]})"
            return None
        deeper = _learnable_subclass(project, base, depth + 1)
        if deeper is not None:
            return f"{qual.rpartition('.')[2]} (a subclass of {deeper})"
    return None


def _star_sources(project, made: str) -> list[str]:
    """What ``made`` (``pkg.neuron.LIFNode``) may name through the star imports of its module
    (``pkg/neuron/__init__.py``: ``from .lif import *`` gives ``pkg.neuron.lif.LIFNode``)."""
    module, _, name = made.rpartition(".")
    parsed = project.parsed(module) if module and project is not None else None
    if parsed is None:
        return []
    package = module if os.path.basename(parsed.path) == "__init__.py" else module.rpartition(".")[0]
    out = []
    for node in parsed.tree.body:
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            if not node.level:
                source = node.module
            else:
                parts = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                source = ".".join(parts + ([node.module] if node.module else []))
            if source:
                out.append(f"{source}.{name}")
    return out


def _star_exported(project, made: str, qual: str) -> bool:
    return qual in _star_sources(project, made)


def _proven(f: Finding) -> None:
    """The message of a store whose argument the program shows to be a graph tensor says it is one."""
    f.message = f.message.replace("a tensor that may be on the autograd graph", messages.GRAPH_TENSOR, 1)
    f.message = f.message.replace(" will raise after forward if it is:", " will raise after forward:", 1)


def _evidence(f: Finding, source: str, kind: str = "argument") -> None:
    if f.witness is not None and f.witness.get("source_kind") == kind:
        f.witness["source"] = source


def _made_in_project(runner: ClassRunner) -> bool:
    """Whether the code of the project (this file included) instantiates the class or a subclass
    of it, also under a name a package re-exports it as (``from torch_uncertainty.metrics import
    FPR95``): then the program's own calls of it are the evidence for what it is given.  A
    docstring's example makes nothing."""
    imports = runner.imports
    name = runner.info.node.name
    qual = f"{imports.module or '__main__'}.{name}"
    if current_summary(imports)["made"].get(qual):
        return True
    project = imports.project
    index = getattr(project, "index", None)
    if index is None or not hasattr(index, "mentioning"):
        return False
    return _instantiated(project, index, qual, 0)


def _instantiated(project, index, qual: str, depth: int) -> bool:
    key = ("instantiated", qual)
    if key in project.memo:
        return project.memo[key]
    project.memo[key] = False  # a cycle of bases
    name = qual.rpartition(".")[2]
    found = any(made == qual or (made.rpartition(".")[2] == name and _resolves_to(project, made, qual))
                for path in index.mentioning(name) for made in (index.summary(path) or {}).get("made", ()))
    if not found and depth < 3:
        for path in index.subclassing(name):
            parsed = project.parsed_path(path)
            if parsed is None:
                continue
            for node in parsed.defs.values():
                if isinstance(node, ast.ClassDef) and any(
                        _resolves_to(project, _base_qualname(parsed, b), qual) for b in node.bases):
                    found = _instantiated(project, index, f"{parsed.name}.{node.name}", depth + 1)
                    if found:
                        break
            if found:
                break
    project.memo[key] = found
    return found


def _base_qualname(parsed, base: ast.AST) -> str | None:
    if isinstance(base, ast.Name) and base.id in parsed.defs:
        return f"{parsed.name}.{base.id}"  # class FPR95(FPRx): with FPRx defined in the same file
    return parsed.imports.qualname(base)


def _resolves_to(project, made: str | None, qual: str) -> bool:
    definition = resolve(project, made)
    return definition is not None and definition.qualname == qual


def _metric_input(f: Finding) -> bool:
    """A store whose evidence is a metric's argument taken for the model's output (see
    ``ClassRunner._run_each``): the metric's update() keeping its inputs."""
    return f.witness is not None and f.witness.get("source_kind") == "model-output"


def _project_call_sites(runner: ClassRunner) -> list:
    """The calls of this class's instances that modules in other files of the project make
    through their submodule attributes (``self.norm = GlobalNorm()`` ... ``self.norm(h)``),
    with the values passed, from their ``forward``: [(positional values, keyword values)].
    Asked only for a store whose evidence is an argument; remembered per class."""
    imports = runner.imports
    project = imports.project
    index = getattr(project, "index", None)
    if index is None or not hasattr(index, "modules_making"):
        return []
    qual = f"{imports.module or '__main__'}.{runner.info.node.name}"
    key = ("project_call_sites", qual)
    if key in project.memo:
        return project.memo[key]
    project.memo[key] = sites = []
    for module in index.modules_making(qual):
        if module == imports.module:
            continue  # this file's own calls are the runners' (calls)
        parsed = project.parsed(module)
        if parsed is None:
            continue
        classes, module_classes = file_classes(parsed)
        for holder in classes.values():
            attrs = {a for a, quals in holder.facts.submodule_quals.items() if qual in quals}
            if not attrs or not holder.facts.is_module:
                continue
            caller = ClassRunner(holder, parsed.imports, module_classes, depth=1)

            def record(origin, pos, kw, grad, attrs=attrs):
                m = SUBMODULE_CALL.match(origin)
                if grad and m is not None and m.group(1) in attrs:
                    sites.append((pos, kw))

            caller._record_call = record
            caller.run_forward(lambda store, func: None)
    return sites


def _graph_at_call_sites(runner: ClassRunner, origin: str, sites, method: str = "forward",
                         store: Finding | None = None) -> bool:
    """Whether a recorded call of the class's instances passes a graph tensor (or a leaf that
    requires grad) where ``method`` (the method the calls reach: forward; a metric's update,
    which its inherited forward is given the arguments for) takes the argument ``origin`` names.
    With ``store`` (a finding of the class): and whether ``method`` run with that call's values
    makes that store with a graph tensor (``self.revin(z, "denorm")`` gives a graph tensor, but
    the store sits under ``if mode == "norm":``)."""
    m = re.match(r"argument '\*?(\w+)'", origin)
    func = runner.info.facts.methods.get(method)
    if m is None or func is None or not sites:
        return False
    name = m.group(1)
    params = [a.arg for a in func.args.posonlyargs + func.args.args][1:]
    index = params.index(name) if name in params else None
    star = func.args.vararg is not None and func.args.vararg.arg == name
    for pos, kw in sites:
        values = list(pos[len(params):]) if star else []
        if index is not None and index < len(pos):
            values.append(pos[index])
        if name in kw:
            values.append(kw[name])
        if any(v.kind in (GRAPH, LEAF) for v in values) and (store is None or _site_makes(runner, func, pos, kw, store)):
            return True
    return False


def _site_makes(runner: ClassRunner, func: ast.FunctionDef, pos, kw, store: Finding) -> bool:
    """Does ``func`` run with a call's values (and grad on) make the store ``store`` reports
    with a graph tensor? The runner's state is left as it was."""
    kept = {k: getattr(runner, k) for k in ("_sink", "_memo", "_active", "reached", "_building", "_skip", "_batch")}
    calls = {k: list(v) for k, v in runner.calls.items()}
    fed, helper_findings, helper_state = set(runner.fed), list(runner.helper_findings), dict(runner.helper_state)
    made = []

    def sink(got: Store, where) -> None:
        if got.node.lineno == store.line and got.node.col_offset == store.col and got.value.kind == GRAPH:
            made.append(got)

    runner._skip = set()  # the methods a root run reached before are run again here, with these values
    try:
        runner.run_with(func, list(pos), dict(kw), sink, grad=True)
    finally:
        for k, v in kept.items():
            setattr(runner, k, v)
        for k in list(runner.calls):
            if k in calls:
                runner.calls[k][:] = calls[k]
            else:
                del runner.calls[k]
        runner.fed.clear()
        runner.fed.update(fed)
        runner.helper_findings[:] = helper_findings
        runner.helper_state.clear()
        runner.helper_state.update(helper_state)
    return bool(made)


def _describe(value) -> tuple[str, str]:
    """('is' | 'may be', origin) for a message."""
    if value.kind == GRAPH:
        return "is", origin_text(value)
    return "may be", origin_text(value)


BUFFER_THEN = "the buffer then has a grad_fn"


def classify(store: Store, func: ast.FunctionDef, facts, class_name: str, after: str = "forward") -> Finding | None:
    """The finding for one store (None: not one to report); ``after``: the root method that
    made the store (``forward``, or a public method run as a root of its own)."""
    finding_ = finding
    if after != "forward":
        def finding_(code, node, message, **extra):  # the message names the method that stored it
            return finding(code, node, message.replace("after forward", f"after {after}()"), **extra)
    value = store.value
    if not (value.kind == GRAPH or (value.kind == ARG and store.grad)):
        return None
    on_self = store.root == self_name(func)
    if not on_self and store.root_value.kind != MODULE:
        return None
    attr = store.attr
    buffer = on_self and attr in facts.buffers
    maybe = value.kind != GRAPH

    def say(subject: str, verb: str, advice: str, by: str | None = None, then: str | None = None) -> str:
        return messages.store(subject, verb, value.origin or "a computation on the autograd graph",
                              messages.copy_clause("copy.deepcopy(model)", maybe=maybe), advice, maybe=maybe,
                              by=by, then=then)
    target = store.text
    extra = {"class_name": class_name, "attribute": target}
    extra["data"] = {"kind": store.kind, "method": func.name, "value_kind": value.kind, "root": store.root,
                     "node": store.node, "origin": value.origin}
    if store.kind in ("attr", "setattr"):
        if store.kind == "setattr":
            name = store.name_node
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                target = f"{store.text}.{name.value}"
                buffer = on_self and name.value in facts.buffers
            else:
                target = f"{store.text}.<{ast.unparse(name)}>"
            extra["attribute"] = target
        if buffer and target == f"{store.root}.{attr}" or (store.kind == "setattr" and buffer):
            return finding_(
                "GLF004", store.node,
                say(messages.holder(target, class_name, "buffer"), "is reassigned from",
                    "assign .detach() of the new value, or update it under torch.no_grad()", then=BUFFER_THEN),
                **extra,
            )
        if on_self and attr in facts.params and target == f"{store.root}.{attr}":
            return None  # nn.Module.__setattr__ refuses a non-Parameter here: a TypeError, not our bug
        return finding_(
            "GLF001", store.node,
            say(messages.holder(target, class_name), "keeps", "use a local variable, or store .detach()"),
            **extra,
        )
    if store.kind == "container":
        if buffer:
            return finding_(
                "GLF004", store.node,
                say(messages.holder(target, class_name, "buffer"), "is updated in place with",
                    "update it under torch.no_grad(), or with .detach() of the new value", then=BUFFER_THEN),
                **extra,
            )
        how = "by " + (f".{store.method}()" if store.method not in ("__setitem__", "+=") else
                       ("item assignment" if store.method == "__setitem__" else "+="))
        return finding_(
            "GLF002", store.node,
            say(messages.holder(target, class_name), "is given",
                "build the container in a local variable, or add .detach()", by=how),
            **extra,
        )
    if store.kind == "inplace" and buffer:
        return finding_(
            "GLF004", store.node,
            say(messages.holder(target, class_name, "buffer"), f"is updated in place (.{store.method}()) with",
                "update it under torch.no_grad(), or with .detach() of the new value", then=BUFFER_THEN),
            **extra,
        )
    if store.kind == "register_buffer":
        return finding_(
            "GLF004", store.node,
            say(f"a buffer of {class_name}", "is registered from", "register .detach() of it"),
            **extra,
        )
    return None
