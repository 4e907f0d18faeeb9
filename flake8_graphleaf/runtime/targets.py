"""Load a TARGET: ``package.module:callable`` or ``path/to/file.py:callable``.

Shared by ``graphleaf explain`` and ``graphleaf verify``.  Importing this module does
not import torch.  A bad target raises :class:`TargetError`, whose message is meant to
be printed as is (no traceback); front ends exit with :attr:`TargetError.exit_code`.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import traceback
import zlib
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable

__all__ = ["TargetError", "Target", "resolve_target", "load_target", "split_target", "import_beside", "package_of"]


class TargetError(Exception):
    """A TARGET that cannot be loaded; ``str(err)`` is a complete, user-facing message."""

    exit_code = 2


@dataclass(frozen=True)
class Target:
    spec: str
    module: ModuleType
    attr: str  # dotted attribute path inside the module, e.g. "make_model" or "Factory.build"
    obj: Callable[..., Any]

    @property
    def file(self) -> str | None:
        return getattr(self.module, "__file__", None)

    def sibling(self, name: str) -> Any:
        """An attribute of the target's module (e.g. ``make_inputs``), or None."""
        return getattr(self.module, name, None)


def _is_path(left: str) -> bool:
    return left.endswith(".py") or "/" in left or os.sep in left or (os.altsep is not None and os.altsep in left)


def split_target(spec: str) -> tuple[str, str]:
    """``'a/b.py:make'`` -> ``('a/b.py', 'make')``.  The last ``:`` splits (Windows drive letters survive)."""
    if not isinstance(spec, str) or ":" not in spec:
        raise TargetError(
            f"bad target {spec!r}: expected 'package.module:callable' or 'path/to/file.py:callable'"
        )
    left, _, right = spec.rpartition(":")
    if not left or not right:
        raise TargetError(
            f"bad target {spec!r}: expected 'package.module:callable' or 'path/to/file.py:callable'"
        )
    if not all(part.isidentifier() for part in right.split(".")):
        raise TargetError(f"bad target {spec!r}: {right!r} is not a (dotted) Python name")
    return left, right


def _import_error(what: str, exc: BaseException) -> TargetError:
    # Point at the user's line that failed, without a full traceback.
    frames = traceback.extract_tb(exc.__traceback__)
    user = [f for f in frames if "importlib" not in f.filename]
    where = f" (at {user[-1].filename}:{user[-1].lineno})" if user else ""
    return TargetError(f"could not import {what}: {type(exc).__name__}: {exc}{where}")


def package_of(full: str) -> tuple[str, str] | None:
    """(dotted module name, the folder to put on sys.path) for a file inside a package
    (its folder has an ``__init__.py``), else None."""
    folder = os.path.dirname(full)
    stem = os.path.splitext(os.path.basename(full))[0]
    parts = [] if stem == "__init__" else [stem]
    inside = False
    while os.path.isfile(os.path.join(folder, "__init__.py")):
        inside = True
        parts.insert(0, os.path.basename(folder))
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    if not inside or not all(p.isidentifier() for p in parts):
        return None
    return ".".join(parts), folder


def _load_file(path: str) -> ModuleType:
    full = os.path.abspath(path)
    if not os.path.isfile(full):
        raise TargetError(f"bad target: file {path!r} does not exist")
    if not full.endswith(".py"):
        raise TargetError(f"bad target: {path!r} is not a .py file")
    package = package_of(full)
    if package is not None:
        # A file inside a package is imported as part of it, so its relative imports work.
        dotted, root = package
        if root not in sys.path:
            sys.path.insert(0, root)
        module = _load_module(dotted)
        if os.path.realpath(getattr(module, "__file__", "") or "") == os.path.realpath(full):
            return module
        sys.modules.pop(dotted, None)  # another package of that name came first: load the file alone
    # A unique, importable name so that pickling, dataclasses and tracebacks work.
    stem = os.path.splitext(os.path.basename(full))[0]
    name = f"_graphleaf_target_{stem}_{zlib.crc32(full.encode()):08x}"
    if name in sys.modules and getattr(sys.modules[name], "__file__", None) == full:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, full)
    if spec is None or spec.loader is None:
        raise TargetError(f"bad target: cannot load {path!r} as a Python module")
    module = importlib.util.module_from_spec(spec)
    # Like `python path/to/file.py`: the file's folder comes first, so its sibling imports work.
    folder = os.path.dirname(full)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except SystemExit as exc:
        sys.modules.pop(name, None)
        raise TargetError(f"could not import {path!r}: it called sys.exit({exc.code!r}) at import time") from None
    except BaseException as exc:  # noqa: BLE001 - any import-time failure is a bad target
        sys.modules.pop(name, None)
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise _import_error(repr(path), exc) from None
    return module


def _load_module(name: str) -> ModuleType:
    if not all(part.isidentifier() for part in name.split(".")):
        raise TargetError(f"bad target: {name!r} is neither a module name nor a path to a .py file")
    # Like `python -m`: the current directory is importable.
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name and (name == exc.name or name.startswith(exc.name + ".")):
            raise TargetError(f"bad target: no module named {exc.name!r}") from None
        raise _import_error(f"module {name!r}", exc) from None
    except SystemExit as exc:
        raise TargetError(f"could not import module {name!r}: it called sys.exit({exc.code!r}) at import time") from None
    except Exception as exc:  # noqa: BLE001
        raise _import_error(f"module {name!r}", exc) from None


def import_beside(path: str, like: ModuleType, tag: str) -> ModuleType:
    """Import ``path`` (a changed copy of ``like``'s file, kept elsewhere) as a sibling
    of ``like`` in its package, so that its relative imports (``from .base import X``)
    resolve as the original's do.  Registered in sys.modules; the caller pops it."""
    package = getattr(like, "__package__", None) or ""
    full = os.path.abspath(path)
    stem = os.path.splitext(os.path.basename(full))[0]
    base = f"_graphleaf_{tag}_{stem}_{zlib.crc32(full.encode()):08x}"
    name = f"{package}.{base}" if package else base
    return exec_file(full, name)


def exec_file(path: str, name: str) -> ModuleType:
    """Run the file ``path`` as a module named ``name`` (registered in sys.modules while it runs;
    removed again if it raises)."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path!r} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def resolve_target(spec: str) -> Target:
    """Import the module of ``spec`` and look the callable up; raises :class:`TargetError`."""
    left, attr = split_target(spec)
    module = _load_file(left) if _is_path(left) else _load_module(left)
    obj: Any = module
    where = left
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            names = sorted(n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n, None)))
            hint = f"; callables there: {', '.join(names[:12])}" if names else ""
            raise TargetError(f"bad target {spec!r}: {where!r} has no attribute {part!r}{hint}") from None
        where = f"{where}:{part}" if where == left else f"{where}.{part}"
    if not callable(obj):
        raise TargetError(f"bad target {spec!r}: {attr!r} is a {type(obj).__name__}, not a callable")
    return Target(spec=spec, module=module, attr=attr, obj=obj)


def load_target(spec: str) -> Callable[..., Any]:
    """The callable named by ``spec`` (``pkg.mod:fn`` or ``path/file.py:fn``); raises :class:`TargetError`."""
    return resolve_target(spec).obj
