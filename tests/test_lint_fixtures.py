"""Runs the real flake8 over the bugbear-style fixtures and compares exactly.

In ``fixtures/lint/*.py`` a line ending in ``# expect: GLF001`` must be reported with
that code (and nothing else), and every other line must not be reported at all;
lines marked ``# ok`` document the negatives."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT = ROOT / "fixtures" / "lint"
FILES = sorted(LINT.glob("*.py"))
EXPECT = re.compile(r"#\s*expect:\s*(?P<codes>GLF\d+(?:\s*,\s*GLF\d+)*)")
OUTPUT = re.compile(r"^(?P<path>.+?):(?P<line>\d+):(?P<col>\d+): (?P<code>GLF\d+) (?P<msg>.*)$")


def expected(path: Path) -> set[tuple[int, str]]:
    out = set()
    for i, line in enumerate(path.read_text().splitlines(), start=1):
        m = EXPECT.search(line)
        if m:
            out |= {(i, c.strip()) for c in m.group("codes").split(",")}
    return out


def run_flake8(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "flake8", "--isolated", *args], capture_output=True, text=True, cwd=ROOT
    )


@pytest.fixture(scope="module")
def reported() -> dict[str, set[tuple[int, str]]]:
    proc = run_flake8("--select=GLF", str(LINT))
    assert proc.returncode == 1, proc.stderr
    out: dict[str, set[tuple[int, str]]] = {}
    for line in proc.stdout.splitlines():
        m = OUTPUT.match(line)
        assert m, f"unexpected flake8 output line: {line!r}"
        out.setdefault(Path(m.group("path")).name, set()).add((int(m.group("line")), m.group("code")))
    return out


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_fixture_reports_exactly_the_marked_lines(path: Path, reported) -> None:
    want = expected(path)
    got = reported.get(path.name, set())
    assert sorted(got - want) == [], "reported but not marked"
    assert sorted(want - got) == [], "marked but not reported"


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
    assert "'DepthModel' (its self.encoder is 'ResnetEncoder')" in proc.stdout


def test_non_tensor_fixture_runs_as_its_marks_say():
    """fixtures/lint/non_tensors.py: the unmarked lines really copy fine after forward + backward,
    the marked twins really keep a graph tensor (deepcopy raises)."""
    pytest.importorskip("torch")
    proc = subprocess.run([sys.executable, "-c", "import non_tensors; non_tensors.check_runs()"],
                          capture_output=True, text=True, cwd=LINT)
    assert proc.returncode == 0, proc.stderr
