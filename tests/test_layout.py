"""The package's layout keeps its rules: imports only go down, and the linter never imports torch.

Layers, bottom to top: ``analysis`` <- ``project`` <- ``fix`` <- ``cli`` / ``runtime``; ``plugin`` uses
``project`` and ``analysis``; nothing imports ``cli``.  The test reads every module's imports (top-level and inside
functions) with ``ast``, so a lazy import that goes the wrong way fails too.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "flake8_graphleaf"

# What each part may import from the package (besides itself and the package's __init__).
ALLOWED = {
    "analysis": set(),
    "project": {"analysis"},
    "fix": {"project", "analysis"},
    "runtime": {"fix", "project", "analysis"},
    "cli": {"runtime", "fix", "project", "analysis"},
    "plugin": {"project", "analysis"},
    "__main__": {"cli"},
    "__init__": set(),
    "rule_docs": set(),
}


def part_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def module_name(path: Path, root: Path | None = None) -> str:
    rel = path.relative_to((root or PACKAGE).parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_imports(path: Path, root: Path | None = None) -> list[tuple[int, str]]:
    """(line, module) of every import of a flake8_graphleaf module in ``path``: the module itself,
    not the name taken from it (``from ..analysis.flow import Walker`` gives ``...analysis.flow``)."""
    root = root or PACKAGE
    known = {module_name(p, root) for p in root.rglob("*.py")}
    return [(line, nearest_module(target, known)) for line, target in raw_imports(path, root)]


def nearest_module(target: str, known: set[str]) -> str:
    while target not in known and "." in target:
        target = target.rpartition(".")[0]
    return target


def raw_imports(path: Path, root: Path) -> list[tuple[int, str]]:
    name = module_name(path, root)
    here = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
                if node.module is None:  # from . import x, y
                    out += [(node.lineno, f"{target}.{a.name}") for a in node.names]
                    continue
            else:
                target = node.module or ""
            if target.split(".")[0] == "flake8_graphleaf":
                out.append((node.lineno, target))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "flake8_graphleaf"]
    return out


def modules(root: Path | None = None) -> list[Path]:
    return sorted(p for p in (root or PACKAGE).rglob("*.py") if "__pycache__" not in p.parts)


def test_every_module_is_in_a_known_part() -> None:
    for path in modules():
        assert part_of(module_name(path)) in ALLOWED, f"{path}: put it in analysis/, project/, fix/, cli/ or runtime/"


def wrong_imports(root: Path) -> list[str]:
    wrong = []
    for path in modules(root):
        src_part = part_of(module_name(path, root))
        for line, target in package_imports(path, root):
            dst_part = part_of(target)
            if dst_part in (src_part, "__init__"):
                continue
            if dst_part not in ALLOWED[src_part]:
                wrong.append(f"{path.relative_to(root.parent)}:{line}: {src_part} imports {target}")
    return wrong


def test_every_package_import_resolves() -> None:
    """A lazy relative import inside a function fails only when it runs: check them all here."""
    known = {module_name(p) for p in modules()}
    broken = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {target}"
        for path in modules()
        for line, target in raw_imports(path, PACKAGE)
        if target not in known and target.rpartition(".")[0] not in known
    ]
    assert not broken, "imports of modules that do not exist:\n" + "\n".join(broken)


def test_imports_only_go_down() -> None:
    wrong = wrong_imports(PACKAGE)
    assert not wrong, "imports that go up or sideways:\n" + "\n".join(wrong)


# Inside analysis/, the steps a finding goes through, bottom to top; a step imports only the steps
# below it and the shared vocabulary (values, findings, witness, messages, noqa, confidence), which imports no step.
ANALYSIS_STEPS = ["facts", "program", "evaluator", "rules", "file_analysis"]
ANALYSIS_SHARED = {"values", "findings", "witness", "messages", "noqa", "confidence"}


def analysis_step(module: str) -> str | None:
    parts = module.split(".")
    if len(parts) < 3 or parts[1] != "analysis":
        return None
    return parts[2]


def wrong_analysis_imports(root: Path) -> list[str]:
    wrong = []
    for path in modules(root):
        src = analysis_step(module_name(path, root))
        if src is None:
            continue
        for line, target in package_imports(path, root):
            dst = analysis_step(target)
            if dst is None or dst == src or dst in ANALYSIS_SHARED:
                continue
            ok = (src in ANALYSIS_STEPS and dst in ANALYSIS_STEPS
                  and ANALYSIS_STEPS.index(dst) < ANALYSIS_STEPS.index(src))
            if not ok:
                wrong.append(f"{path.relative_to(root.parent)}:{line}: analysis/{src} imports {target}")
    return wrong


def test_every_analysis_module_is_in_a_step() -> None:
    for path in modules():
        step = analysis_step(module_name(path))
        if step is not None:
            assert step in ANALYSIS_STEPS or step in ANALYSIS_SHARED, (
                f"{path}: put it in one of analysis/{', analysis/'.join(ANALYSIS_STEPS[:-1])}")


def test_analysis_imports_only_go_down_its_steps() -> None:
    wrong = wrong_analysis_imports(PACKAGE)
    assert not wrong, "analysis imports that go up or sideways:\n" + "\n".join(wrong)


def test_the_steps_test_catches_an_upward_import(tmp_path) -> None:
    pkg = tmp_path / "flake8_graphleaf"
    for sub in ("analysis/facts", "analysis/evaluator"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "analysis" / "__init__.py").write_text("")
    (pkg / "analysis" / "evaluator" / "graph.py").write_text("X = 1\n")
    (pkg / "analysis" / "facts" / "table.py").write_text("def f():\n    from ..evaluator.graph import X\n")
    assert wrong_analysis_imports(pkg) == [
        "flake8_graphleaf/analysis/facts/table.py:2: analysis/facts imports flake8_graphleaf.analysis.evaluator.graph"]


def test_no_import_cycles_between_modules() -> None:
    names = {module_name(p): p for p in modules()}
    graph: dict[str, set[str]] = {}
    for name, path in names.items():
        deps = set()
        for _, target in package_imports(path):
            while target and target not in names:  # "from .x import name": the module is x
                target = target.rpartition(".")[0]
            if target and target != name and target != "flake8_graphleaf":
                deps.add(target)
        graph[name] = deps
    # Only imports run at import time make a cycle; lazy ones inside functions do not, but the
    # layering test above already forbids the upward ones, so any cycle left is within one part.
    state: dict[str, int] = {}
    cycle: list[str] = []

    def visit(n: str, stack: list[str]) -> bool:
        state[n] = 1
        for d in sorted(graph.get(n, ())):
            if state.get(d) == 1 and not is_package_of(d, n):
                cycle.extend(stack[stack.index(d):] + [n, d] if d in stack else [n, d])
                return True
            if d not in state and visit(d, stack + [n]):
                return True
        state[n] = 2
        return False

    def is_package_of(pkg: str, mod: str) -> bool:
        return mod.startswith(pkg + ".")  # a package's __init__ re-exporting its modules

    for n in sorted(graph):
        if n not in state and visit(n, []):
            break
    assert not cycle, " -> ".join(cycle)


def test_the_layering_test_catches_upward_and_lazy_imports(tmp_path) -> None:
    root = tmp_path / "flake8_graphleaf"
    for folder in ("analysis", "fix", "cli"):
        (root / folder).mkdir(parents=True)
        (root / folder / "__init__.py").write_text("")
    (root / "__init__.py").write_text("__version__ = '0'\n")
    (root / "analysis" / "flow.py").write_text("from .. import __version__\n\ndef f():\n    from ..fix import x\n")
    (root / "fix" / "x.py").write_text("from ..analysis.flow import f\nimport flake8_graphleaf.cli\n")
    assert wrong_imports(root) == [
        "flake8_graphleaf/analysis/flow.py:4: analysis imports flake8_graphleaf.fix",
        "flake8_graphleaf/fix/x.py:2: fix imports flake8_graphleaf.cli",
    ]


NO_TORCH = textwrap.dedent(
    """
    import sys
    sys.modules["torch"] = None  # "import torch" raises ImportError from here on
    import flake8_graphleaf.analysis, flake8_graphleaf.project, flake8_graphleaf.fix, flake8_graphleaf.cli, flake8_graphleaf.plugin
    import flake8_graphleaf.cli.app, flake8_graphleaf.cli.explain, flake8_graphleaf.cli.verify
    import flake8_graphleaf.runtime, flake8_graphleaf.runtime.targets, flake8_graphleaf.runtime.verify
    from flake8_graphleaf.fix import fix_source
    fix_source("import torch\\nclass M(torch.nn.Module):\\n    def forward(self, x):\\n        self.y = x * 2\\n        return self.y\\n")
    assert flake8_graphleaf.cli.main(["check", "--quiet", "-"]) in (0, 1)
    print("ok")
    """
)


def test_the_linter_does_not_import_torch(tmp_path) -> None:
    r = subprocess.run([sys.executable, "-c", NO_TORCH], capture_output=True, text=True, input="x = 1\n", timeout=120)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr


@pytest.mark.torch
def test_public_runtime_names_still_load() -> None:
    pytest.importorskip("torch")
    from flake8_graphleaf.runtime import explain, find_graph_tensors, trace_stores

    assert callable(explain) and callable(find_graph_tensors) and callable(trace_stores)
