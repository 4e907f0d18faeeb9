"""Benchmark: what flake8-graphleaf costs, measured against flake8's own cost and
against other tools on the same files, in one run, interleaved.

    python bench/bench.py                      # the installed torch package
    python bench/bench.py --tree PATH --rounds 3 --torchfix

Each round runs, one after the other on the same tree:
  base      flake8 without this plugin (a venv under bench/_work with the same flake8)
  plugin    flake8 with this plugin (this interpreter's environment)
  torchfix  flake8 with TorchFix instead (--torchfix; a venv under bench/_work)
  glf-f8    flake8 --select=GLF (what a GLF-only flake8 run costs)
  check-j1  graphleaf check --no-cache -j 1
  check-jN  graphleaf check --no-cache -j N (all cores)
  check-warm graphleaf check -j 1 with a cache filled by an untimed run before the rounds
  ruff-all  ruff check --select ALL --no-cache (when ruff is installed)
and reports the median CPU seconds (user+sys of the child) and wall seconds, with the
ratios the project budgets (issue 39): plugin/base <= 1.25 (with --select F on torch/nn), glf-f8/check-j1 >= 3
(torch/nn), check-j1/ruff-all <= 1.3 (the installed torch), check-warm/ruff-all < 1.
Timing assertions never go in the test-suite: run this by hand and record the
figures in docs/performance.md.

    python bench/bench.py --scaling            # the generated-file scaling case only
    python bench/bench.py --only check-j1,ruff-all --baseline /tmp/base --rounds 3
                                               # A/B: this checkout against another one (a
                                               # `git archive REV | tar -x -C /tmp/base`), with ruff
    python bench/bench.py --tree <site-packages>/torch/nn --only base,plugin,glf-f8,check-j1 --select F
                                               # the plugin's cost with flake8 --select=F

--scaling times, on generated modules of N small classes with one finding each (N = 40,
400, 4000 by default), graphleaf check, graphleaf fix --unsafe-fixes --diff and
flake8 --select=GLF, and prints a table of time against the number of findings with the
ratios the project budgets: 400/40 <= 15 for check and fix (linear is 10), and
graphleaf check <= 2x flake8 --select=GLF on the 400-class file.
"""

from __future__ import annotations

import argparse
import ast
import importlib.metadata
import importlib.util
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
import venv
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORK = HERE / "_work"


def default_tree() -> str:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("torch is not installed here: pass --tree PATH")
    return list(spec.submodule_search_locations)[0]


def make_venv(name: str, packages: list[str]) -> Path:
    path = WORK / name
    python = path / "bin" / "python"
    marker = path / ".installed"
    if not marker.exists() or marker.read_text() != " ".join(packages):
        venv.create(path, with_pip=True, clear=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *packages], check=True)
        marker.write_text(" ".join(packages))
    return python


def timed(cmd: list[str], env: dict | None = None, cwd: str | None = None) -> tuple[float, float, int]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    # 2 is graphleaf's "some file could not be parsed" (a Python 3.12-only file under 3.11, say)
    if proc.returncode not in (0, 1, 2) or "Traceback" in proc.stderr:
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return cpu, wall, proc.returncode


def parse_costs(tree: str) -> dict[str, float]:
    """In-process: what parsing the tree costs with ast and (if installed) libcst."""
    sources = []
    for dirpath, _, files in os.walk(tree):
        for f in files:
            if f.endswith(".py"):
                try:
                    sources.append(Path(dirpath, f).read_text(encoding="utf-8"))
                except (OSError, UnicodeDecodeError):
                    pass
    out = {"files": float(len(sources))}
    t0 = time.process_time()
    trees = []
    for s in sources:
        try:
            trees.append((ast.parse(s), s))
        except (SyntaxError, ValueError):
            pass
    out["ast.parse"] = time.process_time() - t0
    from flake8_graphleaf.analysis import analyze_tree

    t0 = time.process_time()
    for t, s in trees:
        analyze_tree(t, s)
    out["graphleaf analysis (on parsed trees)"] = time.process_time() - t0
    try:
        import libcst
    except ImportError:
        return out
    t0 = time.process_time()
    for s in sources:
        try:
            libcst.parse_module(s)
        except Exception:  # noqa: BLE001 - libcst raises its own error types
            pass
    out["libcst.parse_module"] = time.process_time() - t0
    return out


def generated_module(n: int) -> str:
    """N small module classes, each storing a graph tensor in forward (one GLF001 each)."""
    out = ["import torch", "import torch.nn as nn", ""]
    for i in range(n):
        out += [f"class M{i}(nn.Module):", "    def __init__(self):", "        super().__init__()",
                "        self.lin = nn.Linear(4, 4)", "", "    def forward(self, x):",
                "        self.last = self.lin(x)", "        return self.last * 2", "", ""]
    return "\n".join(out) + "\n"


def scaling(sizes: list[int], rounds: int) -> int:
    WORK.mkdir(parents=True, exist_ok=True)
    graphleaf = [sys.executable, "-m", "flake8_graphleaf"]
    kinds = {
        "check": lambda f: graphleaf + ["check", "--no-cache", "-j", "1", "-q", "--output-format", "concise", f],
        "fix": lambda f: graphleaf + ["fix", "--no-cache", "-j", "1", "-q", "--unsafe-fixes", "--diff", f],
        "flake8": lambda f: [sys.executable, "-m", "flake8", "--isolated", "-j", "1", "--select=GLF", f],
    }
    files = {}
    for n in sizes:
        path = WORK / f"scaling_{n}.py"
        path.write_text(generated_module(n))
        files[n] = str(path)
    times: dict[tuple[str, int], list[float]] = {}
    print(f"scaling: generated modules of N classes, one GLF001 each; {rounds} rounds, interleaved", flush=True)
    for _ in range(rounds):
        for n in sizes:
            for kind, cmd in kinds.items():
                cpu, _, _ = timed(cmd(files[n]))
                times.setdefault((kind, n), []).append(cpu)
    med = {k: statistics.median(v) for k, v in times.items()}
    print("\nfindings  KB      check s   fix s   flake8 --select=GLF s   (median CPU)")
    for n in sizes:
        kb = os.path.getsize(files[n]) / 1024
        print(f"{n:8d} {kb:6.0f}  {med[('check', n)]:8.2f} {med[('fix', n)]:7.2f} {med[('flake8', n)]:12.2f}")
    if 40 in sizes and 400 in sizes:
        c = med[("check", 400)] / med[("check", 40)]
        f = med[("fix", 400)] / med[("fix", 40)]
        g = med[("check", 400)] / med[("flake8", 400)]
        print(f"\n400/40 check: {c:.1f}  fix: {f:.1f}  (budget <= 15; linear is 10)")
        print(f"graphleaf check / flake8 --select=GLF on 400 classes: {g:.2f}  (budget <= 2)")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", default=None, help="directory of Python files (default: the installed torch package)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--torchfix", action="store_true", help="also time flake8 with TorchFix (pip installs it in bench/_work)")
    ap.add_argument("--no-parse", action="store_true", help="skip the in-process ast/libcst parse figures")
    ap.add_argument("--scaling", action="store_true", help="only the generated-file scaling case")
    ap.add_argument("--sizes", default="40,400,4000", help="class counts for --scaling (default 40,400,4000)")
    ap.add_argument("--select", default=None, metavar="CODES",
                    help="--select for the base and plugin flake8 runs (say F: what a user who selects only "
                         "pyflakes pays for the installed plugin; flake8 runs every plugin whatever is selected)")
    ap.add_argument("--only", default=None, help="comma-separated runs to time (say check-j1,ruff-all); default: all")
    ap.add_argument("--baseline", default=None, metavar="DIR",
                    help="also time check-j1 of the flake8_graphleaf package in DIR (a checkout of another commit), "
                         "as check-j1@base, interleaved with the rest")
    args = ap.parse_args(argv)
    if args.scaling:
        return scaling([int(x) for x in args.sizes.split(",")], args.rounds)
    tree = os.path.abspath(args.tree or default_tree())
    flake8_version = importlib.metadata.version("flake8")
    only = set(args.only.split(",")) if args.only else None
    wanted = lambda name: only is None or name in only  # noqa: E731
    # the same flake8 and the same versions of its own plugins, without this one
    same = [f"{p}=={importlib.metadata.version(p)}" for p in ("flake8", "pycodestyle", "pyflakes", "mccabe")]
    select = [f"--select={args.select}"] if args.select else []
    runs: dict[str, list[str]] = {}
    envs: dict[str, dict] = {}
    cwds: dict[str, str] = {}
    if wanted("base"):
        runs["base"] = [str(make_venv("base", same)), "-m", "flake8", "-j", "1", "--exit-zero", *select, tree]
    runs["plugin"] = [sys.executable, "-m", "flake8", "-j", "1", "--exit-zero", *select, tree]
    if args.torchfix:
        tfx = make_venv("torchfix", same + ["torchfix"])
        runs["torchfix"] = [str(tfx), "-m", "flake8", "-j", "1", "--exit-zero", tree]
    graphleaf = [sys.executable, "-m", "flake8_graphleaf"]
    runs["glf-f8"] = [sys.executable, "-m", "flake8", "-j", "1", "--select=GLF", "--exit-zero", tree]
    runs["check-j1"] = graphleaf + ["check", "--no-cache", "-j", "1", "--exit-zero", "--output-format", "concise", tree]
    if args.baseline:
        runs["check-j1@base"] = list(runs["check-j1"])
        # run in DIR: `python -m` puts the working directory first on sys.path, before PYTHONPATH
        envs["check-j1@base"] = {**os.environ, "PYTHONPATH": os.path.abspath(args.baseline)}
        cwds["check-j1@base"] = os.path.abspath(args.baseline)
    cores = os.cpu_count() or 1
    runs[f"check-j{cores}"] = graphleaf + ["check", "--no-cache", "-j", str(cores), "--exit-zero", "--output-format",
                                           "concise", tree]
    # a warm run: the same tree, unchanged, with the cache the first (untimed) run filled
    cache_dir = WORK / "cache"
    warm = graphleaf + ["check", "--cache-dir", str(cache_dir), "-j", "1", "--exit-zero", "--output-format", "concise", tree]
    if wanted("check-warm"):
        subprocess.run(warm, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    runs["check-warm"] = warm
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff:
        runs["ruff-all"] = [ruff, "check", "--select", "ALL", "--no-cache", "--exit-zero", "-q", tree]
    runs = {k: v for k, v in runs.items() if wanted(k) or (k == "check-j1@base" and args.baseline)}
    print(f"tree: {tree}\nflake8 {flake8_version}, {cores} cores, {args.rounds} rounds, interleaved\n", flush=True)
    results: dict[str, list[tuple[float, float]]] = {k: [] for k in runs}
    for r in range(args.rounds):
        for name, cmd in runs.items():
            cpu, wall, _ = timed(cmd, envs.get(name), cwds.get(name))
            results[name].append((cpu, wall))
            print(f"  round {r + 1} {name:10s} cpu {cpu:7.2f}s wall {wall:7.2f}s", flush=True)
    med = {k: (statistics.median(c for c, _ in v), statistics.median(w for _, w in v)) for k, v in results.items()}
    print("\nmedian   cpu s    wall s")
    for k, (c, w) in med.items():
        print(f"{k:10s} {c:7.2f}  {w:7.2f}")
    print()
    def ratio(label: str, a: str, b: str, budget: str = "", i: int = 0, digits: int = 2) -> None:
        if a in med and b in med:
            print(f"{label}: {med[a][i] / med[b][i]:.{digits}f}" + (f"  ({budget})" if budget else ""))

    ratio("plugin / base (CPU)" + (f", --select={args.select}" if args.select else ""), "plugin", "base",
          "budget <= 1.25", digits=3)
    ratio("torchfix / base (CPU)", "torchfix", "base", digits=3)
    ratio("flake8 --select=GLF / graphleaf check -j1 (CPU)", "glf-f8", "check-j1", "budget >= 3")
    ratio(f"graphleaf check -j1 / -j{cores} (wall)", "check-j1", f"check-j{cores}", i=1)
    ratio("graphleaf check -j1 / ruff --select ALL --no-cache (CPU)", "check-j1", "ruff-all", "budget <= 1.3")
    ratio("graphleaf check -j1 @base / ruff --select ALL --no-cache (CPU)", "check-j1@base", "ruff-all")
    ratio("graphleaf check -j1 / check -j1 @base (CPU)", "check-j1", "check-j1@base")
    ratio("graphleaf check, warm cache / ruff --select ALL --no-cache (CPU)", "check-warm", "ruff-all", "budget < 1")
    if not args.no_parse:
        print("\nin-process CPU seconds on the same files:")
        for k, v in parse_costs(tree).items():
            print(f"  {k:40s} {v:8.2f}" if k != "files" else f"  {k:40s} {int(v):8d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
