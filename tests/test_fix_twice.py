"""``graphleaf fix`` run twice changes nothing the second time, on every fixture folder and on
generated cases; a fix that does not remove its finding is undone and reported, never applied
again.  The generated cases are also run with torch before and after: the fixed model computes
the same outputs and gradients (bitwise) where every applied fix is safe, and ``copy.deepcopy``
works after the fix whenever no finding is left."""

from __future__ import annotations

import ast
import copy
import itertools
import shutil
import types

import pytest

from test_cli import FIXTURES, run

from flake8_graphleaf.fix.fixer import NOT_REMOVED, fix_source

FOLDERS = ["models", "fix", "lint", "incidents", "example", "projects/metricbase", "projects/probe_train",
           "projects/wholeprogram", "projects/multifile"]


def _snapshot(root) -> dict:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
@pytest.mark.parametrize("folder", FOLDERS)
def test_second_fix_run_changes_nothing(tmp_path, folder, unsafe):
    work = tmp_path / "tree"
    shutil.copytree(FIXTURES / folder, work)
    flags = ["--unsafe-fixes"] if unsafe else []
    first = run("fix", *flags, ".", cwd=work)
    assert first.returncode in (0, 1), first.stdout + first.stderr
    assert "Traceback" not in first.stdout + first.stderr
    after_first = _snapshot(work)
    for name, data in after_first.items():
        if name.endswith(".py"):
            text = data.decode("utf-8")
            assert "with torch.no_grad():\n" + " " * 12 + "with torch.no_grad():" not in text, name
            for cls in (n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.ClassDef)):
                methods = [s.name for s in cls.body if isinstance(s, ast.FunctionDef)]
                assert methods.count("__getstate__") <= 1, (name, cls.name)
    second = run("fix", *flags, ".", cwd=work)
    assert "Fixed 0 findings in 0 files" in second.stdout, second.stdout
    assert _snapshot(work) == after_first
    # what the first run left is what the second run reports left, line for line
    left = lambda out: sorted(ln.split(": ", 1)[0] for ln in out.splitlines() if " left: " in ln)  # noqa: E731
    assert left(second.stdout) == left(first.stdout)


# -- generated cases ----------------------------------------------------------------------------
# Each snippet: (lines in __init__, lines in forward, does the return read the buffer).
SNIPPETS = {
    "public_attr": ([], ["self.last = h"], False),
    "private_attr": ([], ["self._last = h * 2"], False),
    "buffer_new": ([], ["self.buf = h.mean(0)"], False),
    "buffer_existing_read": ([], ["m = h.mean(0)", "self.buf = m"], True),
    "buffer_from_attr": ([], ["self.pos = h[0]", "self.buf = self.pos"], True),
    "buffer_inplace": ([], ["self.buf.mul_(0.9).add_(0.1 * h.mean(0))"], True),
    "container": (["self.feats = []"], ["self.feats.append(h)"], False),
    "dynamic_names": ([], ['for k in ("a", "b"):', '    setattr(self, f"_t_{k}", h * 3)'], False),
    "dict_store": (["self.cache = {}"], ['self.cache["h"] = h'], False),
    "register_in_forward": ([], ['self.register_buffer("seen", h.sum(0))'], False),
}


def _case(names) -> str:
    init, body, reads = [], [], False
    for n in names:
        i, b, r = SNIPPETS[n]
        init += i
        body += b
        reads |= r
    lines = ["import torch", "import torch.nn as nn", "", "", "class Gen(nn.Module):",
             "    def __init__(self):", "        super().__init__()", "        self.fc = nn.Linear(4, 4)",
             '        self.register_buffer("buf", torch.zeros(4))']
    lines += ["        " + ln for ln in init]
    lines += ["", "    def forward(self, x):", "        h = self.fc(x)"]
    lines += ["        " + ln for ln in body]
    lines += ["        return h + self.buf" if reads else "        return h", ""]
    return "\n".join(lines)


CASES = [(n,) for n in SNIPPETS] + list(itertools.combinations(SNIPPETS, 2))


@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
def test_generated_cases_fix_once(unsafe):
    for names in CASES:
        src = _case(names)
        first = fix_source(src, "gen.py", unsafe=unsafe)
        ast.parse(first.source)
        second = fix_source(first.source, "gen.py", unsafe=unsafe)
        assert second.source == first.source and not second.applied, (names, first.source)
        assert first.source.count("def __getstate__") <= 1, names
        assert "with torch.no_grad():\n            with torch.no_grad():" not in first.source, names


def _load(text: str, name: str):
    module = types.ModuleType(name)
    exec(compile(text, f"{name}.py", "exec"), module.__dict__)
    return module


def _step(torch, module, state, x):
    torch.manual_seed(0)
    model = module.Gen()
    model.load_state_dict(state)
    x = x.clone().requires_grad_(True)
    out = model(x)
    out.sum().backward()
    return model, out.detach(), x.grad, {n: p.grad for n, p in model.named_parameters()}


def _copies(model) -> bool:
    try:
        copy.deepcopy(model)
    except RuntimeError as exc:
        assert "graph leaves" in str(exc)
        return False
    return True


@pytest.mark.torch
@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
def test_generated_cases_run_the_same_and_copy_after_the_fix(unsafe):
    torch = pytest.importorskip("torch")
    x = torch.randn(3, 4)
    for names in CASES:
        src = _case(names)
        res = fix_source(src, "gen.py", unsafe=unsafe)
        old, new = _load(src, "gen_old"), _load(res.source, "gen_new")
        torch.manual_seed(0)
        state = old.Gen().state_dict()
        a, out_a, gx_a, g_a = _step(torch, old, state, x)
        b, out_b, gx_b, g_b = _step(torch, new, state, x)
        assert not _copies(a), names  # every snippet breaks the copy
        if all(f.fix.applicability == "safe" for f in res.applied):
            assert torch.equal(out_a, out_b) and torch.equal(gx_a, gx_b), names
            assert all(torch.equal(g_a[k], g_b[k]) for k in g_a), names
        if not res.skipped:
            assert _copies(b), (names, res.source)
        assert not [why for _, why in res.skipped if why == NOT_REMOVED], (names, res.skipped)


def test_a_fix_that_does_not_remove_its_finding_is_undone(monkeypatch):
    """A fixer whose GLF004 fix wraps in no_grad whatever the value (the bug of issue 20): the
    wrap is undone, reported, and not applied on later rounds."""
    from flake8_graphleaf.analysis.findings import UNSAFE, Fix
    from flake8_graphleaf.fix import attach
    from flake8_graphleaf.fix.cst import wrap_no_grad

    def always_no_grad(f, ctx):
        line, col = ctx.text.start(ctx.method(f).body[-2])
        return Fix(UNSAFE, "update the buffer under torch.no_grad()", (wrap_no_grad(ctx, line, col),))

    monkeypatch.setattr(attach, "fix_buffer", always_no_grad)
    monkeypatch.setattr(attach, "on_self", lambda f, classes: False)  # no copy-safe fallback
    src = _case(["buffer_existing_read"])
    res = fix_source(src, "gen.py", unsafe=True)
    assert res.source == src and not res.applied
    assert [(f.code, why) for f, why in res.skipped] == [("GLF004", NOT_REMOVED)]


def test_the_cli_reports_a_fix_that_did_not_work(tmp_path, monkeypatch):
    src = _case(["buffer_from_attr"])
    (tmp_path / "m.py").write_text(src)
    r = run("fix", "--unsafe-fixes", "m.py", cwd=tmp_path)
    text = (tmp_path / "m.py").read_text()
    assert "no_grad" not in text  # an existing graph tensor is never wrapped in no_grad
    assert "Fixed 0 findings" not in r.stdout, r.stdout
    again = run("fix", "--unsafe-fixes", "m.py", cwd=tmp_path)
    assert "Fixed 0 findings in 0 files" in again.stdout and (tmp_path / "m.py").read_text() == text


def test_an_existing_graph_tensor_is_detached_never_wrapped_in_no_grad():
    src = _case(["buffer_from_attr"]).replace("        return h + self.buf", "        return h")
    res = fix_source(src, "gen.py")  # safe fixes: forward does not read the buffer afterwards
    assert "self.buf = self.pos.detach()" in res.source and "no_grad" not in res.source, res.source
    assert [f.code for f in res.applied].count("GLF004") == 1


def test_a_run_time_name_extends_the_generated_method_to_every_attribute():
    first = fix_source(_case(["public_attr"]), "gen.py").source
    assert 'state["last"] = detached(state["last"])' in first  # the small method: one tensor
    more = first.replace("        self.last = h\n", '        self.last = h\n        setattr(self, "_t_" + str(len(h)), h)\n')
    again = fix_source(more, "gen.py")
    assert again.source.count("def __getstate__") == 1
    assert "for name in list(state):" in again.source and '("last", "_buffers")' not in again.source
    assert fix_source(again.source, "gen.py").source == again.source


def test_a_loop_over_every_entry_covers_only_when_it_detaches():
    from flake8_graphleaf.analysis import analyze_source

    src = _case(["dynamic_names"])
    moving = src + ('\n    def __getstate__(self):\n        state = self.__dict__.copy()\n'
                    '        for name in list(state):\n            state[name] = state[name]\n        return state\n')
    assert [f.code for f in analyze_source(moving, "gen.py")] == ["GLF001"]  # nothing detached: still reported
    detaching = moving.replace("state[name] = state[name]\n", "state[name] = state[name].detach()\n")
    assert analyze_source(detaching, "gen.py") == []
