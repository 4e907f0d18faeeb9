"""How well the runtime checker locates the incidents of ``fixtures/incidents/``, and that it reports no clean twin.

    python bench/runtime_incidents.py                  # pytest --graphleaf and graphleaf explain --run
    python bench/runtime_incidents.py --only pytest    # one of the two (or: --only roots)
    python bench/runtime_incidents.py --incidents DIR  # another folder of NAME.py / NAME_clean.py scripts

Each incident script (and its ``*_clean.py`` twin) is wrapped in a test that runs the script's scenario
(``runpy.run_path(script, run_name="__main__")``) and swallows its error, as a training-step smoke test
would; the wrapped suite runs under ``pytest --graphleaf --graphleaf-json``.  A raising case is *located*
when one of its findings names one of the case's root lines (``ROOTS`` below: the line that stored the
tensor, or made it, or sent it; never the copy of an object that merely holds it); a clean case is
*reported* when it has any finding.  ``graphleaf explain --run`` runs on each script: located when it
exits 1 and a ``<-`` line of its report names a root line; a clean case must exit 0.

The root-kind suite ``fixtures/pytest/roots`` (a test per kind of root: legacy norms and pruning applied
through helpers, in-place writes, objects' own copy methods, DataLoader workers, a replaced store; its
root lines in ``ROOTS.json``) runs under ``pytest --graphleaf`` too, and its clean twin
``fixtures/pytest/roots_clean``: how many root lines are named, how many other lines, how many clean tests
are reported.

Prints a line per case and the totals; exits 1 when a clean case is reported.  Needs torch.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INCIDENTS = os.path.join(ROOT, "fixtures", "incidents")
SUITES = os.path.join(ROOT, "fixtures", "pytest")

# The root lines of each raising incident: where the tensor that breaks the copy or send was stored
# (or made with grad on, or handed to the other process when the tensor itself is sent).
ROOTS = {
    "beam_search.py": {12},  # self.hidden = hidden
    "cache_object.py": {15},  # self.items.append(value)
    "dataloader_workers.py": {8, 10},  # features = torch.randn(..., requires_grad=True); TensorDataset(features, ...)
    "distill_teacher.py": {19},  # self.feats["body"] = h
    "ema_helper.py": {16},  # self.shadow[name] = ... * p
    "eval_copy.py": {17},  # self.val_logits = logits
    "hook_closure.py": {13},  # outputs[module.tag] = output
    "lightning_step.py": {17},  # self.last_loss = loss
    "loader_batch_none.py": {10},  # self.items = [encoder(r) for r in raw]
    "mp_queue.py": {20, 21},  # out = model(...); queue.put(out)
    "mp_spawn_args.py": {14, 15},  # scores = ...; ctx.Process(..., args=(scores,))
    "trainer_wrapper.py": {20},  # self.last_loss = loss
    "worker_result_put.py": {10},  # queue.put(model(...))
}

WRAPPER = '''\
import os
import runpy

import pytest

INCIDENTS = {incidents!r}
CASES = {cases!r}


@pytest.mark.parametrize("case", CASES)
def test_incident(case):
    try:
        runpy.run_path(os.path.join(INCIDENTS, case), run_name="__main__")
    except Exception:  # a smoke test of the scenario: its error is swallowed
        pass
'''


def cases(folder: str) -> tuple[list[str], list[str]]:
    names = sorted(f for f in os.listdir(folder) if f.endswith(".py") and not f.startswith("_"))
    clean = [f for f in names if f.endswith("_clean.py")]
    raising = [f for f in names if f not in clean]
    return raising, clean


def run_pytest(folder: str, names: list[str], timeout: int) -> dict[str, list[dict]]:
    """{script: [finding, ...]} from one pytest --graphleaf run of the wrapped suite."""
    with tempfile.TemporaryDirectory(prefix="graphleaf-incidents-") as tmp:
        with open(os.path.join(tmp, "test_incidents.py"), "w", encoding="utf-8") as fh:
            fh.write(WRAPPER.format(incidents=folder, cases=names))
        with open(os.path.join(tmp, "pytest.ini"), "w", encoding="utf-8") as fh:
            fh.write("[pytest]\n")
        out = os.path.join(tmp, "findings.json")
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
               "-c", os.path.join(tmp, "pytest.ini"), "--rootdir", tmp, "--graphleaf", f"--graphleaf-json={out}",
               os.path.join(tmp, "test_incidents.py")]
        r = subprocess.run(cmd, cwd=folder, capture_output=True, text=True, timeout=timeout,
                           env=dict(os.environ, PYTHONWARNINGS="ignore"))
        if not os.path.exists(out):
            sys.exit(f"pytest --graphleaf wrote no findings (exit {r.returncode}):\n{r.stdout}\n{r.stderr}")
        with open(out, encoding="utf-8") as fh:
            data = json.load(fh)
    by_case: dict[str, list[dict]] = {n: [] for n in names}
    for f in data:
        m = re.search(r"\[(.+?\.py)\]$", f["test"])
        if m:
            by_case.setdefault(m.group(1), []).append(f)
    return by_case


def run_suite(folder: str, timeout: int) -> list[dict]:
    """The findings of ``pytest --graphleaf`` run in a suite's folder."""
    with tempfile.TemporaryDirectory(prefix="graphleaf-suite-") as tmp:
        out = os.path.join(tmp, "findings.json")
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
               "-c", os.devnull, "--rootdir", folder, "--graphleaf", f"--graphleaf-json={out}", folder]
        r = subprocess.run(cmd, cwd=folder, capture_output=True, text=True, timeout=timeout,
                           env=dict(os.environ, PYTHONWARNINGS="ignore"))
        if not os.path.exists(out):
            sys.exit(f"pytest --graphleaf wrote no findings in {folder} (exit {r.returncode}):\n{r.stdout}\n{r.stderr}")
        with open(out, encoding="utf-8") as fh:
            return json.load(fh)


def score_roots(timeout: int, verbose: bool) -> int:
    """fixtures/pytest/roots against its ROOTS.json, and its clean twin; the number of clean tests reported."""
    with open(os.path.join(SUITES, "roots", "ROOTS.json"), encoding="utf-8") as fh:
        expected = {(test, path, line) for test, places in json.load(fh).items() if test != "_"
                    for path, line, _code in places}
    found = run_suite(os.path.join(SUITES, "roots"), timeout)
    named = {(f["test"].split("::")[-1], os.path.basename(f["path"]), f["line"]) for f in found}
    print("pytest --graphleaf on fixtures/pytest/roots (one test per kind of root)")
    for test, path, line in sorted(expected):
        print(f"  {'named ' if (test, path, line) in named else 'MISSED'}  {test}: {path}:{line}")
    for test, path, line in sorted(named - expected):
        print(f"  OTHER   {test}: {path}:{line}")
    if verbose:
        for f in found:
            print(f"      {f['path']}:{f['line']}: {f['code']} {f['message']}")
    clean = run_suite(os.path.join(SUITES, "roots_clean"), timeout)
    reported = sorted({f["test"].split("::")[-1] for f in clean})
    for test in reported:
        print(f"  REPORTED clean {test}: " + "; ".join(f"{f['path']}:{f['line']}" for f in clean
                                                       if f["test"].endswith(test)))
    tests = len({t for t, _p, _l in expected})
    print(f"pytest --graphleaf roots: {len(expected & named)}/{len(expected)} root lines named, "
          f"{len(named - expected)} other lines; {len(reported)}/{tests} clean tests reported")
    return len(reported)


def run_explain(folder: str, name: str, timeout: int) -> tuple[int, set[int], str]:
    """(exit status, the lines of the script named by the report's ``<-`` lines, the output)."""
    cmd = [sys.executable, "-m", "flake8_graphleaf", "explain", "--run", name]
    try:
        r = subprocess.run(cmd, cwd=folder, capture_output=True, text=True, timeout=timeout,
                           env=dict(os.environ, PYTHONWARNINGS="ignore"))
    except subprocess.TimeoutExpired:
        return -1, set(), "timed out"
    lines = {int(m.group(1)) for m in re.finditer(rf"<- (?:\S*/)?{re.escape(name)}:(\d+) ", r.stdout)}
    return r.returncode, lines, r.stdout + r.stderr


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--incidents", default=INCIDENTS, help="folder of NAME.py and NAME_clean.py scripts")
    ap.add_argument("--only", choices=("pytest", "explain", "roots"),
                    help="run one part: pytest --graphleaf or explain --run on the incidents, or the root-kind suite")
    ap.add_argument("--timeout", type=int, default=600, help="seconds for the pytest run (120 per explain --run)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every finding")
    args = ap.parse_args(argv)
    folder = os.path.abspath(args.incidents)
    raising, clean = cases(folder)
    unknown = [n for n in raising if n not in ROOTS]
    if unknown:
        sys.exit(f"no root lines known for {', '.join(unknown)}: add them to ROOTS in {__file__}")
    bad = 0
    if args.only in (None, "pytest"):
        found = run_pytest(folder, raising + clean, args.timeout)
        located = 0
        print("pytest --graphleaf (each script wrapped in a test that swallows its error)")
        for name in raising:
            lines = {f["line"] for f in found[name] if os.path.basename(f["path"]) == name}
            named = sorted({f"{os.path.basename(f['path'])}:{f['line']}" for f in found[name]})
            hit = bool(lines & ROOTS[name])
            located += hit
            print(f"  {'located' if hit else 'MISSED '}  {name}: roots {sorted(ROOTS[name])}, named {named}")
            if args.verbose:
                for f in found[name]:
                    print(f"      {f['path']}:{f['line']}: {f['code']} {f['message']}")
        reported = [n for n in clean if found[n]]
        for name in reported:
            print(f"  REPORTED clean {name}: " + "; ".join(f"{f['path']}:{f['line']}" for f in found[name]))
        print(f"pytest --graphleaf: {located}/{len(raising)} raising cases located at a root line; "
              f"{len(reported)}/{len(clean)} clean cases reported")
        bad += len(reported)
    if args.only in (None, "roots"):
        bad += score_roots(args.timeout, args.verbose)
    if args.only in (None, "explain"):
        located = 0
        reported = []
        print("graphleaf explain --run")
        for name in raising:
            code, lines, out = run_explain(folder, name, 120)
            hit = code == 1 and bool(lines & ROOTS[name])
            located += hit
            print(f"  {'located' if hit else 'MISSED '}  {name}: exit {code}, roots {sorted(ROOTS[name])}, "
                  f"named {sorted(lines)}")
            if args.verbose and not hit:
                print("      " + out.replace("\n", "\n      "))
        for name in clean:
            code, _lines, out = run_explain(folder, name, 120)
            if code != 0:
                reported.append(name)
                print(f"  REPORTED clean {name}: exit {code}")
        print(f"graphleaf explain --run: {located}/{len(raising)} raising cases located at a root line; "
              f"{len(clean) - len(reported)}/{len(clean)} clean cases exit 0")
        bad += len(reported)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
