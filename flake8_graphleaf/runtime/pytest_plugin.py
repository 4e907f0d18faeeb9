"""``pytest --graphleaf``: graph tensors your tests leave where ``copy.deepcopy`` or a process boundary meets them.

Registered with pytest through the ``pytest11`` entry point ``graphleaf``; it does nothing unless
``--graphleaf`` is given or the ini option ``graphleaf = true`` is set.  This module imports neither
torch nor the rest of the runtime until then (the linter installs without torch); the work is done by
:mod:`flake8_graphleaf.runtime.leftovers`.

For each test (setup, call): the modules it builds, the objects it deep-copies, pickles for another
process, puts on a queue, hands to a spawned ``Process`` or to ``DataLoader`` workers, and every store
of a graph tensor its code makes on any object, with its line.  Each graph tensor that a copy or send
of the test met (it raised, or was sent with it) is a finding ``path:line: GLFnnn message (test id)``
in the ``graphleaf`` section of the terminal summary and in ``--graphleaf-json``; what the deepcopy walk
at the end of the call finds in the modules built and the objects copied earlier is a note of the
summary (no copy met it in this run), a finding with ``--graphleaf-leftovers``.  A deepcopy / pickling /
DataLoader-worker / multiprocessing failure the test raised gets its explanation as a report section.
Tests still pass; ``--graphleaf-strict`` fails a test that leaves such a tensor;
``@pytest.mark.graphleaf_ignore`` skips a test.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import pytest

INSTALL_HINT = (
    "pytest --graphleaf needs torch, which is not installed here. "
    "Install it with:  pip install 'flake8-graphleaf[verify]'   (or: pip install torch)"
)
MARKER = "graphleaf_ignore"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("graphleaf", "graphleaf: graph tensors left where copy.deepcopy or a process "
                                         "boundary meets them (flake8-graphleaf)")
    group.addoption("--graphleaf", action="store_true", dest="graphleaf", default=None,
                    help="check every test for tensors on the autograd graph left in the modules it built or in "
                    "what it deep-copied or sent to another process, with the line that stored them "
                    "(ini: graphleaf = true)")
    group.addoption("--no-graphleaf", action="store_false", dest="graphleaf",
                    help="turn the check off, over the ini option")
    group.addoption("--graphleaf-strict", action="store_true", dest="graphleaf_strict", default=None,
                    help="fail a test that leaves such a tensor (ini: graphleaf_strict = true)")
    group.addoption("--graphleaf-leftovers", action="store_true", dest="graphleaf_leftovers", default=None,
                    help="also report, as findings, the graph tensors that no copy or send of the test met: held "
                    "at the end of the test by the modules it built, or by what it copied or sent earlier "
                    "(a copy it would make); without it they are notes in the summary (ini: graphleaf_leftovers = "
                    "true)")
    group.addoption("--graphleaf-json", metavar="FILE", dest="graphleaf_json", default=None,
                    help="write the findings to FILE as a JSON list (ini: graphleaf_json)")
    parser.addini("graphleaf", type="bool", default=False,
                  help="check every test for graph tensors left where a copy or a process boundary meets them")
    parser.addini("graphleaf_strict", type="bool", default=False,
                  help="with graphleaf: fail a test that leaves such a tensor")
    parser.addini("graphleaf_leftovers", type="bool", default=False,
                  help="with graphleaf: report what tests leave at their end (no copy or send met it) as findings, "
                  "not notes")
    parser.addini("graphleaf_json", type="string", default="",
                  help="with graphleaf: write the findings to this file as a JSON list")


def _option(config: pytest.Config, name: str) -> Any:
    value = config.getoption(name)
    return config.getini(name) if value is None else value


@pytest.hookimpl(trylast=True)  # after conftest.py files that set config.option.graphleaf
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{MARKER}: do not check this test for graph tensors (pytest --graphleaf)")
    if not _option(config, "graphleaf"):
        return
    try:
        import torch  # noqa: F401
    except ImportError:
        raise pytest.UsageError(INSTALL_HINT) from None
    from .trace import choose_backend

    try:
        choose_backend()  # GRAPHLEAF_TRACER, checked once: a wrong value is a usage error, not a failed test
    except ValueError as exc:
        raise pytest.UsageError(f"graphleaf: {exc}") from None
    json_path = _option(config, "graphleaf_json") or None
    if json_path:
        json_path = os.path.join(str(config.invocation_params.dir), json_path)
    plugin = GraphleafPlugin(config, strict=bool(_option(config, "graphleaf_strict")), json_path=json_path,
                             leftovers=bool(_option(config, "graphleaf_leftovers")))
    config.pluginmanager.register(plugin, "graphleaf-checker")


class StrictFailure:
    """A strict failure's report: the headline and its findings in the failure, the headline alone
    where pytest repeats a failure's message (the short summary, which prints the whole message on
    CI; JUnit's ``message``), so that each finding is printed once."""

    def __init__(self, headline: str, lines: list[str], path: str):
        from types import SimpleNamespace

        self.text = headline + ":\n" + "\n".join(lines)
        self.reprcrash = SimpleNamespace(message=headline, path=path, lineno=None)

    def toterminal(self, tw) -> None:
        for line in self.text.splitlines():
            tw.line(line)

    def __str__(self) -> str:
        return self.text


class GraphleafPlugin:
    """The per-session state of ``pytest --graphleaf``."""

    def __init__(self, config: pytest.Config, strict: bool, json_path: str | None, leftovers: bool = False):
        self.config = config
        self.strict = strict
        self.json_path = json_path
        self.leftovers = leftovers
        self.findings: list[dict] = []
        self.notes: list[dict] = []  # what tests left at their end that no copy or send met (not findings)
        self.shown: set[int] = set()  # indexes in findings listed with a failed test's report (not again below)
        self.checked = 0
        self.untraced: list[str] = []
        self.errors: list[str] = []
        self.watch = None
        self.is_worker = hasattr(config, "workerinput")  # pytest-xdist: the controller reports

    def pytest_report_header(self, config: pytest.Config) -> str:
        modes = [m for m, on in (("strict", self.strict), ("leftovers reported", self.leftovers)) if on]
        return "graphleaf: checking every test for graph tensors left behind" + (f" ({', '.join(modes)})" if modes
                                                                                 else "")

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item):
        self._start(item)
        yield

    def _start(self, item: pytest.Item) -> None:
        self._release()
        if item.get_closest_marker(MARKER) is not None:
            return
        from .leftovers import TestWatch

        line = item.location[1]
        self.watch = TestWatch(item.nodeid, str(item.path), (line if line is not None else 0) + 1,
                               leftovers=self.leftovers)
        self.watch.start()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        outcome = yield
        watch = self.watch
        if call.when != "call" or watch is None:
            return
        report = outcome.get_result()
        try:
            self._check(watch, report, call)
        except Exception as exc:  # a bug of the checker must not break the user's run
            watch.stop()
            self.errors.append(f"{item.nodeid}: {type(exc).__name__}: {exc}")
            report.sections.append(("graphleaf", f"the check failed: {type(exc).__name__}: {exc}"))

    def _check(self, watch, report, call) -> None:
        self.checked += 1
        if not watch.tracing:
            self.untraced.append(watch.nodeid)
        findings = watch.check()
        if watch.notes:
            report.graphleaf_notes = [f.as_json() for f in watch.notes]  # travels with the report too
        if call.excinfo is not None:
            text = watch.explain_exception(call.excinfo.value)
            if text:
                report.sections.append(("graphleaf: why it failed", text))
        if not findings:
            return
        lines = [f.summary_line() for f in findings]
        report.graphleaf = [f.as_json() for f in findings]  # travels with the report (pytest-xdist too)
        if self.strict and report.passed:  # the failure lists them: once per test
            report.outcome = "failed"
            report.longrepr = StrictFailure(
                f"graphleaf (strict): this test left {len(findings)} tensor{'s' if len(findings) != 1 else ''} "
                "on the autograd graph where copy.deepcopy or a process boundary meets "
                f"{'them' if len(findings) != 1 else 'it'}", lines, report.location[0])
        else:
            report.sections.append(("graphleaf", "\n".join(lines)))

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item):
        yield
        self._release()

    def _release(self) -> None:
        if self.watch is not None:
            self.watch.release()
            self.watch = None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call":
            self.notes.extend(getattr(report, "graphleaf_notes", None) or ())
        data = getattr(report, "graphleaf", None)
        if data and report.when == "call":
            if report.failed:
                self.shown.update(range(len(self.findings), len(self.findings) + len(data)))
            self.findings.extend(data)

    def pytest_terminal_summary(self, terminalreporter, exitstatus, config) -> None:
        if self.is_worker:
            return
        tr = terminalreporter
        tr.section("graphleaf")
        for i, f in enumerate(self.findings):
            if i not in self.shown:  # a failed test's report lists its findings already
                tr.write_line(f"{f['path']}:{f['line']}: {f['code']} {f['message']} ({f['test']})")
        n = len(self.findings)
        tests = len({f["test"] for f in self.findings})
        if n:
            shown = len(self.shown)
            tr.write_line(f"{n} tensor{'s' if n != 1 else ''} on the autograd graph left by {tests} "
                          f"test{'s' if tests != 1 else ''}" + ("" if self.strict else
                          " (reported, not failed: --graphleaf-strict fails those tests)")
                          + (f"; {'all' if shown == n else shown} listed with the failures above" if shown else ""))
        else:
            tr.write_line("no test left a tensor on the autograd graph where copy.deepcopy or a process "
                          "boundary meets it")
        self._write_notes(tr)
        if self.untraced:
            why = ("another trace function (a debugger, coverage) was installed" if sys.version_info < (3, 12) else
                   "another tool held both sys.monitoring tool ids graphleaf can use (3 and 4)")
            tr.write_line(f"{len(self.untraced)} test(s) ran without the store recorder ({why}): "
                          "their stores on objects that are not modules were not recorded")
        for e in self.errors:
            tr.write_line(f"graphleaf: the check failed in {e}")
        if self.json_path:
            tr.write_line(f"graphleaf: findings written to {self.json_path}")

    NOTES_SHOWN = 10

    def _write_notes(self, tr) -> None:
        """What tests left at their end that no copy or send of theirs met: not findings (nothing in this
        run shows that the program copies or sends those objects now), shown so that a copy made later
        (the next epoch's checkpoint) is not a surprise."""
        n = len(self.notes)
        if not n:
            return
        tests = len({f["test"] for f in self.notes})
        tr.write_line(f"note: {n} tensor{'s' if n != 1 else ''} on the autograd graph held at the end of {tests} "
                      f"test{'s' if tests != 1 else ''} by objects that no copy or send of the test met then "
                      "(not findings: a later copy of them would raise; --graphleaf-leftovers reports them):")
        for f in self.notes[:self.NOTES_SHOWN]:
            tr.write_line(f"    {f['path']}:{f['line']}: {f['attribute']} {_note_shape(f)} ({f['test']})")
        if n > self.NOTES_SHOWN:
            tr.write_line(f"    ... and {n - self.NOTES_SHOWN} more")

    def pytest_sessionfinish(self, session, exitstatus) -> None:
        self._release()
        if self.is_worker or not self.json_path:
            return
        folder = os.path.dirname(self.json_path)
        if folder:
            os.makedirs(folder, exist_ok=True)
        tmp = self.json_path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(self.findings, fh, indent=2)
            fh.write("\n")
        os.replace(tmp, self.json_path)


def _note_shape(f: dict) -> str:
    shape = "(" + ", ".join(str(s) for s in f["shape"]) + ("," if len(f["shape"]) == 1 else "") + ")"
    what = f"grad_fn={f['grad_fn']}" if f["grad_fn"] else "a leaf that requires grad"
    return f"{shape} {what}, {_NOTE_HOW.get(f['how'], f['how'] + ' here')}"


_NOTE_HOW = {  # Finding.how -> what a note says of its line
    "passed": "given here to the constructor that stores it", "forward": "the forward that stored it ran here",
    "method": "its own copy method copies it here", "static": "stored here (static finding)",
    "built": "the object holding it was built here", "argument": "made here", "unrecorded": "no store recorded",
}
