"""What verify reports: the checks, one result per fixture and device, and what to run (``Spec``).

Pure data; imports neither torch nor the rest of the package."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

PASS, FAIL, SKIP, DIFF, INFO = "PASS", "FAIL", "SKIP", "DIFF", "INFO"
CHECKS = ("crash", "fix", "same", "deepcopy", "safety")
GRAPH_LEAF_TEXT = "graph leaves"
SEED = 1234


class UsageError(Exception):
    """A usage problem: message printed as is, exit 2."""


@dataclass
class Check:
    status: str
    detail: str = ""


@dataclass
class Result:
    fixture: str
    path: str | None
    device: str
    checks: dict[str, Check] = field(default_factory=dict)
    applied: list[dict] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)
    differences: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    graph_tensors: list[str] = field(default_factory=list)

    @property
    def status(self) -> str:
        states = [c.status for c in self.checks.values()]
        if FAIL in states:
            return FAIL
        if DIFF in states:
            return DIFF
        if states and all(s == SKIP for s in states):
            return SKIP
        return PASS

    def to_json(self) -> dict:
        return {
            "fixture": self.fixture,
            "path": self.path,
            "device": self.device,
            "status": self.status,
            "checks": {k: {"status": c.status, "detail": c.detail} for k, c in self.checks.items()},
            "applied": self.applied,
            "skipped": self.skipped,
            "differences": self.differences,
            "notes": self.notes,
            "graph_tensors": self.graph_tensors,
        }


@dataclass
class Spec:
    """What to run: a fixture file, or a user's model (``--model``)."""

    name: str
    path: str | None  # source file the fixer runs on (None: a module without a file)
    model_attr: str = "make_model"
    inputs_attr: str | None = "make_inputs"
    inputs_module_path: str | None = None  # --inputs in another file: (path, attr) loaded as is
    inputs_callable: Callable | None = None
    step_attr: str | None = "training_step"
    expect_crash: bool | None = None
    expect_fix: str | None = None
    expect_unsafe_diff: tuple[str, ...] = ()
    expect_fixes: tuple[str, ...] = ()  # substrings each found in an applied fix's description
    step_backward: bool = True
    user: bool = False
    module: Any = None  # --model: the already imported module of the target
