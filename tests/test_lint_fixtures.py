"""Runs the real flake8 over the bugbear-style fixtures and compares exactly.

In ``fixtures/lint/*.py`` a line ending in ``# expect: GLF001`` must be reported with
that code (and nothing else), and every other line must not be reported at all;
lines marked ``# ok`` document the negatives. ``# expect: GLF001?`` marks a finding whose
witness takes a step on trust: reported with ``--graphleaf-confidence=low``, not by default."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT = ROOT / "fixtures" / "lint"
FILES = sorted(LINT.glob("*.py"))
EXPECT = re.compile(r"#\s*expect:\s*(?P<codes>GLF\d+\??(?:\s*,\s*GLF\d+\??)*)")
OUTPUT = re.compile(r"^(?P<path>.+?):(?P<line>\d+):(?P<col>\d+): (?P<code>GLF\d+) (?P<msg>.*)$")


def expected(path: Path, level: str = "high") -> set[tuple[int, str]]:
    out = set()
    for i, line in enumerate(path.read_text().splitlines(), start=1):
        m = EXPECT.search(line)
        if m:
            codes = [c.strip() for c in m.group("codes").split(",")]
            out |= {(i, c.rstrip("?")) for c in codes if level == "low" or not c.endswith("?")}
    return out


def run_flake8(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "flake8", "--isolated", *args], capture_output=True, text=True, cwd=ROOT
    )


def _reported(*args: str) -> dict[str, set[tuple[int, str]]]:
    proc = run_flake8("--select=GLF", *args, str(LINT))
    assert proc.returncode == 1, proc.stderr
    out: dict[str, set[tuple[int, str]]] = {}
    for line in proc.stdout.splitlines():
        m = OUTPUT.match(line)
        assert m, f"unexpected flake8 output line: {line!r}"
        out.setdefault(Path(m.group("path")).name, set()).add((int(m.group("line")), m.group("code")))
    return out


@pytest.fixture(scope="module")
def reported() -> dict[str, set[tuple[int, str]]]:
    return _reported()


@pytest.fixture(scope="module")
def reported_low() -> dict[str, set[tuple[int, str]]]:
    return _reported("--graphleaf-confidence=low")


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_fixture_reports_exactly_the_marked_lines(path: Path, reported, reported_low) -> None:
    for level, found in (("high", reported), ("low", reported_low)):
        want = expected(path, level)
        got = found.get(path.name, set())
        assert sorted(got - want) == [], f"reported but not marked (confidence {level})"
        assert sorted(want - got) == [], f"marked but not reported (confidence {level})"


def test_fixtures_have_more_negatives_than_positives() -> None:
    pos = sum(len(expected(p)) for p in FILES)
    neg = sum(line.count("# ok") for p in FILES for line in p.read_text().splitlines())
    assert pos + neg >= 60
    assert neg > pos


def test_message_names_attribute_cause_and_remedy() -> None:
    proc = run_flake8("--select=GLF", str(LINT / "forward_stores.py"))
    line = next(l for l in proc.stdout.splitlines() if ":22:9: GLF002" in l)
    assert "'self.features'" in line
    assert "from self.encoder.relu(...)" in line
    assert "copy.deepcopy(model) will raise after forward" in line
    assert ".detach()" in line


def test_example_reports_the_encoder_and_the_ema_copy() -> None:
    proc = run_flake8("--select=GLF", "fixtures/example/")
    assert proc.returncode == 1
    codes = [OUTPUT.match(l).group("code") for l in proc.stdout.splitlines()]
    assert codes.count("GLF002") == 3
    assert "GLF202" in codes
    # at the copy: the copied object and its class, the attribute path to the tensor, every storing line
    assert ("GLF202 copy.deepcopy(model) will raise: model (DepthModel) keeps a tensor on the autograd graph in "
            "model.encoder.features[...] (GLF002 at lines 26, 27 and 28, stored by ResnetEncoder.forward)") in proc.stdout
    # at each store: the class that holds it, and the program's copy that fails
    assert proc.stdout.count("'self.features' (ResnetEncoder) is given a tensor on the autograd graph") == 3
    assert proc.stdout.count("copy.deepcopy(model) at line 70 will raise (it reaches it as model.encoder.features[...])") == 3


def test_non_tensor_fixture_runs_as_its_marks_say():
    """fixtures/lint/non_tensors.py: the unmarked lines really copy fine after forward + backward,
    the marked twins really keep a graph tensor (deepcopy raises)."""
    pytest.importorskip("torch")
    proc = subprocess.run([sys.executable, "-c", "import non_tensors; non_tensors.check_runs()"],
                          capture_output=True, text=True, cwd=LINT)
    assert proc.returncode == 0, proc.stderr
