"""The copy-safe fix (fix/copysafe.py) on its own: the generated __getstate__ with torch, extending
an existing one, chaining to a base, idempotence, Python 3.10 (no object.__getstate__), no-fix cases."""

from __future__ import annotations

import copy
import os
import subprocess
import textwrap

import pytest

from flake8_graphleaf.fix.fixer import fix_source
from flake8_graphleaf.project.index import ProjectIndex

SRC = textwrap.dedent('''
    import torch
    import torch.nn as nn
    from collections import namedtuple

    Pair = namedtuple("Pair", "a b")


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)
            self.leaf = torch.ones(2, requires_grad=True)

        def forward(self, x):
            out = self.lin(x)
            self.cache = out
            self.items = [out, 1, "s", (out * 2, None)]
            self.table = {"a": out, "b": {"c": out + 1}}
            self.pair = Pair(out, 3)
            return out
''')


class _NoReaders:
    def attribute_reads(self, name):
        return []

    def dynamic_access(self):
        return []


def _load(source, name="m"):
    ns = {"__name__": name}
    exec(compile(source, f"<{name}>", "exec"), ns)
    return ns


def test_generated_getstate_detaches_copies_and_leaves_the_original():
    torch = pytest.importorskip("torch")
    res = fix_source(SRC, "m.py")
    assert len(res.applied) == 4 and all(f.fix.applicability == "safe" for f in res.applied)
    assert res.source.count("def __getstate__") == 1
    ns = _load(res.source)
    torch.manual_seed(0)
    model = ns["Net"]()
    out = model(torch.randn(2, 3))
    out.sum().backward()
    clone = copy.deepcopy(model)
    assert model.cache.grad_fn is not None and model.items[0].grad_fn is not None  # the original keeps its graph
    assert clone.cache.grad_fn is None and torch.equal(clone.cache, model.cache)
    assert clone.items[1:3] == [1, "s"] and clone.items[3][0].grad_fn is None and clone.items[3][1] is None
    assert clone.table["b"]["c"].grad_fn is None and type(clone.pair).__name__ == "Pair" and clone.pair.b == 3
    assert clone.leaf.requires_grad and clone.leaf.is_leaf  # a leaf is copied as deepcopy copies it
    # a second run changes nothing; a new attribute extends the list
    assert fix_source(res.source, "m.py").source == res.source
    more = res.source.replace("        return out\n", "        self.extra = out.exp()\n        return out\n", 1)
    again = fix_source(more, "m.py")
    assert again.source.count("def __getstate__") == 1
    assert '"pair", "extra", "_buffers")' in again.source and fix_source(again.source, "m.py").source == again.source


def test_existing_getstate_is_extended_or_left_with_a_reason():
    hand = SRC.replace("        return out\n", '''        return out

    def __getstate__(self):
        state = self.__dict__.copy()
        state.pop("lock", None)
        return state
''')
    res = fix_source(hand, "m.py")
    assert "state.pop(\"lock\", None)" in res.source and "def detached(value, seen=()):" in res.source
    assert res.source.index("def detached") < res.source.rindex("return state")
    assert fix_source(res.source, "m.py").source == res.source
    odd = SRC.replace("        return out\n", '''        return out

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k != "lock"}
''')
    res = fix_source(odd, "m.py")
    assert res.source == odd
    # the copy-safe fix is refused with its reason; only the unsafe fallback (.detach()) is left
    reasons = {f.data.get("no_fix", "") + why for f, why in res.skipped}
    assert any("not one the fixer can extend" in why for why in reasons), reasons


def test_base_with_getstate_is_chained():
    src = SRC.replace("class Net(nn.Module):", '''class Base(nn.Module):
    def __getstate__(self):
        state = super().__getstate__()
        return state


class Net(Base):''')
    res = fix_source(src, "m.py")
    assert "state = dict(super().__getstate__())" in res.source


def test_private_attribute_choice_follows_the_readers():
    src = SRC.replace("self.cache", "self._cache")
    # no project: the attribute may be read elsewhere, the copy-safe fix
    assert '"_cache"' in fix_source(src, "m.py").source
    # a project with no reader: a local variable
    fixed = fix_source(src, "m.py", project=_NoReaders()).source
    assert "self._cache" not in fixed
    # the public ones are never renamed, even with no reader in the project
    assert '("items", "table", "pair", "_buffers")' in fixed


def test_hook_holder_class_gets_the_getstate(tmp_path):
    torch = pytest.importorskip("torch")
    src = textwrap.dedent('''
        import torch.nn as nn


        class Tap:
            def __init__(self, layer):
                self.out = None
                layer.register_forward_hook(self.hook)

            def hook(self, module, inputs, output):
                self.out = output
    ''')
    res = fix_source(src, "tap.py")
    assert "import torch\n" in res.source  # torch is imported inside the method when the file has no `import torch`
    ns = _load(res.source, "tap")
    lin = torch.nn.Linear(2, 2)
    tap = ns["Tap"](lin)
    lin(torch.randn(1, 2)).sum().backward()
    clone = copy.deepcopy(lin)
    holder = next(iter(clone._forward_hooks.values())).__self__
    assert holder.out.grad_fn is None and tap.out.grad_fn is not None


PY310 = os.path.expanduser("~/.pyenv/versions/3.10.13/bin/python")


@pytest.mark.skipif(not os.path.exists(PY310), reason="no Python 3.10 here")
def test_generated_getstate_on_python_310(tmp_path):
    """object has no __getstate__ before 3.11: the generated method falls back to __dict__ (a stub torch)."""
    src = fix_source(textwrap.dedent('''
        import torch


        class Tap:
            def hook(self, module, inputs, output):
                self.out = output

            def attach(self, layer):
                layer.register_forward_hook(self.hook)
    '''), "tap.py").source
    assert "def __getstate__" in src
    (tmp_path / "torch.py").write_text("class Tensor:\n    grad_fn = object()\n    def detach(self):\n"
                                       "        t = Tensor(); t.grad_fn = None; return t\n"
                                       "class nn:\n    class Module:\n        pass\n")
    (tmp_path / "tap.py").write_text(src)
    prog = ("import copy, pickle, sys, torch, tap\nassert not hasattr(object, '__getstate__')\n"
            "t = tap.Tap(); t.out = [torch.Tensor()]\nc = copy.deepcopy(t)\n"
            "assert c.out[0].grad_fn is None and t.out[0].grad_fn is not None\n"
            "e = copy.deepcopy(tap.Tap())\nprint('ok')\n")
    r = subprocess.run([PY310, "-c", prog], cwd=tmp_path, capture_output=True, text=True)
    assert r.stdout.strip() == "ok", r.stderr


def test_project_index_sees_readers_in_other_files(tmp_path):
    (tmp_path / "a.py").write_text("print(probe.last.shape)\nx = getattr(m, 'aux')\ny = getattr(m, name)\n")
    index = ProjectIndex.build([str(tmp_path)])
    assert [r.how for r in index.attribute_reads("last")] == ["attr"]
    assert [r.how for r in index.attribute_reads("aux")] == ["getattr"]
    assert index.dynamic_access() == [(str(tmp_path / "a.py"), 3)]


def test_dict_and_setattr_stores_are_covered():
    torch = pytest.importorskip("torch")
    src = SRC.replace("        self.cache = out\n", '        self.__dict__["cache"] = out\n        setattr(self, "gate", out.sigmoid())\n')
    res = fix_source(src, "m.py")
    assert '("cache", "gate", "items", "table", "pair", "_buffers")' in res.source, res.source
    ns = _load(res.source)
    model = ns["Net"]()
    model(torch.randn(2, 3))
    clone = copy.deepcopy(model)
    assert clone.cache.grad_fn is None and clone.gate.grad_fn is None and model.gate.grad_fn is not None
