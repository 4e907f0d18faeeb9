"""The store recorder's two backends (runtime/trace.py): ``sys.monitoring`` on Python 3.12+, ``sys.settrace`` on 3.11.

The choice and its errors are checked on every Python; the tests of the ``sys.monitoring`` backend itself run
only under Python 3.12+ (CI runs 3.11: run this file with a 3.12 interpreter that has torch to check them).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from flake8_graphleaf.runtime import find_graph_tensors  # noqa: E402
from flake8_graphleaf.runtime import trace as trace_module  # noqa: E402
from flake8_graphleaf.runtime.trace import (MONITORING, SETTRACE, TRACER_ENV, StoreTracer,  # noqa: E402
                                            choose_backend)

pytestmark = [pytest.mark.torch, pytest.mark.graphleaf_ignore]  # they install their own recorder

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
needs_monitoring = pytest.mark.skipif(
    sys.version_info < (3, 12),
    reason="sys.monitoring is Python 3.12+; this interpreter records with the sys.settrace fallback "
           "(run this file under Python 3.12+ with torch to check the monitoring backend)")


@pytest.mark.parametrize("version, env, has, expected", [
    ((3, 11, 7), {}, False, SETTRACE),
    ((3, 12, 1), {}, True, MONITORING),
    ((3, 13, 0), {TRACER_ENV: "auto"}, True, MONITORING),
    ((3, 12, 1), {TRACER_ENV: "settrace"}, True, SETTRACE),
    ((3, 12, 1), {TRACER_ENV: " SetTrace "}, True, SETTRACE),
    ((3, 11, 7), {TRACER_ENV: "monitoring"}, False, SETTRACE),  # asked for, not there: the fallback
    ((3, 12, 1), {}, False, SETTRACE),  # an interpreter without sys.monitoring (another implementation)
])
def test_the_backend_follows_the_python_version_and_the_environment(version, env, has, expected):
    assert choose_backend(version, env, has) == expected


def test_a_wrong_tracer_setting_is_a_clear_error():
    with pytest.raises(ValueError, match=r"GRAPHLEAF_TRACER='sttrace': expected 'settrace', 'monitoring' or 'auto'"):
        choose_backend((3, 12, 1), {TRACER_ENV: "sttrace"}, True)


def test_a_wrong_tracer_setting_stops_explain_run_and_pytest_with_a_message(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("print('ran')\n")
    (tmp_path / "test_nothing.py").write_text("def test_nothing():\n    pass\n")
    env = dict(os.environ, **{TRACER_ENV: "sttrace"})
    r = subprocess.run([sys.executable, "-m", "flake8_graphleaf", "explain", "--run", str(script)],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 2 and "ran" not in r.stdout
    assert r.stderr.strip() == ("graphleaf explain: error: GRAPHLEAF_TRACER='sttrace': expected 'settrace', "
                                "'monitoring' or 'auto'")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                        "--graphleaf", "test_nothing.py"], cwd=tmp_path, capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 4, r.stdout + r.stderr
    assert "graphleaf: GRAPHLEAF_TRACER='sttrace'" in r.stderr and "Traceback" not in r.stderr


class Holder:
    def keep(self, model, x):
        out = model(x)
        self.last = out
        self.items = []
        self.items.append(out * 2)
        return out


def _records(tracer, obj):
    return {g.path: sorted(r.line for r in tracer.records(g.tensor, g.holder)) for g in find_graph_tensors(obj, "h")}


def test_the_installed_backend_is_the_one_chosen_and_leaves_nothing_behind(monkeypatch):
    monkeypatch.delenv(TRACER_ENV, raising=False)
    if sys.version_info < (3, 12) and sys.gettrace() is not None:
        pytest.skip("another trace function (a debugger, coverage) is installed")
    tracer = StoreTracer()
    assert tracer.install()
    try:
        assert tracer.backend == choose_backend()
        if tracer.backend == SETTRACE:
            assert sys.gettrace() is not None
        else:
            assert "graphleaf" in {sys.monitoring.get_tool(i) for i in range(6)}
        h = Holder()
        h.keep(nn.Linear(2, 2), torch.randn(1, 2))
    finally:
        tracer.uninstall()
    if tracer.backend == SETTRACE:
        assert sys.gettrace() is None
    else:  # the process's monitor stays registered for the next recorder, attached to none
        assert tracer._monitor is None and all(m.tracer is None for m in trace_module._SHARED)
    first = Holder.keep.__code__.co_firstlineno
    assert _records(tracer, h) == {"h.last": [first + 2], "h.items[0]": [first + 4]}


@needs_monitoring
def test_both_backends_record_the_same_statements(monkeypatch):
    """The same scenario (plain objects, dicts, lists, setattr, a closure, a generator) under each backend."""
    import test_store_tracer as scenarios

    def scenario():
        w = scenarios.Wrapper(nn.Linear(3, 2))
        w.step(torch.randn(4, 3))
        kept, keep = scenarios.closure_maker()
        keep("out", w.last * 3)

        def produce():
            for i in range(2):
                key = f"g{i}"
                w.state[key] = w.last + i  # recorded at each resume of the generator
                yield i

        list(produce())
        return w, kept

    found = {}
    for backend in ("settrace", "monitoring"):
        monkeypatch.setenv(TRACER_ENV, backend)
        torch.manual_seed(0)
        tracer = StoreTracer()
        assert tracer.install()
        try:
            w, kept = scenario()
        finally:
            tracer.uninstall()
        assert tracer.backend == (SETTRACE if backend == "settrace" else MONITORING)
        found[backend] = (_records(tracer, w), _records(tracer, kept))
    assert found["monitoring"] == found["settrace"]
    assert set(found["monitoring"][0]) == {"h.last", "h.state['h']", "h.state['g0']", "h.state['g1']",
                                           "h.history[0]", "h.dynamic"}
    assert all(found["monitoring"][0].values()) and all(found["monitoring"][1].values())


@needs_monitoring
def test_monitoring_turns_off_code_that_stores_nothing(monkeypatch):
    """Only the user's functions with a storing statement get line events; torch's code, the standard
    library's and a user function without a store get none (PY_START returned DISABLE for them)."""
    monkeypatch.delenv(TRACER_ENV, raising=False)

    def no_store(model, x):
        y = model(x)
        return y.sum()

    tracer = StoreTracer()
    assert tracer.install()
    monitor = tracer._monitor
    try:
        h = Holder()
        for _ in range(3):
            no_store(nn.Linear(2, 2), torch.randn(1, 2))
            h.keep(nn.Linear(2, 2), torch.randn(1, 2))
        codes = {code for code, _events in monitor.local_codes.values()}
    finally:
        tracer.uninstall()
    assert Holder.keep.__code__ in codes
    assert no_store.__code__ not in codes
    assert not any(c.co_filename.startswith(os.path.dirname(torch.__file__)) for c in codes)
    assert monitor.frames == {} and monitor.tracer is None


@needs_monitoring
def test_a_recorder_inside_another_records_with_its_own_tool_id(monkeypatch):
    """``trace_stores`` inside a test that ``pytest --graphleaf`` records: both record (as no second
    sys.settrace could)."""
    monkeypatch.delenv(TRACER_ENV, raising=False)
    outer, inner = StoreTracer(), StoreTracer()
    assert outer.install()
    try:
        assert inner.install()
        try:
            assert inner._monitor is not outer._monitor and inner._monitor.tool != outer._monitor.tool
            h = Holder()
            h.keep(nn.Linear(2, 2), torch.randn(1, 2))
        finally:
            inner.uninstall()
    finally:
        outer.uninstall()
    line = Holder.keep.__code__.co_firstlineno + 2
    assert _records(inner, h)["h.last"] == [line] and _records(outer, h)["h.last"] == [line]
    assert {sys.monitoring.get_tool(i) for i in range(6)} & {"graphleaf"} == {"graphleaf"}  # the shared one


@needs_monitoring
def test_monitoring_records_beside_another_trace_function(monkeypatch):
    """A settrace-based tool (a debugger, coverage's C tracer) no longer stops the recording."""
    monkeypatch.delenv(TRACER_ENV, raising=False)
    calls = []

    def other(frame, event, arg):
        calls.append(event)
        return None

    saved = sys.gettrace()
    sys.settrace(other)
    try:
        tracer = StoreTracer()
        assert tracer.install()
        try:
            h = Holder()
            h.keep(nn.Linear(2, 2), torch.randn(1, 2))
        finally:
            tracer.uninstall()
        assert sys.gettrace() is other
    finally:
        sys.settrace(saved)
    assert calls  # the other tool still ran
    assert _records(tracer, h)["h.last"] == [Holder.keep.__code__.co_firstlineno + 2]


@needs_monitoring
def test_monitoring_records_the_installing_thread_only(monkeypatch):
    monkeypatch.delenv(TRACER_ENV, raising=False)
    tracer = StoreTracer()
    assert tracer.install()
    try:
        here, there = Holder(), Holder()
        t = threading.Thread(target=there.keep, args=(nn.Linear(2, 2), torch.randn(1, 2)))
        t.start()
        t.join()
        here.keep(nn.Linear(2, 2), torch.randn(1, 2))
    finally:
        tracer.uninstall()
    assert _records(tracer, here)["h.last"] == [Holder.keep.__code__.co_firstlineno + 2]
    assert _records(tracer, there) == {"h.last": [], "h.items[0]": []}  # as sys.settrace: another thread's stores


@needs_monitoring
def test_pytest_graphleaf_under_monitoring_names_the_storing_lines():
    """The leaky fixture suite under ``sys.monitoring`` and under the settrace fallback: the same findings."""
    import json
    import shutil
    import tempfile

    results = {}
    for backend in ("monitoring", "settrace"):
        with tempfile.TemporaryDirectory() as tmp:
            shutil.copytree(os.path.join(ROOT, "fixtures", "pytest", "leaky"), tmp, dirs_exist_ok=True)
            env = dict(os.environ, **{TRACER_ENV: backend})
            r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                                "--graphleaf", "--graphleaf-json=out.json", "-W", "ignore"], cwd=tmp,
                               capture_output=True, text=True, env=env, timeout=600)
            assert os.path.exists(os.path.join(tmp, "out.json")), r.stdout + r.stderr
            with open(os.path.join(tmp, "out.json")) as fh:
                results[backend] = sorted((f["test"], f["path"], f["line"], f["code"]) for f in json.load(fh))
    assert results["monitoring"] == results["settrace"]
    assert ("test_training.py::test_seq2seq_step_lowers_the_loss", "seq2seq.py", 14, "GLF001") in results["monitoring"]


def test_a_test_run_without_the_recorder_is_counted_in_the_summary(tmp_path):
    """When the recorder cannot start (3.11: another trace function; 3.12+: both tool ids taken), the tests
    still run and are checked, and the summary says how many ran without it, and why."""
    (tmp_path / "conftest.py").write_text(
        "import sys\n\n"
        "if sys.version_info >= (3, 12):\n"
        "    sys.monitoring.use_tool_id(3, 'other')\n"
        "    sys.monitoring.use_tool_id(4, 'another')\n"
        "else:\n"
        "    def other(frame, event, arg):\n"
        "        return None\n\n"
        "    sys.settrace(other)\n")
    (tmp_path / "test_one.py").write_text("def test_one():\n    pass\n")
    env = {k: v for k, v in os.environ.items() if k != TRACER_ENV}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                        "--graphleaf", "test_one.py"], cwd=tmp_path, capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    why = ("another trace function (a debugger, coverage) was installed" if sys.version_info < (3, 12) else
           "another tool held both sys.monitoring tool ids graphleaf can use (3 and 4)")
    assert f"1 test(s) ran without the store recorder ({why})" in r.stdout
