"""Fix pairs executed with torch: the original breaks copy.deepcopy, the fixed file (as
the fixer writes it) does not, and computes the same thing where the fix is safe."""

from __future__ import annotations

import copy
import importlib.util
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "fix"


def load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem.replace(".", "_"), path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def graph_leaves_error(obj) -> bool:
    try:
        copy.deepcopy(obj)
    except RuntimeError as e:
        return "graph leaves" in str(e)
    return False


def test_legacy_norms_and_their_removal(recwarn) -> None:
    old = load(FIX / "vocoder.py")
    new = load(FIX / "vocoder.unsafe.fixed.py")
    torch.manual_seed(0)
    before = old.ResBlock(4)
    torch.manual_seed(0)
    after = new.ResBlock(4)
    x = torch.randn(2, 4, 16)
    before(x).sum().backward()
    after(x).sum().backward()
    assert graph_leaves_error(before)
    assert not graph_leaves_error(after)
    # the weight-norm part computes the same weight from the same g and v
    with torch.no_grad():
        w_old = before.conv.weight
        w_new = after.conv.weight
    assert torch.allclose(w_old, w_new)
    # the fixed remove_weight_norm undoes the parametrization and keeps the weight
    after.remove_weight_norm()
    assert not hasattr(after.conv, "parametrizations") or "weight" not in after.conv.parametrizations
    assert torch.allclose(after.conv.weight, w_new)
    assert not graph_leaves_error(after)


def test_encoder_features_rename_is_exact() -> None:
    old = load(FIX / "encoder_features.py")
    new = load(FIX / "encoder_features.fixed.py")
    torch.manual_seed(0)
    a = old.Encoder()
    b = new.Encoder()
    b.load_state_dict(a.state_dict())
    x = torch.randn(1, 3, 8, 8)
    out_a, out_b = a(x), b(x)
    assert all(torch.equal(p, q) for p, q in zip(out_a, out_b))
    sum(o.sum() for o in out_a).backward()
    sum(o.sum() for o in out_b).backward()
    for (n, p), (_, q) in zip(a.named_parameters(), b.named_parameters()):
        assert torch.equal(p.grad, q.grad), n
    assert graph_leaves_error(a)
    assert not graph_leaves_error(b)


def test_buffer_fix_keeps_values_and_allows_deepcopy() -> None:
    old = load(FIX / "running_stats.py")
    new = load(FIX / "running_stats.fixed.py")
    a, b = old.RunningCenter(3), new.RunningCenter(3)
    x = torch.randn(5, 3, requires_grad=True)
    y = x.detach().clone().requires_grad_(True)
    out_a, out_b = a(x), b(y)
    assert torch.equal(out_a, out_b)
    out_a.sum().backward()
    out_b.sum().backward()
    assert torch.equal(x.grad, y.grad)
    assert torch.equal(a.center, b.center) and torch.equal(a.scale, b.scale)
    assert graph_leaves_error(a)
    assert not graph_leaves_error(b)
