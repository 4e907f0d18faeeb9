"""How well the runtime checker locates the incidents of ``fixtures/incidents/``, and that it reports no clean twin.

    python bench/runtime_incidents.py                  # pytest --graphleaf and graphleaf explain --run
    python bench/runtime_incidents.py --only pytest    # one of the two (or: --only roots)
    python bench/runtime_incidents.py --incidents DIR  # another folder of NAME.py / NAME_clean.py scripts
    python bench/runtime_incidents.py --set bench/incident-sets/set12   # a held-out incident set (below)

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

With ``--set DIR`` the cases are the folders of a held-out incident set (``bench/incident-sets/``):
``caseNN/main.py`` raising, ``caseNN_clean/main.py`` its clean twin, the breaking lines of any of the
case's files marked ``# BREAKS``.  Each ``main.py`` is run in its own folder (on ``sys.path``; the case's
own modules are dropped from ``sys.modules`` after it) by a test that swallows its error; a raising case is
located when a finding names one of its ``# BREAKS`` lines (``explain --run main.py``: exit 1 and a ``<-``
line naming one).  A *process-boundary* case is one whose error is the pickling refusal ("Cowardly
refusing to serialize non-leaf tensor"), as the wrapped test saw it.

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


SET_WRAPPER = '''\
import json
import os
import runpy
import sys

import pytest

SET = {folder!r}
CASES = {cases!r}
ERRORS = {errors!r}


@pytest.mark.parametrize("case", CASES)
def test_case(case):
    where = os.path.join(SET, case)
    before, cwd = set(sys.modules), os.getcwd()
    sys.path.insert(0, where)
    os.chdir(where)
    try:
        runpy.run_path(os.path.join(where, "main.py"), run_name="__main__")
    except BaseException as e:  # a smoke test of the scenario: its error is swallowed
        if not isinstance(e, Exception) and not isinstance(e, SystemExit):
            raise
        with open(ERRORS, "a") as fh:
            fh.write(json.dumps([case, str(e)[:300]]) + "\\n")
    finally:
        os.chdir(cwd)
        sys.path.remove(where)
        for name in set(sys.modules) - before:  # the case's own modules: the next case may have one by that name
            if (getattr(sys.modules[name], "__file__", None) or "").startswith(where + os.sep):
                del sys.modules[name]
'''


def set_cases(folder: str) -> tuple[list[str], list[str], dict[str, set[tuple[str, int]]]]:
    """(raising, clean, {case: {(file relative to the case's folder, line) marked # BREAKS}})."""
    names = sorted(d for d in os.listdir(folder)
                   if d.startswith("case") and os.path.isfile(os.path.join(folder, d, "main.py")))
    clean = [n for n in names if n.endswith("_clean")]
    raising = [n for n in names if n not in clean]
    breaks: dict[str, set[tuple[str, int]]] = {}
    for name in raising:
        base = os.path.join(folder, name)
        marks = breaks[name] = set()
        for here, dirs, files in os.walk(base):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for f in files:
                if f.endswith(".py"):
                    path = os.path.join(here, f)
                    with open(path, encoding="utf-8") as fh:
                        for i, line in enumerate(fh, 1):
                            if re.search(r"#\s*BREAKS\b", line):
                                marks.add((os.path.relpath(path, base).replace(os.sep, "/"), i))
    return raising, clean, breaks


def _names_mark(path: str, line: int, marks: set[tuple[str, int]]) -> bool:
    path = path.replace(os.sep, "/")
    return any(line == n and (path == rel or path.endswith("/" + rel)) for rel, n in marks)


def run_set_pytest(folder: str, names: list[str], timeout: int) -> tuple[dict[str, list[dict]], dict[str, str]]:
    """({case: [finding, ...]}, {case: the error its test swallowed}) from one pytest --graphleaf run."""
    with tempfile.TemporaryDirectory(prefix="graphleaf-set-") as tmp:
        errors = os.path.join(tmp, "errors.jsonl")
        with open(os.path.join(tmp, "test_set.py"), "w", encoding="utf-8") as fh:
            fh.write(SET_WRAPPER.format(folder=folder, cases=names, errors=errors))
        with open(os.path.join(tmp, "pytest.ini"), "w", encoding="utf-8") as fh:
            fh.write("[pytest]\n")
        out = os.path.join(tmp, "findings.json")
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
               "-c", os.path.join(tmp, "pytest.ini"), "--rootdir", tmp, "--graphleaf", f"--graphleaf-json={out}",
               os.path.join(tmp, "test_set.py")]
        r = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, timeout=timeout,
                           env=dict(os.environ, PYTHONWARNINGS="ignore"))
        if not os.path.exists(out):
            sys.exit(f"pytest --graphleaf wrote no findings (exit {r.returncode}):\n{r.stdout}\n{r.stderr}")
        with open(out, encoding="utf-8") as fh:
            data = json.load(fh)
        swallowed: dict[str, str] = {}
        if os.path.exists(errors):
            with open(errors, encoding="utf-8") as fh:
                for row in fh:
                    case, message = json.loads(row)
                    swallowed[case] = message
    by_case: dict[str, list[dict]] = {n: [] for n in names}
    for f in data:
        m = re.search(r"\[(case[^\]]+)\]$", f["test"])
        if m:
            by_case.setdefault(m.group(1), []).append(f)
    return by_case, swallowed


def run_set_explain(folder: str, case: str, timeout: int) -> tuple[int, set[tuple[str, int]], str]:
    """(exit status, the (file, line) named by the report's ``<-`` lines, the output) of explain --run main.py."""
    cmd = [sys.executable, "-m", "flake8_graphleaf", "explain", "--run", "main.py"]
    try:
        r = subprocess.run(cmd, cwd=os.path.join(folder, case), capture_output=True, text=True, timeout=timeout,
                           env=dict(os.environ, PYTHONWARNINGS="ignore"))
    except subprocess.TimeoutExpired:
        return -1, set(), "timed out"
    named = {(m.group(1), int(m.group(2))) for m in re.finditer(r"<- (\S+?):(\d+) ", r.stdout)}
    return r.returncode, named, r.stdout + r.stderr


COWARDLY = "Cowardly refusing to serialize non-leaf tensor"


def score_set(folder: str, only: str | None, timeout: int, verbose: bool) -> int:
    """A held-out incident set (``--set``): the number of clean cases reported."""
    raising, clean, breaks = set_cases(folder)
    unmarked = [n for n in raising if not breaks[n]]
    if unmarked:
        sys.exit(f"no line marked # BREAKS in {', '.join(unmarked)}")
    bad = 0
    label = os.path.basename(os.path.normpath(folder))
    if only in (None, "pytest"):
        found, swallowed = run_set_pytest(folder, raising + clean, timeout)
        boundary = [n for n in raising if COWARDLY in swallowed.get(n, "")]
        located = []
        print(f"pytest --graphleaf on {label} (each main.py wrapped in a test that swallows its error)")
        for name in raising:
            hit = any(_names_mark(f["path"], f["line"], breaks[name]) for f in found[name])
            if hit:
                located.append(name)
            named = sorted({f"{f['path']}:{f['line']}" for f in found[name]})
            kind = " (process boundary)" if name in boundary else ""
            print(f"  {'located' if hit else 'MISSED '}  {name}{kind}: breaks "
                  f"{sorted(f'{r}:{n}' for r, n in breaks[name])}, named {named}"
                  + ("" if name in swallowed else "  [the test raised nothing]"))
            if verbose:
                for f in found[name]:
                    print(f"      {f['path']}:{f['line']}: {f['code']} {f['message']}")
        reported = [n for n in clean if found[n]]
        for name in reported:
            print(f"  REPORTED clean {name}: " + "; ".join(f"{f['path']}:{f['line']}" for f in found[name]))
        print(f"pytest --graphleaf {label}: {len(located)}/{len(raising)} raising cases located at a # BREAKS line "
              f"({sum(n in located for n in boundary)}/{len(boundary)} process-boundary); "
              f"{len(reported)}/{len(clean)} clean cases reported")
        bad += len(reported)
    if only in (None, "explain"):
        located_n = 0
        reported = []
        print(f"graphleaf explain --run on {label}")
        for name in raising:
            code, named, out = run_set_explain(folder, name, 120)
            hit = code == 1 and any(_names_mark(p, n, breaks[name]) for p, n in named)
            located_n += hit
            print(f"  {'located' if hit else 'MISSED '}  {name}: exit {code}, named "
                  f"{sorted(f'{p}:{n}' for p, n in named)}")
            if verbose and not hit:
                print("      " + out.replace("\n", "\n      "))
        for name in clean:
            code, _named, out = run_set_explain(folder, name, 120)
            if code != 0:
                reported.append(name)
                print(f"  REPORTED clean {name}: exit {code}")
                if verbose:
                    print("      " + out.replace("\n", "\n      "))
        print(f"graphleaf explain --run {label}: {located_n}/{len(raising)} raising cases located at a # BREAKS "
              f"line; {len(clean) - len(reported)}/{len(clean)} clean cases exit 0")
        bad += len(reported)
    return bad


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
    ap.add_argument("--set", metavar="DIR", help="a held-out incident set: caseNN/main.py folders, # BREAKS lines")
    ap.add_argument("--only", choices=("pytest", "explain", "roots"),
                    help="run one part: pytest --graphleaf or explain --run on the incidents, or the root-kind suite")
    ap.add_argument("--timeout", type=int, default=600, help="seconds for the pytest run (120 per explain --run)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every finding")
    args = ap.parse_args(argv)
    if args.set:
        if args.only == "roots":
            ap.error("--only roots is the root-kind suite, not a part of --set")
        if not os.path.isdir(args.set):
            ap.error(f"--set {args.set}: no such folder")
        return 1 if score_set(os.path.abspath(args.set), args.only, args.timeout, args.verbose) else 0
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
