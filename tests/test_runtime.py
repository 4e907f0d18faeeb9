"""The runtime locator: the deepcopy-faithful walk, the static mapping, trace_stores."""

from __future__ import annotations

import copy
import dataclasses
import functools
import glob
import os

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from flake8_graphleaf.analysis import analyze_source  # noqa: E402
from flake8_graphleaf.runtime import explain, find_graph_tensors, trace_stores  # noqa: E402
from flake8_graphleaf.runtime.targets import resolve_target  # noqa: E402

pytestmark = pytest.mark.torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = sorted(glob.glob(os.path.join(ROOT, "fixtures", "models", "*.py")))


def graph():
    return nn.Linear(3, 3)(torch.randn(2, 3))


def paths(obj, name="obj"):
    return [g.path for g in find_graph_tensors(obj, name)]


def raises(obj):
    try:
        copy.deepcopy(obj)
    except RuntimeError as exc:
        return "graph leaves" in str(exc)
    return False


# ---------------------------------------------------------------- the walk


def test_plain_containers_and_leaves():
    t = graph()
    obj = {"a": [1, (2, t)], "leaf": torch.randn(2, requires_grad=True), "det": t.detach()}
    assert paths(obj) == ["obj['a'][1][1]"]
    assert paths([torch.zeros(2), nn.Parameter(torch.ones(2))]) == []


def test_report_fields():
    (g,) = find_graph_tensors({"x": graph()})
    assert g.shape == (2, 3) and g.dtype == "float32" and g.device == "cpu"
    assert g.grad_fn == "AddmmBackward0" and g.requires_grad


def test_module_paths_params_buffers_attrs():
    m = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    m[1].cache = graph()
    m[0].register_buffer("rm", graph())
    assert paths(m, "model") == ["model[0].rm", "model[1].cache"]
    assert raises(m)


def test_cycle():
    a = []
    b = {"a": a}
    a.append(b)
    t = graph()
    a.append(t)
    assert paths(a) == ["obj[1]"]


def test_deep_nesting_no_recursion_error():
    t = graph()
    deep = [t]
    for _ in range(10_000):
        deep = [deep]
    (g,) = find_graph_tensors(deep)
    assert g.path == "obj" + "[0]" * 10_001


def test_slots():
    class Slotted:
        __slots__ = ("x", "y")

        def __init__(self, x):
            self.x = x

    assert paths(Slotted(graph())) == ["obj.x"]
    assert raises(Slotted(graph()))


def test_dataclass():
    @dataclasses.dataclass
    class State:
        step: int
        last: object

    assert paths(State(1, graph())) == ["obj.last"]


class Stateful:
    def __init__(self, t):
        self.keep = t.detach()
        self.hidden = t

    def __getstate__(self):
        return {"kept": self.keep, "also": [self.hidden]}


def test_getstate():
    obj = Stateful(graph())
    assert paths(obj) == ["obj.also[0]"]
    assert raises(obj)


class DropsTensor:
    def __init__(self, t):
        self.t = t
        self.n = 3

    def __deepcopy__(self, memo):
        new = DropsTensor.__new__(DropsTensor)
        new.t = None
        new.n = self.n
        return new


class CopiesTensor(DropsTensor):
    def __deepcopy__(self, memo):
        new = CopiesTensor.__new__(CopiesTensor)
        new.t = copy.deepcopy(self.t, memo)
        return new


def test_deepcopy_override_that_drops_the_tensor_is_not_reported():
    m = nn.Linear(2, 2)
    m.helper = DropsTensor(graph())
    assert not raises(m)
    assert paths(m, "model") == []


def test_deepcopy_override_that_copies_the_tensor_is_reported():
    m = nn.Linear(2, 2)
    m.helper = CopiesTensor(graph())
    assert raises(m)
    assert paths(m, "model") == ["model.helper.t"]


class Saver:
    def __init__(self):
        self.hidden = None

    def hook(self, module, inputs, output):
        self.hidden = output


def test_bound_method_hook_drags_in_self():
    m = nn.Sequential(nn.Linear(2, 2))
    saver = Saver()
    handle = m[0].register_forward_hook(saver.hook)
    m(torch.randn(1, 2))
    (g,) = find_graph_tensors(m, "model")
    assert g.path == f"model[0]._forward_hooks[{handle.id}].__self__.hidden"
    assert g.owner_class == "Saver" and g.attribute == "hidden"
    assert raises(m)


def test_function_hook_closure_is_not_reached():
    feats = {}
    m = nn.Linear(2, 2)
    m.register_forward_hook(lambda mod, i, o: feats.__setitem__("x", o))
    m(torch.randn(1, 2))
    assert not raises(m)
    assert paths(m, "model") == []


def test_partial_hook_args_are_reached():
    def hook(store, module, inputs, output):
        pass

    m = nn.Linear(2, 2)
    handle = m.register_forward_hook(functools.partial(hook, graph()))
    assert raises(m)
    assert paths(m, "model") == [f"model._forward_hooks[{handle.id}].args[0]"]


def test_parameter_grad_dropped_but_tensor_grad_reached():
    p = nn.Parameter(torch.ones(2))
    (p * graph().sum()).sum().backward(create_graph=True)
    assert p.grad.grad_fn is not None
    assert paths([p]) == []
    assert not raises([p])
    t = torch.ones(2, requires_grad=True)
    (t * graph().sum()).sum().backward(create_graph=True)
    assert paths([t]) == ["obj[0].grad"]
    assert raises([t])


def test_each_tensor_once_at_first_path():
    t = graph()
    assert paths({"a": t, "b": [t]}) == ["obj['a']"]


def test_does_not_mutate():
    src = resolve_target(os.path.join(ROOT, "fixtures", "models", "depth_encoder_features.py") + ":make_model")
    model = src.obj()
    model.train()
    model(*src.sibling("make_inputs")())
    model.extra = Stateful(graph())
    model.helper = DropsTensor(graph())
    before_sd = {k: (v, v.clone()) for k, v in model.state_dict(keep_vars=True).items()}
    before_dicts = {n: (m.__dict__.copy(), dict(m._parameters), dict(m._buffers), dict(m._modules))
                    for n, m in model.named_modules()}
    features = list(model.encoder.features)
    explain(model, print_result=False)
    after_sd = model.state_dict(keep_vars=True)
    assert before_sd.keys() == after_sd.keys()
    for k, (v, clone) in before_sd.items():
        assert after_sd[k] is v and torch.equal(v, clone)
        assert v.grad_fn is None or v.grad_fn is after_sd[k].grad_fn
    for n, m in model.named_modules():
        d, p, b, sub = before_dicts[n]
        assert m.__dict__ == d and dict(m._parameters) == p and dict(m._buffers) == b and dict(m._modules) == sub
    assert model.encoder.features == features


def test_trace_stores_records_setattr_and_inplace_without_changing_results():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)
            self.register_buffer("rm", torch.zeros(3))

        def forward(self, x):
            out = self.lin(x)
            self.cache = out
            self.rm.add_(out.mean(0))
            return out

    torch.manual_seed(0)
    a = Net()
    x = torch.randn(4, 3)
    plain = a(x)
    torch.manual_seed(0)
    b = Net()
    with trace_stores(b) as log:
        traced = b(x)
    assert torch.equal(plain, traced)
    assert nn.Module.__setattr__ is nn.Module.__dict__["__setattr__"]
    assert [(r.module, r.attribute, r.how) for r in log] == [
        ("model", "cache", "assignment"), ("model", "rm", "in-place .add_()")]
    here = os.path.abspath(__file__)
    assert all(r.file == here for r in log)
    items = explain(b, trace=log, print_result=False)
    assert {g.path for g in items} == {"model.cache", "model.rm"}
    assert all(any(s.traced for s in g.sources) for g in items)


def test_trace_stores_restores_setattr_on_error():
    original = nn.Module.__setattr__
    with pytest.raises(ValueError):
        with trace_stores(nn.Linear(2, 2)):
            raise ValueError
    assert nn.Module.__setattr__ is original


# ---------------------------------------------------------------- the fixtures vs. the static findings


STORE_CODES = {"GLF001", "GLF002", "GLF003", "GLF004", "GLF005", "GLF101", "GLF102"}


MY_FIXTURES = {
    "cache_last_output.py", "seg_head_loss.py", "depth_encoder_features.py", "forward_hook_saver.py",
    "running_mean_buffer.py", "legacy_weight_norm.py", "detached_cache.py", "no_grad_buffer.py",
}


def _run_fixture(path):
    """One training step as `graphleaf explain` runs it; returns (target, model, step raised graph-leaf error)."""
    target = resolve_target(path + ":make_model")
    model = target.obj()
    inputs = target.sibling("make_inputs")()
    model.train()
    step_crashed = False
    with torch.enable_grad():
        step = target.sibling("training_step")
        try:
            loss = step(model, inputs) if step else model(*inputs).sum()
            if target.sibling("STEP_BACKWARD") is not False:
                loss.backward()
        except RuntimeError as exc:  # e.g. a deepcopy inside the step itself
            if "graph leaves" not in str(exc):
                raise
            step_crashed = True
    return target, model, step_crashed


@pytest.mark.parametrize("path", FIXTURES, ids=[os.path.basename(p) for p in FIXTURES])
def test_fixture_tensors_map_to_static_findings(path):
    target, model, step_crashed = _run_fixture(path)
    with open(path, encoding="utf-8") as fh:
        static = analyze_source(fh.read(), path)
    items = explain(model, extra_files=[target.file], print_result=False)
    assert raises(model) == bool(items), "the locator and deepcopy disagree"
    if target.sibling("EXPECT_CRASH") is False:
        assert not items and not step_crashed
    static_lines = {(f.line, f.code) for f in static if f.code in STORE_CODES}
    found_lines = set()
    for item in items:
        assert item.sources, f"{item.path} has no source line"
        for s in item.sources:
            assert os.path.abspath(s.file) == os.path.abspath(path)
            assert (s.line, s.code) in static_lines
            found_lines.add((s.line, s.code))
    if os.path.basename(path) in MY_FIXTURES:
        assert bool(items) == target.sibling("EXPECT_CRASH")
        # ... and every static store finding of the fixture is the source of some tensor found at run time.
        assert found_lines == static_lines


def test_legacy_norm_maps_each_weight_to_its_own_call():
    path = os.path.join(ROOT, "fixtures", "models", "legacy_weight_norm.py")
    _, model, _ = _run_fixture(path)
    for item in explain(model, print_result=False):
        assert [(s.code, s.line) for s in item.sources] == [("GLF101", 11)]


EXPECTED_PATHS = {
    "cache_last_output.py": ["model.cache"],
    "seg_head_loss.py": ["model.head.loss"],
    "depth_encoder_features.py": [f"model.encoder.features[{i}]" for i in range(4)],
    "running_mean_buffer.py": ["model.norm.running_mean"],
    "legacy_weight_norm.py": [f"model.blocks[{i}].conv.weight" for i in range(3)],
    "detached_cache.py": [],
    "no_grad_buffer.py": [],
}


@pytest.mark.parametrize("name", sorted(EXPECTED_PATHS))
def test_fixture_paths(name):
    _, model, _ = _run_fixture(os.path.join(ROOT, "fixtures", "models", name))
    assert paths(model, "model") == EXPECTED_PATHS[name]


def test_hook_fixture_path():
    _, model, _ = _run_fixture(os.path.join(ROOT, "fixtures", "models", "forward_hook_saver.py"))
    (g,) = find_graph_tensors(model)
    assert g.path.startswith("model.features[2]._forward_hooks[") and g.path.endswith("].__self__.hidden")


def test_class_whose_module_is_not_in_sys_modules_maps_through_its_code(tmp_path):
    import importlib.util
    import sys

    src = tmp_path / "cfgnet.py"
    src.write_text(
        "import torch.nn as nn\n"
        "class CfgNet(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(2, 2)\n"
        "    def forward(self, x):\n        self.last = self.fc(x)\n        return self.last\n"
    )
    spec = importlib.util.spec_from_file_location("never_registered_cfgnet", src)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert "never_registered_cfgnet" not in sys.modules
    m = mod.CfgNet()
    m(torch.randn(1, 2))
    (item,) = explain(m, print_result=False)
    assert [(s.line, s.code) for s in item.sources] == [(7, "GLF001")]
    assert item.sources[0].file == str(src)
