"""In-place writes into preallocated tensors (theseus's cost functions: a helper object's
variable written with ``t[:] = data``, a buffer row written in forward), and what is computed
from them afterwards, judged with torch: the written tensor gets a grad_fn (CopySlices), so it
and everything computed from it break ``copy.deepcopy(model)``; written under ``no_grad`` or
from a detached value, nothing does."""

from __future__ import annotations

import copy
import textwrap

import pytest

from flake8_graphleaf.analysis import analyze_source
from flake8_graphleaf.analysis.rules.forward_stores import EXAMPLES

BROKEN, CLEAN = (textwrap.dedent(src) for src, _codes in EXAMPLES[:2])


def _lines(source: str, text: str) -> int:
    return next(i for i, line in enumerate(source.splitlines(), start=1) if text in line)


def test_the_writes_and_what_is_computed_from_them_are_reported():
    got = sorted((f.line, f.code, f.attribute) for f in analyze_source(BROKEN))
    assert got == sorted([
        (_lines(BROKEN, "self.var.update(x * self.w)"), "GLF002", "self.var.tensor"),
        (_lines(BROKEN, "self.err = "), "GLF001", "self.err"),
        (_lines(BROKEN, "self.buf[0] = x * self.w"), "GLF002", "self.buf"),
        (_lines(BROKEN, "self.total = "), "GLF001", "self.total"),
    ]), got


def test_the_clean_twin_reports_nothing():
    assert analyze_source(CLEAN) == []


def test_running_them_agrees():
    torch = pytest.importorskip("torch")
    for source, breaks in ((BROKEN, {"var", "err", "buf", "total"}), (CLEAN, set())):
        ns: dict = {}
        exec(compile(source, "<example>", "exec"), ns)
        model = ns["Cost"]()
        model(torch.randn(3)).backward()
        broken = set()
        for attr in ("var", "err", "buf", "total"):
            if not hasattr(model, attr):
                continue
            try:
                copy.deepcopy(getattr(model, attr))
            except RuntimeError as exc:
                assert "graph leaves" in str(exc)
                broken.add(attr)
        assert broken == breaks
        if breaks:
            with pytest.raises(RuntimeError, match="graph leaves"):
                copy.deepcopy(model)
        else:
            copy.deepcopy(model)
