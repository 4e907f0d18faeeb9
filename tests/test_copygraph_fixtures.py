"""fixtures/projects/copygraph: running the code agrees with every marker.

Each broken scenario (``shopgraph.scenarios.run_<name>``) dies with the graph-leaf RuntimeError
at its line marked GLF202 (the innermost frame of the project in the traceback), or fails at its
process boundary, the line marked GLF301 (in a subprocess: a hang counts as failing); each clean
twin (``run_<name>_clean``) runs to the end.  ``pytest --graphleaf`` (the runtime store tracer, in
a subprocess) names, for the broken copies, exactly the lines marked GLF001/002/003/005 as the
stores of the tensors that broke them, and none for the twins.

What the static analysis reports here is not asserted: ``python bench/copygraph_score.py`` scores it.

What each boundary raises with torch 2.13.0 (Linux, ``fork`` start method):

- ``run_probe`` (a TensorDataset of graph features, ``batch_size=4``, workers): the worker's
  default_collate stacks the rows into shared memory with ``torch.stack(batch, out=...)``, which
  raises "stack(): functions with out=... arguments don't support automatic differentiation"; the
  main process re-raises it as "Caught RuntimeError in DataLoader worker process 0" (exit 1).
- ``run_worker`` (``queue.put(model(x))`` in an ``mp.Process``): the child's queue feeder thread
  refuses to pickle the tensor ("Cowardly refusing to serialize non-leaf tensor which
  requires_grad"), prints it and drops the item; ``put`` itself returns and the child's exit code
  would be 0; the parent's ``get(timeout=5)`` raises ``queue.Empty`` (exit 1).
- ``run_dataset`` (``batch_size=None``: no collate, the item itself is sent): the same "Cowardly
  refusing" in the worker's feeder thread, and the main process waits for the item forever (hang).
"""

from __future__ import annotations

import ast
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # end to end: run by `python -m pytest -m slow` and .ci/run

ROOT = Path(__file__).resolve().parent.parent
PROJECT = ROOT / "fixtures" / "projects" / "copygraph"
PACKAGE = PROJECT / "shopgraph"
EXPECT = re.compile(r"#\s*expect:\s*(GLF\d+)")
STORE_CODES = {"GLF001", "GLF002", "GLF003", "GLF005"}

# broken scenario -> (file, function) holding the GLF202 line it must die at
COPIES = {
    "run_trainer": ("checkpoint.py", "BestKeeper.offer"),
    "run_ema": ("scenarios.py", "run_ema"),
    "run_recorder": ("scenarios.py", "run_recorder"),
    "run_tap": ("scenarios.py", "run_tap"),
    "run_session": ("scenarios.py", "run_session"),
    "run_wrapper_cache": ("scenarios.py", "run_wrapper_cache"),
    "run_router": ("swa.py", "swa_after_warmup"),
    "run_vae": ("scenarios.py", "run_vae"),
    "run_weightdrop": ("scenarios.py", "run_weightdrop"),
    "run_penalty": ("scenarios.py", "run_penalty"),
    "run_fast_weights": ("scenarios.py", "run_fast_weights"),
    "run_beam": ("beam.py", "Hypothesis.extend"),
    "run_hyper": ("scenarios.py", "run_hyper"),
}

# broken scenario -> (file, function) holding its GLF301 line, what it must print, whether it hangs
BOUNDARIES = {
    "run_probe": ("probe.py", "train",
                  ["Caught RuntimeError in DataLoader worker process",
                   "stack(): functions with out=... arguments don't support automatic differentiation"], False),
    "run_worker": ("workers.py", "work", ["Cowardly refusing to serialize non-leaf tensor", "_queue.Empty"], False),
    "run_dataset": ("scenarios.py", "run_dataset", ["Cowardly refusing to serialize non-leaf tensor"], True),
}


def marked() -> set[tuple[str, int, str]]:
    out = set()
    for path in sorted(PROJECT.rglob("*.py")):
        for i, text in enumerate(path.read_text().splitlines(), start=1):
            m = EXPECT.search(text)
            if m:
                out.add((path.relative_to(PROJECT).as_posix(), i, m.group(1)))
    return out


def marked_line(file: str, function: str, code: str) -> int:
    """The one line marked ``code`` inside ``function`` (``name`` or ``Class.name``) of shopgraph/``file``."""
    text = (PACKAGE / file).read_text()
    scope: ast.AST = ast.parse(text)
    for part in function.split("."):
        (scope,) = [n for n in ast.walk(scope) if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == part]
    node = scope
    lines = [i for i in range(node.lineno, node.end_lineno + 1)
             if (m := EXPECT.search(text.splitlines()[i - 1])) and m.group(1) == code]
    assert len(lines) == 1, (file, function, code, lines)
    return lines[0]


def scenario_names() -> list[str]:
    tree = ast.parse((PACKAGE / "scenarios.py").read_text())
    return [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("run_")]


# --- the tables and the markers agree (no torch needed) -------------------------------------


def test_every_copy_and_boundary_marker_belongs_to_one_broken_scenario():
    copies = {(f"shopgraph/{f}", marked_line(f, fn, "GLF202"), "GLF202") for f, fn in COPIES.values()}
    sends = {(f"shopgraph/{f}", marked_line(f, fn, "GLF301"), "GLF301") for f, fn, _, _ in BOUNDARIES.values()}
    found = marked()
    assert copies == {m for m in found if m[2] == "GLF202"}
    assert sends == {m for m in found if m[2] == "GLF301"}
    assert {m[2] for m in found} <= STORE_CODES | {"GLF202", "GLF301"}


def test_every_scenario_has_a_clean_twin_and_a_readme_paragraph():
    names = scenario_names()
    broken = [n for n in names if not n.endswith("_clean")]
    assert sorted(broken) == sorted([*COPIES, *BOUNDARIES])
    assert sorted(n for n in names if n.endswith("_clean")) == sorted(f"{n}_clean" for n in broken)
    readme = (PROJECT / "README.md").read_text()
    for name in broken:
        assert f"`{name}`" in readme, name
    for path in sorted(PACKAGE.glob("*.py")):
        if path.name not in ("__init__.py", "scenarios.py"):
            assert f"`shopgraph/{path.name}`" in readme, path.name


# --- running the code ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def scenarios():
    pytest.importorskip("torch")
    sys.path.insert(0, str(PROJECT))
    try:
        import shopgraph.scenarios

        yield shopgraph.scenarios
    finally:
        sys.path.remove(str(PROJECT))
        for name in [m for m in sys.modules if m == "shopgraph" or m.startswith("shopgraph.")]:
            del sys.modules[name]


def innermost_project_frame(exc: BaseException) -> tuple[str, int]:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename).is_relative_to(PACKAGE)]
    assert frames, "".join(traceback.format_exception(exc))
    return Path(frames[-1].filename).name, frames[-1].lineno


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(COPIES))
def test_a_broken_copy_raises_at_its_marked_line(scenarios, name):
    with pytest.raises(RuntimeError, match=r"graph leaves\) support the deepcopy protocol") as info:
        getattr(scenarios, name)()
    file, function = COPIES[name]
    assert innermost_project_frame(info.value) == (file, marked_line(file, function, "GLF202"))


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(COPIES))
def test_its_clean_twin_runs_to_the_end(scenarios, name):
    assert getattr(scenarios, f"{name}_clean")() is not None


def has_grad_fn(value) -> bool:
    return getattr(value, "grad_fn", None) is not None


@pytest.mark.torch
def test_what_the_twins_keep(scenarios):
    """The twins whose difference is not at the store: the tensors are still there, the copy
    does not reach them (hooks removed, __getstate__) or they were cleared first."""
    torch = pytest.importorskip("torch")
    copied, tap = scenarios.run_tap_clean()
    assert has_grad_fn(tap.feats["body"]) and not copied.body._forward_hooks
    copied, wrapper = scenarios.run_wrapper_cache_clean()
    assert has_grad_fn(wrapper.cache.logits) and copied.cache is None
    copied = scenarios.run_recorder_clean()
    assert copied.activations == {}
    swa_model = scenarios.run_router_clean()
    assert isinstance(swa_model, torch.optim.swa_utils.AveragedModel) and int(swa_model.n_averaged) == 3
    best = scenarios.run_trainer_clean()
    assert not has_grad_fn(best.last_loss) and best.steps in (1, 2)
    (hyp, *_) = scenarios.run_beam_clean()
    assert len(hyp.tokens) == 4 and not has_grad_fn(hyp.hidden)


# --- process boundaries, in subprocesses -----------------------------------------------------

CLEAN_BOUNDARIES = "; ".join(f"print('{n}_clean', s.{n}_clean() is not None)" for n in BOUNDARIES)


def _start(code: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(PROJECT), PYTHONUNBUFFERED="1")
    return subprocess.Popen([sys.executable, "-c", f"from shopgraph import scenarios as s; {code}"], cwd=PROJECT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


class Run:
    """A subprocess read line by line: ``hung`` once it has printed ``sentinel`` and is still
    running ``grace`` seconds later (or at ``deadline``); then its whole process group is killed."""

    def __init__(self, code: str, sentinel: str | None = None, grace: float = 8.0, deadline: float = 90.0):
        self.proc = _start(code)
        self.sentinel, self.grace, self.deadline = sentinel, grace, time.monotonic() + deadline
        self.lines: list[str] = []
        self.seen_at: float | None = None
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line)
            if self.sentinel and self.seen_at is None and self.sentinel in line:
                self.seen_at = time.monotonic()

    def wait(self) -> tuple[int | None, bool, str]:
        hung = False
        while self.proc.poll() is None:
            now = time.monotonic()
            if now > self.deadline or (self.seen_at is not None and now > self.seen_at + self.grace):
                hung = True
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
                break
            time.sleep(0.1)
        self.reader.join(timeout=5)
        return (None if hung else self.proc.returncode), hung, "".join(self.lines)


@pytest.mark.torch
def test_the_process_boundaries_fail_and_their_twins_run():
    pytest.importorskip("torch")
    runs = {name: Run(f"s.{name}()", sentinel=expected[0], deadline=60)
            for name, (_, _, expected, _) in BOUNDARIES.items()}
    clean = Run(CLEAN_BOUNDARIES, deadline=90)
    rc, hung, out = clean.wait()
    assert rc == 0 and not hung, out
    for name in BOUNDARIES:
        assert f"{name}_clean True" in out, out
    for name, (_, _, expected, hangs) in BOUNDARIES.items():
        rc, hung, out = runs[name].wait()
        for text in expected:
            assert text in out, f"{name}:\n{out}"
        assert hung == hangs, f"{name}: rc={rc} hung={hung}\n{out}"
        if not hangs:
            assert rc not in (0, None), f"{name}:\n{out}"


# --- the runtime store tracer names the marked stores ----------------------------------------

TRACED = '''
import sys
import pytest
sys.path.insert(0, {project!r})
from shopgraph import scenarios

@pytest.mark.parametrize("name", {names!r})
def test_broken(name):
    with pytest.raises(RuntimeError, match="graph leaves"):
        getattr(scenarios, name)()

@pytest.mark.parametrize("name", {names!r})
def test_clean(name):
    getattr(scenarios, name + "_clean")()
'''


@pytest.mark.torch
def test_the_runtime_tracer_names_exactly_the_marked_stores(tmp_path):
    """``pytest --graphleaf`` records, for each copy that raised, the line that stored each tensor
    that broke it: together, exactly the GLF001/002/003/005 markers.  (It names its own codes:
    GLF002 for the closure's ``outputs[name] = output``, reached as ``model.activations[...]``
    rather than through the hook, and for ``self.grads = autograd.grad(...)``, reached as a tuple
    element; the markers say what the static rules report there: GLF003 and GLF001.)  The twins
    have no copy that raised and no finding; the live router of ``run_router_clean`` still keeps its last
    sample (its AveragedModel was copied before any forward): a note of the summary, not a finding (no copy
    of the run met it)."""
    pytest.importorskip("torch")
    (tmp_path / "test_traced.py").write_text(TRACED.format(project=str(PROJECT), names=sorted(COPIES)))
    report = tmp_path / "graphleaf.json"
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--graphleaf",
                        f"--graphleaf-json={report}", "test_traced.py"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    items = json.loads(report.read_text())
    raised = [i for i in items if i["when"] == "when the copy raised"]
    assert all("test_broken[" in i["test"] for i in raised), raised
    got = {(Path(i["path"]).relative_to(PROJECT).as_posix(), i["line"]) for i in raised}
    assert got == {(path, line) for path, line, code in marked() if code in STORE_CODES}
    broken_tests = {i["test"] for i in raised}
    assert broken_tests == {f"test_traced.py::test_broken[{n}]" for n in COPIES}
    assert [i for i in items if i not in raised] == []
    sample = marked_line("selector.py", "GumbelSelector.sample", "GLF001")
    notes = [line for line in r.stdout.splitlines() if line.startswith("    ") and "selector.py:" in line]
    assert len(notes) == 1 and f"selector.py:{sample}: " in notes[0], r.stdout
    assert notes[0].endswith("(test_traced.py::test_clean[run_router])")
