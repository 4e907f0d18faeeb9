"""Finding and importing verify's fixtures: ``fixtures/models/*.py`` and their expectation constants.

Never imports torch itself (the fixture does)."""

from __future__ import annotations

import os
import sys
import types
import zlib

from ..targets import exec_file
from .results import Spec, UsageError


def import_file(path: str, tag: str, sibling_dir: str | None = None) -> types.ModuleType:
    """Import ``path`` fresh, under a unique name (registered in sys.modules while in use)."""
    full = os.path.abspath(path)
    stem = os.path.splitext(os.path.basename(full))[0]
    name = f"_graphleaf_verify_{tag}_{stem}_{zlib.crc32(full.encode()):08x}"
    folder = sibling_dir or os.path.dirname(full)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return exec_file(full, name)


def fixture_spec(path: str) -> Spec:
    """Read the fixture's expectation constants (without importing torch twice: a fresh import)."""
    mod = import_file(path, "meta")
    try:
        expect_crash = getattr(mod, "EXPECT_CRASH", True)
        expect_fix = getattr(mod, "EXPECT_FIX", None)
        diff = tuple(getattr(mod, "EXPECT_UNSAFE_DIFF", ()) or ())
        kinds = tuple(getattr(mod, "EXPECT_FIXES", ()) or ())
        backward = bool(getattr(mod, "STEP_BACKWARD", True))
    finally:
        sys.modules.pop(mod.__name__, None)
    return Spec(
        name=os.path.splitext(os.path.basename(path))[0],
        path=os.path.abspath(path),
        expect_crash=bool(expect_crash),
        expect_fix=expect_fix,
        expect_unsafe_diff=diff,
        expect_fixes=kinds,
        step_backward=backward,
    )


def resolve_attr(module, dotted: str):
    obj = module
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def default_fixture_dir() -> str | None:
    here = os.path.join(os.getcwd(), "fixtures", "models")
    if os.path.isdir(here):
        return here
    package = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    repo = os.path.join(os.path.dirname(package), "fixtures", "models")
    return repo if os.path.isdir(repo) else None


def collect_fixtures(paths: list[str]) -> list[str]:
    if not paths:
        d = default_fixture_dir()
        if d is None:
            raise UsageError("graphleaf verify: no FIXTURES given and no fixtures/models/ folder found")
        paths = [d]
    out: list[str] = []
    for p in paths:
        if os.path.isdir(p):
            out += sorted(
                os.path.join(p, f) for f in os.listdir(p) if f.endswith(".py") and not f.startswith("_")
            )
        elif os.path.isfile(p):
            out.append(p)
        else:
            raise UsageError(f"graphleaf verify: {p}: no such file or folder")
    return out
