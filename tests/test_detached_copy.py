"""``deepcopy_detached``: the same copy as ``copy.deepcopy`` where that works, a working one where it does not."""

from __future__ import annotations

import copy
import glob
import os
import threading

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from flake8_graphleaf.cli.explain import _call, _scalar  # noqa: E402
from flake8_graphleaf.runtime import deepcopy_detached, find_graph_tensors  # noqa: E402
from flake8_graphleaf.runtime.targets import resolve_target  # noqa: E402

pytestmark = pytest.mark.torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = sorted(glob.glob(os.path.join(ROOT, "fixtures", "models", "*.py")))


def tensors(obj):
    """(path, tensor) of every tensor in the module tree and its plain attributes, in a fixed order."""
    out = []
    if isinstance(obj, nn.Module):
        for name, m in obj.named_modules(remove_duplicate=False):
            for k, v in sorted(vars(m).items()):
                if isinstance(v, torch.Tensor):
                    out.append((f"{name}.{k}", v))
            for k, v in m.named_parameters(recurse=False):
                out.append((f"{name}.{k}", v))
            for k, v in m.named_buffers(recurse=False):
                out.append((f"{name}.{k}", v))
    return out


def shared_pairs(items):
    ids: dict[int, str] = {}
    pairs = set()
    for path, t in items:
        if id(t) in ids:
            pairs.add((ids[id(t)], path))
        else:
            ids[id(t)] = path
    return pairs


def assert_same_copy(a, b):
    ta, tb = tensors(a), tensors(b)
    assert [p for p, _ in ta] == [p for p, _ in tb]
    for (p, x), (_, y) in zip(ta, tb):
        assert type(x) is type(y), p
        assert x.dtype == y.dtype and x.shape == y.shape and x.stride() == y.stride(), p
        assert x.requires_grad == y.requires_grad, p
        assert torch.equal(x, y), p
    assert shared_pairs(ta) == shared_pairs(tb)
    assert [type(m) for m in a.modules()] == [type(m) for m in b.modules()]
    assert a.training == b.training


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4)
        self.out = nn.Linear(4, 10, bias=False)
        self.out.weight = self.emb.weight  # tied
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))
        self.scale = torch.ones(4, requires_grad=True)  # a plain leaf that requires grad
        self.alias = self.scale
        self.view = self.steps.view(1)  # a view of a buffer
        self.blocks = nn.ModuleList([nn.Linear(4, 4)] * 2)  # the same module twice
        self.config = {"dims": [4, 10], "name": "tied"}


def test_same_as_deepcopy_without_graph_tensors():
    for model in (Tied(), nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU()), nn.LSTM(3, 5, 2)):
        model(torch.zeros(1, 3, 8, 8)) if isinstance(model, nn.Sequential) else None
        ours, theirs = deepcopy_detached(model), copy.deepcopy(model)
        assert_same_copy(ours, theirs)
        assert_same_copy(ours, model)
    c = deepcopy_detached(Tied())
    assert c.out.weight is c.emb.weight and c.alias is c.scale and c.blocks[0] is c.blocks[1]
    assert c.view.untyped_storage().data_ptr() == c.steps.untyped_storage().data_ptr()
    assert c.scale.requires_grad and c.scale.is_leaf


def test_graph_tensors_are_detached_shared_and_the_original_untouched():
    m = Tied()
    out = m.out(m.emb(torch.tensor([1, 2])))
    m.cache = out
    m.extra = {"again": out, "half": out[0]}  # out[0] is a view of out
    state = {k: v.clone() for k, v in m.state_dict().items()}
    before = {id(mod): dict(vars(mod)) for mod in m.modules()}
    c = deepcopy_detached(m)
    assert c.cache is c.extra["again"] and not c.cache.requires_grad and c.cache.grad_fn is None
    assert torch.equal(c.cache, out) and c.cache.data_ptr() != out.data_ptr()
    assert c.extra["half"].untyped_storage().data_ptr() == c.cache.untyped_storage().data_ptr()
    assert m.cache is out and out.grad_fn is not None and m.extra["again"] is out
    assert {id(mod): dict(vars(mod)) for mod in m.modules()} == before
    assert all(torch.equal(state[k], v) for k, v in m.state_dict().items())
    with pytest.raises(RuntimeError, match="graph leaves"):
        copy.deepcopy(m)  # still: nothing was swapped in and left behind


def test_a_non_leaf_grad_is_detached():
    w = torch.randn(3, requires_grad=True)
    (g,) = torch.autograd.grad((w * w).sum(), w, create_graph=True)
    w.grad = g
    c = deepcopy_detached({"w": w})
    assert c["w"].requires_grad and c["w"].grad is not None and c["w"].grad.grad_fn is None
    assert torch.equal(c["w"].grad, g) and w.grad is g


def test_threads_copy_the_same_model_at_once():
    m = nn.Linear(4, 4)
    m.cache = m(torch.randn(2, 4))
    errors = []

    def work():
        try:
            for _ in range(20):
                assert not deepcopy_detached(m).cache.requires_grad
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and m.cache.grad_fn is not None


def _step(path):
    target = resolve_target(path + ":make_model")
    model = target.obj()
    inputs = target.sibling("make_inputs")()
    step = target.sibling("training_step")
    model.train()
    with torch.enable_grad():
        try:
            loss = step(model, inputs) if callable(step) else _scalar(_call(model, inputs, torch), torch)
            if target.sibling("STEP_BACKWARD") is not False and isinstance(loss, torch.Tensor) and loss.requires_grad:
                (loss if loss.dim() == 0 else loss.sum()).backward()
        except RuntimeError as exc:
            if "graph leaves" not in str(exc):
                raise
    return model


def _snapshot(model):
    return [(p, t.detach().clone(), t.grad_fn, t.requires_grad) for p, t in tensors(model)], \
        {id(mod): dict(vars(mod)) for mod in model.modules()}


@pytest.mark.parametrize("path", FIXTURES, ids=[os.path.basename(p) for p in FIXTURES])
def test_every_fixture_model_after_a_step(path):
    model = _step(path)
    (before, dicts) = _snapshot(model)
    c = deepcopy_detached(model)
    assert find_graph_tensors(c) == []
    copy.deepcopy(c)  # the copy is an ordinary, deep-copyable model
    after, dicts_after = _snapshot(model)
    assert dicts_after == dicts
    for (p, x, fn, rg), (_, y, fn2, rg2) in zip(before, after):
        assert fn is fn2 and rg == rg2, p
        assert x.dtype == y.dtype and torch.equal(x.view(-1).view(torch.uint8) if x.numel() else x,
                                                   y.view(-1).view(torch.uint8) if y.numel() else y), p
    for (p, x), (_, y) in zip(tensors(model), tensors(c)):
        assert torch.equal(x.detach(), y), p
        assert y.requires_grad == (x.requires_grad and x.is_leaf), p


def test_the_ema_recipe_in_the_docs_runs():
    import re
    import subprocess
    import sys

    text = open(os.path.join(ROOT, "docs", "runtime.md"), encoding="utf-8").read()
    recipe = next(b for b in re.findall(r"```python\n(.*?)```", text, flags=re.S) if "AveragedModel" in b)
    r = subprocess.run([sys.executable, "-c", recipe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "ema ok False Net" in r.stdout, r.stderr
