"""StoreTracer (runtime/trace.py): the statements that stored a graph tensor on any object, by identity."""

from __future__ import annotations

import copy
import dataclasses
import sys
import types

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from flake8_graphleaf.runtime import find_graph_tensors  # noqa: E402
from flake8_graphleaf.runtime.trace import StoreTracer  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.graphleaf_ignore]  # it installs its own trace function


class Wrapper:
    def __init__(self, model):
        self.model = model
        self.state = {}
        self.history = []

    def step(self, x):
        out = self.model(x)
        self.last = out
        self.state["h"] = out * 2
        self.history.append(out.sum())
        self.clean = out.detach()
        setattr(self, "dynamic", out + 1)
        return out


class Watched:
    reads = 0

    @property
    def cache(self):
        Watched.reads += 1  # the tracer must never run this
        return self._cache

    @cache.setter
    def cache(self, value):
        self._cache = value


@dataclasses.dataclass
class State:
    step: int
    loss: object


def closure_maker():
    kept = {}

    def keep(name, value):
        kept[name] = value

    return kept, keep


def run_traced(fn):
    if sys.gettrace() is not None:
        pytest.skip("another trace function (a debugger, coverage) is installed")
    tracer = StoreTracer()
    assert tracer.install()
    try:
        result = fn()
    finally:
        tracer.uninstall()
    assert sys.gettrace() is None
    return tracer, result


def lines(tracer, obj, name):
    return {g.path: sorted((r.line, r.text) for r in tracer.records(g.tensor, g.holder))
            for g in find_graph_tensors(obj, name)}


def line_of(text, source=__file__):
    with open(source) as fh:
        return next(i for i, line in enumerate(fh, 1) if text in line)


def test_stores_on_plain_objects_dicts_lists_and_setattr():
    torch.manual_seed(0)

    def scenario():
        w = Wrapper(nn.Linear(3, 2))
        w.step(torch.randn(4, 3))
        return w

    tracer, w = run_traced(scenario)
    found = lines(tracer, w, "w")
    assert found == {
        "w.state['h']": [(line_of('self.state["h"] = out * 2'), 'self.state["h"] = out * 2')],
        "w.history[0]": [(line_of("self.history.append(out.sum())"), "self.history.append(out.sum())")],
        "w.last": [(line_of("self.last = out"), "self.last = out")],
        "w.dynamic": [(line_of('setattr(self, "dynamic", out + 1)'), 'setattr(self, "dynamic", out + 1)')],
    }
    assert w.clean.grad_fn is None and w.last.grad_fn is not None  # observed, not changed


def test_a_closure_a_dataclass_and_a_namespace():
    def scenario():
        model = nn.Linear(2, 2)
        out = model(torch.randn(3, 2))
        kept, keep = closure_maker()
        keep("out", out)
        state = State(1, out.sum())
        holder = types.SimpleNamespace()
        holder.ns = types.SimpleNamespace(twice=out * 2)
        return kept, state, holder

    tracer, (kept, state, holder) = run_traced(scenario)
    assert lines(tracer, kept, "kept") == {"kept['out']": [(line_of("kept[name] = value"), "kept[name] = value")]}
    assert lines(tracer, state, "state") == {
        "state.loss": [(line_of("state = State(1, out.sum())"), "state = State(1, out.sum())")]}
    assert lines(tracer, holder, "holder") == {"holder.ns.twice": [
        (line_of("holder.ns = types.SimpleNamespace(twice=out * 2)"), "holder.ns = types.SimpleNamespace(twice=out * 2)")]}


def test_a_store_into_another_container_is_not_a_store_into_this_one():
    def scenario():
        model = nn.Linear(2, 2)
        model.cache = model(torch.randn(3, 2))
        snapshot = {}
        snapshot["cache"] = model.cache  # the test's own copy of the reference
        return model, snapshot

    tracer, (model, snapshot) = run_traced(scenario)
    assert lines(tracer, model, "model") == {
        "model.cache": [(line_of("model.cache = model(torch.randn(3, 2))"), "model.cache = model(torch.randn(3, 2))")]}
    assert lines(tracer, snapshot, "snapshot") == {
        "snapshot['cache']": [(line_of('snapshot["cache"] = model.cache'), 'snapshot["cache"] = model.cache  # the '
                                                                          "test's own copy of the reference")]}


def test_the_program_runs_unchanged_and_no_property_is_read():
    def scenario():
        torch.manual_seed(1)
        w = Watched()
        model = nn.Linear(3, 1)
        w.cache = model(torch.randn(2, 3))
        w.cache = w.cache * 2  # the property's getter runs here once, by the program itself
        out = w.cache.sum()
        copied = copy.deepcopy(nn.Linear(1, 1))
        return float(out.detach()), copied

    before = Watched.reads
    plain, _ = scenario()
    reads_plain = Watched.reads - before
    tracer, (traced, _copied) = run_traced(scenario)
    assert traced == plain
    assert Watched.reads - before == 2 * reads_plain  # the tracer read nothing through the property
